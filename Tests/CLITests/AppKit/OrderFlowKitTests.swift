import Foundation
import LocalAPNS
import OrderFlow
import OrderFlowKit
import TestTags
import Testing

/// OrderFlowKit against `orderflow serve` with its worker and the APNs stand-in, launch after
/// launch through a scripted activity source: what reaches the server, and what the phone gets.
@Suite("OrderFlowKit against orderflow serve", .serialized, .tags(.kit))
struct OrderFlowKitTests {
    @Test("registers once, a push-started activity's token arrives at the next launch, offline tokens are kept, dismissal stops pushes")
    func launches() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "kit")
        let serve = try setup.cli.start(["serve", "--port", "0"] + setup.workerArguments.dropFirst(2))
        let port = try #require(try await HTTPWalkthroughTests.port(of: serve), "serve never said where it listens")
        let api = try #require(URL(string: "http://127.0.0.1:\(port)/v1"))
        let store = FileStore(url: setup.cli.directory.appendingPathComponent("kit-state.json"))
        let retry = RetryPolicy(attempts: 2, initialDelay: .milliseconds(50))
        _ = try await setup.engine.createOrder(NewOrder(orderID: "K1", workflow: "food-order",
            attributes: ["merchantName": "Kit Kitchen", "orderNumber": "K1", "itemCount": 1]))
        let secret = try await setup.engine.clientSecret(forOrder: "K1")

        // First launch: registers, follows, forwards its push-to-start token; the server push-starts.
        let first = OrderFlowKit.connect(api: api, activities: ScriptedActivities(pushToStart: .token(0xA1), existing: []), store: store, retry: retry)
        await first.follow(order: "K1", clientSecret: secret)
        try await eventually { await first.pendingCalls == 0 && setup.apns.pushes(forToken: Data.token(0xA1).hex).count == 1 }
        let device = try #require(await first.device)
        await first.disconnect()

        // The activity started while the app was not running: the next launch sends its token.
        let started = ScriptedActivity(id: "act-1", token: .token(0xB2))
        let second = OrderFlowKit.connect(api: api, activities: ScriptedActivities(pushToStart: .token(0xA1), existing: [started]), store: store, retry: retry)
        try await eventually { await second.pendingCalls == 0 }
        #expect(await second.device == device, "registered once, the credential reused")
        _ = try await setup.engine.advance("K1", to: "accept")
        try await eventually { setup.apns.pushes(forToken: Data.token(0xB2).hex).count == 1 }
        await second.disconnect()

        // Offline: the rotated token is queued in the store, then sent at the next launch.
        let rotated = ScriptedActivity(id: "act-1", token: .token(0xC3))
        let offline = OrderFlowKit.connect(api: try #require(URL(string: "http://127.0.0.1:1/v1")),
            activities: ScriptedActivities(pushToStart: .token(0xA1), existing: [rotated]), store: store, retry: retry)
        try await eventually { await offline.pendingCalls == 1 }
        await offline.disconnect()
        let again = ScriptedActivity(id: "act-1", token: .token(0xC3))
        let third = OrderFlowKit.connect(api: api, activities: ScriptedActivities(pushToStart: .token(0xA1), existing: [again]), store: store, retry: retry)
        try await eventually { await third.pendingCalls == 0 }
        _ = try await setup.engine.advance("K1", to: "ready")
        try await eventually { setup.apns.pushes(forToken: Data.token(0xC3).hex).count == 1 }

        // Dismissed: nothing more is pushed to it.
        again.states.yield(.dismissed)
        try await eventually { await third.pendingCalls == 0 }
        try await eventually { try await setup.engine.order("K1").activities.first?.appState == "dismissed" }
        _ = try await setup.engine.advance("K1", to: "dispatch", input: ["eta": "+10m", "driver": "Kim"])
        try await setup.waitUntilDrained(timeout: .seconds(10))
        #expect(setup.apns.pushes(forToken: Data.token(0xC3).hex).count == 1, "no push after dismissal")
        let problems = await third.problems
        #expect(problems.isEmpty, "\(problems)")
        #expect(setup.apns.pushes(forToken: Data.token(0xA1).hex).count == 1, "push-started once, its token sent once")
        await third.disconnect()
        serve.interrupt()
        _ = try await serve.finish()
        try await setup.shutdown()
    }

    private func eventually(timeout: Duration = .seconds(20), _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("the condition never held within \(timeout)")
    }
}
