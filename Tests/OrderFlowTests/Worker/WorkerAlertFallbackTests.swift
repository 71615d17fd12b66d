import Foundation
import LocalAPNS
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// The ordinary-alert fallback against a real PostgreSQL and the APNs stand-in: a follower whose
/// device can show no Live Activity for the order still gets its alerts, once each, as ordinary
/// notifications on its device token; a device showing the activity, one whose customer
/// dismissed it, and every other device get none.
@Suite("Worker: ordinary alerts when no activity can be shown", .serialized)
struct WorkerAlertFallbackTests {
    /// One `deliveries` row, as staff read it in `orderflow show`.
    struct Delivery: Equatable, CustomStringConvertible {
        var device: String
        var seq: Int
        var merged: Int
        var event: String
        var tokenKind: String
        var outcome: String
        var alertTitle: String?

        var description: String { "\(device) #\(seq) ×\(merged) \(event) \(tokenKind) \(outcome) \(alertTitle ?? "-")" }
    }

    static func deliveries(_ h: WorkerHarness, _ orderID: String) async throws -> [Delivery] {
        try await h.pool.query(PostgresQuery("""
            SELECT device_id, seq, merged, event, token_kind, outcome, alert_title
            FROM deliveries WHERE order_id = $1 ORDER BY id
            """, orderID)).map { row in
            Delivery(device: try row.decode("device_id"), seq: try row.decode("seq"), merged: try row.decode("merged"),
                     event: try row.decode("event"), tokenKind: try row.decode("token_kind"), outcome: try row.decode("outcome"),
                     alertTitle: try row.decode("alert_title", as: String?.self))
        }
    }

    /// Waits until every command is handled, then a little longer: a push sent twice would show.
    static func settle(_ h: WorkerHarness) async throws {
        try await eventually("every command is handled") { try await h.pendingCommands() == 0 }
        try await Task.sleep(for: .milliseconds(200))
        try await eventually("every command is handled") { try await h.pendingCommands() == 0 }
    }

    /// The issue's follower: an ordinary device token and push-to-start tokens for another
    /// attributes type only. Nothing can show the food order's activity; the cancellation's
    /// alert reaches the device token once, as a plain alert push.
    @Test func pushToStartTokensForOtherTypesOnlyGetTheCancellationAsAnOrdinaryAlert() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let deviceToken = EngineFixture.token(41)
        let tickerStart = EngineFixture.token(42)
        try await h.engine.registerDeviceToken(deviceID: "phone", token: deviceToken)
        try await h.engine.registerPushToStartToken(deviceID: "phone", attributesType: "TickerAttributes", token: tickerStart)
        try await h.createFoodOrder("1042")
        try await h.engine.follow(orderID: "1042", deviceID: "phone")
        _ = try await h.engine.advance("1042", to: "accept")
        try await Self.settle(h)
        #expect(h.apns.acceptedCount == 0, "no transition so far has an alert, and no start can be shown")

        _ = try await h.engine.cancel("1042", reason: "Out of dough")
        let push = try await h.apns.waitForPushes(count: 1)[0]
        try await Self.settle(h)
        try await running.stop()

