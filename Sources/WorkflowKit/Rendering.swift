import Foundation

/// A text in a rendered alert.
public enum LocalizableText: Sendable, Hashable, Codable {
    case plain(String)
    /// Localized by the app from its strings file: `{"loc-key": key, "loc-args": args}`.
    case localized(key: String, args: [String])

    private enum CodingKeys: String, CodingKey {
        case key = "loc-key"
        case args = "loc-args"
    }

    /// Encodes in the APNs shape: a string, or `{"loc-key": …, "loc-args": […]}`.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .plain(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .localized(let key, let args):
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(key, forKey: .key)
            try container.encode(args, forKey: .args)
        }
    }

    public init(from decoder: any Decoder) throws {
        if let text = try? decoder.singleValueContainer().decode(String.self) {
            self = .plain(text)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self = .localized(key: try container.decode(String.self, forKey: .key),
                          args: try container.decodeIfPresent([String].self, forKey: .args) ?? [])
    }

}

extension APNSAlertText {
    public init(_ text: LocalizableText) {
        switch text {
        case .plain(let text): self = .plain(text)
        case .localized(let key, let args): self = .localized(key: key, arguments: args)
        }
    }
}

/// A rendered alert; encodes as the APNs `alert` dictionary (`sound` sits inside it).
public struct ActivityAlert: Sendable, Hashable, Codable {
    public var title: LocalizableText
    public var body: LocalizableText
    public var sound: String?

    public init(title: LocalizableText, body: LocalizableText, sound: String? = nil) {
        self.title = title
        self.body = body
        self.sound = sound
    }

    /// The alert as APNs receives it (and as it is stored).
    public var json: JSONValue { LiveActivityAlert(self).json }
}

extension LiveActivityAlert {
    public init(_ alert: ActivityAlert) {
        self.init(title: APNSAlertText(alert.title), body: APNSAlertText(alert.body), sound: alert.sound.map(APNSSound.init(named:)))
    }
}

extension LiveActivityPayload.Event {
    public init(_ event: ActivityEvent) {
        switch event {
        case .start: self = .start
        case .update: self = .update
        case .end: self = .end
        }
    }
}

/// The APNs `event` of a Live Activity push.
public enum ActivityEvent: String, Sendable, Hashable, Codable {
    case start
    case update
    case end
}

/// What one transition shows: everything the sender needs besides tokens and headers.
public struct RenderedActivityUpdate: Sendable, Hashable {
    /// `update`, or `end` when the transition enters a final state.
    public var event: ActivityEvent
    /// The state the order is in after the transition.
    public var state: String
    /// The full ContentState in the app's JSON shape (dates are seconds since 2001-01-01).
    public var contentState: JSONValue
    public var alert: ActivityAlert?
    public var staleDate: Date?
    public var relevanceScore: Double?
    /// 5 or 10 (`apns-priority`).
    public var priority: Int
    /// How the activity is dismissed, for an `end` update.
    public var dismissal: Dismissal?
    /// The transition time; the payload's `timestamp`.
    public var timestamp: Date

    /// `dismissal-date` for an `end` update.
    public var dismissalDate: Date? {
        guard event == .end else { return nil }
        return dismissal?.dismissalDate(endedAt: timestamp)
    }

    /// The APNs payload of this update, in the format the `APNSCore` module owns.
    public func apnsPayload() -> LiveActivityPayload {
        LiveActivityPayload(
            event: LiveActivityPayload.Event(event), timestamp: timestamp,
            contentState: APNSJSONObject(members: contentState.objectValue ?? [:]), alert: alert.map(LiveActivityAlert.init),
            staleDate: staleDate, dismissalDate: dismissalDate, relevanceScore: relevanceScore)
    }
}

/// A push-to-start: the first update plus the static attributes.
public struct RenderedActivityStart: Sendable, Hashable {
    public var attributesType: String
    /// The static attributes in the app's JSON shape.
    public var attributes: JSONValue
    /// `event == .start`; its alert is the start alert.
    public var update: RenderedActivityUpdate

