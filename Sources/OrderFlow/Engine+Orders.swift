import APNS
import Foundation
import PGKit
import WorkflowKit

extension OrderFlowEngine {
    // MARK: Create

    /// Creates an order in its workflow's initial state and enqueues the activity's start.
    ///
    /// Retrying with the same idempotency key returns the order created the first time (the
    /// same key with another workflow or other attributes is `conflict`); the same order id
    /// without that key is `alreadyExists`.
    public func createOrder(_ request: NewOrder) async throws -> OrderSnapshot {
        try await translatingErrors {
            // Everything the caller gave is checked before anything is written.
            try Self.validateIdentifier(request.orderID, what: "order id")
            try Self.validateIdentifier(request.workflow, what: "workflow name")
            try Self.validateIdentifier(request.idempotencyKey, what: "idempotency key")
            try Self.validateIdentifier(request.actor, what: "actor")
            if let pinned = request.workflowVersion, pinned < 1 {
                throw OrderFlowError(.invalidInput, "workflow version \(pinned) does not exist; versions count from 1", remedy: .listWorkflowVersions)
            }
            let (version, workflow): (Int, Workflow)
            if let pinned = request.workflowVersion {
                (version, workflow) = (pinned, try await workflows.workflow(named: request.workflow, version: pinned))
            } else {
                (version, workflow) = try await workflows.latest(named: request.workflow)
            }
            // As stored: the snapshot returned below equals what a later read gives.
            let now = Date().asStoredByPostgres
            let attributes = try workflow.validateAttributes(request.attributes, at: now)
            let input = try workflow.validateStartInput(request.input, at: now)
            try Self.validateContentText(attributes, what: "attribute")
            try Self.validateContentText(input, what: "start input")
            let rendering = StoredRendering(try workflow.render(state: workflow.initialState, attributes: attributes, input: input, at: now))
            // The push-to-start carries the attributes and the start alert besides the content:
            // it must fit as well, or the activity could never start.
            var startOverhead: Int?
            if workflow.startsByPush {
                do {
                    // Kept for the advances' checks (`checkPushToStartFits`).
                    startOverhead = try workflow.renderStart(attributes: attributes, input: input, at: now).bytesBesidesContent
                } catch let error as RenderError where error.code == .payloadTooLarge {
                    throw OrderFlowError(
                        .invalidInput,
                        "order \(Self.shown(request.orderID)) cannot be created: its push-to-start (attributes, start alert and first content together) would be over APNs' \(APNSLimits.maximumPayloadSize)-byte limit; shorten the attribute values")
                }
            }
            var created: Bool
            do {
                created = try await orderStore.insertOrder(
                    orderID: request.orderID, workflow: request.workflow, version: version, state: workflow.initialState,
                    attributes: attributes.postgresJSON, content: rendering.content.postgresJSON, creationKey: request.idempotencyKey,
                    at: now, input: input.postgresJSON, rendered: rendering.json.postgresJSON, actor: request.actor,
                    channelStoragePolicy: workflow.lifecycle.audience.storagePolicy)
            } catch let error as PostgresError where error.isUniqueViolation && request.idempotencyKey != nil {
                // The key created an order already (a key names one creation per merchant): this
                // one, by a copy of this request that ran beside it — then answered as a retry
                // below — or another, which is a mistake to report.
                let other = try await orderStore.order(creationKey: request.idempotencyKey!)
                guard other == request.orderID else {
                    throw OrderFlowError(
                        .conflict,
                        "idempotency key \(Self.shown(request.idempotencyKey!)) already created order \(Self.shown(other ?? "?")); nothing changed. Use a new key for a different order")
                }
                created = false
            }
            if !created {
                let snapshot = try await orderSnapshot(request.orderID)
                let key = try await orderStore.creationKey(orderID: request.orderID)
                guard let given = request.idempotencyKey, key == given else {
                    throw OrderFlowError(
                        .alreadyExists,
                        "order \(request.orderID) already exists (workflow \(snapshot.workflow), state \(snapshot.state)); use another id, or the same idempotency key to retry a creation",
                        currentState: snapshot.state)
                }
                // The same key for a different creation is a mistake to report, not a retry to
                // answer with an order that is not the one asked for.
                let sameWorkflow = snapshot.workflow == request.workflow
                    && (request.workflowVersion == nil || request.workflowVersion == snapshot.workflowVersion)
                // The start input too, read as of the first request's time (a relative date
                // means what it meant then).
                let first = try await orderStore.transition(orderID: request.orderID, seq: 1)
                let sameInput = sameWorkflow
                    && (try? workflow.validateStartInput(request.input, at: first.occurredAt)) == first.input
                guard sameWorkflow, snapshot.attributes == attributes, sameInput else {
                    throw OrderFlowError(
                        .conflict,
                        "idempotency key \(Self.shown(given)) already created order \(Self.shown(request.orderID)) with \(sameWorkflow ? (snapshot.attributes == attributes ? "other start input" : "other attributes") : "workflow \(snapshot.workflow) version \(snapshot.workflowVersion)"); nothing changed. Use a new key for a different order",
                        currentState: snapshot.state)
                }
                return snapshot
            }
            // Everything the new row holds is known here: no need to read it back.
            let snapshot = OrderSnapshot(
                orderID: request.orderID, workflow: request.workflow, workflowVersion: version, state: workflow.initialState,
                seq: 1, isFinal: workflow.isFinal(workflow.initialState), attributes: attributes, content: rendering.content,
                createdAt: now, updatedAt: now, stateEnteredAt: now,
                channel: workflow.lifecycle.audience.pendingChannel)
            orderCache.store(OrderCache.Entry(
                workflowName: snapshot.workflow, workflowVersion: snapshot.workflowVersion, state: snapshot.state,
                seq: snapshot.seq, attributes: snapshot.attributes, content: snapshot.content, createdAt: snapshot.createdAt,
                startOverhead: startOverhead),
                for: request.orderID)
            wakeSignal.signal()
            return snapshot
        }
    }

