/// The variables a template may name at one place in the file.
struct TemplateScope {
    var attributes: [FieldSpec]
    var content: [FieldSpec]
    var inputs: [FieldSpec]
    /// Whose inputs these are, for messages: "transition `a -> b`".
    var inputOwner: String
    /// Why `previous.*` is unavailable, or nil when it is available.
    var previousUnavailable: String?

    /// The type of `group.field`, or of a struct's member `group.field.member…`.
    func type(of variable: String) -> FieldType? {
        if variable == "now" { return .date }
        let parts = variable.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2 else { return nil }
        var type: FieldType
        switch parts[0] {
        case "attributes":
            guard let found = attributes.first(where: { $0.name == parts[1] })?.type else { return nil }
            type = found
        case "input":
            guard let found = inputs.first(where: { $0.name == parts[1] })?.type else { return nil }
            type = found
        case "previous":
            guard previousUnavailable == nil, let found = content.first(where: { $0.name == parts[1] })?.type else { return nil }
            type = found.isOptional ? found : .optional(found)
        default: return nil
        }
        for member in parts.dropFirst(2) {
            guard let structure = type.structType, let field = structure.fields.first(where: { $0.name == member }) else { return nil }
            // A member of an optional struct is absent when the struct is.
            type = type.isOptional && !field.type.isOptional ? .optional(field.type) : field.type
        }
        return type
    }

    var allNames: [String] {
        func names(_ prefix: String, _ fields: [FieldSpec]) -> [String] {
            fields.flatMap { field in
                [prefix + field.name] + (field.type.structType.map { names(prefix + field.name + ".", $0.fields) } ?? [])
            }
        }
        return names("attributes.", attributes) + names("input.", inputs)
            + (previousUnavailable == nil ? names("previous.", content) : []) + ["now"]
    }
}

/// Checks the workflow as a whole and builds the `Workflow`.
struct WorkflowValidator {
    var parser: WorkflowParser
    let name: String
    let description: String
    let attributesType: String
    let structTypes: [StructType]
    let attributesSchema: [FieldSpec]
    let contentSchema: [FieldSpec]
    let statesPosition: SourcePosition
    var states: [ParsedState]
    let transitions: [ParsedTransition]
    let lifecycle: LifecycleSpec
    let lifecycleStartPosition: SourcePosition
    let startAlert: ParsedAlert?
    let dismissals: [String: Located<Dismissal>]
    let timers: [ParsedTimer]
    /// Index in `states` by name: lookups stay cheap in workflows with thousands of states.
    let stateIndex: [String: Int]

