import APNS
import Foundation
@testable import OrderFlow
import OrderFlowTesting
import Testing
import WorkflowKit

/// The broadcast side of the merge alone: what a broadcast order's followers and its channel
/// are sent. No database, no network.
@Suite("Worker: broadcast merge rules")
struct BroadcastMergeTests {
    typealias M = WorkerMergeTests

    @Test func aFollowerWithItsOwnTokenIsNeverPushedOneByOne() throws {
        let device = M.activity(lastSeq: 1)
        let order = try M.order([("in_progress", [:]), ("ready", [:])], device: device)
        let plan = M.merge().plan(order: order, workflow: M.workflow, activity: device, broadcast: .init(channelID: "Y2hhbm5lbA=="))
        #expect(plan.pushes.isEmpty)
        #expect(plan.state.lastSeq == order.seq, "the channel carries its updates")
    }

    @Test func aFollowerWithAPushToStartTokenJoinsTheChannel() throws {
        let device = M.activity(status: nil, token: nil, lastSeq: 0, pushToStart: ["FoodOrderAttributes": "ff00ff00ff00ff00ff00"])
        let order = try M.order([("in_progress", [:])], device: device)
        let plan = M.merge().plan(order: order, workflow: M.workflow, activity: device, broadcast: .init(channelID: "Y2hhbm5lbA=="))
        let push = try #require(plan.pushes.first)
        #expect(plan.pushes.count == 1 && push.event == .start)
        #expect(M.spec(push)?.inputPushChannel == "Y2hhbm5lbA==")
        let body = String(decoding: try push.request(bundleID: "com.example.app").payload, as: UTF8.self)
        #expect(body.contains(#""input-push-channel":"Y2hhbm5lbA==""#), "\(body)")
        #expect(!body.contains("input-push-token"), "a channel activity has no update token to report: \(body)")

        // Until the channel is open, the follower waits.
        let waiting = M.merge().plan(order: order, workflow: M.workflow, activity: device, broadcast: .init(channelID: nil))
        #expect(waiting.pushes.isEmpty)
        #expect(waiting.state.status == .waiting)
    }

    /// A decision that sends nothing still reaches the caller (it once did not: a `defer` set
    /// it after the plan was copied for the return).
    @Test func aPlanWithoutPushesCarriesItsDecidedState() throws {
        let device = M.activity(status: nil, token: nil, lastSeq: 1, alertToken: "0a0b0c0d0e0f0a0b0c0d")
        let order = try M.order([("in_progress", [:])], device: device)
        let plan = M.merge().plan(order: order, workflow: M.workflow, activity: device)
        #expect(plan.pushes.isEmpty, "the step carries no alert")
        #expect(plan.state.status == .alerts)
        #expect(plan.state.lastSeq == order.seq, "nothing more is pending for the alert-only device")
    }

    static func channel(lastSeq: Int = 1, lastTimestamp: Int = 0, lastPushedAt: Double? = nil, policy: Int = 1) -> OutboxChannel {
        OutboxChannel(state: .open, channelID: "Y2hhbm5lbA==", bundleID: "com.example.app", storagePolicy: policy, generation: 1,
                      lastSeq: lastSeq, lastTimestamp: lastTimestamp, lastPushedAt: lastPushedAt, nextAttemptAt: nil, failures: 0)
    }

    @Test func unseenTransitionsAreOneBroadcastWithTheNewestContentAndTheHighestPriority() throws {
        let order = try M.order([("in_progress", [:]), ("ready", [:]), ("out_for_delivery", ["eta": "+10m", "driver": "Sam"])],
                                device: M.activity())
        let now = M.t0.addingTimeInterval(5).timeIntervalSince1970
        let step = ChannelStep(configuration: WorkerConfiguration(bundleID: "com.example.app", workerID: "t"), now: now)
        let last = Int(M.t0.timeIntervalSince1970) + 30
        guard case .broadcast(let request, let push) = step.action(order: order, channel: Self.channel(lastTimestamp: last),
                                                                  bundleID: "com.example.app")
        else { Issue.record("expected a broadcast"); return }
        #expect(push.merged == 3 && push.priority == 10 && request.priority == .immediate)
        #expect(M.spec(push)?.content?["status"] == "outForDelivery")
        #expect(push.apsTimestamp == last + 1, "strictly after the channel's last timestamp")
        #expect(request.expiration == Int(now) + 8 * 3600)
        #expect(request.channelID == "Y2hhbm5lbA==" && request.bundleID == "com.example.app")

        // Within a second of the last broadcast: later, with whatever is newest then.
        let paced = step.action(order: order, channel: Self.channel(lastPushedAt: now - 0.2), bundleID: "com.example.app")
        guard case .revisit(let at) = paced else { Issue.record("expected a revisit, got \(paced)"); return }
        #expect(abs(at - (now + 0.8)) < 0.001)

        // A channel that stores nothing takes apns-expiration 0.
        guard case .broadcast(let once, _) = step.action(order: order, channel: Self.channel(policy: 0), bundleID: "com.example.app")
        else { Issue.record("expected a broadcast"); return }
        #expect(once.expiration == 0)

        // The creation alone is not broadcast (devices join by push-to-start showing it).
        let created = try M.order([], device: M.activity())
        guard case .none = step.action(order: created, channel: Self.channel(lastSeq: 0), bundleID: "com.example.app") else {
            Issue.record("the creation was broadcast"); return
        }
    }
}