    // MARK: Advance

    /// Moves an order to a state, or by an event, of its pinned workflow.
    ///
    /// - Parameters:
    ///   - orderID: the order's id.
    ///   - target: a state or event name; case-insensitive, a unique prefix is enough.
    ///   - input: data for the transition's templates (`eta`, `driver`), checked against the
    ///     transition's declared inputs.
    ///   - idempotencyKey: a retry with the same key returns the first result and changes nothing.
    ///   - expectedState: fail with `conflict` unless the order is in this state.
    ///   - actor: who or what did it, for the history.
    /// - Throws: `OrderFlowError` — `notFound`, `invalidTransition` (naming the allowed next
    ///   states), `conflict` (the order changed meanwhile; names its state now), `invalidInput`.
    public func advance(
        _ orderID: String, to target: String, input: JSONValue = [:], idempotencyKey: String? = nil,
        expectedState: String? = nil, actor: String? = nil
    ) async throws -> AdvanceResult {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            // Blank is no target at all: the workflow's answer lists the choices. (A plain name,
            // the usual case, has nothing to trim, and Foundation's trimming is dear per advance.)
            if !Self.isPlainIdentifier(target, allowEmpty: true) {
                try Self.validateIdentifier(target.trimmingCharacters(in: .whitespaces), what: "state or event name", allowEmpty: true)
            }
            try Self.validateIdentifier(idempotencyKey, what: "idempotency key")
            try Self.validateIdentifier(expectedState, what: "expected state")
            try Self.validateIdentifier(actor, what: "actor")
            // Under overload most advances are refused: before rendering, not after.
            if let busy = pool.commitGroupRefusal { throw busy }
            let pushLag = try wakeSignal.pushLag.flatMap { try $0.admit() ? $0 : nil }
            let started = Date()
            let outcome: AdvanceOutcome
            do {
                outcome = try await advanceOutcome(
                    orderID: orderID, target: target, input: input, idempotencyKey: idempotencyKey,
                    expectedState: expectedState, actor: actor, started: started)
            } catch {
                pushLag?.withdrawn()
                throw error
            }
            if case .advanced = outcome { pushLag?.committed() } else { pushLag?.withdrawn() }
            switch outcome {
            case .advanced(let result):
                wakeSignal.signal()
                return result
            case .replay(let seq):
                return try await replay(orderID, seq: seq, target: target, input: input)
            case .replayKey(let key):
                return try await replayByKey(orderID, key: key, target: target, input: input)
            case .changedMeanwhile(let assumedState):
                // Someone moved the order first; if it was a retry of this very request, that
                // is our answer.
                if let idempotencyKey, let replayed = try? await replayByKey(orderID, key: idempotencyKey, target: target, input: input) {
                    return replayed
                }
                throw try await concurrentChange(orderID, assumedState: assumedState, target: target)
            }
        }
    }

    private enum AdvanceOutcome: Sendable {
        case advanced(AdvanceResult)
        case replay(seq: Int)
        case replayKey(String)
        case changedMeanwhile(assumedState: String)
    }

    /// An advance's read (only when this process does not know the order), checks, rendering
    /// and write. The write is committed together with other callers' (group commit), and no
    /// connection is held while it waits for its group: the read takes one and gives it back,
    /// an order this process knows needs none until its group runs.
    private func advanceOutcome(
        orderID: String, target: String, input: JSONValue,
        idempotencyKey: String?, expectedState: String?, actor: String?, started: Date
    ) async throws -> AdvanceOutcome {
        // Without an idempotency key (whose earlier use only the database knows), an order this
        // process moved last needs no read: the write below is guarded by its sequence number.
        if idempotencyKey == nil, let cached = orderCache.entry(for: orderID) {
            do {
                let outcome = try await advance(
                    orderID: orderID, known: cached, target: target, input: input, idempotencyKey: nil,
                    expectedState: expectedState, actor: actor)
                guard case .changedMeanwhile = outcome else { return outcome }
                // The cache was stale, or another caller won a race: read and decide again, but
                // report a conflict if the order changed after this call began.
                orderCache.forget(orderID)
                let updatedAt = try await pool.withConnection { [orderStore] connection in
                    try await connection.run { connection in try await orderStore.updatedAt(connection, orderID: orderID) }
                }
                if let updatedAt, updatedAt >= started { return outcome }
            } catch is OrderFlowError {
                // Refused on what may be stale knowledge: decide again from the database.
                orderCache.forget(orderID)
            }
        }
        let read = try await pool.withConnection { [self] connection in
            try await connection.run { connection in
                try await readForAdvance(connection, orderID: orderID, idempotencyKey: idempotencyKey)
            }
        }
        switch read {
        case .replay(let seq):
            return .replay(seq: seq)
        case .known(let known):
            return try await advance(
                orderID: orderID, known: known, target: target, input: input, idempotencyKey: idempotencyKey,
                expectedState: expectedState, actor: actor)
        }
    }

    private enum ReadForAdvance: Sendable {
        /// The idempotency key's first use made this transition.
        case replay(seq: Int)
        case known(OrderCache.Entry)
    }

    /// The order as an advance needs it, read with the idempotency key's earlier use (if any).
    private func readForAdvance(
        _ connection: isolated PostgresConnection, orderID: String, idempotencyKey: String?
    ) async throws -> ReadForAdvance {
        let current = try await orderStore.orderForAdvance(connection, orderID: orderID, idempotencyKey: idempotencyKey)
        guard let current else { throw Self.orderNotFound(orderID) }
        if let replaySeq = try current.decode("replay_seq", as: Int?.self) { return .replay(seq: replaySeq) }
        var known = OrderCache.Entry(
            workflowName: try current.decode("workflow_name"), workflowVersion: try current.decode("workflow_version"),
            state: try current.decode("state"), seq: try current.decode("seq"),
            attributes: try JSONValue(postgres: current.decode("attributes")),
            content: try JSONValue(postgres: current.decode("content")), createdAt: try current.decode("created_at"))
        // The push-to-start's size besides the content depends only on the order's attributes,
        // which never change: keep the measure (keyed advances and timers always come this way).
        if let cached = orderCache.entry(for: orderID), cached.workflowName == known.workflowName,
           cached.workflowVersion == known.workflowVersion {
            known.startOverhead = cached.startOverhead
        }
        return .known(known)
    }

    /// Checks, renders and writes a transition from what is `known` of the order.
    private func advance(
        orderID: String, known: OrderCache.Entry, target: String,
        input: JSONValue, idempotencyKey: String?, expectedState: String?, actor: String?
    ) async throws -> AdvanceOutcome {
        let state = known.state
        let workflow = try await workflows.workflow(named: known.workflowName, version: known.workflowVersion)
        if let expectedState, expectedState.lowercased() != state.lowercased() {
            guard workflow.states.contains(where: { $0.name.lowercased() == expectedState.lowercased() }) else {
                throw OrderFlowError(
                    .invalidInput,
                    "the expected state \"\(Self.shown(expectedState))\" is not a state of workflow \(workflow.name); states: \(workflow.states.map(\.name).joined(separator: ", "))",
                    currentState: state, candidates: workflow.states.map(\.name))
            }
            throw OrderFlowError(.conflict, "order \(orderID) is in \(state), not in \(expectedState) as expected", orderID: orderID, currentState: state)
        }
        let transition: TransitionSpec
        do throws(TransitionResolutionError) {
            transition = try workflow.resolveTransition(from: state, target: target)
        } catch {
            throw Self.translate(error, orderID: orderID, workflow: workflow)
        }
        // As stored: the snapshot and record returned equal what a later read (or a replay) gives.
        let now = Date().asStoredByPostgres
        let validInput = try workflow.validateInput(input, for: transition, at: now)
        try Self.validateContentText(validInput, what: "input")
        let rendering = StoredRendering(try workflow.render(
            transition: transition, attributes: known.attributes, validatedInput: validInput, previous: known.content, at: now))
        let content = PostgresJSONText(rendering.content)
        var known = known
        try checkPushToStartFits(orderID: orderID, workflow: workflow, state: transition.to, known: &known, content: content, at: now)
        let written: Int?
        do throws(PostgresError) {
            written = try await orderStore.writeTransition(
                orderID: orderID, from: state, expectedSeq: known.seq, to: transition.to, event: transition.event,
                content: PostgresJSON(content.text), input: validInput.postgresJSON, rendered: rendering.json.postgresJSON,
                actor: actor, idempotencyKey: idempotencyKey, commandKind: rendering.isEnd ? "end" : "update", at: now)
        } catch {
            // The same key committed concurrently: answer with that first result.
            if error.isUniqueViolation, let idempotencyKey { return .replayKey(idempotencyKey) }
            throw error
        }
        guard let newSeq = written else { return .changedMeanwhile(assumedState: state) }
        if workflow.isFinal(transition.to) {
            // Nothing moves it again: keep the room for open orders.
            orderCache.forget(orderID)
        } else {
            var moved = known
            moved.state = transition.to
            moved.seq = newSeq
            moved.content = rendering.content
            orderCache.store(moved, for: orderID)
        }
        // Everything the snapshot holds is known here (but a broadcast order's channel, which the
        // worker moves): no need to read the order again.
        var order = OrderSnapshot(
            orderID: orderID, workflow: workflow.name, workflowVersion: known.workflowVersion, state: transition.to,
            seq: newSeq, isFinal: workflow.isFinal(transition.to), attributes: known.attributes,
            content: rendering.content, createdAt: known.createdAt, updatedAt: now, stateEnteredAt: now)
        if case .broadcast = workflow.lifecycle.audience {
            order.channel = try await pool.withConnection { [orderStore] connection in
                try await connection.run { connection in try await orderStore.channel(connection, orderID: orderID) }
            }
        }
        let record = TransitionRecord(
            seq: newSeq, from: state, to: transition.to, event: transition.event, input: validInput,
            rendered: rendering, actor: actor, idempotencyKey: idempotencyKey, occurredAt: now)
        return .advanced(AdvanceResult(order: order, transition: record, replayed: false))
    }

    /// Moves an order to its workflow's `cancelled` state (or the state its `cancel` event leads to).
    public func cancel(_ orderID: String, reason: String? = nil, idempotencyKey: String? = nil, actor: String? = nil) async throws -> AdvanceResult {
        var input: JSONValue = [:]
        if let reason { input = ["reason": .string(reason)] }
        return try await advance(orderID, to: "cancel", input: input, idempotencyKey: idempotencyKey, actor: actor)
    }

    // MARK: Helpers

    func orderSnapshot(_ orderID: String, workflow: Workflow? = nil) async throws -> OrderSnapshot {
        let row = try await orderStore.snapshotRow(orderID: orderID)
        guard let row else { throw Self.orderNotFound(orderID) }
        return try await orderSnapshot(row: row, workflow: workflow)
    }

    /// The snapshot in a row with the order's columns, its final states from `workflow` or the
    /// version the row names.
    func orderSnapshot(row: PostgresRow, workflow: Workflow? = nil) async throws -> OrderSnapshot {
        let resolved: Workflow
        if let workflow {
            resolved = workflow
        } else {
            resolved = try await workflows.workflow(named: try row.decode("workflow_name"), version: try row.decode("workflow_version"))
        }
        return try OrderSnapshot(row: row, finalStates: resolved.finalStates)
    }

    /// The first result of a request retried with its idempotency key. A key is the caller's
    /// name for one change: used again for another (another target, other input, or the
    /// order's creation), it is refused rather than answered with a result that is not what was
    /// asked.
    ///
    /// The retry's input is read as of the first request's time, so that a relative date
    /// (`"+20m"`) means what it meant then: equal input gives the stored transition's input.
    private func replay(_ orderID: String, seq: Int, target: String, input: JSONValue) async throws -> AdvanceResult {
        let record = try await orderStore.transition(orderID: orderID, seq: seq)
        let order = try await orderSnapshot(orderID)
        let workflow = try await workflows.workflow(named: order.workflow, version: order.workflowVersion)
        let spec = record.from.flatMap { from in try? workflow.resolveTransition(from: from, target: target) }
        let sameTarget = spec.map { $0.to == record.to && $0.event == record.event } ?? false
        guard sameTarget else {
            let change = record.from.map { "its transition \($0) -> \(record.to)" } ?? "its creation"
            throw OrderFlowError(
                .conflict,
                "the idempotency key \"\(Self.shown(record.idempotencyKey ?? ""))\" was already used for order \(Self.shown(orderID))'s \(change) (step \(record.seq)), not for a move to \(Self.shown(target)); use a new key for a different change",
                currentState: order.state)
        }
        if let spec, (try? workflow.validateInput(input, for: spec, at: record.occurredAt)) != record.input {
            throw OrderFlowError(
                .conflict,
                "the idempotency key \"\(Self.shown(record.idempotencyKey ?? ""))\" was already used for order \(Self.shown(orderID))'s move to \(record.to) (step \(record.seq)) with other input; use a new key for a different change",
                currentState: order.state)
        }
        return AdvanceResult(order: order, transition: record, replayed: true)
    }

    private func replayByKey(_ orderID: String, key: String, target: String, input: JSONValue) async throws -> AdvanceResult {
        let seq = try await orderStore.transitionSeq(orderID: orderID, idempotencyKey: key)
        return try await replay(orderID, seq: seq, target: target, input: input)
    }

    /// The order moved between reading it and writing: say where it is now.
    private func concurrentChange(_ orderID: String, assumedState: String, target: String) async throws -> OrderFlowError {
        let now = try await orderSnapshot(orderID)
        return OrderFlowError(
            .conflict,
            "order \(orderID) changed while moving it to \(target): it is now in \(now.state) (it was in \(assumedState)); check the order and try again if still wanted",
            orderID: orderID, currentState: now.state)
    }

    static func orderNotFound(_ orderID: String) -> OrderFlowError {
        OrderFlowError(.notFound, "order \(shown(orderID)) does not exist", remedy: .createOrFindOrder, orderID: orderID)
    }

    static func translate(_ error: TransitionResolutionError, orderID: String, workflow: Workflow) -> OrderFlowError {
        switch error.code {
        case .ambiguous:
            return OrderFlowError(.invalidInput, error.message, orderID: orderID, currentState: error.currentState, candidates: error.candidates)
        case .finalState:
            return OrderFlowError(
                .invalidTransition,
                "order \(orderID) is \(error.currentState), a final state; nothing can follow it",
                orderID: orderID, currentState: error.currentState, candidates: error.candidates)
        case .notAllowed where !workflow.knows(error.target):
            let names = workflow.states.map(\.name) + Set(workflow.transitions.compactMap(\.event)).sorted()
            let hint = workflow.suggestion(for: error.target).map { " (did you mean `\($0)`?)" } ?? ""
            return OrderFlowError(
                .notFound,
                "workflow \(workflow.name) has no state or event \"\(shown(error.target))\"\(hint); states and events: \(names.joined(separator: ", "))",
                orderID: orderID, currentState: error.currentState, candidates: error.candidates)
        case .notAllowed:
            return OrderFlowError(.invalidTransition, "order \(orderID): \(error.message)", orderID: orderID, currentState: error.currentState,
                                  candidates: error.candidates)
        default:
            return OrderFlowError(.notFound, error.message, orderID: orderID, currentState: error.currentState, candidates: error.candidates)
        }
    }
}
