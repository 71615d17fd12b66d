import Foundation
import WorkflowKit

/// Writes random workflows from a small grammar. Unmutated, most are valid: every state reachable
/// and able to finish, every required ContentState field set, templates naming declared variables.
struct WorkflowGenerator {
    var rng: SplitMix64

    indirect enum YAML {
        case scalar(String)
        case map([(String, YAML)])
        case list([YAML])
    }

    // MARK: Emitting YAML

    mutating func emit(_ node: YAML, indent: Int, flowProbability: Double) -> String {
        switch node {
        case .scalar(let text): return " " + text
        case .map(let entries) where entries.isEmpty: return " {}"
        case .list(let items) where items.isEmpty: return " []"
        case .map(let entries):
            if rng.chance(flowProbability) { return " " + flow(node) }
            let pad = String(repeating: " ", count: indent)
            return entries.map { key, value in "\n\(pad)\(key):" + emit(value, indent: indent + 2, flowProbability: flowProbability) }
                .joined()
        case .list(let items):
            if rng.chance(flowProbability) { return " " + flow(node) }
            let pad = String(repeating: " ", count: indent)
            return items.map { item in
                if case .map(let entries) = item, !entries.isEmpty, !rng.chance(flowProbability) {
                    // `- key: value` with the rest of the mapping indented under the first key.
                    var lines: [String] = []
                    for (offset, (key, value)) in entries.enumerated() {
                        lines.append("\n\(pad)\(offset == 0 ? "- " : "  ")\(key):" + emit(value, indent: indent + 4, flowProbability: flowProbability))
                    }
                    return lines.joined()
                }
                return "\n\(pad)-" + emit(item, indent: indent + 2, flowProbability: 1)
            }.joined()
        }
    }

    func flow(_ node: YAML) -> String {
        switch node {
        case .scalar(let text): return text
        case .map(let entries): return "{" + entries.map { "\($0.0): \(flow($0.1))" }.joined(separator: ", ") + "}"
        case .list(let items): return "[" + items.map(flow).joined(separator: ", ") + "]"
        }
    }

    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    // MARK: The workflow

    static let words = ["open", "ready", "cooking", "packed", "waiting", "moving", "paused", "checked", "queued", "arrived",
                        "picked", "shipped", "held", "review", "approved"]
    static let fieldNames = ["message", "eta", "driverName", "count", "price", "urgent", "tags", "level", "note", "progress", "seats"]
    static let texts = ["Hello", "Your order", "On its way", "Ça arrive", "Fertig 🍕", "Готово", "Wait \\\"here\\\"", "50% done", "a: b",
                        "# not a comment", "x"]

    mutating func fieldType(allowArray: Bool = true) -> FieldType {
        var type: FieldType
        switch rng.below(allowArray ? 8 : 7) {
        case 0, 1: type = .string(maxLength: rng.chance(0.8) ? rng.int(1...60) : nil)
        case 2: type = .int
        case 3: type = .double
        case 4: type = .bool
        case 5: type = rng.chance(0.25) ? .daterange : .date
        case 6: type = .enumeration(Array(Self.words.shuffled(using: &rng).prefix(rng.int(1...4))))
        default: type = .array(fieldType(allowArray: false).nonOptional, maxCount: rng.int(1...4))
        }
        if rng.chance(0.35) { type = .optional(type) }
        return type
    }

    func typeText(_ type: FieldType) -> String { Self.quoted(type.spelling) }

    /// A literal that fits `type`.
    mutating func literal(_ type: FieldType) -> String {
        switch type {
        case .optional(let wrapped): return rng.chance(0.2) ? rng.pick(["null", "~"]) : literal(wrapped)
        case .string(let maxLength):
            let text = String(rng.pick(Self.texts).prefix(maxLength ?? 200))
            return text.contains("\\") ? "\"\(text)\"" : Self.quoted(text)
        case .int: return String(rng.int(-1000...100_000))
        case .double: return rng.pick(["0.5", "1", "-2.25", "1.0e+3", "3.14159"])
        case .bool: return rng.pick(["true", "false"])
        case .date: return rng.pick(["now", "+15m", "-1h", "\"+1h30m\"", "2025-05-01T12:00:00Z", "\"2025-05-01T12:00:00+02:00\""])
        case .daterange:
            return rng.pick(["now..+15m", "+10m..+25m", "\"-1h..now\"", "2025-05-01T12:00:00Z..2025-05-01T12:20:00Z",
                             "\"2025-05-01T12:00:00+02:00...2025-05-01T12:30:00+02:00\""])
        case .enumeration(let values): return rng.pick(values)
        case .array(let element, let maxCount):
            return "[" + (0..<rng.int(0...maxCount)).map { _ in literal(element) }.joined(separator: ", ") + "]"
        case .structure:
            // The generator declares no struct types: a struct takes a template, not a literal.
            preconditionFailure("fuzzed schemas have no struct types")
        }
    }

