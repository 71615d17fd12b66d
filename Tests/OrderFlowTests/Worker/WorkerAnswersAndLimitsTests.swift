import APNS
import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// What the worker does with APNs' answers (a dead token, server errors, a configuration error),
/// a device with only an alert token, and activities near the system's time limit.
extension WorkerIntegrationTests {
    @Test func anActivityNearTheTimeLimitIsRestartedWhenTheWorkflowSaysSo() async throws {
        let h = try await WorkerHarness.make()
        let yaml = try EngineFixture.shippedWorkflow("food-order").replacingOccurrences(of: "on-time-limit: end", with: "on-time-limit: restart")
        _ = try await h.engine.applyWorkflow(yaml: yaml, file: "food-order.yaml")
        let running = h.start(h.configuration {
            $0.activityLifetime = .seconds(4)
            $0.timeLimitMargin = .seconds(2)
            $0.timeLimitCheckInterval = .milliseconds(100)
        })
        let startToken = EngineFixture.token(13)
        let oldToken = EngineFixture.token(14)
        try await h.engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttributes", token: startToken)
        try await h.createFoodOrder("88")
        _ = try await h.engine.advance("88", to: "accept")
        try await h.engine.registerActivityToken(orderID: "88", deviceID: "phone", token: oldToken)
        // The app-started activity catches up with an update, unless the worker first sees it
        // past the time limit (2 s after the token, on a loaded machine): then the end comes first.
        let first = try await h.apns.waitForPushes(count: 1)[0]
        #expect(first.deviceToken == oldToken)
        let endIndex = first.event == "update" ? 1 : 0
        let pushes = try await h.apns.waitForPushes(count: endIndex + 2, timeout: .seconds(10))
        try await eventually("the restart is recorded") { try await h.activity("88", "phone").status == "starting" }
        try await running.stop()
        let (end, restart) = (pushes[endIndex], pushes[endIndex + 1])
        #expect(end.deviceToken == oldToken)
        #expect(end.event == "end")
        #expect(end.aps?["dismissal-date"]?.integerValue != nil, "the old activity leaves at once")
        #expect(restart.deviceToken == startToken)
        #expect(restart.event == "start")
        #expect(restart.content?["status"]?.stringValue == "preparing", "the new activity shows the current state")
        let activity = try await h.activity("88", "phone")
        #expect(activity.updateToken == nil, "the old activity's token is dropped")
        // One end and one start; the new activity (no token reported) is itself restarted only
        // at its own limit, 2 s later, which a slow test may reach before it stops the worker.
        let restartsTooSoon = h.apns.pushes().dropFirst(endIndex + 2)
            .filter { $0.receivedAt < restart.receivedAt.addingTimeInterval(1.9) }
        #expect(restartsTooSoon.isEmpty, "no second restart before the new activity's limit")
        await h.shutdown()
    }

    @Test func aDeadTokenIsMarkedAndNeverSentAgain() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let token = EngineFixture.token(4)
        h.apns.injectFault(.unregistered(), deviceToken: token)
        try await h.createTicker("t2", activityToken: token)
        try await eventually("APNs refused the push") { h.apns.rejectedCount == 1 }
        try await eventually("the token is marked dead") { try await h.activity("t2", "phone").status == "gone" }
        #expect(try await h.activity("t2", "phone").updateToken == nil)