    /// The APNs payload of the push-to-start, in the format the `APNSCore` module owns.
    public func apnsPayload() -> LiveActivityPayload {
        var payload = update.apnsPayload()
        payload.attributesType = attributesType
        payload.attributes = APNSJSONObject(members: attributes.objectValue ?? [:])
        payload.inputPushToken = true
        return payload
    }
}

/// A rendering failure: a value that does not fit its field, or a payload over 4096 bytes.
public struct RenderError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// A rendered string is longer than the field's max length.
        case valueTooLong
        /// A rendered value cannot be converted to the field's type.
        case typeMismatch
        /// A required field rendered empty or null.
        case missingValue
        /// More array elements than the field allows.
        case tooManyElements
        /// The APNs payload would exceed 4096 bytes.
        case payloadTooLarge
        /// The state or transition is not part of this workflow.
        case unknownState
    }

    public var code: Code
    /// `workflow: transition from->to` or similar.
    public var context: String
    /// The ContentState field, when the problem is one field.
    public var field: String?
    public var message: String

    public var description: String {
        "\(context): \(field.map { "field `\($0)`: " } ?? "")\(message)"
    }
}

/// Attributes or a transition's input that do not match the workflow's declared types.
public struct DataValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// `merchantName`, `items[2]`, or empty for the whole value.
        public var path: String
        public var message: String
        public var description: String { path.isEmpty ? message : "`\(path)`: \(message)" }
    }

    /// What was checked: "attributes of workflow `food-order`", "input of transition `a -> b`".
    public var subject: String
    public var problems: [Problem]

    /// The first few problems; a value with hundreds of wrong keys does not make a page of text.
    public var description: String {
        let shown = problems.prefix(Self.problemsShown).map(\.description)
        let more = problems.count > Self.problemsShown ? "; and \(problems.count - Self.problemsShown) more" : ""
        return "invalid \(subject): " + shown.joined(separator: "; ") + more
    }

    static let problemsShown = 5
}

/// Limits on the data callers give, beyond the declared types.
public enum DataLimits {
    /// No text value may be longer than this in UTF-8: it could never fit in an APNs payload.
    /// (`string(N)` counts characters; a "character" with many combining marks is many bytes.)
    public static let maximumTextBytes = APNSLimits.maximumPayloadSize
    /// An input date (an ETA) may lie at most this far ahead of the transition time…
    public static let maximumInputDateAhead: TimeInterval = 366 * 86_400
    /// …and at most this far behind it (clocks differ; an ETA hours old is a mistake).
    public static let maximumInputDateBehind: TimeInterval = 86_400
    /// An attribute date may lie at most this far ahead of the creation time, and not before 1970.
    public static let maximumAttributeDateAhead: TimeInterval = 10 * 366 * 86_400
}

// MARK: - Validating data

extension Workflow {
    /// Checks static attributes given at order creation against `activity.attributes` and returns
    /// them normalized (dates as ISO-8601 UTC text, integral doubles as ints).
    public func validateAttributes(_ attributes: JSONValue, at time: Date = Date()) throws -> JSONValue {
        try DataNormalizer.normalize(attributes, schema: attributesSchema, subject: "attributes of workflow `\(name)`",
                                     allowRelativeDates: false, reference: time)
    }

    /// Checks a transition's input against its declared `input` and returns it normalized. A date
    /// may be ISO-8601 text or an offset from the transition time like `+15m` (kept as written),
    /// not in the past (a day of clock difference aside) and at most a year ahead of `time`.
    public func validateInput(_ input: JSONValue, for transition: TransitionSpec, at time: Date = Date()) throws -> JSONValue {
        try DataNormalizer.normalize(input, schema: transition.inputs, subject: "input of transition `\(transition.from) -> \(transition.to)`",
                                     allowRelativeDates: true, reference: time)
    }

    /// Checks the data given with order creation against `lifecycle.start-input`.
    public func validateStartInput(_ input: JSONValue, at time: Date = Date()) throws -> JSONValue {
        try DataNormalizer.normalize(input, schema: lifecycle.startInputs, subject: "start input of workflow `\(name)`",
                                     allowRelativeDates: true, reference: time)
    }
}

