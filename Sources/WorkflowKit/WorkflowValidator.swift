/// Checks the workflow as a whole and builds the `Workflow`.
struct WorkflowValidator {
    var parser: WorkflowParser
    let name: String
    let description: String
    let attributesType: String
    let structTypes: [StructType]
    let attributesSchema: [FieldSpec]
    let contentSchema: [FieldSpec]
    let statesPosition: SourcePosition
    var states: [ParsedState]
    let transitions: [ParsedTransition]
    let lifecycle: LifecycleSpec
    let lifecycleStartPosition: SourcePosition
    let startAlert: ParsedAlert?
    let dismissals: [String: Located<Dismissal>]
    let timers: [ParsedTimer]
    /// Index in `states` by name: lookups stay cheap in workflows with thousands of states.
    let stateIndex: [String: Int]
    /// The workflow-level `android:` section, if written.
    var android: ParsedAndroid?

    init(parser: WorkflowParser, name: String, description: String, attributesType: String, structTypes: [StructType],
         attributesSchema: [FieldSpec],
         contentSchema: [FieldSpec], statesPosition: SourcePosition, states: [ParsedState], transitions: [ParsedTransition],
         lifecycle: LifecycleSpec, lifecycleStartPosition: SourcePosition, startAlert: ParsedAlert?,
         dismissals: [String: Located<Dismissal>], timers: [ParsedTimer])
    {
        self.parser = parser
        self.name = name
        self.description = description
        self.attributesType = attributesType
        self.structTypes = structTypes
        self.attributesSchema = attributesSchema
        self.contentSchema = contentSchema
        self.statesPosition = statesPosition
        self.states = states
        self.transitions = transitions
        self.lifecycle = lifecycle
        self.lifecycleStartPosition = lifecycleStartPosition
        self.startAlert = startAlert
        self.dismissals = dismissals
        self.timers = timers
        self.stateIndex = Dictionary(states.enumerated().map { ($1.spec.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    mutating func error(_ message: String, at position: SourcePosition) {
        parser.error(message, at: position)
    }

    func state(_ name: String) -> ParsedState? { stateIndex[name].map { states[$0] } }
    var stateNames: [String] { states.map(\.spec.name) }

    func label(_ transition: ParsedTransition) -> String {
        let from = transition.fromAny ? "any" : transition.from.map(\.value).joined(separator: "|")
        return "transition `\(from) -> \(transition.to.value)`"
    }

    mutating func unknownState(_ name: Located<String>, role: String) {
        error("\(role) names unknown state `\(name.value)`\(didYouMean(name.value, in: stateNames)); states: \(codeList(stateNames))",
              at: name.position)
    }

    /// Runs the checks in this order because later ones use earlier results: the final states
    /// shape the graph, the transitions' specs feed the timers, and the payload limit needs a
    /// whole workflow, so it runs only once everything else is sound.
    mutating func validate() -> Workflow? {
        let initials = states.filter(\.spec.isInitial)
        checkInitialAndFinalFlags(initials: initials)
        let finals = Set(states.filter(\.spec.isFinal).map(\.spec.name))
        applyDismissals(finals: finals)

        let expanded = expandTransitions(finals: finals)
        let graph = TransitionGraph(expanded)
        checkEventNames(expanded, graph: graph)
        checkReachability(initials: initials, finals: finals, graph: graph)

        let specs = makeTransitionSpecs(expanded, finals: finals)
        let transitionSpecs = expanded.compactMap { specs["\($0.from)->\($0.parsed.to.value)"] }
        checkStateDefaults(incoming: graph.incoming)
        let initialName = initials.first?.spec.name
        checkStart(initials: initials)
        let timerSpecs = makeTimerSpecs(finals: finals, transitions: specs)
        let androidSpec = makeAndroidSpec(expanded: expanded, graph: graph, initial: initialName, finals: finals)

        guard parser.diagnostics.isEmpty, let initialName else { return nil }
        var workflow = Workflow(
            name: name, description: description, attributesType: attributesType, structTypes: structTypes,
            attributesSchema: attributesSchema,
            contentSchema: contentSchema, states: states.map(\.spec), initialState: initialName, finalStates: finals,
            transitions: transitionSpecs, lifecycle: lifecycle, timers: timerSpecs)
        workflow.android = androidSpec

        checkPayloadSizes(of: workflow, expanded: expanded, specs: specs)
        checkAndroidDataSizes(of: workflow, expanded: expanded, specs: specs)
        return parser.diagnostics.isEmpty ? workflow : nil
    }
}
