import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// One merchant rule: a worker serves a declared set of merchants, every merchant by default,
/// for pushes and timers alike. Two merchants in one database.
@Suite("Merchant scope: pushes and timers", .serialized)
struct MerchantScopeTests {
    @Test("a worker scoped to one merchant never claims another's commands; one for all claims both")
    func workerClaimsOnlyItsMerchants() async throws {
        let h = try await WorkerHarness.make()
        let other = try h.engine.forMerchant("other-merchant")
        _ = try await other.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        let ours = EngineFixture.token(31)
        let theirs = EngineFixture.token(32)
        try await h.createFoodOrder("M1")
        try await h.engine.registerActivityToken(orderID: "M1", deviceID: "ours", token: ours)
        _ = try await other.createOrder(NewOrder(
            orderID: "M1", workflow: "food-order", attributes: ["merchantName": "Other", "orderNumber": "M1", "itemCount": 1]))
        try await other.registerActivityToken(orderID: "M1", deviceID: "theirs", token: theirs)

        let scoped = h.start(h.configuration("scoped") { $0.merchants = .only([h.engine.configuration.merchantID]) })
        try await eventually("our order's update is sent") { !h.pushes(ours).isEmpty }
        try await Task.sleep(for: .milliseconds(300))
        #expect(h.pushes(theirs).isEmpty, "the scoped worker sent another merchant's push")
        #expect(try await h.pendingCommands("M1") > 0, "the other merchant's commands are still queued")
        try await scoped.stop()

        let everyone = h.start(h.configuration("everyone"))
        try await eventually("the other merchant's update is sent") { !h.pushes(theirs).isEmpty }
        try await everyone.stop()
        #expect(try await h.pendingCommands() == 0)
        await h.shutdown()
    }

    @Test("timers fire for every merchant in scope, and for no other")
    func timersFollowTheScope() async throws {
        let fixture = try await EngineFixture.make()
        let other = try fixture.engine.forMerchant("other-merchant")
        _ = try await other.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        for engine in [fixture.engine, other] {
            for id in ["T1", "T2"] {
                _ = try await engine.createOrder(NewOrder(
                    orderID: id, workflow: "food-order", attributes: ["merchantName": "M", "orderNumber": .string(id), "itemCount": 1]))
                _ = try await engine.advance(id, to: "in_progress")
                _ = try await engine.advance(id, to: "ready")
            }
        }
        let late = Date().addingTimeInterval(46 * 60)
        let mine = fixture.engine.configuration.merchantID
        #expect(try await fixture.engine.fireDueTimers(for: .only([mine]), now: late) == 2)
        #expect(try await other.order("T1").order.state == "ready", "another merchant's timer fired")
        #expect(try await fixture.engine.fireDueTimers(for: .all, now: late) == 2, "the other merchant's two, ours already fired")
        #expect(try await other.order("T1").order.state == "cancelled")
        #expect(try await fixture.engine.fireDueTimers(for: .all, now: late) == 0, "each fires once")
        await fixture.shutdown()
    }
}