enum DataNormalizer {
    static func normalize(_ value: JSONValue, schema: [FieldSpec], subject: String, allowRelativeDates: Bool,
                          reference: Date) throws(DataValidationError) -> JSONValue
    {
        var problems: [DataValidationError.Problem] = []
        let object: [String: JSONValue]
        switch value {
        case .null: object = [:]
        case .object(let fields): object = fields
        default:
            throw DataValidationError(subject: subject, problems: [.init(path: "", message: "expected a JSON object, got \(value.typeName)")])
        }
        var result: [String: JSONValue] = [:]
        let names = schema.map(\.name)
        for key in object.keys.sorted() where !names.contains(key) {
            let hint = didYouMean(key, in: names)
            problems.append(.init(path: excerpt(key), message: "unknown field\(hint); expected fields: \(codeList(names))"))
        }
        normalizeFields(object, schema: schema, path: "", allowRelativeDates: allowRelativeDates, reference: reference,
                        into: &result, problems: &problems)
        guard problems.isEmpty else { throw DataValidationError(subject: subject, problems: problems) }
        return .object(result)
    }

    /// The fields of an object (the top level, or a struct at `path`): a field not given takes
    /// its `default`.
    static func normalizeFields(_ object: [String: JSONValue], schema: [FieldSpec], path: String, allowRelativeDates: Bool,
                                reference: Date, into result: inout [String: JSONValue],
                                problems: inout [DataValidationError.Problem])
    {
        for field in schema {
            var fieldValue = object[field.name] ?? .null
            if fieldValue.isNull, let defaultValue = field.defaultValue { fieldValue = defaultValue }
            if let normalized = normalizeValue(fieldValue, type: field.type, path: path + field.name, allowRelativeDates: allowRelativeDates,
                                               reference: reference, problems: &problems)
            {
                result[field.name] = normalized
            }
        }
    }

    static func normalizeValue(_ value: JSONValue, type: FieldType, path: String, allowRelativeDates: Bool, reference: Date,
                               problems: inout [DataValidationError.Problem]) -> JSONValue?
    {
        func problem(_ message: String) -> JSONValue? {
            problems.append(.init(path: path, message: message))
            return nil
        }
        if value.isNull {
            if type.isOptional { return .null }
            return problem("required \(type.spelling) is missing")
        }
        if case .optional(let wrapped) = type {
            return normalizeValue(value, type: wrapped, path: path, allowRelativeDates: allowRelativeDates, reference: reference,
                                  problems: &problems)
        }
        // Once per value: an optional's text is checked where it is unwrapped, just above.
        if let text = value.stringValue, let message = textProblem(text) { return problem(message) }
        // The value as quoted in a message (computed only for one).
        func shown() -> String { excerpt(value.jsonString) }
        switch type {
        case .optional:
            preconditionFailure("unwrapped above")
        case .string(let maxLength):
            guard let text = value.stringValue else { return problem("expected a string, got \(value.typeName) \(shown())") }
            if let maxLength, text.count > maxLength {
                return problem("at most \(maxLength) characters allowed, got \(text.count); shorten it")
            }
            return value
        case .int:
            guard let int = value.intValue else { return problem("expected a whole number, got \(value.typeName) \(shown())") }
            return .int(int)
        case .double:
            guard let double = value.doubleValue else { return problem("expected a number, got \(value.typeName) \(shown())") }
            // JSON has no NaN or infinity: such a value would be stored as null.
            guard double.isFinite else { return problem("expected a finite number, got \(double)") }
            return .double(double)
        case .bool:
            guard let bool = value.boolValue else { return problem("expected true or false, got \(value.typeName) \(shown())") }
            return .bool(bool)
        case .date:
            guard let text = value.stringValue else {
                return problem("expected a date as ISO-8601 text like \"2025-05-01T12:00:00Z\", got \(value.typeName) \(shown())")
            }
            let date: Date
            let normalized: JSONValue
            if let absolute = DateValues.parseISO8601(text) {
                date = absolute
                normalized = .string(DateValues.formatISO8601(absolute))
            } else if allowRelativeDates, let offset = DateValues.parseOffset(text) {
                guard offset >= 0 else {
                    return problem("`\(excerpt(text))` lies in the past; give a time from now like \"+15m\", or ISO-8601 like \"2025-05-01T12:00:00Z\"")
                }
                date = reference.addingTimeInterval(offset)
                normalized = .string(text)
            } else {
                return problem("`\(excerpt(text))` is not a date; use ISO-8601 like \"2025-05-01T12:00:00Z\"\(allowRelativeDates ? " or an offset like \"+15m\"" : "")")
            }
            if let message = dateRangeProblem(text, date, reference: reference, isInput: allowRelativeDates) { return problem(message) }
            return normalized
        case .enumeration(let values):
            guard let text = value.stringValue, values.contains(text) else {
                let hint = value.stringValue.map { didYouMean($0, in: values) } ?? ""
                return problem("expected one of \(codeList(values)), got \(shown())\(hint)")
            }
            return value
        case .array(let element, let maxCount):
            guard let items = value.arrayValue else { return problem("expected an array, got \(value.typeName)") }
            if items.count > maxCount { return problem("at most \(maxCount) elements allowed, got \(items.count)") }
            var result: [JSONValue] = []
            for (index, item) in items.enumerated() {
                guard let normalized = normalizeValue(item, type: element, path: "\(path)[\(index)]",
                                                      allowRelativeDates: allowRelativeDates, reference: reference,
                                                      problems: &problems)
                else { continue }
                result.append(normalized)
            }
            return .array(result)
        case .structure(let structure):
            guard case .object(let object) = value else {
                return problem("expected a \(structure.name) object with \(codeList(structure.fields.map(\.name))), got \(value.typeName)")
            }
            let names = structure.fields.map(\.name)
            for key in object.keys.sorted() where !names.contains(key) {
                problems.append(.init(path: "\(path).\(excerpt(key))",
                                      message: "unknown field of \(structure.name)\(didYouMean(key, in: names)); expected fields: \(codeList(names))"))
            }
            var result: [String: JSONValue] = [:]
            normalizeFields(object, schema: structure.fields, path: path + ".", allowRelativeDates: allowRelativeDates,
                            reference: reference, into: &result, problems: &problems)
            return .object(result)
        }
    }

