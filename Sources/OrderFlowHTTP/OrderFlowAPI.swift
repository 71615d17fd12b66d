import Foundation
import HTTPTypes
import Logging
import OpenAPIRuntime
import OrderFlow
import WorkflowKit

/// The HTTP API's handlers: each translates the request to one library call and its result (or
/// error) back, nothing more. The merchant comes from the request's API key (``RequestScope``).
struct OrderFlowAPI: APIProtocol {
    let engine: OrderFlowEngine
    /// Whether this process runs a worker (`/healthz` says so).
    let runsWorker: Bool
    /// The worker's state, when this process runs one.
    let workerStatus: (@Sendable () -> String)?
    /// The open event streams, ended when the server stops.
    let events: EventStreams
    /// Where `/healthz` says what it does not tell the public: the database's own words.
    var logger: Logger = Logger(label: "orderflow.http")

    // MARK: Workflows

    func listWorkflows(_ input: Operations.ListWorkflows.Input) async throws -> Operations.ListWorkflows.Output {
        await respond(Operations.ListWorkflows.Output.default) { engine in
            let summaries = try await engine.workflowVersions()
            return .ok(.init(body: .json(.init(workflows: summaries.map {
                .init(name: $0.name, newestVersion: $0.latestVersion, versions: $0.versions, updatedAt: $0.updatedAt)
            }))))
        }
    }

