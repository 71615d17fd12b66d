import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// Advances admitted by the work they would find ahead of them in the worker of the process
/// (`OrderFlowConfiguration.pushLagTarget`).
@Suite("Advances refused while the worker has more than the target's worth ahead")
struct PushLagTests {
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    /// The worker claims `commands` commands every 50 ms from `from` to `to` (2,000 a second
    /// by default), each claim short of a full batch unless `full`.
    func claims(_ lag: PushLag, from: Int, to: Int, commands: Int = 100, full: Bool = false) {
        for time in stride(from: from, to: to, by: 50) { lag.claimed(commands: commands, full: full, at: at(time)) }
    }

    /// `count` advances asked at `time`: how many were admitted (and committed, when `commit`).
    func admitted(_ lag: PushLag, count: Int, at time: Int, commit: Bool = true) -> Int {
        var admitted = 0
        for _ in 0..<count {
            guard let counted = try? lag.admit(at: at(time)) else { continue }
            admitted += 1
            if counted, commit { lag.committed() }
        }
        return admitted
    }

    /// A worker taking 2,000 commands a second with a 50 ms target: 100 commands' worth ahead
    /// at most. Advances beyond are refused at once, saying how much waits.
    @Test func advancesBeyondTheTargetsWorthOfWorkAreRefused() throws {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 1000)
        #expect(admitted(lag, count: 100, at: 1000) == 100)
        let refusal = try #require(throws: OrderFlowError.self) { try lag.admit(at: at(1000)) }
        #expect(refusal.isBusy && refusal.code == .busy)
        #expect(refusal.message == "busy: this server's worker has 100 pushes to send before this advance's, "
            + "more than it sends in 50 ms (2000 a second lately); nothing was written; retry shortly", "\(refusal.message)")
        #expect(refusal.retryAfter == .milliseconds(100))
        // Admitted ones not yet committed count as well.
        let other = PushLag(target: .milliseconds(50))
        claims(other, from: 0, to: 1000)
        #expect(admitted(other, count: 150, at: 1000, commit: false) == 100)
    }

    /// A full claim takes its commands off what waits; one short of a full batch found the
    /// queue empty.
    @Test func claimsMakeRoom() {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 1000)
        #expect(admitted(lag, count: 200, at: 1000) == 100)
        lag.claimed(commands: 30, full: true, at: at(1010))
        let afterFull = admitted(lag, count: 200, at: 1010)
        #expect((26...31).contains(afterFull), "30 taken, about 30 more admitted: \(afterFull)")
        lag.claimed(commands: 100, full: false, at: at(1020))
        let afterShort = admitted(lag, count: 200, at: 1020)
        #expect((95...105).contains(afterShort), "the queue was found empty: a target's worth again: \(afterShort)")
    }

    /// An advance that wrote nothing (failed, or a replay) frees its place.
    @Test func withdrawnAdvancesFreeTheirPlace() {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 1000)
        #expect(admitted(lag, count: 100, at: 1000, commit: false) == 100)
        #expect(admitted(lag, count: 1, at: 1000) == 0)
        for _ in 0..<10 { lag.withdrawn() }
        #expect(admitted(lag, count: 20, at: 1000, commit: false) == 10)
    }

    /// The bound follows the worker's pace over the last second, never below
    /// ``PushLag/minimumAhead`` commands (an idle worker is given enough to show its pace).
    @Test func theBoundFollowsTheWorkersPace() {
        let lag = PushLag(target: .milliseconds(50))
        claims(lag, from: 0, to: 1000, commands: 10)  // 200 a second: 10 commands' worth
        #expect(admitted(lag, count: 100, at: 1000) == PushLag.minimumAhead)
        claims(lag, from: 1000, to: 2000, commands: 200, full: true)  // 4,000 a second, taking nothing of ours
        #expect(admitted(lag, count: 300, at: 2000) == 200, "its full claims took what waited")
        // Half a second later with no claim since, only the last half second's claims count:
        // 2,000 a second, 100 commands' worth, of which the 200 admitted fill more than all.
        #expect(admitted(lag, count: 1, at: 2500) == 0)
        let later = PushLag(target: .milliseconds(50))
        claims(later, from: 0, to: 1000, commands: 200)  // 4,000 a second: 200 commands' worth
        #expect(admitted(later, count: 300, at: 1500) == 100, "the claims of the last half second: 2,000 a second")
    }

    @Test func aWorkerThatStoppedClaimingRefusesNothing() {
        let lag = PushLag(target: .milliseconds(50))
        #expect(admitted(lag, count: 500, at: 0) == 500, "no worker has claimed yet")
        claims(lag, from: 0, to: 300)
        #expect(admitted(lag, count: 200, at: 300) < 150)
        #expect(admitted(lag, count: 500, at: 1300) == 500, "no claim for a second: the worker is not there to measure")
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

        // A worker that claims 10 commands a second, 20 of them (the least it is given) ahead.
        lag.claimed(commands: 10, full: true)
        for _ in 0..<PushLag.minimumAhead { _ = try lag.admit(); lag.committed() }
        await #expect { try await engine.advance("lag-1", to: "accept", input: ["eta": "+20m"]) } throws: { error in
            (error as? OrderFlowError)?.isBusy == true
        }
        // The scoped engines of merchants share it.
        #expect(try engine.forMerchant("other").wakeSignal.pushLag === lag)
        #expect(try await fixture.engine.order("lag-1").order.state == "received", "nothing written")

        #expect(lag.workAhead == PushLag.minimumAhead, "the refused advance is not counted")

        // Once a claim has found the queue empty it advances, and its command counts as waiting;
        // an advance that fails counts for nothing.
        lag.claimed(commands: 10, full: false)
        let result = try await engine.advance("lag-1", to: "accept", input: ["eta": "+20m"])
        #expect(result.order.state == "in_progress")
        #expect(lag.workAhead == 1)
        await #expect(throws: OrderFlowError.self) { try await engine.advance("lag-1", to: "no-such-state") }
        #expect(lag.workAhead == 1)
        await engine.shutdown()
        await fixture.shutdown()
    }
}