    /// What is wrong with a text value whatever its type: a NUL, which PostgreSQL text and jsonb
    /// cannot hold, or more bytes than any APNs payload can carry.
    static func textProblem(_ text: String) -> String? {
        if text.utf8.contains(0) {
            return "contains a NUL character (U+0000), which cannot be stored; remove it"
        }
        let bytes = text.utf8.count
        if bytes > DataLimits.maximumTextBytes {
            return "the text is \(bytes) bytes in UTF-8, more than a whole APNs payload (\(DataLimits.maximumTextBytes) bytes) can carry; shorten it"
        }
        return nil
    }

    /// Dates far from the transition (input) or creation (attributes) time are mistakes: a year-9999
    /// ETA, `+99999d`, an ETA from last week.
    static func dateRangeProblem(_ text: String, _ date: Date, reference: Date, isInput: Bool) -> String? {
        let distance = date.timeIntervalSince(reference)
        guard distance > DataLimits.maximumInputDateAhead || distance < -DataLimits.maximumInputDateBehind
            || date.timeIntervalSince1970 < 0
        else { return nil }
        let shown = "`\(excerpt(text))`"
        func days(_ seconds: TimeInterval) -> String {
            let count = abs(seconds) / 86_400
            return count >= 1e7 ? "millions of days" : "\(Int(count.rounded(.down))) days"
        }
        if isInput {
            if distance > DataLimits.maximumInputDateAhead {
                return "\(shown) is \(days(distance)) ahead; an input time may be at most a year ahead, check the value"
            }
            if distance < -DataLimits.maximumInputDateBehind {
                return "\(shown) lies \(days(distance)) in the past; an input time (an ETA) should be now or later"
            }
        } else if distance > DataLimits.maximumAttributeDateAhead || date.timeIntervalSince1970 < 0 {
            return "\(shown) is out of range; a date may lie between 1970 and 10 years from now, check the value"
        }
        return nil
    }
}


// MARK: - Rendering