    init(parser: WorkflowParser, name: String, description: String, attributesType: String, structTypes: [StructType],
         attributesSchema: [FieldSpec],
         contentSchema: [FieldSpec], statesPosition: SourcePosition, states: [ParsedState], transitions: [ParsedTransition],
         lifecycle: LifecycleSpec, lifecycleStartPosition: SourcePosition, startAlert: ParsedAlert?,
         dismissals: [String: Located<Dismissal>], timers: [ParsedTimer])
    {
        self.parser = parser
        self.name = name
        self.description = description
        self.attributesType = attributesType
        self.structTypes = structTypes
        self.attributesSchema = attributesSchema
        self.contentSchema = contentSchema
        self.statesPosition = statesPosition
        self.states = states
        self.transitions = transitions
        self.lifecycle = lifecycle
        self.lifecycleStartPosition = lifecycleStartPosition
        self.startAlert = startAlert
        self.dismissals = dismissals
        self.timers = timers
        self.stateIndex = Dictionary(states.enumerated().map { ($1.spec.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    mutating func error(_ message: String, at position: SourcePosition) {
        parser.error(message, at: position)
    }

    func state(_ name: String) -> ParsedState? { stateIndex[name].map { states[$0] } }
    var stateNames: [String] { states.map(\.spec.name) }

    func label(_ transition: ParsedTransition) -> String {
        let from = transition.fromAny ? "any" : transition.from.map(\.value).joined(separator: "|")
        return "transition `\(from) -> \(transition.to.value)`"
    }

    mutating func unknownState(_ name: Located<String>, role: String) {
        error("\(role) names unknown state `\(name.value)`\(didYouMean(name.value, in: stateNames)); states: \(codeList(stateNames))",
              at: name.position)
    }

    // MARK: -

    mutating func validate() -> Workflow? {
        // Initial and final states.
        let initials = states.filter(\.spec.isInitial)
        if initials.isEmpty, !states.isEmpty {
            error("no initial state: mark the state an order starts in with `initial: true`", at: statesPosition)
        }
        for extra in initials.dropFirst() {
            error("several initial states (\(codeList(initials.map(\.spec.name)))): keep `initial: true` on exactly one", at: extra.position)
        }
        if !states.isEmpty, !states.contains(where: \.spec.isFinal) {
            error("no final state: mark the states where an order ends with `final: true`", at: statesPosition)
        }
        for state in states where state.spec.isInitial && state.spec.isFinal {
            error("state `\(state.spec.name)` is both initial and final: an order would end as it starts; remove one of the flags", at: state.position)
        }
        let finals = Set(states.filter(\.spec.isFinal).map(\.spec.name))

        // Dismissals.
        for (stateName, dismissal) in dismissals.sorted(by: { $0.key < $1.key }) {
            guard let index = stateIndex[stateName] else {
                unknownState(Located(value: stateName, position: dismissal.position), role: "`lifecycle.end`")
                continue
            }
            guard states[index].spec.isFinal else {
                error("`lifecycle.end` sets a dismissal for `\(stateName)`, which is not a final state; final states: \(codeList(finals.sorted()))",
                      at: dismissal.position)
                continue
            }
            states[index].spec.dismissal = dismissal.value
        }
        for index in states.indices where states[index].spec.isFinal && states[index].spec.dismissal == nil {
            states[index].spec.dismissal = .systemDefault
        }

        // Expand and check transitions.
        var expanded: [(from: String, parsed: ParsedTransition)] = []
        var seenPairs: [String: SourcePosition] = [:]
        var seenEvents: [String: String] = [:]
        for transition in transitions {
            guard state(transition.to.value) != nil else {
                unknownState(transition.to, role: "`to` of \(label(transition))")
                continue
            }
            var sources: [Located<String>] = []
            if transition.fromAny {
                sources = stateNames.filter { !finals.contains($0) && $0 != transition.to.value }
                    .map { Located(value: $0, position: transition.position) }
            } else {
                for from in transition.from {
                    guard state(from.value) != nil else {
                        unknownState(from, role: "`from` of \(label(transition))")
                        continue
                    }
                    if finals.contains(from.value) {
                        error("\(label(transition)) leaves final state `\(from.value)`: a final state ends the order; remove the transition or drop `final: true` from `\(from.value)`",
                              at: from.position)
                        continue
                    }
                    sources.append(from)
                }
            }
            for from in sources {
                let pair = "\(from.value)->\(transition.to.value)"
                if let earlier = seenPairs[pair] {
                    error("duplicate transition `\(from.value) -> \(transition.to.value)` (first declared at line \(earlier.line)); keep one",
                          at: transition.fromAny ? transition.position : from.position)
                    continue
                }
                seenPairs[pair] = transition.fromAny ? transition.position : from.position
                if let event = transition.event {
                    let key = "\(from.value)|\(event.value.lowercased())"
                    if let other = seenEvents[key] {
                        error("event `\(event.value)` is used twice from state `\(from.value)` (by `\(other)` and `\(pair)`): an event must pick one transition; rename one",
                              at: event.position)
                        continue
                    }
                    seenEvents[key] = pair
                }
                expanded.append((from.value, transition))
            }
        }
        // The graph, looked up by state rather than searched (files with thousands of transitions).
        var successors: [String: [String]] = [:]
        var predecessors: [String: [String]] = [:]
        var incoming: [String: [ParsedTransition]] = [:]
        // The targets of each source by normalized name, each once, in file order.
        var targetsByName: [String: [String: [String]]] = [:]
        for (from, transition) in expanded {
            let to = transition.to.value
            successors[from, default: []].append(to)
            predecessors[to, default: []].append(from)
            incoming[to, default: []].append(transition)
            let key = TransitionResolver.normalize(to)
            if targetsByName[from, default: [:]][key, default: []].contains(to) == false {
                targetsByName[from, default: [:]][key, default: []].append(to)
            }
        }

        // An event named like a state the same source can go to would make `resolveTransition` ambiguous.
        for (from, transition) in expanded {
            guard let event = transition.event else { continue }
            let namesake = targetsByName[from]?[TransitionResolver.normalize(event.value)] ?? []
            if let clash = namesake.first(where: { $0 != transition.to.value }) {
                error("event `\(event.value)` of `\(from) -> \(transition.to.value)` has the name of state `\(clash)`, which `\(from)` can also go to; rename the event",
                      at: event.position)
            }
        }

        // Reachability.
        if initials.count == 1 {
            let initial = initials[0].spec.name
            var reachable: Set<String> = [initial]
            var queue = [initial]
            while let current = queue.popLast() {
                for next in successors[current] ?? [] where !reachable.contains(next) {
                    reachable.insert(next)
                    queue.append(next)
                }
            }
            for state in states where !reachable.contains(state.spec.name) {
                error("state `\(state.spec.name)` is unreachable: no transitions lead to it from the initial state `\(initial)`; add a transition into it or remove it",
                      at: state.position)
            }
        }
        var canFinish = finals
        var queue = Array(finals)
        while let current = queue.popLast() {
            for previous in predecessors[current] ?? [] where !canFinish.contains(previous) {
                canFinish.insert(previous)
                queue.append(previous)
            }
        }
        if !finals.isEmpty {
            for state in states where !canFinish.contains(state.spec.name) {
                error("state `\(state.spec.name)` has no path to a final state, so an order there could never end; add a transition from it toward \(codeList(finals.sorted()))",
                      at: state.position)
            }
        }

        // Content, alerts and templates of each transition (once per entry in the file).
        var specs: [String: TransitionSpec] = [:]
        var checked = Set<SourcePosition>()
        for (from, transition) in expanded {
            guard let target = state(transition.to.value) else { continue }
            let scope = TemplateScope(attributes: attributesSchema, content: contentSchema, inputs: transition.inputs,
                                      inputOwner: label(transition), previousUnavailable: nil)
            let firstTime = checked.insert(transition.position).inserted
            let content = effectiveContent(transition.content, defaults: target, label: label(transition),
                                           position: transition.position, scope: scope, report: firstTime)
            var alert: ParsedAlert?
            switch transition.alert {
            case .alert(let own): alert = own
            case .suppressed: alert = nil
            case .inherit: alert = target.alert
            }
            if firstTime, let alert { checkAlert(alert, scope: scope) }
            let ends = finals.contains(target.spec.name)
            let priority = transition.priority ?? target.spec.priority ?? ((alert != nil || ends) ? 10 : 5)
            let spec = TransitionSpec(
                from: from, to: target.spec.name, event: transition.event?.value, inputs: transition.inputs,
                content: content, alert: alert?.spec, relevanceScore: transition.relevanceScore ?? target.spec.relevanceScore,
                priority: priority, endsActivity: ends)
            specs[spec.id] = spec
        }
        let transitionSpecs = expanded.compactMap { specs["\($0.from)->\($0.parsed.to.value)"] }

        // State defaults, also those no transition uses.
        for state in states {
            var inputs: [FieldSpec] = state.spec.isInitial ? lifecycle.startInputs : []
            for transition in incoming[state.spec.name] ?? [] {
                for input in transition.inputs where !inputs.contains(where: { $0.name == input.name }) { inputs.append(input) }
            }
            let scope = TemplateScope(
                attributes: attributesSchema, content: contentSchema, inputs: inputs,
                inputOwner: "the transitions into `\(state.spec.name)`",
                previousUnavailable: state.spec.isInitial ? "there is no previous ContentState when the activity starts in `\(state.spec.name)`" : nil)
            for (field, value) in state.content.sorted(by: { $0.key < $1.key }) {
                guard let type = contentSchema.first(where: { $0.name == field })?.type else { continue }
                checkValue(value.value, type: type, position: value.position,
                           label: "`content.\(field)` of state `\(state.spec.name)`", scope: scope)
            }
            if let alert = state.alert { checkAlert(alert, scope: scope) }
        }

        // The start.
        let initialName = initials.first?.spec.name
        if let initial = initials.first {
            let scope = TemplateScope(
                attributes: attributesSchema, content: contentSchema, inputs: lifecycle.startInputs,
                inputOwner: "`lifecycle.start-input`",
                previousUnavailable: "there is no previous ContentState when the activity starts")
            if lifecycle.start == .pushToStart {
                _ = effectiveContent([:], defaults: initial, label: "the push-to-start of initial state `\(initial.spec.name)`",
                                     position: initial.position, scope: scope, report: true)
            }
            if let startAlert { checkAlert(startAlert, scope: scope) }
        }
        if lifecycle.start == .pushToStart, startAlert == nil {
            error("`start: push-to-start` needs a `start-alert` with `title` and `body`: APNs silently drops a push-to-start without an alert",
                  at: lifecycleStartPosition)
        }
        if lifecycle.onTimeLimit == .restart, lifecycle.start == .app, startAlert == nil {
            error("`on-time-limit: restart` starts a new activity with push-to-start, which needs a `start-alert`", at: lifecycleStartPosition)
        }

        // Timers.
        var timerSpecs: [TimerSpec] = []
        for (index, timer) in timers.enumerated() {
            let what = "timer #\(index + 1)"
            guard state(timer.state.value) != nil else {
                unknownState(timer.state, role: "`in` of \(what)")
                continue
            }
            if finals.contains(timer.state.value) {
                error("\(what) runs in final state `\(timer.state.value)`, where the order has ended; use a non-final state", at: timer.state.position)
                continue
            }
            if let goTo = timer.goTo {
                guard state(goTo.value) != nil else {
                    unknownState(goTo, role: "`go-to` of \(what)")
                    continue
                }
                guard let transition = specs["\(timer.state.value)->\(goTo.value)"] else {
                    error("\(what) goes from `\(timer.state.value)` to `\(goTo.value)`, but there is no transition `\(timer.state.value) -> \(goTo.value)`; add one to `transitions`",
                          at: goTo.position)
                    continue
                }
                let required = transition.inputs.filter { !$0.type.isOptional }.map(\.name)
                if !required.isEmpty {
                    error("\(what) takes transition `\(transition.from) -> \(transition.to)`, which requires input \(codeList(required)); a timer has no input, so make it optional (e.g. `date?`)",
                          at: goTo.position)
                    continue
                }
                timerSpecs.append(TimerSpec(state: timer.state.value, after: timer.after, action: .transition(to: goTo.value)))
            } else {
                timerSpecs.append(TimerSpec(state: timer.state.value, after: timer.after, action: .markStale))
            }
        }

        guard parser.diagnostics.isEmpty, let initialName else { return nil }
        let workflow = Workflow(
            name: name, description: description, attributesType: attributesType, structTypes: structTypes,
            attributesSchema: attributesSchema,
            contentSchema: contentSchema, states: states.map(\.spec), initialState: initialName, finalStates: finals,
            transitions: transitionSpecs, lifecycle: lifecycle, timers: timerSpecs)

        // The 4 KB payload limit, once everything else is sound.
        let bounds = PayloadBounds(workflow: workflow)
        for (from, transition) in expanded {
            guard let spec = specs["\(from)->\(transition.to.value)"] else { continue }
            let size = bounds.update(spec)
            if size.total > APNSLimits.maximumPayloadSize {
                error("transition `\(spec.from) -> \(spec.to)` can produce an APNs payload of up to \(size.total) bytes, over the \(APNSLimits.maximumPayloadSize)-byte limit (\(size.breakdown)); \(shrinkAdvice(size)); or shorten alert texts, or send less in the ContentState",
                      at: transition.fromAny ? transition.position : (transition.from.first { $0.value == from }?.position ?? transition.position))
            }
        }
        if lifecycle.start == .pushToStart || lifecycle.onTimeLimit == .restart {
            let size = bounds.start()
            if size.total > APNSLimits.maximumPayloadSize {
                error("the push-to-start can produce an APNs payload of up to \(size.total) bytes, over the \(APNSLimits.maximumPayloadSize)-byte limit (\(size.breakdown)); \(shrinkAdvice(size)); bound the attributes' strings the same way, or shorten the start alert",
                      at: lifecycleStartPosition)
            }
        }
        return parser.diagnostics.isEmpty ? workflow : nil
    }

    /// How to make the largest ContentState field smaller, in the format's own syntax: a string's
    /// bound is `string(N)` and an array's `[T; N]` (there is no `max-length` key).
    func shrinkAdvice(_ size: PayloadBounds.Size) -> String {
        let generic = "bound the strings with `string(N)` and the arrays with `[T; N]`"
        guard let name = size.largestField?.name, let field = contentSchema.first(where: { $0.name == name }) else { return generic }
        func advice(_ type: FieldType) -> String {
            switch type.nonOptional {
            case .string(nil):
                return "give `\(name)` a max length, e.g. `\(name): string(60)` (a string without one counts as \(PayloadBounds.defaultStringLength) bytes)"
            case .string(let maxLength?):
                return "lower the max length of `\(name): \(field.type.spelling)` below \(maxLength)"
            case .array(let element, let maxCount):
                let fewer = max(1, maxCount / 2)
                if case .string(nil) = element.nonOptional {
                    return "give the elements of `\(name): \(field.type.spelling)` a max length and declare fewer of them, e.g. `[string(40); \(fewer)]` (a string without a max length counts as \(PayloadBounds.defaultStringLength) bytes)"
                }
                return "declare fewer or smaller elements for `\(name): \(field.type.spelling)`, e.g. `[\(element.spelling); \(fewer)]`"
            default:
                return generic
            }
        }
        return advice(field.type)
    }

    // MARK: Content and templates

    /// The transition's content over the target state's defaults; reports required fields left unset.
    mutating func effectiveContent(_ own: [String: Located<ValueSpec>], defaults state: ParsedState, label: String,
                                   position: SourcePosition, scope: TemplateScope, report: Bool) -> [String: ValueSpec]
    {
        var result: [String: ValueSpec] = [:]
        var missing: [FieldSpec] = []
        for field in contentSchema {
            if let value = own[field.name] {
                if report {
                    checkValue(value.value, type: field.type, position: value.position, label: "`content.\(field.name)` of \(label)", scope: scope)
                }
                result[field.name] = value.value
            } else if let value = state.content[field.name] {
                if report {
                    checkValue(value.value, type: field.type, position: value.position,
                               label: "`content.\(field.name)` of state `\(state.spec.name)` (used by \(label))", scope: scope)
                }
                result[field.name] = value.value
            } else if field.carriesOver, scope.previousUnavailable == nil {
                // Kept as it was: the same as writing `{{previous.field}}`, which copies the value with its type.
                result[field.name] = .template(Template.previousValue(of: field.name))
            } else if let value = field.defaultValue {
                result[field.name] = .literal(value)
            } else if field.type.isOptional {
                result[field.name] = .literal(.null)
            } else {
                missing.append(field)
            }
        }
        if report, !missing.isEmpty {
            let list = missing.map { "`\($0.name)` (\($0.type.spelling))" }.joined(separator: ", ")
            error("\(label) leaves required ContentState field\(missing.count > 1 ? "s" : "") \(list) unset; set \(missing.count > 1 ? "them" : "it") under its `content`, in state `\(state.spec.name)`'s `content`, or give the field a `default`",
                  at: position)
        }
        return result
    }

    mutating func checkAlert(_ alert: ParsedAlert, scope: TemplateScope) {
        for use in alert.templates {
            checkTemplate(use.template, position: use.position, label: use.label, scope: scope, sectionTypes: [])
        }
    }

    mutating func checkValue(_ value: ValueSpec, type: FieldType, position: SourcePosition, label: String, scope: TemplateScope) {
        switch value {
        case .literal:
            return
        case .list(let items):
            guard case .array(let element, _) = type.nonOptional else { return }
            for item in items { checkValue(item, type: element, position: position, label: label, scope: scope) }
        case .template(let template):
            guard checkTemplate(template, position: position, label: label, scope: scope, sectionTypes: []) else { return }
            if let variable = template.singleVariable, variable != "." {
                guard let source = scope.type(of: variable) else { return }
                if let problem = Self.incompatibility(field: type, source: source) {
                    error("\(label) is \(type.spelling) but `{{\(variable)}}` is \(source.spelling): \(problem)", at: position)
                }
            } else if case .array = type.nonOptional {
                error("\(label) is an array (\(type.spelling)): give a YAML list or exactly one variable naming an array, like \"{{input.items}}\"", at: position)
            }
        }
    }

    /// Why a value of type `source` cannot fill a field of type `field`, or nil when it can
    /// (possibly with a check at render time, e.g. text into an int).
    static func incompatibility(field: FieldType, source: FieldType) -> String? {
        let target = field.nonOptional
        let from = source.nonOptional
        if case .array(let targetElement, _) = target {
            guard case .array(let sourceElement, _) = from else { return "an array field needs an array variable" }
            return incompatibility(field: targetElement, source: sourceElement)
        }
        if case .array = from { return "an array cannot fill a single value" }
        if target.structType != nil || from.structType != nil {
            guard let targetStruct = target.structType, let sourceStruct = from.structType else {
                return "a struct is filled only from a variable of the same struct type"
            }
            return targetStruct.name == sourceStruct.name ? nil : "use a variable of type \(targetStruct.name)"
        }
        switch (target, from) {
        case (.string, _): return nil
        case (_, .string): return nil  // converted and checked at render time
        case (.int, .int), (.double, .int), (.double, .double), (.bool, .bool), (.date, .date): return nil
        case (.enumeration(let values), .enumeration(let sourceValues)):
            let extra = sourceValues.filter { !values.contains($0) }
            return extra.isEmpty ? nil : "values \(codeList(extra)) are not in the field's enum"
        default:
            return "use a variable of a matching type, or a literal"
        }
    }

    /// Checks the variables and transforms a template names; false when it reported a problem.
    @discardableResult
    mutating func checkTemplate(_ template: Template, position: SourcePosition, label: String, scope: TemplateScope,
                                sectionTypes: [FieldType]) -> Bool
    {
        var ok = true
        for variable in template.variables {
            for transform in variable.transforms where !Template.knownTransforms.contains(transform) {
                error("\(label): unknown template transform `\(transform)`\(didYouMean(transform, in: Template.knownTransforms)); known: \(codeList(Template.knownTransforms.sorted()))",
                      at: position)
                ok = false
            }
            let name = variable.name
            if name == "." {
                if !variable.insideSection {
                    error("\(label): `{{.}}` only means something inside a section like `{{#input.items}}…{{/input.items}}`", at: position)
                    ok = false
                }
                continue
            }
            if scope.type(of: name) != nil { continue }
            ok = false
            let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            let suggestion = didYouMean(name, in: scope.allNames)
            if parts.count == 2, parts[0] == "attributes" {
                error("\(label) uses `{{\(name)}}`, but `\(parts[1])` is not in `activity.attributes`\(suggestion); attributes: \(codeList(attributesSchema.map(\.name)))",
                      at: position)
            } else if parts.count == 2, parts[0] == "input" {
                error("\(label) uses `{{\(name)}}`, but \(scope.inputOwner) declares no input `\(parts[1])`\(suggestion); declare it, e.g. `input: {\(parts[1]): string}`",
                      at: position)
            } else if parts.count == 2, parts[0] == "previous" {
                if let reason = scope.previousUnavailable {
                    error("\(label) uses `{{\(name)}}`, but \(reason)", at: position)
                } else {
                    error("\(label) uses `{{\(name)}}`, but `\(parts[1])` is not a ContentState field\(suggestion); fields: \(codeList(contentSchema.map(\.name)))",
                          at: position)
                }
            } else if ["attributes", "input", "previous"].contains(name) {
                error("\(label) uses `{{\(name)}}`, which is a group; name one of its fields, e.g. `{{\(scope.allNames.first { $0.hasPrefix(name + ".") } ?? name + ".x")}}`",
                      at: position)
            } else {
                let bare = scope.allNames.first { $0.hasSuffix("." + name) }
                let hint = bare.map { " (did you mean `\($0)`?)" } ?? suggestion
                error("\(label) uses unknown variable `{{\(name)}}`\(hint); templates can use \(codeList(scope.allNames))", at: position)
            }
        }
        return ok
    }
}
