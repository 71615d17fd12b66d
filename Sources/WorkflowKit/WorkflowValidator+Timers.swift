/// Timers: each in a non-final state, and a `go-to` only along a transition that needs no input.
extension WorkflowValidator {
    mutating func makeTimerSpecs(finals: Set<String>, transitions specs: [String: TransitionSpec]) -> [TimerSpec] {
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
        return timerSpecs
    }
}