extension Workflow {
    /// Renders what `transition` shows: the full ContentState, the alert, stale date, relevance,
    /// priority and (into a final state) the dismissal. `previous` is the last ContentState sent
    /// (app shape), used by `{{previous.x}}`; pass nil when there is none.
    public func render(transition: TransitionSpec, attributes: JSONValue, input: JSONValue, previous: JSONValue? = nil,
                       at time: Date) throws -> RenderedActivityUpdate
    {
        try render(transition: transition, attributes: attributes, validatedInput: try validateInput(input, for: transition, at: time),
                   previous: previous, at: time)
    }

    /// ``render(transition:attributes:input:previous:at:)`` for input that already went through
    /// ``validateInput(_:for:at:)`` — the engine validates once, stores that input and renders it.
    public func render(transition: TransitionSpec, attributes: JSONValue, validatedInput input: JSONValue, previous: JSONValue? = nil,
                       at time: Date) throws -> RenderedActivityUpdate
    {
        let context = "workflow `\(name)`, transition `\(transition.from) -> \(transition.to)`"
        guard state(named: transition.to) != nil else {
            throw RenderError(code: .unknownState, context: context, field: nil, message: "state `\(transition.to)` is not in this workflow")
        }
        let renderer = Renderer(workflow: self, attributes: attributes, input: input, inputSchema: transition.inputs,
                                previous: previous, time: time, context: context)
        let update = RenderedActivityUpdate(
            event: transition.endsActivity ? .end : .update,
            state: transition.to,
            contentState: try renderer.content(transition.content),
            alert: try transition.alert.map { try renderer.alert($0) },
            staleDate: staleAfter(in: transition.to).map { time.addingTimeInterval($0.timeInterval) },
            relevanceScore: transition.relevanceScore,
            priority: transition.priority,
            dismissal: transition.endsActivity ? dismissal(in: transition.to) : nil,
            timestamp: time)
        try Renderer.checkSize(update.apnsPayload(), context: context)
        return update
    }

    /// Renders the update for an order that is in `state` without a transition — used when the
    /// app starts its activity late and registers its token. Shows `previous` (the last ContentState
    /// sent) when given, else the state's default content; no alert, priority 5.
    public func render(state stateName: String, attributes: JSONValue, input: JSONValue = [:], previous: JSONValue? = nil,
                       at time: Date) throws -> RenderedActivityUpdate
    {
        let context = "workflow `\(name)`, state `\(stateName)`"
        guard let state = state(named: stateName) else {
            throw RenderError(code: .unknownState, context: context, field: nil,
                              message: "unknown state; states: \(codeList(states.map(\.name)))")
        }
        let contentState: JSONValue
        if let previous, !previous.isNull {
            contentState = previous
        } else {
            let renderer = Renderer(workflow: self, attributes: attributes, input: input, inputSchema: inputs(into: stateName),
                                    previous: nil, time: time, context: context)
            contentState = try renderer.content(defaultContent(in: state))
        }
        let update = RenderedActivityUpdate(
            event: state.isFinal ? .end : .update, state: stateName, contentState: contentState, alert: nil,
            staleDate: staleAfter(in: stateName).map { time.addingTimeInterval($0.timeInterval) },
            relevanceScore: state.relevanceScore, priority: state.priority ?? (state.isFinal ? 10 : 5),
            dismissal: state.isFinal ? dismissal(in: stateName) : nil, timestamp: time)
        try Renderer.checkSize(update.apnsPayload(), context: context)
        return update
    }

    /// Renders the push-to-start at order creation: the initial state's content, the start alert
    /// and the attributes. `input` is checked against `lifecycle.start-input`.
    public func renderStart(attributes: JSONValue, input: JSONValue = [:], at time: Date) throws -> RenderedActivityStart {
        try renderStart(in: initialState, attributes: attributes, input: input, previous: nil, at: time)
    }

