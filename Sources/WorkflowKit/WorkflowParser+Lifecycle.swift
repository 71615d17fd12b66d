import Yams

/// `lifecycle`: how the activity starts, its start input and alert, how it ends and who follows it.
extension WorkflowParser {
    static let lifecycleKeys = ["start", "start-input", "start-alert", "end", "on-time-limit", "audience", "channel-storage"]

    mutating func parseLifecycle(_ node: Node, structs: [StructType]) -> (spec: LifecycleSpec, startPosition: SourcePosition, alert: ParsedAlert?,
                                                   dismissals: [String: Located<Dismissal>])?
    {
        guard let map = mapping(node, what: "`lifecycle`", allowed: Self.lifecycleKeys, required: ["start"]) else { return nil }
        guard let startNode = map["start"], let startText = string(startNode, what: "`lifecycle.start`") else { return nil }
        guard let start = StartMode(rawValue: startText) else {
            error("`lifecycle.start` must be `push-to-start` (the server starts the activity when the order is created) or `app` (the app starts it and registers its token), not `\(startText)`\(didYouMean(startText, in: ["push-to-start", "app"]))",
                  at: startNode)
            return nil
        }
        let structsByName = Dictionary(structs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let startInputs = map["start-input"].map {
            schema($0, what: "`lifecycle.start-input`", swiftNames: false, structs: structsByName)
        } ?? []
        var alert: ParsedAlert?
        if let alertNode = map["start-alert"] {
            if case .alert(let parsed) = alertOverride(alertNode, what: "`lifecycle.start-alert`") { alert = parsed }
        }
        var dismissals: [String: Located<Dismissal>] = [:]
        if let endNode = map["end"], let entries = mapping(endNode, what: "`lifecycle.end`", allowed: nil) {
            for entry in entries.entries {
                if let dismissal = dismissal(entry.value, state: entry.key) {
                    dismissals[entry.key] = Located(value: dismissal, position: SourcePosition(entry.keyNode))
                }
            }
        }
        var onTimeLimit = TimeLimitPolicy.end
        if let limitNode = map["on-time-limit"], let text = string(limitNode, what: "`lifecycle.on-time-limit`") {
            if let policy = TimeLimitPolicy(rawValue: text) {
                onTimeLimit = policy
            } else {
                error("`lifecycle.on-time-limit` must be `end` (end the activity near its 8-hour limit) or `restart` (start a fresh one with push-to-start), not `\(text)`",
                      at: limitNode)
            }
        }
        var audience = Audience.perDevice
        if let audienceNode = map["audience"], let text = string(audienceNode, what: "`lifecycle.audience`") {
            switch text {
            case "per-device": break
            case "broadcast":
                audience = .broadcast(storage: .latest)
                if onTimeLimit == .restart {
                    error("`lifecycle.on-time-limit: restart` does not go with `audience: broadcast`: the followers' activities are not tracked one by one, so none can be restarted; use `end`",
                          at: map["on-time-limit"] ?? audienceNode)
                }
            default:
                error("`lifecycle.audience` must be `per-device` (one push per following device, the default) or `broadcast` (one APNs channel per order, every follower subscribed; iOS 18), not `\(text)`\(didYouMean(text, in: ["per-device", "broadcast"]))",
                      at: audienceNode)
            }
        }
        if let storageNode = map["channel-storage"], let text = string(storageNode, what: "`lifecycle.channel-storage`") {
            if let storage = ChannelStorage(rawValue: text) {
                if audience.isBroadcast {
                    audience = .broadcast(storage: storage)
                } else {
                    error("`lifecycle.channel-storage` applies to `audience: broadcast` only; add `audience: broadcast` or remove it",
                          at: storageNode)
                }
            } else {
                error("`lifecycle.channel-storage` must be `latest` (APNs keeps the newest update for devices that join late, the default) or `none` (nothing is kept; each broadcast is delivered once), not `\(text)`\(didYouMean(text, in: ["latest", "none"]))",
                      at: storageNode)
            }
        }
        let spec = LifecycleSpec(start: start, startInputs: startInputs, startAlert: alert?.spec, onTimeLimit: onTimeLimit,
                                 audience: audience)
        return (spec, SourcePosition(map.keyNode("start")), alert, dismissals)
    }

    mutating func dismissal(_ node: Node, state: String) -> Dismissal? {
        let what = "dismissal of `\(state)` in `lifecycle.end`"
        let maximum = WorkflowDuration(seconds: 4 * 3600)
        if case .mapping = node {
            guard let map = mapping(node, what: what, allowed: ["after"], required: ["after"]),
                let afterNode = map["after"], let after = duration(afterNode, what: "`after` of \(what)")
            else { return nil }
            guard after <= maximum else {
                error("\(what): `after: \(after)` is longer than the 4 hours an ended activity can stay on the Lock Screen", at: afterNode)
                return nil
            }
            return .after(after)
        }
        guard let text = string(node, what: what) else { return nil }
        switch text {
        case "immediate": return .immediate
        case "default": return .systemDefault
        default:
            if text.hasPrefix("after ") {
                guard let after = WorkflowDuration(parsing: String(text.dropFirst(6))) else {
                    error("\(what): `\(text.dropFirst(6))` is not a duration; write e.g. `after 30m`", at: node)
                    return nil
                }
                guard after <= maximum else {
                    error("\(what): `\(text)` is longer than the 4 hours an ended activity can stay on the Lock Screen", at: node)
                    return nil
                }
                return .after(after)
            }
            error("\(what) must be `immediate`, `default`, `after 30m` or `{after: 30m}`, not `\(text)`", at: node)
            return nil
        }
    }
}