        #expect(h.apns.acceptedCount == 1, "exactly one push: \(h.apns.pushes().map(\.deviceToken))")
        #expect(push.deviceToken == deviceToken)
        #expect(push.pushType == "alert")
        #expect(push.topic == WorkerHarness.bundleID, "the plain bundle id, without .push-type.liveactivity")
        #expect(push.priority == 10)
        #expect(push.alertTitle == "Order cancelled")
        #expect(push.aps?["alert"]?["body"]?.stringValue == "Order 1042 from Luigi's was cancelled.")
        #expect(push.aps?["sound"]?.stringValue == "default", "an ordinary alert's sound sits beside the alert")
        #expect(push.aps?["thread-id"]?.stringValue == "1042")
        #expect(push.payload["orderID"]?.stringValue == "1042")
        for key in ["event", "content-state", "timestamp", "attributes-type"] {
            #expect(push.aps?[key] == nil, "no Live Activity key \(key) in an ordinary alert")
        }
        #expect(h.pushes(tickerStart).isEmpty, "another type's push-to-start token is never used")
        #expect(try await Self.deliveries(h, "1042") == [
            Delivery(device: "phone", seq: 3, merged: 1, event: "alert", tokenKind: "device", outcome: "sent", alertTitle: "Order cancelled"),
        ])
        let activity = try await h.activity("1042", "phone")
        #expect(activity.status == "alerts")
        #expect(activity.lastAlertSeq == 3)
        await h.shutdown()
    }

    /// A push-to-start token for the workflow's own type that APNs refuses: the device is
    /// looked at again at once without it, and the alert of the state the start was to show
    /// goes to the device token then, not at the next transition.
    @Test func aRefusedPushToStartTokenFallsBackToTheDeviceTokenAtOnce() async throws {
        let h = try await WorkerHarness.make()
        let deviceToken = EngineFixture.token(43)
        let deadStart = EngineFixture.token(44)
        try await h.engine.registerDeviceToken(deviceID: "phone", token: deviceToken)
        try await h.engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttributes", token: deadStart)
        h.apns.injectFault(.init(status: 410, reason: "Unregistered", timestamp: Date()), deviceToken: deadStart)
        try await h.createFoodOrder("77")
        _ = try await h.engine.advance("77", to: "accept")
        _ = try await h.engine.advance("77", to: "ready")
        let running = h.start(h.configuration())
        try await h.engine.follow(orderID: "77", deviceID: "phone")

        let push = try await h.apns.waitForPushes(count: 1)[0]
        try await Self.settle(h)
        #expect(push.deviceToken == deviceToken)
        #expect(push.pushType == "alert")
        #expect(push.alertTitle == "Order 77 is ready")

        _ = try await h.engine.cancel("77")
        try await h.apns.waitForPushes(count: 2)
        try await Self.settle(h)
        try await running.stop()
        #expect(h.pushes(deviceToken).map(\.alertTitle) == ["Order 77 is ready", "Order cancelled"])
        #expect(h.apns.rejections().map(\.deviceToken) == [deadStart], "the refused start is never tried again")
        let deliveries = try await Self.deliveries(h, "77").map { "\($0.event) \($0.tokenKind) \($0.outcome)" }
        #expect(deliveries == ["start push-to-start token_dead", "alert device sent", "alert device sent"])
        let invalid: Int = try await h.pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM push_to_start_tokens WHERE device_id = 'phone' AND invalid_at IS NOT NULL")).single().decode("n")
        #expect(invalid == 1)
        await h.shutdown()
    }

    /// A device showing the activity gets the alert inside the activity's end, never also as an
    /// ordinary notification; a device whose customer dismissed the activity gets nothing.
    @Test func aShowingActivityCarriesTheAlertAndADismissedOneGetsNothing() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let tokens = (phone: EngineFixture.token(45), phoneActivity: EngineFixture.token(46),
                      tablet: EngineFixture.token(47), tabletActivity: EngineFixture.token(48))
        try await h.createFoodOrder("88")
        try await h.engine.registerDeviceToken(deviceID: "phone", token: tokens.phone)
        try await h.engine.registerDeviceToken(deviceID: "tablet", token: tokens.tablet)
        try await h.engine.registerActivityToken(orderID: "88", deviceID: "phone", token: tokens.phoneActivity)
        try await h.engine.registerActivityToken(orderID: "88", deviceID: "tablet", token: tokens.tabletActivity)
        try await Self.settle(h)
        try await h.engine.reportActivityState(orderID: "88", deviceID: "tablet", state: .dismissed)
        h.apns.reset()

        _ = try await h.engine.advance("88", to: "accept")
        _ = try await h.engine.cancel("88")
        try await eventually("the phone's activity ends") { try await h.activity("88", "phone").status == "ended" }
        try await Self.settle(h)
        try await running.stop()

        let pushes = h.apns.pushes()
        #expect(pushes.allSatisfy { $0.deviceToken == tokens.phoneActivity }, "\(pushes.map(\.deviceToken))")
        #expect(pushes.last?.event == "end")
        #expect(pushes.last?.pushType == "liveactivity")
        #expect(pushes.compactMap(\.alertTitle) == ["Order cancelled"], "the alert once, inside the activity's push")
        #expect(h.pushes(tokens.phone).isEmpty && h.pushes(tokens.tablet).isEmpty, "no ordinary alert beside an activity")
        // Before the dismissal both activities were caught up (seq 1); from then on, the phone's only.
        let sinceDismissal = try await Self.deliveries(h, "88").filter { $0.seq > 1 }
        #expect(!sinceDismissal.isEmpty && sinceDismissal.allSatisfy { $0.tokenKind == "activity" && $0.device == "phone" },
                "\(sinceDismissal)")
        #expect(try await h.activity("88", "tablet").status == "ended")
        await h.shutdown()
    }

    /// No ordinary token and no usable push-to-start token (another type's only, or one APNs
    /// refused): nothing is sent, nothing is retried or dead-lettered, nothing is left queued.
    @Test func noOrdinaryTokenAndNoUsableStartTokenSendsNothingAndFailsNothing() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let tickerStart = EngineFixture.token(51)
        let deadStart = EngineFixture.token(52)
        try await h.engine.registerPushToStartToken(deviceID: "other-type", attributesType: "TickerAttributes", token: tickerStart)
        try await h.engine.registerPushToStartToken(deviceID: "refused", attributesType: "FoodOrderAttributes", token: deadStart)
        h.apns.injectFault(.init(status: 410, reason: "Unregistered", timestamp: Date()), deviceToken: deadStart)
        try await h.createFoodOrder("99")
        for device in ["other-type", "refused", "bare"] { try await h.engine.follow(orderID: "99", deviceID: device) }
        // The start is tried while the order is live (a cancelled order is never started).
        try await eventually("the start is refused") { h.apns.rejectedCount == 1 }
        _ = try await h.engine.advance("99", to: "accept")
        _ = try await h.engine.advance("99", to: "ready")
        _ = try await h.engine.cancel("99")
        try await Self.settle(h)
        try await running.stop()

        #expect(h.apns.acceptedCount == 0)
        #expect(h.apns.rejections().map(\.deviceToken) == [deadStart], "only the one start, refused")
        #expect(try await Self.deliveries(h, "99").map(\.outcome) == ["token_dead"])
        for device in ["other-type", "refused", "bare"] {
            let activity = try await h.activity("99", device)
            #expect(activity.status == "waiting", "\(device)")
            #expect(activity.failures == 0, "\(device)")
        }
        #expect(try await h.leaseOwners().isEmpty)
        let troubles = h.logs.records.filter { $0.level >= .warning }
        #expect(troubles.isEmpty, "\(troubles.map(\.message))")
        await h.shutdown()
    }

    /// Only the followers of the order that changed, of its merchant, get its alert: not the
    /// same device id at another merchant (following its own order of the same id), not a
    /// device following another order, not a device following nothing.
    @Test func anotherMerchantsDeviceAndOtherOrdersFollowersGetNothing() async throws {
        let h = try await WorkerHarness.make()
        let other = try h.engine.forMerchant("other-merchant")
        _ = try await other.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        let ours = EngineFixture.token(61)
        let theirs = EngineFixture.token(62)
        let neighbour = EngineFixture.token(63)
        let idle = EngineFixture.token(64)
        try await h.createFoodOrder("1042")
        try await h.createFoodOrder("2000")
        _ = try await other.createOrder(NewOrder(
            orderID: "1042", workflow: "food-order", attributes: ["merchantName": "Other", "orderNumber": "1042", "itemCount": 1]))
        try await h.engine.registerDeviceToken(deviceID: "phone", token: ours)
        try await other.registerDeviceToken(deviceID: "phone", token: theirs)
        try await h.engine.registerDeviceToken(deviceID: "neighbour", token: neighbour)
        try await h.engine.registerDeviceToken(deviceID: "idle", token: idle)
        try await h.engine.follow(orderID: "1042", deviceID: "phone")
        try await other.follow(orderID: "1042", deviceID: "phone")
        try await h.engine.follow(orderID: "2000", deviceID: "neighbour")
        _ = try await other.advance("1042", to: "accept")
        _ = try await h.engine.advance("2000", to: "accept")

        let running = h.start(h.configuration())
        _ = try await h.engine.cancel("1042")
        try await h.apns.waitForPushes(count: 1)
        try await Self.settle(h)
        try await running.stop()

        #expect(h.apns.pushes().map(\.deviceToken) == [ours])
        #expect(h.pushes(ours).first?.alertTitle == "Order cancelled")
        let elsewhere: Int = try await h.pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM deliveries WHERE merchant_id = 'other-merchant' OR order_id <> '1042'")).single().decode("n")
        #expect(elsewhere == 0)
        #expect(try await other.order("1042").order.state == "in_progress")
        await h.shutdown()
    }

    /// Transitions that commit while no worker runs merge: one ordinary alert, the newest. An
    /// order that ended sends only its end's own alert (none when the end has none: "ready"
    /// after the customer picked the order up would misinform), and nothing after it, even
    /// when the device later registers a token that could start an activity.
    @Test func aBurstSendsOneAlertTheNewestAndNothingAfterTheEnd() async throws {
        let h = try await WorkerHarness.make()
        let tokens = ["B1": EngineFixture.token(71), "B2": EngineFixture.token(72), "B3": EngineFixture.token(73)]
        for (orderID, token) in tokens {
            try await h.createFoodOrder(orderID)
            try await h.engine.registerDeviceToken(deviceID: "phone-\(orderID)", token: token)
            try await h.engine.follow(orderID: orderID, deviceID: "phone-\(orderID)")
            _ = try await h.engine.advance(orderID, to: "accept")
            _ = try await h.engine.advance(orderID, to: "ready")
        }
        _ = try await h.engine.advance("B1", to: "dispatch", input: ["eta": "+10m", "driver": "Sam"])
        _ = try await h.engine.cancel("B2")
        _ = try await h.engine.advance("B3", to: "pickup")

        var running = h.start(h.configuration())
        try await h.apns.waitForPushes(count: 2)
        try await Self.settle(h)
        #expect(h.pushes(tokens["B1"]!).map(\.alertTitle) == ["On the way"])
        #expect(h.pushes(tokens["B2"]!).map(\.alertTitle) == ["Order cancelled"])
        #expect(h.pushes(tokens["B3"]!).isEmpty, "a picked-up order's older alert is not sent after its end")
        #expect(try await Self.deliveries(h, "B1") == [
            Delivery(device: "phone-B1", seq: 4, merged: 2, event: "alert", tokenKind: "device", outcome: "sent", alertTitle: "On the way"),
        ])
        #expect(try await Self.deliveries(h, "B2") == [
            Delivery(device: "phone-B2", seq: 4, merged: 2, event: "alert", tokenKind: "device", outcome: "sent", alertTitle: "Order cancelled"),
        ])
        #expect(try await Self.deliveries(h, "B3").isEmpty)
        try await running.stop()

        // After the end: a push-to-start token for the workflow's type queues a look at every
        // order the device follows in alerts; an ended order starts nothing and repeats nothing.
        for orderID in ["B2", "B3"] {
            try await h.engine.registerPushToStartToken(
                deviceID: "phone-\(orderID)", attributesType: "FoodOrderAttributes", token: EngineFixture.token(orderID == "B2" ? 74 : 75))
        }
        _ = try await h.engine.advance("B1", to: "deliver")
        running = h.start(h.configuration())
        try await h.apns.waitForPushes(count: 3)
        try await Self.settle(h)
        try await running.stop()
        #expect(h.pushes(tokens["B1"]!).map(\.alertTitle) == ["On the way", "Delivered"])
        #expect(h.apns.acceptedCount == 3, "\(h.apns.pushes().map { "\($0.deviceToken.suffix(8)) \($0.alertTitle ?? "-")" })")
        await h.shutdown()
    }
}
