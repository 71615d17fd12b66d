import Foundation
import LocalFCM
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import TestTags
import Testing

/// The Android side's pacing: a burst merged into one message, the end last and nothing after
/// it, and FCM's `Retry-After` honoured. Measures elapsed time, so it runs in the timing group.
@Suite("Timing: Android followers' merge and backoff", .serialized, .tags(.timing))
struct TimingAndroidDeliveryTests {
    @Test func aBurstIsOneMessageWithTheNewestStateAndTheEndIsLast() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(11)
        try await a.androidOrder("b1", token: token)
        let running = a.start(a.configuration { $0.minimumPushInterval = .seconds(1) })
        try await eventually("the first message") { a.messages(token).count == 1 }

        // Inside one interval: merged into the next message, the end's.
        _ = try await a.engine.advance("b1", to: "accept")
        _ = try await a.engine.advance("b1", to: "ready")
        _ = try await a.engine.advance("b1", to: "dispatch", input: ["eta": "+15m", "driver": "Sam"])
        _ = try await a.engine.advance("b1", to: "deliver")
        try await eventually("the end") { a.messages(token).count == 2 }

        // Nothing after the end, whatever asks for the order again.
        try await a.engine.follow(orderID: "b1", deviceID: "pixel-b1")
        try await a.engine.registerFCMToken(deviceID: "pixel-b1", token: token)
        try await Task.sleep(for: .milliseconds(1500))
        try await running.stop()

        let messages = a.messages(token)
        #expect(messages.count == 2, "four transitions, one message")
        let end = try #require(messages.last)
        #expect(end.data["event"] == "end" && end.data["state"] == "delivered")
        #expect(end.data["dismiss"] != nil, "the app is told how to take the notification down")
        #expect(end.receivedAt.timeIntervalSince(messages[0].receivedAt) >= 0.99, "at most one message per second")
        let merged = try await a.pool.query(PostgresQuery(
            "SELECT merged FROM deliveries WHERE order_id = 'b1' AND platform = 'android' ORDER BY id DESC LIMIT 1"))
            .single().decode("merged", as: Int.self)
        #expect(merged == 4)
        // The history shows each Android delivery's message as FCM received it, the merged one too.
        let sent = try await a.engine.history("b1").deliveries.filter { $0.platform == "android" && $0.outcome == .sent }
            .sorted { $0.id < $1.id }
        #expect(sent.map(\.android) == messages.map { Optional($0.data) })
        await a.shutdown()
    }

    @Test func quotaExceededWaitsForRetryAfterThenSends() async throws {
        let a = try await AndroidDeliveryHarness.make()
        let token = LocalFCMServer.registrationToken(12)
        a.fcm.injectFault(.quotaExceeded(retryAfter: 1), token: token, count: 1)
        try await a.androidOrder("q1", token: token)
        let running = a.start(a.configuration())
        try await eventually("the message went out after the refusal") { !a.messages(token).isEmpty }
        try await running.stop()
        #expect(try await a.deliveries("q1") == ["android fcm update retry", "android fcm update sent"])
        let times = try await a.pool.query(PostgresQuery(
            "SELECT extract(epoch FROM attempted_at)::float8 AS t FROM deliveries WHERE order_id = 'q1' ORDER BY id"))
            .map { try $0.decode("t", as: Double.self) }
        #expect(times[1] - times[0] >= 0.99, "FCM's Retry-After (1 s) honoured, not the worker's shorter backoff")
        #expect(try await a.reasons("q1")[0].contains("QUOTA_EXCEEDED"))
        await a.shutdown()
    }
}
