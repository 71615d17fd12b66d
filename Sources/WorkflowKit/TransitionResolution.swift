/// Why a requested transition cannot be taken.
public struct TransitionResolutionError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The current state is not part of the workflow.
        case unknownState
        /// The order is in a final state.
        case finalState
        /// Nothing leaving the current state matches the target.
        case notAllowed
        /// The target is a prefix of several transitions' names.
        case ambiguous
    }

    public var code: Code
    public var currentState: String
    public var target: String
    /// The names (target states and events) that would have been accepted, or that matched.
    public var candidates: [String]
    public var message: String

    public var description: String { message }
}

enum TransitionResolver {
    /// Case-insensitive, with `-` and spaces read as `_` (`In-Progress` finds `in_progress`).
    static func normalize(_ name: String) -> String {
        // Names as workflows spell them (`in_progress`) are already normal: no copy.
        if name.utf8.allSatisfy({ (97...122).contains($0) || (48...57).contains($0) || $0 == 95 }) { return name }
        return String(name.lowercased().map { $0 == "-" || $0 == " " ? "_" : $0 })
    }
}

extension Workflow {
    /// The state or event name closest to `name`, when `name` is likely a typo of it.
    public func suggestion(for name: String) -> String? {
        closestMatch(to: name, in: states.map(\.name) + Set(transitions.compactMap(\.event)).sorted())
    }

    /// Whether `name` is, or is a prefix of, some state or event of the workflow, read as
    /// ``resolveTransition(from:target:)`` reads names (case-insensitive, `-` and spaces as `_`,
    /// surrounding spaces ignored): tells "no such name" from "not allowed from here".
    public func knows(_ name: String) -> Bool {
        let wanted = TransitionResolver.normalize(name.trimmingWhitespace(newlines: false))
        let names = states.map(\.name) + transitions.compactMap(\.event)
        return names.contains { TransitionResolver.normalize($0).hasPrefix(wanted) }
    }

    /// Finds the transition a caller asks for from `current`: `target` is a state name or an event
    /// name, case-insensitive, and may be a unique prefix (`out` for `out_for_delivery`). An exact
    /// name wins over prefixes. Errors name the current state and what is allowed from it.
    public func resolveTransition(from current: String, target: String) throws(TransitionResolutionError) -> TransitionSpec {
        guard state(named: current) != nil else {
            throw TransitionResolutionError(
                code: .unknownState, currentState: current, target: target, candidates: states.map(\.name),
                message: "unknown current state `\(current)` in workflow `\(name)`; states: \(codeList(states.map(\.name)))")
        }
        // The usual request names one transition exactly: found without building the lists
        // below, which only the prefix matching and the error messages need.
        let wanted = TransitionResolver.normalize(target.trimmingWhitespace(newlines: false))
        if !wanted.isEmpty, !isFinal(current) {
            var found: TransitionSpec?
            var several = false
            for transition in transitions where transition.from == current {
                guard TransitionResolver.normalize(transition.to) == wanted
                    || transition.event.map({ TransitionResolver.normalize($0) == wanted }) == true
                else { continue }
                if let first = found, first.to != transition.to { several = true }  // same `from`: `to` is the id
                found = found ?? transition
            }
            if let found, !several { return found }
        }
        let outgoing = transitions(from: current)
        if isFinal(current) {
            throw TransitionResolutionError(
                code: .finalState, currentState: current, target: target, candidates: [],
                message: "cannot go to `\(target)`: the order is in final state `\(current)`, which no transition leaves")
        }
        // Each transition is known by its target state and, optionally, its event.
        let names: [(name: String, transition: TransitionSpec, kind: String)] = outgoing.flatMap { transition in
            [(transition.to, transition, "state")] + (transition.event.map { [($0, transition, "event")] } ?? [])
        }
        // Only the error messages need these: built when one is thrown, not on every advance.
        var allowed: [String] {
            outgoing.map { transition in transition.event.map { "\(transition.to) (event `\($0)`)" } ?? transition.to }
        }
        var candidateNames: [String] { names.map(\.name) }

        func unique(_ matches: [(name: String, transition: TransitionSpec, kind: String)]) -> TransitionSpec? {
            let ids = Set(matches.map(\.transition.id))
            return ids.count == 1 ? matches[0].transition : nil
        }
        guard !wanted.isEmpty else {
            throw TransitionResolutionError(
                code: .notAllowed, currentState: current, target: target, candidates: candidateNames,
                message: "no target given; from `\(current)` the order can go to: \(allowed.joined(separator: ", "))")
        }
        let exact = names.filter { TransitionResolver.normalize($0.name) == wanted }
        if let transition = unique(exact) { return transition }
        let prefixed = exact.isEmpty ? names.filter { TransitionResolver.normalize($0.name).hasPrefix(wanted) } : exact
        if let transition = unique(prefixed) { return transition }
        if !prefixed.isEmpty {
            let matches = prefixed.map { "`\($0.name)` (\($0.kind) → \($0.transition.to))" }
            throw TransitionResolutionError(
                code: .ambiguous, currentState: current, target: target, candidates: prefixed.map(\.name),
                message: "`\(target)` is ambiguous from `\(current)`: it matches \(matches.joined(separator: ", ")); type more of the name")
        }
        var message = "cannot go from `\(current)` to `\(target)`"
        // What the name means elsewhere in the workflow, so that the message names the state or
        // event the caller meant rather than echoing a prefix.
        let elsewhere = Set(states.map(\.name).filter { TransitionResolver.normalize($0).hasPrefix(wanted) })
        let events = Set(transitions.compactMap(\.event).filter { TransitionResolver.normalize($0).hasPrefix(wanted) })
        if let other = state(named: target) ?? states.first(where: { TransitionResolver.normalize($0.name) == wanted }) {
            message += ": `\(other.name)` is a state, but there is no transition `\(current) -> \(other.name)`"
        } else if elsewhere.count == 1, events.isEmpty, let other = elsewhere.first {
            message += ": `\(target)` is the state `\(other)`, but there is no transition `\(current) -> \(other)`"
        } else if events.count == 1, elsewhere.isEmpty, let event = events.first {
            let leadsTo = Set(transitions.filter { $0.event == event }.map(\.to)).sorted().map { "`\($0)`" }.joined(separator: " or ")
            message += ": `\(target)` is the event `\(event)` (to \(leadsTo)), which does not leave `\(current)`"
        } else if let suggestion = closestMatch(to: target, in: candidateNames) {
            message += " (did you mean `\(suggestion)`?)"
        }
        message += "; from `\(current)` the order can go to: \(allowed.isEmpty ? "nothing" : allowed.joined(separator: ", "))"
        throw TransitionResolutionError(code: .notAllowed, currentState: current, target: target, candidates: candidateNames,
                                        message: message)
    }
}