    struct Plan {
        var attributes: [FieldSpec] = []
        var content: [FieldSpec] = []
        var states: [String] = []
        var initial = ""
        var finals: [String] = []
        var startInputs: [FieldSpec] = []
    }

    /// A value for a content field: a literal, or a template over the variables in scope.
    mutating func value(for field: FieldSpec, plan: Plan, inputs: [FieldSpec], previous: Bool) -> String {
        let stringAttributes = plan.attributes.filter { if case .string = $0.type.nonOptional { true } else { false } }
        if case .string(let maxLength) = field.type.nonOptional, maxLength ?? 100 >= 40, rng.chance(0.5) {
            var parts = ["Now"]
            if let attribute = stringAttributes.first, rng.chance(0.7) {
                parts.append(rng.chance(0.2) ? "{{uppercased(attributes.\(attribute.name))}}" : "{{attributes.\(attribute.name)}}")
            }
            if let input = inputs.randomElement(using: &rng), rng.chance(0.6) {
                parts.append(input.type.isOptional
                    ? "{{#input.\(input.name)}}({{input.\(input.name)}}){{/input.\(input.name)}}{{^input.\(input.name)}}-{{/input.\(input.name)}}"
                    : "{{input.\(input.name)}}")
            }
            if previous, let other = plan.content.randomElement(using: &rng), rng.chance(0.4) {
                parts.append("{{previous.\(other.name)}}")
            }
            return Self.quoted(parts.joined(separator: " "))
        }
        if let input = inputs.first(where: { $0.type.nonOptional == field.type.nonOptional && (field.type.isOptional || !$0.type.isOptional) }),
            rng.chance(0.7)
        {
            return Self.quoted("{{input.\(input.name)}}")
        }
        if previous, field.type.isOptional, rng.chance(0.3) {
            return Self.quoted("{{previous.\(field.name)}}")
        }
        return literal(field.type)
    }

    mutating func alert(plan: Plan, inputs: [FieldSpec]) -> YAML {
        var body = "Order"
        if let attribute = plan.attributes.first, rng.chance(0.5) { body += " {{attributes.\(attribute.name)}}" }
        if let input = inputs.first, rng.chance(0.5) { body += " ({{input.\(input.name)}})" }
        var entries: [(String, YAML)] = [("title", .scalar(Self.quoted(rng.pick(Self.texts)))), ("body", .scalar(Self.quoted(body)))]
        if rng.chance(0.3) {
            entries[0] = ("title", .map([("loc-key", .scalar("ORDER_TITLE")), ("loc-args", .list([.scalar(Self.quoted(body))]))]))
        }
        if rng.chance(0.4) { entries.append(("sound", .scalar("default"))) }
        return .map(entries)
    }

    mutating func schema(count: ClosedRange<Int>, names: [String]) -> [FieldSpec] {
        Array(names.shuffled(using: &rng).prefix(rng.int(count))).map { FieldSpec(name: $0, type: fieldType()) }
    }

