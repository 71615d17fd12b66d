/// The `android:` sections checked against the whole workflow, the progress path derived from
/// the transitions, and the FCM data limit.
extension WorkflowValidator {
    mutating func makeAndroidSpec(expanded: [ExpandedTransition], graph: TransitionGraph, initial: String?,
                                  finals: Set<String>) -> AndroidSpec
    {
        var spec = AndroidSpec()
        if let android {
            spec.defaults = android.presentation
            // Shared by every state, so no transition's inputs are in scope.
            let scope = TemplateScope(
                attributes: attributesSchema, content: contentSchema, inputs: [],
                inputOwner: "the workflow's `android` section (shared by every state: use inputs in a state's own `android`)",
                previousUnavailable: nil)
            checkAndroidTemplates(android, scope: scope)
        }
        for state in states {
            guard let section = state.android else { continue }
            spec.states[state.spec.name] = section.presentation
            checkAndroidTemplates(section, scope: androidScope(of: state, incoming: graph.incoming))
        }
        (spec.whenField, spec.whenDeclared) = androidWhenField()
        guard let initial else { return spec }
        let explicit = expanded.filter { !$0.parsed.fromAny }
        if let declared = android?.path {
            spec.declaredPath = declared.map(\.value)
            spec.path = checkDeclaredPath(declared, finals: finals)
        } else {
            spec.path = derivedPath(initial: initial, explicit: explicit, finals: finals)
        }
        guard let last = spec.path.last else { return spec }
        spec.completions = Set(explicit.filter { $0.from == last && finals.contains($0.parsed.to.value) }.map(\.parsed.to.value))
        let onPath = Set(spec.path)
        for (index, state) in spec.path.enumerated() { spec.positions[state] = index * AndroidSpec.segmentLength }
        for state in spec.completions { spec.positions[state] = spec.total }
        // A state off the path: as far as the furthest path state that leads to it directly.
        for (from, transition) in explicit where !onPath.contains(transition.to.value) && !spec.completions.contains(transition.to.value) {
            guard onPath.contains(from), let position = spec.positions[from] else { continue }
            spec.positions[transition.to.value] = max(spec.positions[transition.to.value] ?? 0, position)
        }
        return spec
    }

    /// Starts at the initial state and follows, from each state, the first transition in file
    /// order (not one written `from: any`) that leads to a non-final state not yet on the path.
    func derivedPath(initial: String, explicit: [ExpandedTransition], finals: Set<String>) -> [String] {
        var path = [initial]
        var onPath: Set<String> = [initial]
        var leaving: [String: [String]] = [:]
        for (from, transition) in explicit { leaving[from, default: []].append(transition.to.value) }
        while let next = leaving[path[path.count - 1]]?.first(where: { !finals.contains($0) && !onPath.contains($0) }) {
            path.append(next)
            onPath.insert(next)
        }
        return path
    }

    mutating func checkDeclaredPath(_ declared: [Located<String>], finals: Set<String>) -> [String] {
        var path: [String] = []
        for name in declared {
            guard state(name.value) != nil else {
                unknownState(name, role: "`android.path`")
                continue
            }
            if finals.contains(name.value) {
                error("`android.path` lists final state `\(name.value)`; the path holds the states an order goes through, and the final states it leads to complete the bar: leave it out",
                      at: name.position)
            } else if path.contains(name.value) {
                error("`android.path` lists `\(name.value)` twice; each state is one segment of the bar", at: name.position)
            } else {
                path.append(name.value)
            }
        }
        return path
    }

    /// `android.when` names a date field of the ContentState; without it a date field `eta` is used.
    mutating func androidWhenField() -> (String?, Bool) {
        func isDate(_ name: String) -> Bool {
            guard let field = contentSchema.first(where: { $0.name == name }), case .date = field.type.nonOptional else { return false }
            return true
        }
        guard let when = android?.when else { return (isDate("eta") ? "eta" : nil, false) }
        guard let name = when.value else { return (nil, true) }
        if !isDate(name) {
            let dates = contentSchema.filter { if case .date = $0.type.nonOptional { return true } else { return false } }.map(\.name)
            let choices = dates.isEmpty ? "the ContentState has no date field; add one, or write `when: none`" : "date fields: \(codeList(dates))"
            error("`when` of `android` names `\(name)`, which is not a date field of `activity.content-state`\(didYouMean(name, in: dates)); \(choices)",
                  at: when.position)
        }
        return (name, true)
    }

    /// As the state's own defaults are checked: with the inputs of every transition into it.
    func androidScope(of state: ParsedState, incoming: [String: [ParsedTransition]]) -> TemplateScope {
        var inputs: [FieldSpec] = state.spec.isInitial ? lifecycle.startInputs : []
        for transition in incoming[state.spec.name] ?? [] {
            for input in transition.inputs where !inputs.contains(where: { $0.name == input.name }) { inputs.append(input) }
        }
        return TemplateScope(
            attributes: attributesSchema, content: contentSchema, inputs: inputs,
            inputOwner: "the transitions into `\(state.spec.name)`",
            previousUnavailable: state.spec.isInitial ? "there is no previous ContentState when the activity starts in `\(state.spec.name)`" : nil)
    }

    mutating func checkAndroidTemplates(_ section: ParsedAndroid, scope: TemplateScope) {
        for use in section.templates {
            guard checkTemplate(use.template, position: use.position, label: use.label, scope: scope, sectionTypes: []) else { continue }
            guard use.template == section.presentation.chip else { continue }
            let bound = PayloadBounds.textBound(use.template.nodes, scope: scope, dot: nil)
            if bound > WorkflowParser.maximumChipLength {
                error("\(use.label) can be up to \(bound) characters; the status-bar chip shows about \(WorkflowParser.maximumChipLength) (Android cuts the rest): use a shorter text, or variables of bounded length like `string(8)`",
                      at: use.position)
            }
        }
    }

    /// FCM's 4096-byte data limit, checked as the APNs limit is: once everything else is sound.
    mutating func checkAndroidDataSizes(of workflow: Workflow, expanded: [ExpandedTransition], specs: [String: TransitionSpec]) {
        let bounds = AndroidDataBounds(workflow: workflow)
        let limit = RenderedAndroidUpdate.maximumDataSize
        for (from, transition) in expanded {
            guard let spec = specs["\(from)->\(transition.to.value)"] else { continue }
            let size = bounds.update(spec)
            guard size.total > limit else { continue }
            error("transition `\(spec.from) -> \(spec.to)` can produce an FCM data message of up to \(size.total) bytes, over the \(limit)-byte limit (title up to \(size.title) bytes, text up to \(size.text) bytes); bound the strings shown with `string(N)`, or give the state's `android` a shorter `title` or `text`",
                  at: transition.fromAny ? transition.position : (transition.from.first { $0.value == from }?.position ?? transition.position))
        }
    }
}