    /// Renders a push-to-start for an order in `state`: a restart near the 8-hour limit shows
    /// `previous` (the last ContentState sent); without it the state's default content is used.
    public func renderStart(in stateName: String, attributes: JSONValue, input: JSONValue = [:], previous: JSONValue?,
                            at time: Date) throws -> RenderedActivityStart
    {
        let context = "workflow `\(name)`, start in `\(stateName)`"
        guard let state = state(named: stateName) else {
            throw RenderError(code: .unknownState, context: context, field: nil,
                              message: "unknown state; states: \(codeList(states.map(\.name)))")
        }
        let normalizedAttributes = try validateAttributes(attributes, at: time)
        let normalizedInput = stateName == initialState ? try validateStartInput(input, at: time) : input
        let renderer = Renderer(workflow: self, attributes: normalizedAttributes, input: normalizedInput,
                                inputSchema: stateName == initialState ? lifecycle.startInputs : inputs(into: stateName),
                                previous: nil, time: time, context: context)
        let contentState: JSONValue
        if let previous, !previous.isNull {
            contentState = previous
        } else {
            contentState = try renderer.content(defaultContent(in: state))
        }
        let alert = try lifecycle.startAlert.map { try renderer.alert($0) }
        let update = RenderedActivityUpdate(
            event: .start, state: stateName, contentState: contentState, alert: alert,
            staleDate: staleAfter(in: stateName).map { time.addingTimeInterval($0.timeInterval) },
            relevanceScore: state.relevanceScore, priority: 10, dismissal: nil, timestamp: time)
        let start = RenderedActivityStart(attributesType: attributesType,
                                          attributes: renderer.appShape(normalizedAttributes, schema: attributesSchema),
                                          update: update)
        try Renderer.checkSize(start.apnsPayload(), context: context)
        return start
    }

    /// The alert of the push-to-start (nil when the workflow declares none).
    public func renderStartAlert(attributes: JSONValue, input: JSONValue = [:], at time: Date) throws -> ActivityAlert? {
        guard let alert = lifecycle.startAlert else { return nil }
        let renderer = Renderer(workflow: self, attributes: try validateAttributes(attributes, at: time), input: try validateStartInput(input, at: time),
                                inputSchema: lifecycle.startInputs, previous: nil, time: time,
                                context: "workflow `\(name)`, start alert")
        return try renderer.alert(alert)
    }

    /// Converts normalized attributes (from `validateAttributes`) to the app's JSON shape.
    public func appAttributes(_ attributes: JSONValue) throws -> JSONValue {
        let normalized = try validateAttributes(attributes)
        return Renderer(workflow: self, attributes: normalized, input: [:], inputSchema: [], previous: nil, time: Date(),
                        context: "").appShape(normalized, schema: attributesSchema)
    }

    /// Every input declared by a transition into `state` (and the start input for the initial state).
    func inputs(into state: String) -> [FieldSpec] {
        var inputs = state == initialState ? lifecycle.startInputs : []
        for transition in transitions where transition.to == state {
            for input in transition.inputs where !inputs.contains(where: { $0.name == input.name }) { inputs.append(input) }
        }
        return inputs
    }
}

/// Renders values for one transition at one time.
struct Renderer {
    let workflow: Workflow
    let time: Date
    let context: String
    /// Typed values by variable name (`attributes.x`, `input.y`, `previous.z`, `now`); dates as ISO text.
    let variables: [String: JSONValue]

    /// The groups of variables; each is an object in swift-mustache's context, also when empty.
    static let groups = ["attributes", "input", "previous"]

    init(workflow: Workflow, attributes: JSONValue, input: JSONValue, inputSchema: [FieldSpec], previous: JSONValue?,
         time: Date, context: String)
    {
        self.workflow = workflow
        self.time = time
        self.context = context
        var variables: [String: JSONValue] = ["now": .string(DateValues.formatISO8601(time))]
        // A struct's members too, by their full names (`input.leader.name`).
        func add(_ prefix: String, _ value: JSONValue?, schema: [FieldSpec]) {
            for field in schema {
                let fieldValue = Self.templateValue(value?[field.name] ?? .null, type: field.type, time: time)
                variables[prefix + field.name] = fieldValue
                if let structure = field.type.structType {
                    add(prefix + field.name + ".", fieldValue, schema: structure.fields)
                }
            }
        }
        add("attributes.", attributes, schema: workflow.attributesSchema)
        add("input.", input, schema: inputSchema)
        add("previous.", previous, schema: workflow.contentSchema)
        self.variables = variables
    }

