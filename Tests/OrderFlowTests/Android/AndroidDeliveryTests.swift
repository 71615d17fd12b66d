import Foundation
import LocalFCM
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Prometheus
import Testing
import WorkflowKit

/// The worker's Android side against the FCM stand-in and a real PostgreSQL: what FCM receives,
/// mixed followers, and every FCM answer handled by its meaning.
@Suite("Worker: Android followers through FCM", .serialized)
struct AndroidDeliveryTests {
    @Test func theStandInReceivesOneDataMessageOfTheNewestState() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(1)
        try await a.androidOrder("o1", token: token)
        _ = try await a.engine.advance("o1", to: "accept")
        let running = a.start(a.configuration())
        let message = try #require(try await a.fcm.waitForMessages(count: 1).first)
        try await running.stop()

        #expect(message.token == token && message.projectID == "default-orders")
        #expect(message.data["order"] == "o1" && message.data["state"] == "in_progress" && message.data["event"] == "update")
        #expect(message.data["orderflow"] == "1" && message.data["workflow"] == "food-order")
        #expect(message.collapseKey == "order:o1")
        #expect(message.ttl?.hasSuffix("s") == true)
        #expect(message.body["message"]?["notification"] == nil, "a data message: the app builds the notification")
        let row = try await a.pool.query(PostgresQuery("""
            SELECT platform, token_kind, event, outcome, priority, merged, token_suffix FROM deliveries WHERE order_id = 'o1'
            """)).single()
        #expect(try row.decode("platform", as: String.self) == "android")
        #expect(try row.decode("token_kind", as: String.self) == "fcm")
        #expect(try row.decode("outcome", as: String.self) == "sent")
        #expect(try row.decode("merged", as: Int.self) == 2, "creation and accept, merged")
        #expect(try row.decode("token_suffix", as: String.self) == String(token.suffix(8)), "never the whole token")
        let priority = try row.decode("priority", as: Int.self)
        #expect(message.priority == (priority >= 10 ? "HIGH" : "NORMAL"))
        await a.shutdown()
    }

    @Test func iPhoneAndAndroidFollowersOfOneOrderEachGetTheirs() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(2)
        let activityToken = EngineFixture.token(21)
        try await a.androidOrder("o2", token: token)
        try await a.engine.registerActivityToken(orderID: "o2", deviceID: "iphone", token: activityToken)
        let registry = PrometheusCollectorRegistry()
        let running = a.start(a.configuration(), metrics: PrometheusMetricsFactory(registry: registry))
        _ = try await a.engine.advance("o2", to: "accept")
        try await eventually("both platforms got the accept") {
            a.messages(token).contains { $0.data["state"] == "in_progress" }
                && a.h.pushes(activityToken).contains { $0.content?["status"] != nil && $0.event == "update" }
        }
        try await running.stop()
        let iphone = try #require(a.h.pushes(activityToken).last)
        let android = try #require(a.messages(token).last)
        #expect(android.priority == (iphone.priority == 10 ? "HIGH" : "NORMAL"), "HIGH only where the iPhone gets priority 10")
        let rows = try await a.deliveries("o2")
        #expect(rows.contains("android fcm update sent") && rows.contains("ios activity update sent"))
        // The push metrics keep their names, a series per platform.
        let text = MerchantAppsTests.scrape(registry)
        for platform in ["ios", "android"] {
            let series = #"orderflow_pushes_total{merchant="default",platform="\#(platform)",outcome="sent"}"#
            #expect(text.contains(series), "no \(series) in:\n\(text)")
            #expect(text.contains(#"orderflow_push_latency_seconds_count{merchant="default",platform="\#(platform)"}"#))
        }
        await a.shutdown()
    }

    @Test func unregisteredStopsTheDeviceForGood() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(3)
        a.fcm.injectFault(.unregistered, token: token)
        try await a.androidOrder("o3", token: token)
        let running = a.start(a.configuration())
        _ = try await a.engine.advance("o3", to: "accept")
        try await eventually("FCM's answer is recorded") { try await a.deliveries("o3").contains("android fcm update token_dead") }
        let invalid = try await a.pool.query(PostgresQuery(
            "SELECT fcm_token_invalid_at IS NOT NULL AS invalid FROM devices WHERE device_id = 'pixel-o3'")).single()
        #expect(try invalid.decode("invalid", as: Bool.self))
        let refusals = a.fcm.rejections().count
        _ = try await a.engine.advance("o3", to: "ready")
        try await eventually("the advance is handled") { try await a.h.pendingCommands("o3") == 0 }
        try await running.stop()
        #expect(a.fcm.rejections().count == refusals, "nothing more is sent to a gone token")
        #expect(try await a.deliveries("o3").count == 1)
        await a.shutdown()
    }

    @Test func invalidArgumentIsADeadLetterWithFCMsReason() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(4)
        a.fcm.injectFault(LocalFCMFault(status: 400, canonicalStatus: "INVALID_ARGUMENT",
                                        message: "Invalid value at 'message.android.ttl'", errorCode: "INVALID_ARGUMENT"),
                          token: token)
        try await a.androidOrder("o4", token: token)
        _ = try await a.engine.advance("o4", to: "accept")
        let running = a.start(a.configuration())
        try await eventually("the dead letter is recorded") { try await a.deliveries("o4").contains("android fcm update dead") }
        try await Task.sleep(for: .milliseconds(300))
        try await running.stop()
        #expect(try await a.deliveries("o4") == ["android fcm update dead"], "never retried as it is")
        let reason = try #require(try await a.reasons("o4").first)
        #expect(reason.contains("INVALID_ARGUMENT") && reason.contains("message.android.ttl"))
        let valid = try await a.pool.query(PostgresQuery(
            "SELECT fcm_token_invalid_at IS NULL AS valid FROM devices WHERE device_id = 'pixel-o4'")).single()
        #expect(try valid.decode("valid", as: Bool.self), "the token itself is fine")
        await a.shutdown()
    }

    @Test func anAndroidDeadLetterIsSentAgainOnRetry() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(10)
        a.fcm.injectFault(LocalFCMFault(status: 400, canonicalStatus: "INVALID_ARGUMENT", message: "Request contains an invalid argument.",
                                        errorCode: "INVALID_ARGUMENT"), token: token, count: 1)
        try await a.androidOrder("r1", token: token)
        let running = a.start(a.configuration())
        try await eventually("the dead letter") { try await a.deliveries("r1") == ["android fcm update dead"] }
        let id = try await a.pool.query(PostgresQuery("SELECT id FROM deliveries WHERE order_id = 'r1'")).single().decode("id", as: Int64.self)
        try await a.engine.retryDelivery(id: id)
        try await eventually("sent again once the cause is gone") { !a.messages(token).isEmpty }
        try await running.stop()
        #expect(try await a.deliveries("r1") == ["android fcm update dead", "android fcm update sent"])
        await a.shutdown()
    }

    @Test func aMerchantWithoutAFirebaseProjectGetsADeadLetterSayingSo() async throws {
        let a = try await AndroidDeliveryHarness.make(merchants: [])
        let token = LocalFCMServer.registrationToken(13)
        let iphone = EngineFixture.token(131)
        try await a.androidOrder("n1", token: token)
        try await a.engine.registerActivityToken(orderID: "n1", deviceID: "iphone-n1", token: iphone)
        let running = a.start(a.configuration())
        _ = try await a.engine.advance("n1", to: "accept")
        try await eventually("the iPhone got the update") { a.h.pushes(iphone).contains { $0.event == "update" } }
        try await eventually("the Android message is recorded") { try await a.deliveries("n1").contains("android fcm update dead") }
        try await running.stop()
        #expect(a.fcm.messages().isEmpty && a.fcm.tokenRequestCount == 0)
        #expect(try await a.reasons("n1").contains { $0.contains("no Firebase project") && $0.contains("merchant set-fcm") })
        await a.shutdown()
    }

    @Test func senderIDMismatchHoldsBackOnlyItsMerchant() async throws {
        let a = try await AndroidDeliveryHarness.make(merchants: ["default", "bravo"])
        let bravo = try a.engine.forMerchant("bravo")
        _ = try await bravo.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        let alphaToken = LocalFCMServer.registrationToken(5)
        let bravoToken = LocalFCMServer.registrationToken(6)
        let bravoIPhone = EngineFixture.token(61)
        a.fcm.injectFault(.senderIDMismatch, token: alphaToken)
        let running = a.start(a.configuration { $0.pausedRetryInterval = .seconds(60) })

        try await a.androidOrder("a1", token: alphaToken)
        _ = try await a.engine.advance("a1", to: "accept")
        try await eventually("FCM refused merchant default's project") { a.fcm.rejections().count == 1 }

        try await a.androidOrder("b1", token: bravoToken, engine: bravo)
        try await bravo.registerActivityToken(orderID: "b1", deviceID: "iphone-b1", token: bravoIPhone)
        _ = try await bravo.advance("b1", to: "accept")
        _ = try await a.engine.advance("a1", to: "ready")
        try await eventually("merchant bravo's Android and iPhone pushes flow") {
            a.messages(bravoToken).contains { $0.data["state"] == "in_progress" } && !a.h.pushes(bravoIPhone).isEmpty
        }
        try await Task.sleep(for: .milliseconds(300))
        try await running.stop()
        #expect(a.fcm.rejections().count == 1, "merchant default is held back: not asked again")
        #expect(a.messages(alphaToken).isEmpty)
        #expect(try await a.h.pendingCommands("a1") > 0, "its orders wait in the queue")
        let state = try await a.pool.query(PostgresQuery(
            "SELECT merchant_id FROM merchants WHERE push_status = 'paused' ORDER BY 1")).map {
            try $0.decode("merchant_id", as: String.self)
        }
        #expect(state == ["default"], "recorded for `orderflow merchant list`")
        await a.shutdown()
    }

    @Test func aWorkerWithoutTheMasterKeySendsNothingToAndroidAndHoldsTheMerchant() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(7)
        try await a.androidOrder("o7", token: token)
        _ = try await a.engine.advance("o7", to: "accept")
        let wrongKey = MerchantApps(configuration: .init(masterKey: MasterKey(bytes: Data(repeating: 9, count: 32))),
                                    pool: a.pool, logger: a.h.logs.logger(label: "apps"))
        let running = RunningWorker(OrderFlowWorker(
            configuration: a.configuration(), pool: a.pool, sender: a.h.client, wakeSignal: a.engine.wakeSignal,
            logger: a.h.logs.logger(label: "worker"), apps: wrongKey), listener: nil)
        try await eventually("the merchant is held back") {
            try await a.pool.query(PostgresQuery("SELECT push_status = 'paused' AS held FROM merchants WHERE merchant_id = 'default'"))
                .single().decode("held", as: Bool.self)
        }
        try await running.stop()
        await wrongKey.shutdown()
        #expect(a.fcm.messages().isEmpty && a.fcm.tokenRequestCount == 0, "the sealed account was never opened")
        #expect(try await a.h.pendingCommands("o7") > 0)
        await a.shutdown()
    }

    @Test func oneAccessTokenServesTwoWorkersAndAnExpiredOneIsReplaced() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let first = LocalFCMServer.registrationToken(8)
        let second = LocalFCMServer.registrationToken(9)
        try await a.androidOrder("o8", token: first)
        let w1 = a.start(a.configuration("w1"))
        try await a.fcm.waitForMessages(count: 1)
        try await w1.stop()

        // Another worker (its own clients and caches) takes the stored token.
        try await a.androidOrder("o9", token: second)
        let w2 = a.start(a.configuration("w2"))
        try await eventually("the second worker sent") { !a.messages(second).isEmpty }
        #expect(a.fcm.tokenRequestCount == 1, "one exchange with the token endpoint for both workers")

        // FCM refuses the token before its time: one new exchange, and the message goes out.
        a.fcm.expireAccessTokens()
        _ = try await a.engine.advance("o9", to: "accept")
        try await eventually("the update went out with a new token") { a.messages(second).contains { $0.data["state"] == "in_progress" } }
        try await w2.stop()
        #expect(a.fcm.tokenRequestCount == 2)
        #expect(try await a.deliveries("o9").allSatisfy { $0.hasSuffix(" sent") })
        let stored = try await a.pool.query(PostgresQuery("SELECT count(*) AS n FROM fcm_access_tokens")).single()
        #expect(try stored.decode("n", as: Int.self) == 1)
        await a.shutdown()
    }

    @Test func theHistoryShowsEachTransitionsMessageAsItWasSent() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(10)
        try await a.androidOrder("o10", token: token)
        let running = a.start(a.configuration())
        try await a.fcm.waitForMessages(count: 1)
        for (count, target) in [(2, "accept"), (3, "ready"), (4, "dispatch")] {
            _ = try await a.engine.advance("o10", to: target, input: target == "dispatch" ? ["driver": "Mia", "eta": "+10m"] : [:])
            try await a.fcm.waitForMessages(count: count)
        }
        try await running.stop()

        let history = try await a.engine.history("o10")
        let sent = history.deliveries.filter { $0.platform == "android" && $0.outcome == .sent }.sorted { $0.id < $1.id }
        let messages = a.messages(token)
        #expect(sent.map(\.merged) == [1, 1, 1, 1] && messages.count == 4, "one transition per message")
        for (delivery, message) in zip(sent, messages) {
            let transition = try #require(history.transitions.first { $0.seq == delivery.seq })
            #expect(transition.android == message.data, "transition \(transition.seq): the history's message is the one FCM received")
            #expect(delivery.android == message.data, "delivery \(delivery.id): the history's message is the one FCM received")
        }
        // The workflow's `android:` overrides are in it: ready's colour and chip.
        let ready = try #require(history.transitions.first { $0.to == "ready" }?.android)
        #expect(ready["chip"] == "Ready" && ready["segments"] == "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3" && ready["progress"] == "200")
        // Another merchant reads no history of it.
        await #expect(throws: OrderFlowError.self) { try await a.engine.forMerchant("elsewhere").history("o10") }
        await a.shutdown()
    }

    @Test func theHistoryRendersAndroidMessagesOnlyForOrdersAnAndroidPhoneFollows() async throws {
        let a = try await AndroidDeliveryHarness.make()
        // Only an iPhone follows i11: no transition carries an Android message, and its JSON has no `android`.
        _ = try await a.engine.createOrder(NewOrder(orderID: "i11", workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": "i11", "itemCount": 1]))
        try await a.engine.registerActivityToken(orderID: "i11", deviceID: "iphone-i11", token: EngineFixture.token(111))
        _ = try await a.engine.advance("i11", to: "accept")
        let ios = try await a.engine.history("i11")
        #expect(ios.transitions.count == 2 && ios.transitions.allSatisfy { $0.android == nil })
        let workflow = try await a.engine.workflow(of: ios.order)
        let json = String(decoding: try JSONEncoder().encode(ios.transitions.map { $0.readable(in: workflow) }), as: UTF8.self)
        #expect(!json.contains("\"android\"") && json.contains("\"aps\""), "\(json)")

        // An Android phone follows a11, nothing sent to it yet (no worker runs): each transition
        // carries the message it renders, the one the worker sends for it alone.
        try await a.androidOrder("a11", token: LocalFCMServer.registrationToken(11))
        _ = try await a.engine.advance("a11", to: "accept")
        let android = try await a.engine.history("a11")
        #expect(android.deliveries.isEmpty && android.transitions.count == 2)
        for (index, transition) in android.transitions.enumerated() {
            let expected = OrderFlowEngine.android(of: transition, after: index > 0 ? android.transitions[index - 1] : nil,
                                                   order: android.order, workflow: workflow)
            #expect(transition.android != nil && transition.android == expected, "transition \(transition.seq)")
        }
        // It stops following, having been sent nothing: the history is an iPhone-only order's again.
        try await a.engine.unfollow(orderID: "a11", deviceID: "pixel-a11")
        #expect(try await a.engine.history("a11").transitions.allSatisfy { $0.android == nil })
        await a.shutdown()
    }
}
