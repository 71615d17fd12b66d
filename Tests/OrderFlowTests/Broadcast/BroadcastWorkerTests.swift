import APNS
import Foundation
import LocalAPNS
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// `audience: broadcast` orders through the worker, against a real PostgreSQL and the local APNs
/// stand-in: one channel per order, one broadcast per merged update, push-to-start joining the
/// channel, the channel deleted after the end.
@Suite("Worker: broadcast channels", .serialized)
struct BroadcastWorkerTests {
    static let relayWorkflow = """
        name: relay
        description: A shared event in five steps.
        activity:
          attributes-type: RelayAttributes
          attributes:
            label: string(20)
          content-state:
            step: int
            message: string(40)
        lifecycle:
          start: push-to-start
          start-alert: {title: "Follow {{attributes.label}}", body: "Live now"}
          audience: broadcast
          channel-storage: latest
        states:
          s0: {initial: true, content: {step: 0, message: "step 0"}}
          s1: {content: {step: 1, message: "step 1"}}
          s2: {content: {step: 2, message: "step 2"}, alert: {title: "Step 2", body: "two"}}
          s3: {content: {step: 3, message: "step 3"}}
          s4: {content: {step: 4, message: "step 4"}}
          done: {final: true, content: {step: 5, message: "done"}, alert: {title: "Done", body: "the end"}}
        transitions:
          - {from: s0, to: s1}
          - {from: s1, to: s2}
          - {from: s2, to: s3}
          - {from: s3, to: s4}
          - {from: s4, to: done}
        """

    private func harness() async throws -> WorkerHarness {
        let h = try await WorkerHarness.make()
        _ = try await h.engine.applyWorkflow(yaml: Self.relayWorkflow, file: "relay.yaml")
        return h
    }

    private func channelRow(_ h: WorkerHarness, _ orderID: String) async throws -> (state: String, id: String?, generation: Int, reason: String?) {
        let row = try await h.pool.query(PostgresQuery(
            "SELECT state, channel_id, generation, reason FROM order_channels WHERE order_id = $1", orderID)).single()
        return (try row.decode("state"), try row.decode("channel_id", as: String?.self), try row.decode("generation"),
                try row.decode("reason", as: String?.self))
    }