    /// The object swift-mustache renders against, built from `variables` for the templates
    /// `Template.renderDirect` leaves to it.
    static func mustacheContext(_ variables: [String: JSONValue]) -> [String: Any] {
        var groups: [String: [String: Any]] = [:]
        for group in Self.groups { groups[group] = [:] }
        var root: [String: Any] = [:]
        for (name, value) in variables {
            guard let any = Self.foundation(value) else { continue }
            if let dot = name.firstIndex(of: "."), groups[String(name[..<dot])] != nil {
                let member = String(name[name.index(after: dot)...])
                // A struct's members are inside the struct's own object already.
                if member.contains(".") { continue }
                groups[String(name[..<dot])]![member] = any
            } else {
                root[name] = any
            }
        }
        for (group, object) in groups { root[group] = object }
        return root
    }

    /// A template rendered against this transition's values.
    func render(_ template: Template) -> String {
        template.renderDirect(variables) ?? template.render(Self.mustacheContext(variables))
    }

    /// A value as templates see it: dates (ISO text, offsets or 2001-based seconds) become ISO text.
    static func templateValue(_ value: JSONValue, type: FieldType, time: Date) -> JSONValue {
        switch (type.nonOptional, value) {
        case (.date, .string(let text)):
            return DateValues.resolve(text, relativeTo: time).map { .string(DateValues.formatISO8601($0)) } ?? value
        case (.date, .int), (.date, .double):
            return .string(DateValues.formatISO8601(Date(timeIntervalSinceReferenceDate: value.doubleValue!)))
        case (.array(let element, _), .array(let items)):
            return .array(items.map { templateValue($0, type: element, time: time) })
        case (.structure(let structure), .object(var object)):
            for field in structure.fields {
                if let member = object[field.name] { object[field.name] = templateValue(member, type: field.type, time: time) }
            }
            return .object(object)
        default:
            return value
        }
    }

    static func foundation(_ value: JSONValue) -> Any? {
        switch value {
        case .null: return nil
        case .bool(let bool): return bool
        case .int(let int): return int
        case .double(let double): return double
        case .string(let string): return string
        case .array(let items): return items.compactMap(foundation)
        case .object(let object): return object.compactMapValues(foundation)
        }
    }

    // MARK: Content

    func content(_ content: [String: ValueSpec]) throws -> JSONValue {
        var result: [String: JSONValue] = [:]
        for field in workflow.contentSchema {
            result[field.name] = try value(content[field.name] ?? .literal(.null), type: field.type, field: field.name)
        }
        return .object(result)
    }

    func value(_ spec: ValueSpec, type: FieldType, field: String) throws -> JSONValue {
        switch spec {
        case .literal(let literal):
            return try convert(literal, type: type, field: field)
        case .list(let items):
            guard case .array(let element, _) = type.nonOptional else { return try convert(.null, type: type, field: field) }
            return try convert(.array(try items.map { try value($0, type: element, field: field) }), type: type, field: field,
                               elementsConverted: true)
        case .template(let template):
            if let variable = template.singleVariable, variable != "." {
                return try convert(variables[variable] ?? .null, type: type, field: field)
            }
            return try convert(.string(render(template)), type: type, field: field)
        }
    }

    func error(_ code: RenderError.Code, _ field: String, _ message: String) -> RenderError {
        RenderError(code: code, context: context, field: field, message: message)
    }

