import Yams

/// `states`: each state's flags, default content, alert and presentation.
extension WorkflowParser {
    static let stateKeys = ["description", "initial", "final", "content", "alert", "stale-after", "relevance", "priority", "android"]

    mutating func parseStates(_ node: Node, contentSchema: [FieldSpec]) -> [ParsedState] {
        guard let map = mapping(node, what: "`states`", allowed: nil) else { return [] }
        if map.entries.isEmpty {
            error("`states` is empty; list the order's states, one marked `initial: true` and at least one `final: true`", at: node)
        }
        var states: [ParsedState] = []
        for entry in map.entries {
            let stateName = entry.key
            guard SwiftNames.isIdentifier(stateName) else {
                error("state name `\(stateName)` must be made of letters, digits and `_` (not starting with a digit)", at: entry.keyNode)
                continue
            }
            if stateName == "any" {
                error("`any` cannot be a state name: `from: any` means every non-final state", at: entry.keyNode)
                continue
            }
            let what = "state `\(stateName)`"
            guard let fields = mapping(entry.value, what: what, allowed: Self.stateKeys, nullIsEmpty: true) else { continue }
            var spec = StateSpec(name: stateName, description: nil, isInitial: false, isFinal: false, content: [:],
                                 alert: nil, staleAfter: nil, relevanceScore: nil, priority: nil, dismissal: nil)
            var parsed = ParsedState(spec: spec, position: SourcePosition(entry.keyNode), content: [:], alert: nil)
            if let node = fields["description"] { spec.description = string(node, what: "`description` of \(what)") }
            if let node = fields["initial"] { spec.isInitial = bool(node, what: "`initial` of \(what)") ?? false }
            if let node = fields["final"] { spec.isFinal = bool(node, what: "`final` of \(what)") ?? false }
            if let node = fields["content"] {
                parsed.content = content(node, what: "`content` of \(what)", schema: contentSchema)
                spec.content = parsed.content.mapValues(\.value)
            }
            if let node = fields["alert"] {
                switch alertOverride(node, what: "`alert` of \(what)") {
                case .alert(let alert):
                    parsed.alert = alert
                    spec.alert = alert.spec
                case .suppressed, .inherit:
                    break
                }
            }
            if let node = fields["stale-after"] { spec.staleAfter = duration(node, what: "`stale-after` of \(what)") }
            if let node = fields["relevance"] { spec.relevanceScore = number(node, what: "`relevance` of \(what)") }
            if let node = fields["priority"] { spec.priority = priority(node) }
            if let node = fields["android"] { parsed.android = parseAndroid(node, what: "`android` of \(what)", workflowLevel: false) }
            parsed.spec = spec
            states.append(parsed)
        }
        return states
    }
}