    /// Three followers join by push-to-start; every update is one broadcast that reaches all of them.
    @Test func oneChannelOneBroadcastPerUpdateThenTheChannelIsDeleted() async throws {
        let h = try await harness()
        let running = h.start(h.configuration { $0.channelRetention = .zero })
        let devices = ["phone-a", "phone-b", "phone-c"]
        for (index, device) in devices.enumerated() {
            try await h.engine.registerPushToStartToken(deviceID: device, attributesType: "RelayAttributes",
                                                        token: EngineFixture.token(10 + index))
        }
        // A fourth follower whose app started the activity itself and registered a token: it is
        // never pushed one by one.
        let created = try await h.engine.createOrder(NewOrder(orderID: "race-1", workflow: "relay", attributes: ["label": "Monza"]))
        #expect(created.channel == BroadcastChannelInfo(id: nil, state: .pending, storage: .latest, reason: nil))
        for device in devices { try await h.engine.follow(orderID: "race-1", deviceID: device) }
        try await h.engine.follow(orderID: "race-1", deviceID: "tablet")
        try await h.engine.registerActivityToken(orderID: "race-1", deviceID: "tablet", token: EngineFixture.token(20))

        let starts = try await h.apns.waitForPushes(count: 3)
        let channel = try await channelRow(h, "race-1")
        #expect(channel.state == "open")
        #expect(channel.generation == 1)
        let channelID = try #require(channel.id)
        #expect(h.apns.channels().map(\.id) == [channelID])
        #expect(h.apns.channels().first?.storagePolicy == 1)
        for start in starts {
            #expect(start.event == "start")
            #expect(start.aps?["input-push-channel"]?.stringValue == channelID)
            #expect(start.aps?["input-push-token"] == nil, "a channel activity has no update token to report")
        }
        #expect(h.apns.subscribers(ofChannel: channelID).count == 3)
        // The API gives the app the channel id.
        let shown = try await h.engine.order("race-1").order
        #expect(shown.channel?.id == channelID)
        #expect(shown.channel?.state == .open)

        for (index, target) in ["s1", "s2", "s3", "s4", "done"].enumerated() {
            let moved = try await h.engine.advance("race-1", to: target)
            // An advance's answer carries the channel too, as it stands (the last one, the end,
            // before the worker sends it).
            #expect(moved.order.channel?.id == channelID && moved.order.channel?.state == .open, "\(target): \(String(describing: moved.order.channel))")
            try await h.apns.waitForBroadcasts(count: index + 1)
        }
        try await eventually("the channel is deleted after the end") { try await channelRow(h, "race-1").state == "deleted" }
        try await running.stop()

        let broadcasts = h.apns.broadcasts()
        #expect(broadcasts.count == 5, "one broadcast per update, not one per device")
        #expect(broadcasts.allSatisfy { $0.channelID == channelID && $0.bundleID == WorkerHarness.bundleID })
        #expect(broadcasts.map { $0.aps?["event"]?.stringValue } == ["update", "update", "update", "update", "end"])
        #expect(broadcasts.map { $0.aps?["content-state"]?["step"]?.integerValue } == [1, 2, 3, 4, 5])
        #expect(broadcasts.map(\.priority) == [5, 10, 5, 5, 10])
        let now = Int64(Date().timeIntervalSince1970)
        #expect(broadcasts.allSatisfy { $0.expiration > now + 7 * 3600 }, "a stored channel keeps messages for late joiners")
        let timestamps = broadcasts.compactMap { $0.aps?["timestamp"]?.integerValue }
        #expect(zip(timestamps, timestamps.dropFirst()).allSatisfy { $0 < $1 }, "\(timestamps)")
        #expect(h.apns.broadcastCounts.deliveries == 15, "five broadcasts fanned out to three devices")
        #expect(h.apns.pushes().count == 3, "only the three starts went to devices one by one")
        #expect(h.pushes(EngineFixture.token(20)).isEmpty)
        #expect(h.apns.channels().isEmpty, "the channel was deleted")
        #expect(try await h.engine.order("race-1").order.channel?.state == .deleted)
        #expect(try await h.pendingCommands("race-1") == 0)
        for device in devices {
            #expect(try await h.activity("race-1", device).status == "ended", "a joined follower's activity ends with the event")
        }
        let kinds = try await h.pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM deliveries WHERE order_id = 'race-1' AND token_kind = 'channel' AND outcome = 'sent'")).single()
        #expect(try kinds.decode("n", as: Int.self) == 5)
        await h.shutdown()
    }

    /// Quick transitions merge per channel: at most one broadcast a second, the newest content,
    /// the end last.
    @Test func quickTransitionsMergeIntoFewerBroadcasts() async throws {
        let h = try await harness()
        let running = h.start(h.configuration {
            $0.minimumPushInterval = .seconds(1)
            $0.channelRetention = .seconds(60)
        })
        try await h.engine.registerPushToStartToken(deviceID: "phone", attributesType: "RelayAttributes", token: EngineFixture.token(30))
        _ = try await h.engine.createOrder(NewOrder(orderID: "race-2", workflow: "relay", attributes: ["label": "Spa"]))
        try await h.engine.follow(orderID: "race-2", deviceID: "phone")
        try await h.apns.waitForPushes(count: 1)
        _ = try await h.engine.advance("race-2", to: "s1")
        try await h.apns.waitForBroadcasts(count: 1)
        for target in ["s2", "s3", "s4", "done"] { _ = try await h.engine.advance("race-2", to: target) }
        let burstCommitted = Date()
        try await eventually("the end is broadcast", timeout: .seconds(10)) {
            h.apns.broadcasts().last?.aps?["event"]?.stringValue == "end"
        }
        // Kept for its retention (late joiners get the stored end), not deleted yet.
        try await eventually("the end is recorded") { try await channelRow(h, "race-2").state == "ended" }
        try await Task.sleep(for: .milliseconds(300))
        try await running.stop()

        let broadcasts = h.apns.broadcasts()
        let steps = broadcasts.map { $0.aps?["content-state"]?["step"]?.integerValue }
        // The four steps merge into one when they all committed inside the second after the
        // first broadcast (milliseconds here; a machine loaded enough to take 0.9 s for four
        // advances would send the ones that missed it a second later, also correctly).
        if burstCommitted < broadcasts[0].receivedAt.addingTimeInterval(0.9) {
            #expect(broadcasts.count == 2, "s2…done merged into one: \(steps)")
        } else {
            #expect(broadcasts.count <= 4, "the burst took \(burstCommitted.timeIntervalSince(broadcasts[0].receivedAt)) s: \(steps)")
        }
        #expect(broadcasts.last?.aps?["content-state"]?["step"]?.integerValue == 5)
        #expect(broadcasts.last?.aps?["alert"]?["title"]?.stringValue == "Done", "the newest alert")
        #expect(broadcasts.last?.priority == 10)
        for (previous, next) in zip(broadcasts, broadcasts.dropFirst()) {
            let gap = next.receivedAt.timeIntervalSince(previous.receivedAt)
            #expect(gap >= 0.95, "at most one broadcast a second per channel (gap \(gap) s)")
        }
        #expect(try await channelRow(h, "race-2").state == "ended")
        #expect(h.apns.channels().count == 1)
        await h.shutdown()
    }

