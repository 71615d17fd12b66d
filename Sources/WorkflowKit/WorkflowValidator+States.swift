/// The states' flags and dismissals, the default content and alert of every state, and what the
/// activity shows when it starts.
extension WorkflowValidator {
    mutating func checkInitialAndFinalFlags(initials: [ParsedState]) {
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
    }

    /// Puts each `lifecycle.end` dismissal on its final state; the others get the system's default.
    mutating func applyDismissals(finals: Set<String>) {
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
    }

    /// State defaults, also those no transition uses, checked with the inputs of every transition
    /// into the state.
    mutating func checkStateDefaults(incoming: [String: [ParsedTransition]]) {
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
    }

    /// The push-to-start's content and the start alert; what a start needs that the file lacks.
    mutating func checkStart(initials: [ParsedState]) {
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
    }
}
