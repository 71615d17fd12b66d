import Yams

/// `timers`: what happens when an order stays in a state too long.
extension WorkflowParser {
    mutating func parseTimers(_ node: Node) -> [ParsedTimer] {
        guard case .sequence(let items) = node else {
            error("`timers` must be a list of `- {in: state, after: 45m, go-to: state}` or `- {in: state, after: 10m, mark-stale: true}` entries",
                  at: node)
            return []
        }
        var timers: [ParsedTimer] = []
        for (index, item) in items.enumerated() {
            let what = "timer #\(index + 1)"
            guard let map = mapping(item, what: what, allowed: ["in", "after", "go-to", "mark-stale"], required: ["in", "after"]),
                let inNode = map["in"], let state = string(inNode, what: "`in` of \(what)"),
                let afterNode = map["after"], let after = duration(afterNode, what: "`after` of \(what)")
            else { continue }
            var goTo: Located<String>?
            if let node = map["go-to"], let target = string(node, what: "`go-to` of \(what)") {
                goTo = Located(value: target, position: SourcePosition(node))
            }
            var markStale = false
            if let node = map["mark-stale"] {
                markStale = bool(node, what: "`mark-stale` of \(what)") ?? false
                if !markStale { error("`mark-stale` of \(what) can only be `true`; remove it otherwise", at: node) }
            }
            if (goTo == nil) == !markStale {
                error("\(what) must have exactly one action: `go-to: <state>` or `mark-stale: true`", at: item)
                continue
            }
            timers.append(ParsedTimer(state: Located(value: state, position: SourcePosition(inNode)), after: after,
                                      goTo: goTo, position: SourcePosition(item)))
        }
        return timers
    }
}
