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

    /// The worker claims 100 commands every 50 ms (2,000 a second) from `from` to `to`, each
    /// claim's oldest `age` seconds late.
    func claims(_ lag: PushLag, from: Int, to: Int, age: Double, commands: Int = 100) {
        for time in stride(from: from, to: to, by: 50) { lag.claimed(commands: commands, oldestAge: age, at: at(time)) }
    }

    /// Advances asked `perMillisecond` a millisecond from `from` to `to`: how many were admitted.
    func admitted(_ lag: PushLag, from: Int, to: Int, perMillisecond: Int = 2) -> Int {
        var admitted = 0
        for time in from..<to {
            for _ in 0..<perMillisecond where lag.refusal(at: at(time)) == nil { admitted += 1 }
        }
        return admitted
    }

    @Test func aStandingLagPacesAdvancesToHalfTheWorkersPaceAndABurstDoesNot() throws {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 500, age: 0.01)
        #expect(admitted(lag, from: 500, to: 600) == 200, "keeping up: everything admitted")
        claims(lag, from: 600, to: 660, age: 0.15)
        #expect(admitted(lag, from: 660, to: 700) == 80, "behind for less than the interval: a burst, admitted")
        claims(lag, from: 700, to: 760, age: 0.6)
        // Paced at half the worker's 2,000 a second: about 100 of the 200 asked in 100 ms, and
        // the 50 ms of them it may take at once.
        let paced = admitted(lag, from: 760, to: 860)
        #expect((80...160).contains(paced), "\(paced)")
        while lag.refusal(at: at(860)) == nil {}
        let refusal = try #require(lag.refusal(at: at(860)))
        #expect(refusal.isBusy && refusal.code == .busy)
        #expect(refusal.message.hasPrefix("busy: this server's pushes run 600 ms behind its advances (it keeps them within 50 ms), and it takes about "), "\(refusal.message)")
        #expect(refusal.message.hasSuffix(" advances a second until they catch up; nothing was written"))
        #expect(refusal.retryAfter == .milliseconds(600))
        // Still behind an interval later: halved again.
        claims(lag, from: 860, to: 960, age: 0.5)
        let halved = admitted(lag, from: 960, to: 1060)
        #expect(halved < paced * 3 / 4, "\(halved) after \(paced)")
        // Caught up, then nothing more to send: every advance admitted again.
        claims(lag, from: 1060, to: 1200, age: 0.01)
        claims(lag, from: 1200, to: 2400, age: 0, commands: 0)
        #expect(admitted(lag, from: 2400, to: 2450) == 100)
    }

    /// A lag far beyond the target (``PushLag/farBehind`` targets) is paced at its first claim:
    /// a burst that puts the pushes that far behind is not one to ride out.
    @Test func aLagFarBehindIsPacedAtOnce() {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 500, age: 0.01)
        lag.claimed(commands: 100, oldestAge: 0.25, at: at(500))
        let paced = admitted(lag, from: 500, to: 600)
        #expect((80...160).contains(paced), "paced at about half the worker's 2,000 a second at once: \(paced) of 200")
    }

    /// Raised while the worker keeps up by a step fixed at half the worker's highest pace lately,
    /// not by half of what it is given (which would compound): 0.95 s after being halved to
    /// 1,000 a second, about 1,950.
    @Test func thePaceRisesByAFixedStep() {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 500, age: 0.01)
        claims(lag, from: 500, to: 620, age: 0.6)  // paced: 1,000 a second
        // Keeping up with what it is given, a tenth of its pace before: a step of half its pace
        // of the moment would have raised the rate to about 1,200 a second by now.
        claims(lag, from: 620, to: 1500, age: 0.01, commands: 10)
        _ = admitted(lag, from: 1500, to: 1550, perMillisecond: 4)  // what it may take at once
        let raised = admitted(lag, from: 1550, to: 1600, perMillisecond: 4)
        #expect((80...120).contains(raised), "about 1,950 a second: \(raised) in 50 ms")
    }

    @Test func aWorkerThatStoppedClaimingRefusesNothing() {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 300, age: 2)
        #expect(admitted(lag, from: 300, to: 400) < 150)
        #expect(admitted(lag, from: 1300, to: 1310) == 20, "no claim for a second: the lag is unknown")
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

        // A worker 3 s behind that sends one command in 50 ms: paced at the minimum, 10 a second.
        for back in stride(from: 500, through: 0, by: -50) { lag.claimed(commands: 1, oldestAge: 3, at: .now - .milliseconds(back)) }
        while lag.refusal() == nil {}  // the one advance its first instant admits
        await #expect { try await engine.advance("lag-1", to: "accept", input: ["eta": "+20m"]) } throws: { error in
            (error as? OrderFlowError)?.isBusy == true
        }
        // The scoped engines of merchants share it.
        #expect(try engine.forMerchant("other").wakeSignal.pushLag === lag)
        #expect(try await fixture.engine.order("lag-1").order.state == "received", "nothing written")

        // Once the worker has caught up (the lag told by no claim for a second, here) it advances.
        try await Task.sleep(for: .milliseconds(1100))
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
