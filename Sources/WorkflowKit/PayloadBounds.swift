/// Worst-case size of the APNs JSON body a transition can produce, checked against APNs' limit
/// (`APNSLimits.maximumPayloadSize`) when a workflow is loaded. The payload's shape is asked of
/// `APNSCore`, which encodes it; this type bounds the parts a workflow declares.
///
/// Rule (see docs/workflows.md): every value counts at its largest: a `string(N)` as N bytes
/// (one byte per character; JSON escaping is not counted), a string without a max length as
/// `defaultStringLength` bytes, an int as 20, a double or a date as 24, a date range as 51
/// (`[`, two dates, `,`, `]`), a bool as 5, an enum as
/// its longest value, an optional as the larger of its value and `null`, an array as N
/// elements. Templates count their literal text plus the largest rendering of each variable.
/// Timestamps count 10 digits. Render checks the real payload against the same limit, so a
/// payload that gets past this estimate (non-ASCII text, escapes) is still stopped before sending.
struct PayloadBounds {
    /// Bytes assumed for a string with no declared max length.
    static let defaultStringLength = 256
    static let dateTextBytes = 24  // 2025-05-01T12:00:00.123Z

    let workflow: Workflow
    /// Looked up per transition: a dictionary keeps a workflow of thousands of states linear.
    private let statesByName: [String: StateSpec]

