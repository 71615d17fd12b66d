import Foundation

extension Workflow {
    /// Renders what `transition` shows: the full ContentState, the alert, stale date, relevance,
    /// priority and (into a final state) the dismissal. `previous` is the last ContentState sent
    /// (app shape), used by `{{previous.x}}`; pass nil when there is none.
    public func render(transition: TransitionSpec, attributes: JSONValue, input: JSONValue, previous: JSONValue? = nil,
                       at time: Date) throws -> RenderedActivityUpdate
    {
        try render(transition: transition, attributes: attributes, validatedInput: try validateInput(input, for: transition, at: time),
                   previous: previous, at: time)
    }

    /// ``render(transition:attributes:input:previous:at:)`` for input that already went through
    /// ``validateInput(_:for:at:)`` — the engine validates once, stores that input and renders it.
    public func render(transition: TransitionSpec, attributes: JSONValue, validatedInput input: JSONValue, previous: JSONValue? = nil,
                       at time: Date) throws -> RenderedActivityUpdate
    {
        let context = "workflow `\(name)`, transition `\(transition.from) -> \(transition.to)`"
        guard state(named: transition.to) != nil else {
            throw RenderError(code: .unknownState, context: context, field: nil, message: "state `\(transition.to)` is not in this workflow")
        }
        let renderer = Renderer(workflow: self, attributes: attributes, input: input, inputSchema: transition.inputs,
                                previous: previous, time: time, context: context)
        let update = RenderedActivityUpdate(
            event: transition.endsActivity ? .end : .update,
            state: transition.to,
            contentState: try renderer.content(transition.content),
            alert: try transition.alert.map { try renderer.alert($0) },
            staleDate: staleAfter(in: transition.to).map { time.addingTimeInterval($0.timeInterval) },
            relevanceScore: transition.relevanceScore,
            priority: transition.priority,
            dismissal: transition.endsActivity ? dismissal(in: transition.to) : nil,
            timestamp: time)
        try Renderer.checkSize(update.apnsPayload(), context: context)
        return update
    }

    /// Renders the update for an order that is in `state` without a transition — used when the
    /// app starts its activity late and registers its token. Shows `previous` (the last ContentState
    /// sent) when given, else the state's default content; no alert, priority 5.
    public func render(state stateName: String, attributes: JSONValue, input: JSONValue = [:], previous: JSONValue? = nil,
                       at time: Date) throws -> RenderedActivityUpdate
    {
        let context = "workflow `\(name)`, state `\(stateName)`"
        guard let state = state(named: stateName) else {
            throw RenderError(code: .unknownState, context: context, field: nil,
                              message: "unknown state; states: \(codeList(states.map(\.name)))")
        }
        let contentState: JSONValue
        if let previous, !previous.isNull {
            contentState = previous
        } else {
            let renderer = Renderer(workflow: self, attributes: attributes, input: input, inputSchema: inputs(into: stateName),
                                    previous: nil, time: time, context: context)
            contentState = try renderer.content(defaultContent(in: state))
        }
        let update = RenderedActivityUpdate(
            event: state.isFinal ? .end : .update, state: stateName, contentState: contentState, alert: nil,
            staleDate: staleAfter(in: stateName).map { time.addingTimeInterval($0.timeInterval) },
            relevanceScore: state.relevanceScore, priority: state.priority ?? (state.isFinal ? 10 : 5),
            dismissal: state.isFinal ? dismissal(in: stateName) : nil, timestamp: time)
        try Renderer.checkSize(update.apnsPayload(), context: context)
        return update
    }

    /// Renders the push-to-start at order creation: the initial state's content, the start alert
    /// and the attributes. `input` is checked against `lifecycle.start-input`.
    public func renderStart(attributes: JSONValue, input: JSONValue = [:], at time: Date) throws -> RenderedActivityStart {
        try renderStart(in: initialState, attributes: attributes, input: input, previous: nil, at: time)
    }

    /// Renders a push-to-start for an order in `state`: a restart near the 8-hour limit shows
    /// `previous` (the last ContentState sent); without it the state's default content is used.
    public func renderStart(in stateName: String, attributes: JSONValue, input: JSONValue = [:], previous: JSONValue?,
                            at time: Date) throws -> RenderedActivityStart
    {
        let context = "workflow `\(name)`, start in `\(stateName)`"
        guard let state = state(named: stateName) else {
            throw RenderError(code: .unknownState, context: context, field: nil,
                              message: "unknown state; states: \(codeList(states.map(\.name)))")
        }
        let normalizedAttributes = try validateAttributes(attributes, at: time)
        let normalizedInput = stateName == initialState ? try validateStartInput(input, at: time) : input
        let renderer = Renderer(workflow: self, attributes: normalizedAttributes, input: normalizedInput,
                                inputSchema: stateName == initialState ? lifecycle.startInputs : inputs(into: stateName),
                                previous: nil, time: time, context: context)
        let contentState: JSONValue
        if let previous, !previous.isNull {
            contentState = previous
        } else {
            contentState = try renderer.content(defaultContent(in: state))
        }
        let alert = try lifecycle.startAlert.map { try renderer.alert($0) }
        let update = RenderedActivityUpdate(
            event: .start, state: stateName, contentState: contentState, alert: alert,
            staleDate: staleAfter(in: stateName).map { time.addingTimeInterval($0.timeInterval) },
            relevanceScore: state.relevanceScore, priority: 10, dismissal: nil, timestamp: time)
        let start = RenderedActivityStart(attributesType: attributesType,
                                          attributes: renderer.appShape(normalizedAttributes, schema: attributesSchema),
                                          update: update)
        try Renderer.checkSize(start.apnsPayload(), context: context)
        return start
    }

    /// The alert of the push-to-start (nil when the workflow declares none).
    public func renderStartAlert(attributes: JSONValue, input: JSONValue = [:], at time: Date) throws -> ActivityAlert? {
        guard let alert = lifecycle.startAlert else { return nil }
        let renderer = Renderer(workflow: self, attributes: try validateAttributes(attributes, at: time), input: try validateStartInput(input, at: time),
                                inputSchema: lifecycle.startInputs, previous: nil, time: time,
                                context: "workflow `\(name)`, start alert")
        return try renderer.alert(alert)
    }

    /// Converts normalized attributes (from `validateAttributes`) to the app's JSON shape.
    public func appAttributes(_ attributes: JSONValue) throws -> JSONValue {
        let normalized = try validateAttributes(attributes)
        return Renderer(workflow: self, attributes: normalized, input: [:], inputSchema: [], previous: nil, time: Date(),
                        context: "").appShape(normalized, schema: attributesSchema)
    }

    /// Every input declared by a transition into `state` (and the start input for the initial state).
    func inputs(into state: String) -> [FieldSpec] {
        var inputs = state == initialState ? lifecycle.startInputs : []
        for transition in transitions where transition.to == state {
            for input in transition.inputs where !inputs.contains(where: { $0.name == input.name }) { inputs.append(input) }
        }
        return inputs
    }
}