    mutating func generate() -> String {
        var plan = Plan()
        plan.attributes = schema(count: 0...3, names: ["shop", "orderNumber", "city", "itemCount", "customer"])
        let stateCount = rng.int(2...7)
        let finalCount = rng.int(1...min(3, stateCount - 1))
        plan.states = Array(Self.words.shuffled(using: &rng).prefix(stateCount)).enumerated().map { rng.chance(0.3) ? "\($1)_\($0)" : $1 }
        plan.initial = plan.states[0]
        plan.finals = Array(plan.states.suffix(finalCount))
        let middle = Array(plan.states.dropFirst().dropLast(finalCount))
        let nonFinals = [plan.initial] + middle
        let status = FieldSpec(name: "status", type: .enumeration(plan.states.map { "is_\($0)" }))
        plan.content = [status] + schema(count: 0...4, names: Self.fieldNames)
        let pushToStart = rng.chance(0.5)
        if rng.chance(0.3) { plan.startInputs = schema(count: 1...2, names: ["eta", "note", "hint"]) }

        var root: [(String, YAML)] = []
        root.append(("name", .scalar(rng.pick(["gen", "generated-flow", "g_1", "Order-Flow"]))))
        if rng.chance(0.5) { root.append(("description", .scalar(Self.quoted(rng.pick(Self.texts))))) }
        var activity: [(String, YAML)] = [("attributes-type", .scalar(rng.pick(["GenAttributes", "OrderAttributes", "X"])))]
        if !plan.attributes.isEmpty || rng.chance(0.3) {
            activity.append(("attributes", .map(plan.attributes.map { ($0.name, .scalar(typeText($0.type))) })))
        }
        activity.append(("content-state", .map(plan.content.map { ($0.name, .scalar(typeText($0.type))) })))
        root.append(("activity", .map(activity)))

        // Lifecycle.
        var lifecycle: [(String, YAML)] = [("start", .scalar(pushToStart ? "push-to-start" : "app"))]
        if !plan.startInputs.isEmpty {
            lifecycle.append(("start-input", .map(plan.startInputs.map { ($0.name, .scalar(typeText($0.type))) })))
        }
        let restart = rng.chance(0.2)
        if pushToStart || restart || rng.chance(0.3) { lifecycle.append(("start-alert", alert(plan: plan, inputs: plan.startInputs))) }
        if rng.chance(0.6) {
            var end: [(String, YAML)] = []
            for final in plan.finals where rng.chance(0.7) {
                end.append((final, rng.chance(0.2) ? .map([("after", .scalar("10m"))]) : .scalar(rng.pick(["immediate", "default", "after 30m", "after 4h"]))))
            }
            lifecycle.append(("end", .map(end)))
        }
        if restart || rng.chance(0.3) { lifecycle.append(("on-time-limit", .scalar(restart ? "restart" : "end"))) }
        root.append(("lifecycle", .map(lifecycle)))

        // Transitions: a chain through every state, more into the other finals, some extras.
        struct Transition {
            var from: [String]
            var fromAny = false
            var to: String
            var inputs: [FieldSpec] = []
        }
        var transitions: [Transition] = []
        var pairs = Set<String>()
        func add(_ transition: Transition, expandedFrom: [String]) {
            guard expandedFrom.allSatisfy({ !pairs.contains("\($0)->\(transition.to)") }) else { return }
            for from in expandedFrom { pairs.insert("\(from)->\(transition.to)") }
            transitions.append(transition)
        }
        let chain = nonFinals + [plan.finals[0]]
        for (from, to) in zip(chain, chain.dropFirst()) { add(Transition(from: [from], to: to), expandedFrom: [from]) }
        for final in plan.finals.dropFirst() {
            if rng.chance(0.4) {
                add(Transition(from: [], fromAny: true, to: final), expandedFrom: nonFinals)
            } else {
                let from = rng.pick(nonFinals)
                add(Transition(from: [from], to: final), expandedFrom: [from])
            }
        }
        for _ in 0..<rng.int(0...3) {
            let to = rng.pick(plan.states.dropFirst().map { $0 })
            let sources = Array(nonFinals.shuffled(using: &rng).prefix(rng.int(1...2)))
            add(Transition(from: sources, to: to), expandedFrom: sources)
        }
        // Reachability: states not on the chain are reached by the extras, or by `from: any`.
        for index in transitions.indices where rng.chance(0.4) {
            transitions[index].inputs = schema(count: 1...2, names: ["eta", "driver", "reason", "amount", "items"])
        }

        // States.
        var states: [(String, YAML)] = []
        for name in plan.states {
            let isInitial = name == plan.initial
            let isFinal = plan.finals.contains(name)
            var entries: [(String, YAML)] = []
            if isInitial { entries.append(("initial", .scalar("true"))) }
            if isFinal { entries.append(("final", .scalar("true"))) }
            if rng.chance(0.3) { entries.append(("description", .scalar(Self.quoted("State \(name)")))) }
            var content: [(String, YAML)] = [("status", .scalar("is_\(name)"))]
            let scopeInputs = isInitial ? plan.startInputs : []
            for field in plan.content.dropFirst() where !field.type.isOptional || rng.chance(0.5) {
                // State defaults use only attributes and literals: every transition into the state must be able to use them.
                content.append((field.name, .scalar(value(for: field, plan: plan, inputs: scopeInputs, previous: false))))
            }
            entries.append(("content", .map(content.shuffled(using: &rng))))
            if rng.chance(0.3) { entries.append(("alert", alert(plan: plan, inputs: scopeInputs))) }
            if !isFinal, rng.chance(0.2) { entries.append(("stale-after", .scalar(rng.pick(["30m", "1h", "90s", "1d"])))) }
            if rng.chance(0.2) { entries.append(("relevance", .scalar(rng.pick(["50", "100", "0.5", "1.0e+2"])))) }
            if rng.chance(0.15) { entries.append(("priority", .scalar(rng.pick(["5", "10"])))) }
            states.append((name, .map(entries)))
        }
        let statesNode = YAML.map(states)

        var transitionNodes: [YAML] = []
        var events = 0
        for transition in transitions {
            var entries: [(String, YAML)] = []
            if transition.fromAny {
                entries.append(("from", .scalar("any")))
            } else if transition.from.count == 1, rng.chance(0.8) {
                entries.append(("from", .scalar(transition.from[0])))
            } else {
                entries.append(("from", .list(transition.from.map { .scalar($0) })))
            }
            entries.append(("to", .scalar(transition.to)))
            if rng.chance(0.6) {
                events += 1
                entries.append(("event", .scalar("do_\(events)")))
            }
            if !transition.inputs.isEmpty {
                entries.append(("input", .map(transition.inputs.map { ($0.name, .scalar(typeText($0.type))) })))
            }
            if rng.chance(0.5) {
                var content: [(String, YAML)] = []
                for field in plan.content.dropFirst() where rng.chance(0.5) {
                    content.append((field.name, .scalar(value(for: field, plan: plan, inputs: transition.inputs, previous: true))))
                }
                entries.append(("content", .map(content)))
            }
            switch rng.below(5) {
            case 0: entries.append(("alert", alert(plan: plan, inputs: transition.inputs)))
            case 1: entries.append(("alert", .scalar(rng.pick(["none", "false"]))))
            default: break
            }
            if rng.chance(0.15) { entries.append(("priority", .scalar(rng.pick(["5", "10"])))) }
            if rng.chance(0.15) { entries.append(("relevance", .scalar(rng.pick(["25", "75.5"])))) }
            transitionNodes.append(.map(rng.chance(0.2) ? entries.shuffled(using: &rng) : entries))
        }

        // Timers: mark-stale anywhere not final; go-to only along a transition without required input.
        var timers: [YAML] = []
        for state in nonFinals where rng.chance(0.3) {
            if rng.chance(0.5) {
                timers.append(.map([("in", .scalar(state)), ("after", .scalar(rng.pick(["10m", "1h30m", "45s"]))), ("mark-stale", .scalar("true"))]))
            } else if let transition = transitions.first(where: {
                ($0.fromAny ? $0.to != state : $0.from.contains(state)) && $0.inputs.allSatisfy(\.type.isOptional)
            }) {
                timers.append(.map([("in", .scalar(state)), ("after", .scalar("45m")), ("go-to", .scalar(transition.to))]))
            }
        }

        // Sections in a random order, as people write them.
        var sections: [(String, YAML)] = [("states", statesNode), ("transitions", .list(transitionNodes))]
        if !timers.isEmpty { sections.append(("timers", .list(timers))) }
        root += sections
        if rng.chance(0.3) { root.shuffle(using: &rng) }

        let flowProbability = rng.pick([0.0, 0.2, 0.5])
        var text = rng.chance(0.3) ? "# generated\n" : ""
        for (key, value) in root {
            text += "\(key):" + emit(value, indent: 2, flowProbability: flowProbability) + "\n"
            if rng.chance(0.3) { text += "\n" }
        }
        return text
    }
}