        for step in 1...3 { _ = try await h.engine.advance("t2", to: "s\(step)") }
        try await eventually("the transitions are handled") { try await h.pendingCommands("t2") == 0 }
        try await Task.sleep(for: .milliseconds(100))
        try await running.stop()
        #expect(h.apns.rejectedCount == 1, "nothing more was sent to the dead token")
        #expect(h.apns.acceptedCount == 0)
        #expect(try await h.outcomes("t2") == ["token_dead"])
        await h.shutdown()
    }

    @Test func serverErrorsAreRetriedWithBackoffThenDeadLettered() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration { $0.maximumAttempts = 3 })
        let token = EngineFixture.token(6)
        h.apns.injectFault(.internalServerError, deviceToken: token)
        try await h.createTicker("t4", activityToken: token)
        try await eventually("three attempts") { try await h.outcomes("t4").count == 3 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await h.outcomes("t4") == ["retry", "retry", "dead"])
        #expect(h.apns.rejectedCount == 3, "no attempt after the dead letter")
        #expect(try await h.pendingCommands("t4") == 0)
        let gaps = zip(h.apns.rejections(), h.apns.rejections().dropFirst()).map { $1.receivedAt.timeIntervalSince($0.receivedAt) }
        #expect(gaps.allSatisfy { $0 >= 0.009 }, "backed off between attempts: \(gaps)")

        // An operator re-queues the dead letter once APNs is back.
        let dead = try await h.engine.deliveries(failedOnly: true)
        #expect(dead.count == 1)
        h.apns.clearFaults()
        try await h.engine.retryDelivery(id: dead[0].id)
        let delivered = try await h.apns.waitForPushes(count: 1)[0]
        try await running.stop()
        #expect(delivered.content?["step"]?.integerValue == 0)
        #expect(try await h.outcomes("t4") == ["retry", "retry", "dead", "sent"])
        #expect(try await h.engine.deliveries(failedOnly: true).isEmpty)
        await h.shutdown()
    }

    @Test func aDeviceWithOnlyAnAlertTokenGetsOrdinaryAlerts() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let token = EngineFixture.token(8)
        try await h.engine.registerDeviceToken(deviceID: "old-phone", token: token)
        try await h.createFoodOrder("77")
        try await h.engine.follow(orderID: "77", deviceID: "old-phone")
        _ = try await h.engine.advance("77", to: "accept")  // no alert: nothing to send
        _ = try await h.engine.advance("77", to: "ready")
        let alert = try await h.apns.waitForPushes(count: 1)[0]
        _ = try await h.engine.advance("77", to: "pickup")  // no alert either
        try await eventually("handled") { try await h.pendingCommands("77") == 0 }
        try await Task.sleep(for: .milliseconds(100))
        try await running.stop()

        #expect(h.apns.acceptedCount == 1)
        #expect(alert.deviceToken == token)
        #expect(alert.pushType == "alert")
        #expect(alert.topic == WorkerHarness.bundleID)
        #expect(alert.alertTitle == "Order 77 is ready")
        #expect(alert.payload["orderID"]?.stringValue == "77")
        #expect(alert.event == nil)
        let activity = try await h.activity("77", "old-phone")
        #expect(activity.status == "alerts")
        #expect(activity.lastAlertSeq == 3)
        await h.shutdown()
    }

    @Test func aConfigurationErrorPausesSendingWithOneLogLine() async throws {
        let h = try await WorkerHarness.make()
        h.apns.injectFault(.init(status: 400, reason: "DeviceTokenNotForTopic"))
        let running = h.start(h.configuration {
            $0.pausedRetryInterval = .milliseconds(800)
            $0.concurrentSends = 1
            $0.concurrentBatches = 1
        })
        for index in 0..<5 {
            try await h.createTicker("p\(index)", activityToken: EngineFixture.token(40 + index))
        }
        try await eventually("APNs refused") { h.apns.rejectedCount >= 1 }
        try await Task.sleep(for: .milliseconds(300))
        // Sending stopped after the error: nothing more reached APNs before the pause's 800 ms
        // were over (timed by the stand-in, so a slow test cannot mistake the retry after the
        // pause for sending on).
        let rejections = h.apns.rejections()
        let pauseEnds = rejections[0].receivedAt.addingTimeInterval(0.8)
        let duringPause = rejections.dropFirst().filter { $0.receivedAt < pauseEnds }
        #expect(duringPause.isEmpty, "sending stopped after the error (\(rejections.count) refused)")
        let errors = h.logs.records.filter { $0.level == .error }
        #expect(errors.count == 1, "one loud line: \(errors.map(\.message))")
        #expect(errors.first?.message.contains("paused") == true)
        #expect(errors.first?.message.contains("bundle id") == true, "says what to fix: \(errors.first?.message ?? "")")
        #expect(try await h.ordersWithPendingCommands() == 5, "the commands stay queued")

        // Fixed: after the pause, everything goes out.
        h.apns.clearFaults()
        try await h.apns.waitForPushes(count: 5, timeout: .seconds(5))
        try await running.stop()
        #expect(try await h.pendingCommands() == 0)
        await h.shutdown()
    }

    @Test func anActivityNearTheTimeLimitIsEnded() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration {
            $0.activityLifetime = .seconds(4)
            $0.timeLimitMargin = .seconds(2)
            $0.timeLimitCheckInterval = .milliseconds(100)
        })
        let token = EngineFixture.token(9)
        try await h.createTicker("t6", activityToken: token)
        // The activity catches up with an update, unless the worker first sees it past the time
        // limit (2 s after the token, on a loaded machine): then the end is the only push.
        let endIndex = try await h.apns.waitForPushes(count: 1)[0].event == "update" ? 1 : 0
        let end = try await h.apns.waitForPushes(count: endIndex + 1, timeout: .seconds(10))[endIndex]
        try await running.stop()
        #expect(end.event == "end")
        #expect(end.content?["step"]?.integerValue == 0)
        #expect(try await h.activity("t6", "phone").status == "ended")
        _ = try await h.engine.advance("t6", to: "s1")
        #expect(h.pushes(token).count == endIndex + 1)
        await h.shutdown()
    }
}
