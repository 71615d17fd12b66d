import Yams

/// `transitions`: each entry as written; `from: any` and lists are expanded by the validator,
/// once every state is known.
extension WorkflowParser {
    static let transitionKeys = ["from", "to", "event", "input", "content", "alert", "priority", "relevance"]

    mutating func parseTransitions(_ node: Node, contentSchema: [FieldSpec], structs: [StructType]) -> [ParsedTransition] {
        let structsByName = Dictionary(structs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        guard case .sequence(let items) = node else {
            error("`transitions` must be a list of `- from: …, to: …` entries, not \(describe(node))", at: node)
            return []
        }
        var result: [ParsedTransition] = []
        for (index, item) in items.enumerated() {
            let what = "transition #\(index + 1)"
            guard let map = mapping(item, what: what, allowed: Self.transitionKeys, required: ["from", "to"]) else { continue }
            guard let fromNode = map["from"], let toNode = map["to"], let to = string(toNode, what: "`to` of \(what)") else {
                continue
            }
            let from = names(fromNode, what: "`from` of \(what)")
            let fromAny = from.count == 1 && from[0].value == "any"
            let label = "transition `\(fromAny ? "any" : from.map(\.value).joined(separator: "|")) -> \(to)`"
            var transition = ParsedTransition(
                from: fromAny ? [] : from, fromAny: fromAny, to: Located(value: to, position: SourcePosition(toNode)),
                event: nil, inputs: [], content: [:], alert: .inherit, priority: nil, relevanceScore: nil,
                position: SourcePosition(item))
            if from.contains(where: { $0.value == "any" }) && !fromAny {
                error("`any` in `from` of \(label) already means every non-final state; write `from: any` alone", at: fromNode)
            }
            if let node = map["event"], let event = name(node, what: "`event` of \(label)") {
                transition.event = Located(value: event, position: SourcePosition(node))
            }
            if let node = map["input"] {
                transition.inputs = schema(node, what: "`input` of \(label)", swiftNames: false, structs: structsByName)
            }
            if let node = map["content"] {
                transition.content = content(node, what: "`content` of \(label)", schema: contentSchema)
            }
            if let node = map["alert"] { transition.alert = alertOverride(node, what: "`alert` of \(label)") }
            if let node = map["priority"] { transition.priority = priority(node) }
            if let node = map["relevance"] { transition.relevanceScore = number(node, what: "`relevance` of \(label)") }
            result.append(transition)
        }
        return result
    }
}