    init(workflow: Workflow) {
        self.workflow = workflow
        statesByName = Dictionary(workflow.states.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    struct Size {
        var total: Int
        var contentState: Int
        var alert: Int
        var largestField: (name: String, bytes: Int)?

        var breakdown: String {
            var text = "content-state up to \(contentState) bytes"
            if let largestField { text += ", largest field `\(largestField.name)` up to \(largestField.bytes) bytes" }
            if alert > 0 { text += ", alert up to \(alert) bytes" }
            return text
        }
    }

    // MARK: Whole payloads

    func update(_ transition: TransitionSpec) -> Size {
        let scope = self.scope(inputs: transition.inputs)
        let (content, largest) = contentBound(transition.content, scope: scope)
        let alert = transition.alert.map { alertBound($0, scope: scope) } ?? 0
        let target = statesByName[transition.to]
        // As `Workflow.dismissal(in:)`.
        let dismissal = workflow.isFinal(transition.to) ? (target?.dismissal ?? .systemDefault) : nil
        let total = LiveActivityPayload.maximumSize(
            event: transition.endsActivity ? .end : .update, contentState: content, alert: alert > 0 ? alert : nil,
            staleDate: workflow.staleAfter(in: transition.to) != nil,
            dismissalDate: transition.endsActivity && dismissal != .systemDefault,
            relevanceScore: transition.relevanceScore, attributesType: nil, attributes: nil, inputPushToken: false)
        return Size(total: total, contentState: content, alert: alert, largestField: largest)
    }

    /// The push-to-start: the initial content, or for a restart the largest content any transition shows.
    func start() -> Size {
        let scope = self.scope(inputs: workflow.lifecycle.startInputs)
        var (content, largest) = (0, nil as (name: String, bytes: Int)?)
        if let initial = workflow.state(named: workflow.initialState) {
            (content, largest) = contentBound(workflow.defaultContent(in: initial), scope: scope)
        }
        if workflow.lifecycle.onTimeLimit == .restart {
            for transition in workflow.transitions {
                let bound = contentBound(transition.content, scope: self.scope(inputs: transition.inputs))
                if bound.bytes > content { (content, largest) = bound }
            }
        }
        let alert = workflow.lifecycle.startAlert.map { alertBound($0, scope: scope) } ?? 0
        let attributes = Self.object(workflow.attributesSchema.map { ($0.name, Self.jsonBound($0.type)) })
        let initial = workflow.state(named: workflow.initialState)
        let total = LiveActivityPayload.maximumSize(
            event: .start, contentState: content, alert: alert > 0 ? alert : nil, staleDate: workflow.staleAfter(in: workflow.initialState) != nil,
            dismissalDate: false, relevanceScore: initial?.relevanceScore, attributesType: workflow.attributesType,
            attributes: attributes, inputPushToken: true)
        return Size(total: total, contentState: content, alert: alert, largestField: largest)
    }

    // MARK: Parts

    func scope(inputs: [FieldSpec]) -> TemplateScope {
        TemplateScope(attributes: workflow.attributesSchema, content: workflow.contentSchema, inputs: inputs,
                      inputOwner: "", previousUnavailable: nil)
    }

    func contentBound(_ content: [String: ValueSpec], scope: TemplateScope) -> (bytes: Int, largest: (name: String, bytes: Int)?) {
        var entries: [(String, Int)] = []
        var largest: (name: String, bytes: Int)?
        for field in workflow.contentSchema {
            let bytes = valueBound(content[field.name] ?? .literal(.null), type: field.type, scope: scope)
            entries.append((field.name, bytes))
            if bytes > (largest?.bytes ?? -1) { largest = (field.name, bytes) }
        }
        return (Self.object(entries), largest)
    }

    func valueBound(_ value: ValueSpec, type: FieldType, scope: TemplateScope) -> Int {
        switch value {
        case .literal(let literal):
            if literal.isNull { return 4 }
            // Written as text, sent as seconds since 2001.
            if case .date = type.nonOptional { return Self.jsonBound(.date) }
            if case .daterange = type.nonOptional { return Self.jsonBound(.daterange) }
            return literal.jsonByteCount
        case .list(let items):
            guard case .array(let element, _) = type.nonOptional else { return Self.jsonBound(type) }
            return Self.sum([2, Self.sum(items.map { valueBound($0, type: element, scope: scope) }), max(0, items.count - 1)])
        case .template(let template):
            let typeBound = Self.jsonBound(type)
            switch type.nonOptional {
            case .string:
                let text = Self.sum([Self.textBound(template.nodes, scope: scope, dot: nil), 2])
                return type.isOptional ? max(4, min(typeBound, text)) : min(typeBound, text)
            default:
                return typeBound
            }
        }
    }

    func alertBound(_ alert: AlertSpec, scope: TemplateScope) -> Int {
        LiveActivityAlert.maximumSize(title: textBound(alert.title, scope: scope), body: textBound(alert.body, scope: scope),
                                      sound: alert.sound.map(APNSSound.init(named:)))
    }

    func textBound(_ text: TextSpec, scope: TemplateScope) -> Int {
        switch text {
        case .plain(let template):
            return Self.sum([Self.textBound(template.nodes, scope: scope, dot: nil), 2])
        case .localized(let key, let args):
            return APNSAlertText.maximumLocalizedSize(
                key: key, argumentSizes: args.map { Self.sum([Self.textBound($0.nodes, scope: scope, dot: nil), 2]) })
        }
    }

    // MARK: Rules

    /// Sizes add up and multiply without trapping: they stop at `Int.max`, which is still over
    /// the limit. Absurd schemas get there: `string(9223372036854775807)`, or sections over
    /// `[T; 10]` arrays nested 19 deep (10^19 repetitions). Sums are APNSCore's, which bounds the
    /// payload's own shape the same way.
    static func sum(_ sizes: [Int]) -> Int {
        PayloadSize.sum(sizes)
    }

    static func product(_ a: Int, _ b: Int) -> Int {
        let (result, overflow) = a.multipliedReportingOverflow(by: b)
        return overflow ? .max : result
    }

    /// Bytes of a JSON object whose values take `entries`' sizes.
    static func object(_ entries: [(String, Int)]) -> Int {
        sum([2, sum(entries.map { sum([$0.0.utf8.count, 3, $0.1]) }), max(0, entries.count - 1)])
    }

    /// Largest JSON encoding of a value of `type` in the app's shape.
    static func jsonBound(_ type: FieldType) -> Int {
        switch type {
        case .string(let maxLength): return sum([maxLength ?? defaultStringLength, 2])
        case .int: return 20
        case .double, .date: return 24
        case .daterange: return sum([2, jsonBound(.date), 1, jsonBound(.date)])
        case .bool: return 5
        case .enumeration(let values): return (values.map(\.utf8.count).max() ?? 0) + 2
        case .optional(let wrapped): return max(4, jsonBound(wrapped))
        case .array(let element, let maxCount): return sum([2, product(maxCount, jsonBound(element)), max(0, maxCount - 1)])
        case .structure(let structure): return object(structure.fields.map { ($0.name, jsonBound($0.type)) })
        }
    }

    /// Largest text a variable of `type` renders as in a template.
    static func textBound(_ type: FieldType) -> Int {
        switch type {
        case .string(let maxLength): return maxLength ?? defaultStringLength
        case .int: return 20
        case .double: return 24
        case .date: return dateTextBytes
        case .daterange: return sum([dateTextBytes, 2, dateTextBytes])  // lower..upper
        case .bool: return 5
        case .enumeration(let values): return values.map(\.utf8.count).max() ?? 0
        case .optional(let wrapped): return textBound(wrapped)
        case .array(let element, let maxCount): return sum([2, product(maxCount, sum([textBound(element), 4]))])
        // Rendered as text, a struct is a dictionary's description: no longer than its JSON by much.
        case .structure(let structure): return sum([object(structure.fields.map { ($0.name, textBound($0.type)) }), structure.fields.count * 4])
        }
    }

    static func textBound(_ nodes: [TemplateNode], scope: TemplateScope, dot: FieldType?) -> Int {
        var total = 0
        for node in nodes {
            switch node {
            case .text(let text):
                total = sum([total, text.utf8.count])
            case .variable(let name, let transforms):
                let type = name == "." ? dot : scope.type(of: name)
                let bound = type.map { textBound($0) } ?? 0
                total = sum([total, transforms.isEmpty ? bound : max(bound, 20)])
            case .section(let name, _, let inverted, let children):
                let type = scope.type(of: name)?.nonOptional
                if !inverted, case .array(let element, let maxCount) = type {
                    total = sum([total, product(maxCount, textBound(children, scope: scope, dot: element))])
                } else {
                    total = sum([total, textBound(children, scope: scope, dot: inverted ? dot : type)])
                }
            }
        }
        return total
    }
}

extension Workflow {
    /// The largest APNs body, in bytes, that `transition` can produce under the counting rule of
    /// `PayloadBounds` (docs/workflows.md); the loader rejects workflows where this exceeds 4096.
    public func maximumPayloadSize(for transition: TransitionSpec) -> Int {
        PayloadBounds(workflow: self).update(transition).total
    }

    /// The largest push-to-start body, in bytes (for a restart, with the largest content any transition shows).
    public var maximumStartPayloadSize: Int {
        PayloadBounds(workflow: self).start().total
    }
}
