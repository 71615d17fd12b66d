import APNS
import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import TestTags
import Testing
import WorkflowKit

/// The worker's latency and pacing, measured against a real PostgreSQL and the local APNs
/// stand-in. Timing-sensitive: `scripts/test` runs suites named "Timing" after the rest.
@Suite("Timing: worker latency and pacing", .tags(.timing), .serialized)
struct TimingWorkerTests {
    @Test func tenTransitionsWithinASecondBecomeOnePush() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration { $0.minimumPushInterval = .seconds(1) })
        let token = EngineFixture.token(3)
        try await h.createTicker("t1", activityToken: token)
        let first = try await h.apns.waitForPushes(count: 1)[0]
        #expect(first.content?["step"]?.integerValue == 0)
        #expect(first.alertTitle == nil)

        let burstStarted = ContinuousClock.now
        for step in 1...10 {
            _ = try await h.engine.advance("t1", to: "s\(step)")
        }
        #expect(ContinuousClock.now - burstStarted < .seconds(1), "the burst fits in the rate-limit window")
        let merged = try await h.apns.waitForPushes(count: 2)[1]
        try await Task.sleep(for: .milliseconds(1300))
        try await running.stop()

        #expect(h.pushes(token).count == 2, "ten transitions, one push")
        #expect(merged.content?["step"]?.integerValue == 10, "the newest content")
        #expect(merged.alertTitle == "Step 8", "the newest alert among the merged transitions")
        #expect(merged.priority == 10)
        #expect(merged.receivedAt.timeIntervalSince(first.receivedAt) >= 0.99, "at most one push per second")
        let mergedCount = try await h.pool.query(PostgresQuery(
            "SELECT merged FROM deliveries WHERE order_id = 't1' ORDER BY id DESC LIMIT 1")).single().decode("merged", as: Int.self)
        #expect(mergedCount == 10)
        await h.shutdown()
    }

    @Test func aThrottledDeviceGetsOnlyTheLatestStateAfterBackingOff() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration {
            $0.backoffBase = .milliseconds(400)
            $0.backoffCap = .milliseconds(400)
        })
        let token = EngineFixture.token(5)
        try await h.createTicker("t3", activityToken: token)
        try await h.apns.waitForPushes(count: 1)

        h.apns.injectFault(.tooManyRequests, deviceToken: token, count: 1)
        _ = try await h.engine.advance("t3", to: "s1")
        try await eventually("APNs throttled the push") { h.apns.rejectedCount == 1 }
        _ = try await h.engine.advance("t3", to: "s2")
        _ = try await h.engine.advance("t3", to: "s3")
        let latest = try await h.apns.waitForPushes(count: 2)[1]
        let backedOff = latest.receivedAt.timeIntervalSince(h.apns.rejections()[0].receivedAt)
        try await Task.sleep(for: .milliseconds(200))
        try await running.stop()

        #expect(backedOff >= 0.19, "waited for the backoff (\(backedOff) s)")
        #expect(latest.content?["step"]?.integerValue == 3, "only the latest state")
        #expect(h.pushes(token).count == 2)
        #expect(try await h.outcomes("t3") == ["sent", "retry", "sent"])
        #expect(try await h.activity("t3", "phone").failures == 0)
        await h.shutdown()
    }

    @Test func commitToPushLatencyIsMilliseconds() async throws {
        let h = try await WorkerHarness.make()
        var report: [String] = []
        // In-process signal, LISTEN from another process's engine, and polling alone.
        let listener = PostgresListener(configuration: h.fixture.database, channels: [OrderFlowEngine.wakeChannel])
        let remoteEngine = OrderFlowEngine(configuration: .init(database: h.fixture.database))
        for (mode, inProcess, useListener) in [("in-process", true, false), ("listen", false, true), ("poll", false, false)] {
            let running = h.start(h.configuration("lat-\(mode)"), inProcessWake: inProcess, listener: useListener ? listener : nil)
            let engine = inProcess ? h.engine : remoteEngine
            let id = "lat-\(mode)"
            try await h.createTicker(id, activityToken: EngineFixture.token(mode.count))
            try await eventually("caught up") { h.pushes(EngineFixture.token(mode.count)).count == 1 }
            var latencies: [Double] = []
            for step in 1...10 {
                try await Task.sleep(for: .milliseconds(300))  // idle: the poll interval is at its longest
                let before = h.apns.acceptedCount
                let advanced = try await engine.advance(id, to: "s\(step)")
                let push = try await h.apns.waitForPushes(count: before + 1)
                    .last { $0.deviceToken == EngineFixture.token(mode.count) }
                if let push { latencies.append(push.receivedAt.timeIntervalSince(advanced.transition.occurredAt) * 1000) }
            }
            try await running.stop()
            latencies.sort()
            let median = latencies[latencies.count / 2]
            report.append("\(mode): median \(String(format: "%.1f", median)) ms, max \(String(format: "%.1f", latencies.last ?? 0)) ms")
            switch mode {
            case "poll": #expect(median < 300, "polling alone bounds the latency by the idle poll")
            default: #expect(median < 100, "\(mode) wakes the worker at once: \(latencies)")
            }
        }
        await remoteEngine.shutdown()
        print("commit → push latency: " + report.joined(separator: "; "))
        await h.shutdown()
    }
}
