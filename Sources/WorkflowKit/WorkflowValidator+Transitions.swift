/// A transition as the graph sees it: one source state, and the entry in the file it came from
/// (`from: any` and `from: [a, b]` give one per source).
typealias ExpandedTransition = (from: String, parsed: ParsedTransition)

/// The graph of states, looked up by state rather than searched (files with thousands of transitions).
struct TransitionGraph {
    var successors: [String: [String]] = [:]
    var predecessors: [String: [String]] = [:]
    var incoming: [String: [ParsedTransition]] = [:]
    /// The targets of each source by normalized name, each once, in file order.
    var targetsByName: [String: [String: [String]]] = [:]

    init(_ expanded: [ExpandedTransition]) {
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
    }
}

/// The transitions: each expanded to one per source state, the graph they make checked, and each
/// built into the `TransitionSpec` the engine renders.
extension WorkflowValidator {
    /// One entry per source state; reports unknown states, transitions out of final states, and
    /// pairs or events declared twice.
    mutating func expandTransitions(finals: Set<String>) -> [ExpandedTransition] {
        var expanded: [ExpandedTransition] = []
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
        return expanded
    }

    /// An event named like a state the same source can go to would make `resolveTransition` ambiguous.
    mutating func checkEventNames(_ expanded: [ExpandedTransition], graph: TransitionGraph) {
        for (from, transition) in expanded {
            guard let event = transition.event else { continue }
            let namesake = graph.targetsByName[from]?[TransitionResolver.normalize(event.value)] ?? []
            if let clash = namesake.first(where: { $0 != transition.to.value }) {
                error("event `\(event.value)` of `\(from) -> \(transition.to.value)` has the name of state `\(clash)`, which `\(from)` can also go to; rename the event",
                      at: event.position)
            }
        }
    }

    /// Every state is reachable from the initial one, and can reach a final one.
    mutating func checkReachability(initials: [ParsedState], finals: Set<String>, graph: TransitionGraph) {
        if initials.count == 1 {
            let initial = initials[0].spec.name
            var reachable: Set<String> = [initial]
            var queue = [initial]
            while let current = queue.popLast() {
                for next in graph.successors[current] ?? [] where !reachable.contains(next) {
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
            for previous in graph.predecessors[current] ?? [] where !canFinish.contains(previous) {
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
    }

    /// Content, alerts and templates of each transition (checked once per entry in the file), by
    /// `TransitionSpec.id`.
    mutating func makeTransitionSpecs(_ expanded: [ExpandedTransition], finals: Set<String>) -> [String: TransitionSpec] {
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
        return specs
    }
}