    /// Converts a template-domain value (dates as text) to `type` in the app's JSON shape.
    func convert(_ value: JSONValue, type: FieldType, field: String, elementsConverted: Bool = false) throws -> JSONValue {
        if case .optional(let wrapped) = type {
            if value.isNull { return .null }
            // An optional field that renders empty (or only whitespace) is null.
            if case .string(let text) = value, text.trimmingWhitespace().isEmpty {
                return .null
            }
            return try convert(value, type: wrapped, field: field, elementsConverted: elementsConverted)
        }
        if value.isNull {
            throw error(.missingValue, field, "required \(type.spelling) rendered no value; give the variable a value or make the field optional")
        }
        let text = value.stringValue?.trimmingWhitespace()
        switch type {
        case .string(let maxLength):
            let string: String
            switch value {
            case .string(let raw): string = raw
            case .int, .double, .bool: string = value.jsonString
            default: throw error(.typeMismatch, field, "expected text, got \(value.typeName)")
            }
            if let maxLength, string.count > maxLength {
                throw error(.valueTooLong, field,
                            "rendered text is \(string.count) characters, over the max length of \(maxLength): \"\(string.prefix(40))…\"; shorten the input or raise the field's max length")
            }
            return .string(string)
        case .int:
            if let int = value.intValue { return .int(int) }
            if let text, let int = Int(text) { return .int(int) }
            throw error(.typeMismatch, field, "expected a whole number, rendered \(value.jsonString)")
        case .double:
            if let double = value.doubleValue { return .double(double) }
            if let text, let double = Double(text), double.isFinite { return .double(double) }
            throw error(.typeMismatch, field, "expected a number, rendered \(value.jsonString)")
        case .bool:
            if let bool = value.boolValue { return .bool(bool) }
            if text == "true" { return .bool(true) }
            if text == "false" { return .bool(false) }
            throw error(.typeMismatch, field, "expected true or false, rendered \(value.jsonString)")
        case .date:
            if let text, let date = DateValues.resolve(text, relativeTo: time) { return DateValues.appJSON(date) }
            // A number is already in the app's shape (seconds since 2001).
            if let seconds = value.doubleValue { return .double(seconds) }
            throw error(.typeMismatch, field,
                        "expected a date (ISO-8601 like 2025-05-01T12:00:00Z or an offset like +15m), rendered \(value.jsonString)")
        case .enumeration(let values):
            guard let text, values.contains(text) else {
                throw error(.typeMismatch, field, "rendered \(value.jsonString), which is not one of \(codeList(values))")
            }
            return .string(text)
        case .optional(let wrapped):
            return try convert(value, type: wrapped, field: field)
        case .array(let element, let maxCount):
            guard let items = value.arrayValue else { throw error(.typeMismatch, field, "expected an array, got \(value.typeName)") }
            if items.count > maxCount {
                throw error(.tooManyElements, field, "\(items.count) elements, at most \(maxCount) allowed")
            }
            if elementsConverted { return value }
            return .array(try items.map { try convert($0, type: element, field: field) })
        case .structure(let structure):
            guard case .object(let object) = value else {
                throw error(.typeMismatch, field, "expected a \(structure.name) object, got \(value.typeName)")
            }
            var result: [String: JSONValue] = [:]
            for member in structure.fields {
                result[member.name] = try convert(object[member.name] ?? member.defaultValue ?? .null, type: member.type,
                                                  field: field + "." + member.name)
            }
            return .object(result)
        }
    }

    func alert(_ spec: AlertSpec) throws -> ActivityAlert {
        ActivityAlert(title: text(spec.title), body: text(spec.body), sound: spec.sound)
    }

    func text(_ spec: TextSpec) -> LocalizableText {
        switch spec {
        case .plain(let template): return .plain(render(template))
        case .localized(let key, let args): return .localized(key: key, args: args.map { render($0) })
        }
    }

    /// Normalized data (dates as ISO text) in the app's JSON shape (dates as 2001-based seconds).
    func appShape(_ value: JSONValue, schema: [FieldSpec]) -> JSONValue {
        var result: [String: JSONValue] = [:]
        for field in schema {
            let fieldValue = value[field.name] ?? .null
            result[field.name] = (try? convert(Self.templateValue(fieldValue, type: field.type, time: time), type: field.type,
                                               field: field.name)) ?? fieldValue
        }
        return .object(result)
    }

    static func checkSize(_ payload: LiveActivityPayload, context: String) throws {
        let size = payload.encodedSize
        if size > APNSLimits.maximumPayloadSize {
            throw RenderError(code: .payloadTooLarge, context: context, field: nil,
                              message: "the APNs payload would be \(size) bytes, over the \(APNSLimits.maximumPayloadSize)-byte limit APNs accepts; shorten the text values given (attributes or input)")
        }
    }
}