    /// APNs forgot the channel: a new one is created and carries the current state; the order
    /// says why its channel id changed.
    @Test func aChannelAPNsForgotIsCreatedAgain() async throws {
        let h = try await harness()
        let running = h.start(h.configuration { $0.channelRetention = .zero })
        _ = try await h.engine.createOrder(NewOrder(orderID: "race-3", workflow: "relay", attributes: ["label": "Imola"]))
        try await eventually("the channel is created") { try await channelRow(h, "race-3").state == "open" }
        let first = try #require(try await channelRow(h, "race-3").id)
        _ = try await h.engine.advance("race-3", to: "s1")
        try await h.apns.waitForBroadcasts(count: 1)

        #expect(h.apns.dropChannel(first))
        _ = try await h.engine.advance("race-3", to: "s2")
        try await h.apns.waitForBroadcasts(count: 2)
        // The stand-in sees the broadcast before the worker has recorded it.
        try await eventually("the batch is recorded") { try await h.outcomes("race-3").count == 3 }
        let again = try await channelRow(h, "race-3")
        #expect(again.state == "open")
        #expect(again.generation == 2)
        let second = try #require(again.id)
        #expect(second != first)
        #expect(again.reason?.contains("ChannelNotRegistered") == true)
        let last = try #require(h.apns.broadcasts().last)
        #expect(last.channelID == second)
        #expect(last.aps?["content-state"]?["step"]?.integerValue == 2)
        #expect(try await h.engine.order("race-3").order.channel?.id == second)
        #expect(try await h.outcomes("race-3") == ["sent", "token_dead", "sent"])
        try await running.stop()
        await h.shutdown()
    }

    /// A channel that keeps disappearing is given up, said clearly on the order.
    @Test func aChannelThatKeepsDisappearingFailsClearly() async throws {
        let h = try await harness()
        let running = h.start(h.configuration {
            $0.channelRetention = .zero
            $0.maximumChannelsPerOrder = 1
        })
        _ = try await h.engine.createOrder(NewOrder(orderID: "race-4", workflow: "relay", attributes: ["label": "Baku"]))
        try await eventually("the channel is created") { try await channelRow(h, "race-4").state == "open" }
        #expect(h.apns.dropChannel(try #require(try await channelRow(h, "race-4").id)))
        _ = try await h.engine.advance("race-4", to: "s1")
        try await eventually("the channel is given up") { try await channelRow(h, "race-4").state == "failed" }
        let shown = try await h.engine.order("race-4").order
        #expect(shown.channel?.state == .failed)
        #expect(shown.channel?.reason?.contains("ChannelNotRegistered") == true)
        try await eventually("nothing is left queued") { try await h.pendingCommands("race-4") == 0 }
        try await running.stop()
        await h.shutdown()
    }
}
