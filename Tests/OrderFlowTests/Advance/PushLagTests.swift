import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// Advances admitted by how far the worker in the process runs behind them
/// (`OrderFlowConfiguration.pushLagTarget`).
@Suite("Advances refused while the worker's pushes run behind")
struct PushLagTests {
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func aBurstIsAdmittedAStandingLagIsRefusedUntilAClaimIsFreshAgain() throws {
        let lag = PushLag(target: .milliseconds(50))
        lag.claimed(oldestAge: 0.01, at: at(0))
        #expect(lag.refusal(at: at(1)) == nil, "keeping up")
        lag.claimed(oldestAge: 0.4, at: at(10))
        #expect(lag.refusal(at: at(60)) == nil, "behind for less than the interval: a burst")
        lag.claimed(oldestAge: 0.6, at: at(90))
        let refusal = try #require(lag.refusal(at: at(120)), "behind for the whole interval")
        #expect(refusal.isBusy && refusal.code == .busy)
        #expect(refusal.message == "busy: this server's pushes run 600 ms behind its advances, more than the 50 ms it keeps them to; nothing was written")
        #expect(refusal.retryAfter == .milliseconds(600))
        lag.claimed(oldestAge: 0.03, at: at(200))
        #expect(lag.refusal(at: at(201)) == nil, "a claim of fresh commands: caught up")
        lag.claimed(oldestAge: 0, at: at(300))
        #expect(lag.refusal(at: at(500)) == nil, "a claim that found nothing")
    }

    @Test func aWorkerThatStoppedClaimingRefusesNothing() {
        let lag = PushLag(target: .milliseconds(50))
        lag.claimed(oldestAge: 2, at: at(0))
        lag.claimed(oldestAge: 2, at: at(150))
        #expect(lag.refusal(at: at(200)) != nil)
        #expect(lag.refusal(at: at(1200)) == nil, "no claim for a second: the lag is unknown")
    }

    /// The engine refuses before writing anything, and advances again once the worker caught up;
    /// without a target nothing is ever refused for the lag.
    @Test func theEngineRefusesAndWritesNothingWhileBehind() async throws {
        let fixture = try await EngineFixture.make()
        _ = try await fixture.createFoodOrder("lag-1")
        var configuration = OrderFlowConfiguration(database: fixture.database, maximumConnections: 2)
        configuration.pushLagTarget = .milliseconds(50)
        let engine = OrderFlowEngine(configuration: configuration)
        let lag = try #require(engine.wakeSignal.pushLag)
        #expect(fixture.engine.wakeSignal.pushLag == nil, "off by default")

        lag.claimed(oldestAge: 3, at: .now - .milliseconds(500))
        lag.claimed(oldestAge: 3)
        await #expect { try await engine.advance("lag-1", to: "accept", input: ["eta": "+20m"]) } throws: { error in
            (error as? OrderFlowError)?.isBusy == true
        }
        // The scoped engines of merchants share it.
        #expect(try engine.forMerchant("other").wakeSignal.pushLag === lag)
        #expect(try await fixture.engine.order("lag-1").order.state == "received", "nothing written")

        lag.claimed(oldestAge: 0)
        let result = try await engine.advance("lag-1", to: "accept", input: ["eta": "+20m"])
        #expect(result.order.state == "in_progress")
        await engine.shutdown()
        await fixture.shutdown()
    }

    /// A claim says how long each command it took had been due: the lag the worker reports.
    @Test func aClaimSaysHowLongItsCommandsWaited() async throws {
        let fixture = try await EngineFixture.make()
        _ = try await fixture.createFoodOrder("late-1")
        try await fixture.engine.pool.query(PostgresQuery(
            "UPDATE activity_commands SET available_at = now() - interval '3 seconds' WHERE order_id = 'late-1'"))
        let claimed = try await OutboxStore(pool: fixture.engine.pool).claim(
            workerID: "w", limit: 10, lease: .seconds(30), merchants: .all, maximumTransitions: 10)
        let ages = claimed.orders.flatMap(\.commands).compactMap(\.age)
        #expect(!ages.isEmpty && ages.allSatisfy { $0 >= 3 && $0 < 30 }, "\(ages)")
        await fixture.shutdown()
    }
}