    func applyWorkflow(_ input: Operations.ApplyWorkflow.Input) async throws -> Operations.ApplyWorkflow.Output {
        await respond(Operations.ApplyWorkflow.Output.default) { engine in
            guard case .yaml(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the workflow file as application/yaml") }
            let bytes = try await Self.collect(body, what: "the workflow file")
            guard let yaml = String(validating: bytes, as: UTF8.self) else {
                throw OrderFlowError(.invalidInput, "the workflow file is not UTF-8 text; save it as UTF-8 and send it again")
            }
            let (applied, _) = try await engine.idempotent(key: input.headers.idempotencyKey, operation: "apply a workflow",
                                                           request: Data(bytes)) {
                try await engine.applyWorkflow(yaml: yaml, file: "request body")
            }
            let result = Components.Schemas.AppliedWorkflow(name: applied.name, version: applied.version, created: applied.created)
            return applied.created ? .created(.init(body: .json(result))) : .ok(.init(body: .json(result)))
        }
    }

    func getWorkflow(_ input: Operations.GetWorkflow.Input) async throws -> Operations.GetWorkflow.Output {
        await respond(Operations.GetWorkflow.Output.default) { engine in
            let stored = try await engine.storedWorkflow(name: input.path.name, version: input.query.version)
            return .ok(.init(body: .json(.init(
                name: stored.name, version: stored.version, attributesType: stored.workflow.attributesType,
                states: stored.workflow.states.map(\.name), finalStates: stored.workflow.states.filter(\.isFinal).map(\.name),
                transitions: stored.workflow.transitions.map(Self.workflowTransition), source: stored.source, createdAt: stored.createdAt))))
        }
    }

    func getWorkflowSwift(_ input: Operations.GetWorkflowSwift.Input) async throws -> Operations.GetWorkflowSwift.Output {
        await respond(Operations.GetWorkflowSwift.Output.default) { engine in
            let stored = try await engine.storedWorkflow(name: input.path.name, version: input.query.version)
            return .ok(.init(body: .plainText(HTTPBody(stored.workflow.swiftActivityAttributes()))))
        }
    }

    // MARK: Orders

    func listOrders(_ input: Operations.ListOrders.Input) async throws -> Operations.ListOrders.Output {
        await respond(Operations.ListOrders.Output.default) { engine in
            let query = input.query
            let page = try await engine.orders(OrderQuery(workflow: query.workflow, state: query.state, after: query.cursor,
                                                          limit: try Self.pageLimit(query.limit, default: 50)))
            var orders: [Components.Schemas.Order] = []
            for summary in page.orders {
                orders.append(try await order(summary.order, engine))
            }
            return .ok(.init(body: .json(.init(orders: orders, nextCursor: page.nextCursor))))
        }
    }

    func createOrder(_ input: Operations.CreateOrder.Input) async throws -> Operations.CreateOrder.Output {
        await respond(Operations.CreateOrder.Output.default) { engine in
            guard case .json(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the order as application/json") }
            let created = try await engine.createOrder(NewOrder(
                orderID: body.id, workflow: body.workflow, workflowVersion: body.workflowVersion,
                attributes: try Self.value(body.attributes, "attributes"), input: try Self.value(body.input, "input"),
                idempotencyKey: input.headers.idempotencyKey, actor: Self.actor))
            let secret = try await engine.clientSecret(forOrder: created.orderID)
            return .created(.init(body: .json(.init(value1: try await order(created, engine), value2: .init(clientSecret: secret)))))
        }
    }

    func getOrder(_ input: Operations.GetOrder.Input) async throws -> Operations.GetOrder.Output {
        await respond(Operations.GetOrder.Output.default, access: .order(input.path.id)) { engine in
            let details = try await engine.order(input.path.id)
            let activities = try await visibleActivities(details.activities, engine)
            return .ok(.init(body: .json(.init(
                order: try await order(details.order, engine),
                activities: activities.map(Self.activity),
                pendingUpdates: details.pendingCommands))))
        }
    }

    /// The activities the request's credential may see: all of them for the merchant's key; for
    /// the customer's app only its own device's, never the other followers'.
    func visibleActivities(_ activities: [ActivityInfo], _ engine: OrderFlowEngine) async throws -> [ActivityInfo] {
        guard let scope = RequestScope.current, scope.grantedOrder != nil else { return activities }
        var own: String?
        if let credential = scope.deviceCredential { own = try await engine.deviceOfCredential(credential) }
        return activities.filter { $0.deviceID == own }
    }

    func getOrderHistory(_ input: Operations.GetOrderHistory.Input) async throws -> Operations.GetOrderHistory.Output {
        await respond(Operations.GetOrderHistory.Output.default) { engine in
            let history = try await engine.history(input.path.id)
            let workflow = try await engine.workflow(of: history.order)
            return .ok(.init(body: .json(.init(
                order: try Self.order(history.order.readable(in: workflow)),
                transitions: try history.transitions.map { try Self.transition($0.readable(in: workflow)) },
                deliveries: history.deliveries.map(Self.delivery)))))
        }
    }

    func advanceOrder(_ input: Operations.AdvanceOrder.Input) async throws -> Operations.AdvanceOrder.Output {
        await respond(Operations.AdvanceOrder.Output.default) { engine in
            guard case .json(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the advance as application/json") }
            let target: String
            switch (body.to, body.event) {
            case (let state?, nil): target = state
            case (nil, let event?): target = event
            case (.some, .some): throw OrderFlowError(.invalidInput, "give `to` (a state) or `event`, not both")
            case (nil, nil): throw OrderFlowError(.invalidInput, "give `to` (a state) or `event` (an event name)")
            }
            let result = try await engine.advance(
                input.path.id, to: target, input: try Self.value(body.input, "input"), idempotencyKey: input.headers.idempotencyKey,
                expectedState: body.expectedState, actor: Self.actor)
            if Self.prefersMinimal(input.headers.prefer) { return .noContent(Self.minimalAdvance(result)) }
            return .ok(.init(body: .json(try await advanceResult(result, engine))))
        }
    }

    func cancelOrder(_ input: Operations.CancelOrder.Input) async throws -> Operations.CancelOrder.Output {
        await respond(Operations.CancelOrder.Output.default) { engine in
            var reason: String?
            if case .json(let body)? = input.body { reason = body.reason }
            let result = try await engine.cancel(input.path.id, reason: reason, idempotencyKey: input.headers.idempotencyKey,
                                                 actor: Self.actor)
            if Self.prefersMinimal(input.headers.prefer) { return .noContent(Self.minimalAdvance(result)) }
            return .ok(.init(body: .json(try await advanceResult(result, engine))))
        }
    }

    // MARK: Devices

    func followOrder(_ input: Operations.FollowOrder.Input) async throws -> Operations.FollowOrder.Output {
        await respond(Operations.FollowOrder.Output.default, access: .order(input.path.id), device: input.path.device) { engine in
            try await engine.follow(orderID: input.path.id, deviceID: input.path.device)
            return .noContent(.init())
        }
    }

    func unfollowOrder(_ input: Operations.UnfollowOrder.Input) async throws -> Operations.UnfollowOrder.Output {
        await respond(Operations.UnfollowOrder.Output.default, access: .order(input.path.id), device: input.path.device) { engine in
            try await engine.unfollow(orderID: input.path.id, deviceID: input.path.device)
            return .noContent(.init())
        }
    }

    func registerActivityToken(_ input: Operations.RegisterActivityToken.Input) async throws -> Operations.RegisterActivityToken.Output {
        await respond(Operations.RegisterActivityToken.Output.default, access: .order(input.path.id), device: input.path.device) { engine in
            guard case .json(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the token as application/json") }
            let stored = try await engine.registerActivityToken(orderID: input.path.id, deviceID: input.path.device, token: body.token)
            return .ok(.init(body: .json(.init(tokenSuffix: Self.suffix(stored)))))
        }
    }

    func reportActivityState(_ input: Operations.ReportActivityState.Input) async throws -> Operations.ReportActivityState.Output {
        await respond(Operations.ReportActivityState.Output.default, access: .order(input.path.id), device: input.path.device) { engine in
            guard case .json(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the report as application/json") }
            guard let state = AppActivityState(rawValue: body.state.rawValue) else {
                throw OrderFlowError(.invalidInput, "`state` must be active, stale, ended or dismissed")
            }
            let activity = try await engine.reportActivityState(
                orderID: input.path.id, deviceID: input.path.device, state: state, appliedAt: body.appliedAt)
            return .ok(.init(body: .json(Self.activity(activity))))
        }
    }

    func registerPushToStartToken(_ input: Operations.RegisterPushToStartToken.Input) async throws -> Operations.RegisterPushToStartToken.Output {
        await respond(Operations.RegisterPushToStartToken.Output.default, access: .anyOrder, device: input.path.device) { engine in
            guard case .json(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the token as application/json") }
            let stored = try await engine.registerPushToStartToken(
                deviceID: input.path.device, attributesType: input.path.attributesType, token: body.token)
            return .ok(.init(body: .json(.init(tokenSuffix: Self.suffix(stored)))))
        }
    }

    func registerDevice(_ input: Operations.RegisterDevice.Input) async throws -> Operations.RegisterDevice.Output {
        await respond(Operations.RegisterDevice.Output.default, access: .anyOrder) { engine in
            var body: Components.Schemas.NewDevice?
            if case .json(let given)? = input.body { body = given }
            let replacing = body?.replaceCredential ?? false
            if replacing, RequestScope.current?.grantedOrder != nil {
                throw AccessDenied(detail: "only the merchant's API key may replace a device's credential; an app that lost its credential registers as a new device (leave `device` out)")
            }
            let registered: RegisteredDevice
            if let order = RequestScope.current?.grantedOrder, engine.configuration.deviceCredentials == .required {
                registered = try await engine.registerAppDevice(forOrder: order, deviceID: body?.device)
            } else {
                // The merchant's key; or an app during the compatible transition, which may claim
                // the id it used before registration existed.
                registered = try await engine.registerAppDevice(deviceID: body?.device, replacingCredential: replacing)
            }
            return .created(.init(body: .json(.init(device: registered.deviceID, deviceCredential: registered.credential))))
        }
    }

    func registerAlertToken(_ input: Operations.RegisterAlertToken.Input) async throws -> Operations.RegisterAlertToken.Output {
        await respond(Operations.RegisterAlertToken.Output.default) { engine in
            guard case .json(let body) = input.body else { throw OrderFlowError(.invalidInput, "send the token as application/json") }
            let stored = try await engine.registerDeviceToken(deviceID: input.path.device, token: body.token)
            return .ok(.init(body: .json(.init(tokenSuffix: Self.suffix(stored)))))
        }
    }

    // MARK: Deliveries

    func listDeliveries(_ input: Operations.ListDeliveries.Input) async throws -> Operations.ListDeliveries.Output {
        await respond(Operations.ListDeliveries.Output.default) { engine in
            let deliveries = try await engine.deliveries(failedOnly: input.query.failed ?? false,
                                                         limit: try Self.pageLimit(input.query.limit, default: 100))
            return .ok(.init(body: .json(.init(deliveries: deliveries.map(Self.delivery)))))
        }
    }

    func retryDelivery(_ input: Operations.RetryDelivery.Input) async throws -> Operations.RetryDelivery.Output {
        await respond(Operations.RetryDelivery.Output.default) { engine in
            _ = try await engine.idempotent(key: input.headers.idempotencyKey, operation: "retry a delivery",
                                            request: Data(String(input.path.deliveryID).utf8)) {
                try await engine.retryDelivery(id: input.path.deliveryID)
                return ["delivery": input.path.deliveryID]
            }
            return .accepted(.init())
        }
    }

    // MARK: Events

    func streamEvents(_ input: Operations.StreamEvents.Input) async throws -> Operations.StreamEvents.Output {
        await respond(Operations.StreamEvents.Output.default) { engine in
            let cursor: FeedCursor
            if let given = input.headers.lastEventID ?? input.query.after {
                cursor = try engine.feedCursor(given)
            } else {
                cursor = try await engine.feedCursorNow()
            }
            let scope = RequestScope.current
            let replaying = input.headers.lastEventID != nil || input.query.after != nil
            let body = try await events.stream(engine: engine, after: cursor, replaying: replaying, credential: scope?.actor ?? "-",
                                               stillAuthorized: { [engine] in await scope?.credential?.stillStands(in: engine) ?? true })
            return .ok(.init(body: .textEventStream(body)))
        }
    }

    // MARK: Health

    func health(_ input: Operations.Health.Input) async throws -> Operations.Health.Output {
        let worker = runsWorker ? (workerStatus?() ?? "running") : "not in this process (--no-worker)"
        do {
            let schema = try await engine.schemaStatus()
            guard schema.isCurrent else {
                return .serviceUnavailable(.init(body: .json(.init(
                    status: .unhealthy,
                    database: "reachable, but its schema is version \(schema.applied) and this OrderFlow needs \(schema.bundled); run `orderflow migrate`",
                    worker: worker))))
            }
            guard !runsWorker || worker == "running" else {
                return .serviceUnavailable(.init(body: .json(.init(status: .unhealthy, database: "reachable", worker: worker))))
            }
            return .ok(.init(body: .json(.init(status: .ok, database: "reachable", worker: worker))))
        } catch {
            // The public answer names no host, port or libpq reason; the log (the operator's) does.
            let problem = ProblemResponse.problem(for: error, requestID: RequestScope.current?.requestID)
            logger.error("health check: the database did not answer", metadata: ["reason": "\(problem.body.detail)"])
            let state = OrderFlowError.translating(error)?.isBusy == true ? "busy" : "unreachable"
            return .serviceUnavailable(.init(body: .json(.init(status: .unhealthy, database: state, worker: worker))))
        }
    }

    // MARK: Translation

    /// A step the workflow allows, with the input it takes (for the board's buttons and forms).
    static func workflowTransition(_ spec: TransitionSpec) -> Components.Schemas.WorkflowTransition {
        .init(from: spec.from, to: spec.to, event: spec.event, inputs: spec.inputs.map {
            .init(name: $0.name, _type: $0.type.spelling, required: !$0.type.isOptional)
        })
    }

    /// The history's actor for changes made through the API.
    static var actor: String { RequestScope.current?.actor ?? "api" }

    /// Who may make a call: a merchant's API key always; an order's client secret only where
    /// the customer's app needs it.
    enum Access {
        /// The merchant's API key only (the default).
        case merchant
        /// Also the client secret of this order.
        case order(String)
        /// Also the client secret of any of the merchant's orders (a device's own tokens).
        case anyOrder
    }

    /// Runs `body` with the engine of the request's merchant; any error becomes a problem response.
    /// With `device`, a call on a client secret's authority must also be let change that device
    /// (``OrderFlowEngine/authorizeAppDevice(_:credential:)``); the merchant's key always may.
    func respond<Output>(
        _ problem: (Int, Components.Responses.Problem) -> Output, access: Access = .merchant, device: String? = nil,
        _ body: (OrderFlowEngine) async throws -> Output
    ) async -> Output {
        let requestID = RequestScope.current?.requestID
        do {
            let engine = try scopedEngine(access: access)
            if let device, let scope = RequestScope.current, scope.grantedOrder != nil {
                try await engine.authorizeAppDevice(device, credential: scope.deviceCredential)
            }
            return try await body(engine)
        } catch {
            let (status, details) = ProblemResponse.problem(for: error, requestID: requestID)
            let headers = Components.Responses.Problem.Headers(
                retryAfter: status == .serviceUnavailable ? ProblemResponse.retryAfter(for: error) ?? ProblemResponse.retryAfterSeconds
                    : status == .tooManyRequests ? ProblemResponse.retryAfter(for: error) : nil)
            return problem(status.code, .init(headers: headers, body: .applicationProblemJson(.init(
                _type: details.type, title: details.title, status: details.status, detail: details.detail, code: details.code,
                requestId: details.requestID, currentState: details.currentState, candidates: details.candidates,
                diagnostics: details.diagnostics?.map { .init(line: $0.line, column: $0.column, message: $0.message) }))))
        }
    }

    /// The engine of the request's merchant, once the request's credential may make the call.
    func scopedEngine(access: Access) throws -> OrderFlowEngine {
        guard let scope = RequestScope.current else {
            throw OrderFlowError(.unexpected, "the request reached a handler without its merchant; this is a bug in the server")
        }
        if let granted = scope.grantedOrder {
            switch access {
            case .merchant:
                throw AccessDenied(detail: AccessDenied.appOnly)
            case .order(let orderID) where orderID != granted:
                throw AccessDenied(detail: "this client secret belongs to another order; use the secret returned when this order was created")
            case .order, .anyOrder:
                break
            }
        }
        return try engine.forMerchant(scope.merchantID)
    }

    /// A list's `limit` as the contract bounds it (1 to 1,000): outside, the caller is told,
    /// rather than given a page of another size than asked.
    static func pageLimit(_ given: Int?, default value: Int) throws -> Int {
        guard let given else { return value }
        guard (1...1_000).contains(given) else {
            throw OrderFlowError(.invalidInput, "`limit` is \(given); give 1 to 1000 and page on with `cursor`")
        }
        return given
    }

    /// Request bodies are read up to this size.
    static let maximumBodyBytes = 1 << 20

    static func collect(_ body: HTTPBody, what: String) async throws -> [UInt8] {
        do {
            return try await [UInt8](collecting: body, upTo: maximumBodyBytes)
        } catch {
            throw OrderFlowError(.invalidInput, "\(what) is over \(maximumBodyBytes / 1024) KiB; send a smaller one")
        }
    }

    // The contract's free-form objects are the engine's own `JSONValue`s (a type override), which
    // decode from any JSON: the contract says object, so anything else is refused here.

    /// The request's member `name`, an object (an empty one when it is left out).
    static func value(_ member: Components.Schemas.JSONObject?, _ name: String) throws -> JSONValue {
        guard let member else { return [:] }
        guard case .object = member else {
            throw OrderFlowError(.invalidInput, "`\(name)` must be a JSON object ({…}), not a \(member.typeName); send its fields as an object")
        }
        return member
    }

    /// A member the contract declares an object: anything else is the engine's mistake.
    static func object(_ value: JSONValue) throws -> Components.Schemas.JSONObject {
        guard case .object = value else { throw OrderFlowError(.invalidInput, "expected a JSON object here") }
        return value
    }

    private func order(_ snapshot: OrderSnapshot, _ engine: OrderFlowEngine) async throws -> Components.Schemas.Order {
        try Self.order(snapshot.readable(in: try await engine.workflow(of: snapshot)))
    }

    /// `Prefer: return=minimal` among the header's preferences (RFC 7240: a comma-separated
    /// list, tokens case-insensitive, optional spaces around `=`). On the header's bytes: it is
    /// read twice per request (here and by ``MinimalReturn``), and Foundation's trimming and
    /// lowercasing are dear on the hot route.
    static func prefersMinimal(_ header: String?) -> Bool {
        guard let header else { return false }
        return header.utf8.split(separator: UInt8(ascii: ",")).contains { preference in
            let parameters = preference.split(separator: UInt8(ascii: ";"), maxSplits: 1, omittingEmptySubsequences: false)
            let parts = parameters[0].split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { return false }
            return Self.equalsIgnoringCase(Self.trimmed(parts[0], also: nil), "return")
                && Self.equalsIgnoringCase(Self.trimmed(parts[1], also: UInt8(ascii: "\"")), "minimal")
        }
    }

    /// `bytes` without the spaces and tabs around it (and `extra`, such as quotes, inside them).
    private static func trimmed(_ bytes: Substring.UTF8View.SubSequence, also extra: UInt8?) -> Substring.UTF8View.SubSequence {
        func isTrimmed(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == extra }
        var bytes = bytes
        while let first = bytes.first, isTrimmed(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, isTrimmed(last) { bytes = bytes.dropLast() }
        return bytes
    }

    /// ASCII comparison, ignoring case; `lowercase` is a lowercase ASCII word.
    private static func equalsIgnoringCase(_ bytes: Substring.UTF8View.SubSequence, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        return zip(bytes, UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)).allSatisfy { byte, expected in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == expected
        }
    }

    /// The 204 answer's headers: the state and step reached, and whether it was a replay.
    /// (`Preference-Applied` is set by ``MinimalReturn``: the generated code would
    /// percent-encode its `=`.)
    static func minimalAdvance(_ result: AdvanceResult) -> Components.Responses.MinimalAdvance {
        .init(headers: .init(orderFlowState: result.order.state,
                             orderFlowSeq: Int32(clamping: result.order.seq), orderFlowReplayed: result.replayed))
    }

    private func advanceResult(_ result: AdvanceResult, _ engine: OrderFlowEngine) async throws -> Components.Schemas.AdvanceResult {
        let workflow = try await engine.workflow(of: result.order)
        return .init(order: try Self.order(result.order.readable(in: workflow)),
                     transition: try Self.transition(result.transition.readable(in: workflow)), replayed: result.replayed)
    }

    static func order(_ order: OrderSnapshot) throws -> Components.Schemas.Order {
        .init(id: order.orderID, workflow: order.workflow, workflowVersion: order.workflowVersion, state: order.state, seq: order.seq,
              isFinal: order.isFinal, attributes: try object(order.attributes), content: try object(order.content),
              createdAt: order.createdAt, updatedAt: order.updatedAt, stateEnteredAt: order.stateEnteredAt,
              channel: order.channel.map(Self.channel))
    }

    static func channel(_ channel: BroadcastChannelInfo) -> Components.Schemas.BroadcastChannel {
        .init(id: channel.id, state: .init(rawValue: channel.state.rawValue) ?? .failed,
              storage: channel.storage == .none ? .none : .latest, reason: channel.reason)
    }

    static func transition(_ record: TransitionRecord.Readable) throws -> Components.Schemas.Transition {
        .init(seq: record.seq, from: record.from, to: record.to, event: record.event, input: try object(record.input),
              actor: record.actor, occurredAt: record.occurredAt, content: try object(record.content), staleDate: record.staleDate,
              dismissalDate: record.dismissalDate, relevanceScore: record.relevanceScore,
              priority: record.priority >= 10 ? ._10 : ._5, aps: try object(record.aps),
              android: record.android.map { .init(additionalProperties: $0) })
    }

    static func activity(_ activity: ActivityInfo) -> Components.Schemas.Activity {
        .init(device: activity.deviceID, status: activity.status, tokenSuffix: activity.tokenSuffix, lastSeq: activity.lastSeq,
              lastPushedAt: activity.lastPushedAt, appState: activity.appState.flatMap { .init(rawValue: $0) },
              appReportedAt: activity.appReportedAt, appAppliedAt: activity.appAppliedAt, appAppliedSeq: activity.appAppliedSeq)
    }

    static func delivery(_ delivery: DeliveryRecord) -> Components.Schemas.Delivery {
        .init(id: delivery.id, orderId: delivery.orderID, device: delivery.deviceID, seq: delivery.seq, merged: delivery.merged,
              event: delivery.event, tokenKind: delivery.tokenKind, tokenSuffix: delivery.tokenSuffix, priority: delivery.priority,
              apsTimestamp: delivery.apsTimestamp, status: delivery.status, reason: delivery.reason,
              outcome: .init(rawValue: delivery.outcome.rawValue) ?? .dead, attemptedAt: delivery.attemptedAt,
              platform: .init(rawValue: delivery.platform) ?? .ios, android: delivery.android.map { .init(additionalProperties: $0) })
    }

    /// The last eight characters of a stored token: never the whole credential.
    static func suffix(_ token: String) -> String {
        String(token.suffix(8))
    }
}
