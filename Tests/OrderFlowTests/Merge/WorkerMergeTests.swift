import APNS
import Foundation
@testable import OrderFlow
import OrderFlowTesting
import Testing
import WorkflowKit

/// The merge and the outcome rules alone: no database, no network.
@Suite("Worker: merge rules")
struct WorkerMergeTests {
    static let workflow: Workflow = {
        let yaml = try! EngineFixture.shippedWorkflow("food-order")
        return try! WorkflowLoader.load(yaml: yaml, file: "food-order.yaml")
    }()

    static let attributes: JSONValue = ["merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 2]
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// An order taken through `steps` (target state and input), one second apart.
    static func order(_ steps: [(String, JSONValue)], device: OutboxActivity, commands: [OutboxCommand]? = nil) throws -> OutboxOrder {
        var transitions: [OutboxTransition] = []
        var content: JSONValue? = nil
        var state = workflow.initialState
        let first = StoredRendering(try workflow.render(state: state, attributes: attributes, at: t0))
        transitions.append(OutboxTransition(seq: 1, occurredAt: t0.timeIntervalSince1970, rendered: first))
        content = first.content
        for (index, (target, input)) in steps.enumerated() {
            let time = t0.addingTimeInterval(Double(index + 1) * 0.2)
            let transition = try #require(workflow.transition(from: state, to: target))
            let rendered = StoredRendering(try workflow.render(
                transition: transition, attributes: attributes, input: input, previous: content, at: time))
            transitions.append(OutboxTransition(seq: index + 2, occurredAt: time.timeIntervalSince1970, rendered: rendered))
            content = rendered.content
            state = target
        }
        return OutboxOrder(
            merchantID: "default", orderID: "1042", workflowName: "food-order", workflowVersion: 1, state: state,
            seq: transitions.count, attributes: attributes, startInput: [:],
            commands: commands ?? [OutboxCommand(id: 1, seq: transitions.count, kind: .update)],
            activities: [device], transitions: transitions)
    }

    static func activity(status: String? = "active", token: String? = "aa11bb22cc33dd44ee55", lastSeq: Int = 1,
                         lastTimestamp: Int = 0, lastPushedAt: Double? = nil, startedAt: Double? = nil,
                         failures: Int = 0, pushToStart: [String: String]? = nil, alertToken: String? = nil) -> OutboxActivity
    {
        OutboxActivity(
            device: "phone", followedAt: t0.timeIntervalSince1970, status: status, updateToken: token,
            tokenUpdatedAt: t0.timeIntervalSince1970 - 60, startedAt: startedAt ?? t0.timeIntervalSince1970,
            lastSeq: lastSeq, lastAlertSeq: lastSeq, lastTimestamp: lastTimestamp, lastPushedAt: lastPushedAt,
            nextAttemptAt: nil, failures: failures, alertToken: alertToken, pushToStartTokens: pushToStart)
    }

    static func merge(now: Date = t0.addingTimeInterval(5), _ adjust: (inout WorkerConfiguration) -> Void = { _ in }) -> ActivityMerge {
        var configuration = WorkerConfiguration(bundleID: "com.example.app", workerID: "test")
        adjust(&configuration)
        return ActivityMerge(configuration: configuration, now: now.timeIntervalSince1970)
    }

    static func spec(_ push: PlannedPush?) -> LiveActivityPayloadSpec? {
        guard case .liveActivity(let spec)? = push?.payload else { return nil }
        return spec
    }

    /// The worker reads stored renderings with the project's JSON parser; it must read exactly
    /// what `Codable` read: every field, with and without its optional parts.
    @Test func storedRenderingsReadAsCodableReadsThem() throws {
        let device = OutboxActivity(device: "d", followedAt: 0, lastSeq: 0, lastAlertSeq: 0, lastTimestamp: 0, failures: 0)
        let order = try Self.order(
            [("in_progress", ["eta": "+20m"]), ("ready", [:]), ("out_for_delivery", ["eta": "+15m", "driver": "Sam"]), ("delivered", [:])],
            device: device)
        var renderings = order.transitions.map(\.rendered)
        var full = renderings[1]
        full.alert = ActivityAlert(title: .localized(key: "ORDER_READY", args: ["1042", "Luigi's"]), body: .plain("Zum Mitnehmen ✓ \"bitte\""), sound: "chime.caf")
        full.relevanceScore = 0.75
        full.staleDate = 1_800_000_900
        full.dismissalDate = 1_800_003_600
        full.content = ["eta": 2.0, "ratio": 2.5, "big": 1_800_000_000, "names": ["é", "✓", ""], "nested": ["x": .null, "y": [true, false]]]
        renderings.append(full)
        var bare = renderings[0]
        bare.alert = nil
        bare.relevanceScore = nil
        bare.staleDate = nil
        bare.dismissalDate = nil
        renderings.append(bare)
        #expect(renderings.contains { $0.alert != nil })
        for rendering in renderings {
            let text = rendering.json.jsonString
            let byCodable = try JSONDecoder().decode(StoredRendering.self, from: Data(text.utf8))
            let byParser = try StoredRendering(json: JSONValue(json: text))
            #expect(byParser == byCodable, "\(text)")
            #expect(byParser.content.jsonString == byCodable.content.jsonString)
        }
        let list = "[" + order.transitions.map { #"{"seq": \#($0.seq), "occurredAt": \#($0.occurredAt + 0.123456), "rendered": \#($0.rendered.json.jsonString)}"# }
            .joined(separator: ",") + "]"
        let read = try OutboxTransition.list(json: list)
        #expect(read.map(\.seq) == order.transitions.map(\.seq))
        #expect(read.map(\.rendered) == order.transitions.map(\.rendered))
        #expect(zip(read, order.transitions).allSatisfy { abs($0.occurredAt - $1.occurredAt - 0.123456) < 1e-6 })
        // What is not a rendering is refused, not read as an empty one.
        #expect(throws: (any Error).self) { try OutboxTransition.list(json: #"[{"seq": 1, "occurredAt": 1, "rendered": {"event": "update"}}]"#) }
        #expect(throws: (any Error).self) { try OutboxTransition.list(json: #"{"seq": 1}"#) }
    }

    @Test func unseenTransitionsMergeIntoOnePushWithTheNewestContentAndAlert() throws {
        let device = Self.activity(lastSeq: 1, lastTimestamp: Int(Self.t0.timeIntervalSince1970))
        let order = try Self.order([("in_progress", [:]), ("ready", [:]), ("out_for_delivery", ["eta": "+10m", "driver": "Sam"])],
                                   device: device)
        let plan = Self.merge().plan(order: order, workflow: Self.workflow, activity: device)
        #expect(plan.pushes.count == 1)
        let push = try #require(plan.pushes.first)
        let spec = try #require(Self.spec(push))
        #expect(push.event == .update)
        #expect(push.merged == 3)
        #expect(push.priority == 10)
        #expect(spec.content?["status"] == "outForDelivery")
        #expect(spec.alert?.title == .plain("On the way"))
        #expect(spec.staleDate != nil)
        #expect(spec.timestamp == Int(Self.t0.timeIntervalSince1970) + 1, "strictly after the last timestamp sent")
        let request = try push.request(bundleID: "com.example.app")
        #expect(request.headerTopic == "com.example.app.push-type.liveactivity")
        #expect(request.priority == .immediate)
    }

    @Test func routineUpdatesGoAtPriorityFiveWithoutAlert() throws {
        let device = Self.activity(lastSeq: 1)
        let order = try Self.order([("in_progress", [:])], device: device)
        let push = try #require(Self.merge().plan(order: order, workflow: Self.workflow, activity: device).pushes.first)
        #expect(push.priority == 5)
        #expect(Self.spec(push)?.alert == nil)
    }

    @Test func aFinalStateSendsOneEndAndThenNothing() throws {
        let device = Self.activity(lastSeq: 3)
        let order = try Self.order([("in_progress", [:]), ("ready", [:]), ("picked_up", [:])], device: device)
        let plan = Self.merge().plan(order: order, workflow: Self.workflow, activity: device)
        let push = try #require(plan.pushes.first)
        #expect(push.event == .end)
        #expect(Self.spec(push)?.dismissalDate != nil, "picked_up: after 15m")

        let attempts: [PushAttempt] = [.sent(apnsID: UUID(), status: 200, answeredAt: Self.t0.timeIntervalSince1970 + 5)]
        let outcome = ActivityOutcome(plan: plan, attempts: attempts, configuration: WorkerConfiguration(bundleID: "x"))
        #expect(outcome.state.status == .ended)
        var ended = device
        ended.status = "ended"
        ended.lastSeq = 1
        #expect(Self.merge().plan(order: order, workflow: Self.workflow, activity: ended).pushes.isEmpty)
    }

    @Test func aPushWithinTheIntervalIsDeferred() throws {
        let now = Self.t0.addingTimeInterval(5)
        let device = Self.activity(lastSeq: 1, lastPushedAt: now.timeIntervalSince1970 - 0.3)
        let order = try Self.order([("in_progress", [:])], device: device)
        let plan = Self.merge(now: now).plan(order: order, workflow: Self.workflow, activity: device)
        #expect(plan.pushes.isEmpty)
        let notBefore = try #require(plan.notBefore)
        #expect(abs(notBefore - (now.timeIntervalSince1970 + 0.7)) < 1e-3)
    }

    @Test func aWaitingDeviceWithAPushToStartTokenGetsAStart() throws {
        let device = Self.activity(status: "waiting", token: nil, lastSeq: 0, pushToStart: ["FoodOrderAttributes": "abcdef0123456789"])
        let order = try Self.order([("in_progress", [:])], device: device)
        let push = try #require(Self.merge().plan(order: order, workflow: Self.workflow, activity: device).pushes.first)
        let spec = try #require(Self.spec(push))
        #expect(push.event == .start)
        #expect(push.tokenKind == .pushToStart)
        #expect(spec.attributesType == "FoodOrderAttributes")
        #expect(spec.attributes?["orderNumber"] == "1042")
        #expect(spec.content?["status"] == "preparing", "the current state, not the first")
        #expect(spec.alert?.title == .plain("Order 1042 received"))
        let payload = try String(decoding: push.request(bundleID: "com.example.app").payload, as: UTF8.self)
        #expect(payload.contains("\"input-push-token\":1"))
    }

    @Test func startingActivitiesAndAppStartedWorkflowsWait() throws {
        let starting = Self.activity(status: "starting", token: nil, lastSeq: 1, pushToStart: ["FoodOrderAttributes": "abcdef0123456789"])
        let order = try Self.order([("in_progress", [:])], device: starting)
        #expect(Self.merge().plan(order: order, workflow: Self.workflow, activity: starting).pushes.isEmpty)

        var appStarted = Self.workflow
        appStarted.lifecycle.start = .app
        let waiting = Self.activity(status: "waiting", token: nil, lastSeq: 0, pushToStart: ["FoodOrderAttributes": "abcdef0123456789"])
        let plan = Self.merge().plan(order: order, workflow: appStarted, activity: waiting)
        #expect(plan.pushes.isEmpty)
        #expect(plan.state.status == .waiting)
    }

    @Test func aDeviceWithOnlyAnAlertTokenGetsTheNewestAlert() throws {
        let device = Self.activity(status: "waiting", token: nil, lastSeq: 1, alertToken: "0123456789abcdef")
        let order = try Self.order([("in_progress", [:]), ("ready", [:]), ("cancelled", [:])], device: device)
        let push = try #require(Self.merge().plan(order: order, workflow: Self.workflow, activity: device).pushes.first)
        #expect(push.event == .alert)
        #expect(push.alertSeq == 4)
        #expect(push.alertTitle == "Order cancelled")
        let request = try push.request(bundleID: "com.example.app")
        #expect(request.pushType == .alert)
        #expect(request.headerTopic == "com.example.app")
    }

    @Test func theTimeLimitEndsTheActivity() throws {
        let now = Self.t0.addingTimeInterval(8 * 3600)
        let device = Self.activity(lastSeq: 2, startedAt: Self.t0.timeIntervalSince1970)
        let order = try Self.order([("in_progress", [:])], device: device)
        let plan = Self.merge(now: now).plan(order: order, workflow: Self.workflow, activity: device)
        #expect(plan.pushes.map(\.event) == [.end])

        var restarting = Self.workflow
        restarting.lifecycle.onTimeLimit = .restart
        var withStartToken = device
        withStartToken.pushToStartTokens = ["FoodOrderAttributes": "abcdef0123456789"]
        let restart = Self.merge(now: now).plan(order: order, workflow: restarting, activity: withStartToken)
        #expect(restart.pushes.map(\.event) == [.end, .start])
        #expect(restart.pushes[1].apsTimestamp > restart.pushes[0].apsTimestamp)
        let attempts: [PushAttempt] = restart.pushes.map { _ in .sent(apnsID: UUID(), status: 200, answeredAt: now.timeIntervalSince1970) }
        let outcome = ActivityOutcome(plan: restart, attempts: attempts, configuration: WorkerConfiguration(bundleID: "x"))
        #expect(outcome.state.status == .starting)
        #expect(outcome.state.clearUpdateToken)
        #expect(outcome.state.startedAt == now.timeIntervalSince1970)

        // An activity the app started restarts by push as well, when the device has the token.
        var appStarted = restarting
        appStarted.lifecycle.start = .app
        let appRestart = Self.merge(now: now).plan(order: order, workflow: appStarted, activity: withStartToken)
        #expect(appRestart.pushes.map(\.event) == [.end, .start])
    }

    @Test func failuresBackOffThenDeadLetterAndDeadTokensStopEverything() throws {
        let device = Self.activity(lastSeq: 1)
        let order = try Self.order([("in_progress", [:])], device: device)
        var configuration = WorkerConfiguration(bundleID: "x", maximumAttempts: 3, backoffBase: .seconds(1), backoffCap: .seconds(60))
        configuration.maximumAttempts = 3
        var plan = Self.merge().plan(order: order, workflow: Self.workflow, activity: device)
        let now = Self.t0.timeIntervalSince1970 + 5
        var outcomes: [DeliveryOutcome] = []
        for _ in 1...3 {
            let failed = PushAttempt.failed(status: 500, reason: "InternalServerError", action: .retryWithBackoff, apnsID: nil, answeredAt: now)
            let outcome = ActivityOutcome(plan: plan, attempts: [failed], configuration: configuration)
            outcomes += outcome.deliveries.map(\.outcome)
            plan.state = outcome.state
            if outcome.deliveries.last?.outcome == .retry {
                let delay = try #require(outcome.revisitAt) - now
                #expect(delay >= 0.5 * pow(2, Double(outcome.state.failures - 1)) && delay <= pow(2, Double(outcome.state.failures - 1)))
            }
        }
        #expect(outcomes == [.retry, .retry, .dead])
        #expect(plan.state.failures == 3)

        let throttled = ActivityOutcome(
            plan: Self.merge().plan(order: order, workflow: Self.workflow, activity: device),
            attempts: [.failed(status: 429, reason: "TooManyRequests", action: .backOffToken(retryAfter: .seconds(30)), apnsID: nil, answeredAt: now)],
            configuration: configuration)
        #expect(throttled.revisitAt == now + 30)
        #expect(throttled.deliveries.map(\.outcome) == [.retry])

        let dead = ActivityOutcome(
            plan: Self.merge().plan(order: order, workflow: Self.workflow, activity: device),
            attempts: [.failed(status: 410, reason: "Unregistered", action: .tokenDead, apnsID: nil, answeredAt: now)],
            configuration: configuration)
        #expect(dead.state.status == .gone)
        #expect(dead.state.clearUpdateToken)
        #expect(dead.deliveries.map(\.outcome) == [.tokenDead])
        #expect(dead.deliveries.first?.tokenSuffix == "dd44ee55", "only the last 8 characters are kept")
    }
}
