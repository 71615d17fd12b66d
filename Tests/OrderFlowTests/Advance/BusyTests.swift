import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import TestTags
import Testing

/// Timing-sensitive (`scripts/test` runs "Timing" suites alone, after the rest).
@Suite("Timing: a busy engine says busy", .tags(.timing))
struct TimingBusyEngineTests {
    /// Every pooled connection in use and a queue the pool cannot serve before the caller's
    /// deadline: `advance` is refused at once, said as busy (not "unavailable"), with a
    /// `retryAfter`, and nothing is written.
    @Test func advanceIsRefusedFastAndSaysBusy() async throws {
        let fixture = try await EngineFixture.make()
        _ = try await fixture.createFoodOrder("busy-1")
        var configuration = OrderFlowConfiguration(database: fixture.database, maximumConnections: 1)
        configuration.acquireTimeout = .milliseconds(1600)
        let engine = OrderFlowEngine(configuration: configuration)
        // The pool learns that a caller holds its connection about 1 s (long, so that a loaded
        // machine's delays do not change which callers fit in the 1.6 s they may wait).
        try await engine.pool.query(PostgresQuery("SELECT pg_sleep(1)"))
        let (held, holding) = AsyncStream<Void>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { holding.finish() }  // a holder that fails ends the wait below: the test fails, not hangs
                try await engine.pool.withConnection { connection in
                    holding.yield()
                    try await connection.query(PostgresQuery("SELECT pg_sleep(2.5)"))
                }
            }
            var iterator = held.makeAsyncIterator()
            guard await iterator.next() != nil else { return try await group.waitForAll() }
            group.addTask { _ = try? await engine.pool.query(PostgresQuery("SELECT 1 AS one")) }  // admitted, waits
            // Bounded: a first caller refused instead of queued (a machine slowed past the
            // estimate) must fail the test, not hang the run.
            let queueing = ContinuousClock.now
            while await engine.pool.statistics.waiting < 1 {
                guard ContinuousClock.now - queueing < .seconds(10) else { Issue.record("the first caller never queued"); break }
                try await Task.sleep(for: .milliseconds(5))
            }

            let clock = ContinuousClock()
            let asked = clock.now
            do {
                _ = try await engine.advance("busy-1", to: "accept", input: ["eta": "+20m"])
                Issue.record("advanced through a pool that could not serve it in time")
            } catch let error as OrderFlowError {
                #expect(clock.now - asked < .milliseconds(300), "refused at once, not after a wait")
                #expect(error.isBusy)
                #expect(error.code == .busy)
                #expect(error.message.hasPrefix("busy: the pool's one connection is in use and 1 caller waiting"), "\(error.message)")
                #expect(error.message.hasSuffix("; retry shortly, or raise the pool size"), "\(error.message)")
                #expect(!error.message.contains("unavailable"), "\(error.message)")
                let retryAfter = try #require(error.retryAfter)
                #expect(retryAfter > .milliseconds(1600) && retryAfter < .seconds(6), "\(retryAfter)")
            }
            try await group.waitForAll()
        }
        // Nothing was written; once the rush is over the same call goes through.
        #expect(try await fixture.engine.order("busy-1").order.state == "received")
        let result = try await engine.advance("busy-1", to: "accept", input: ["eta": "+20m"])
        #expect(result.order.state == "in_progress")
        await engine.shutdown()
        await fixture.shutdown()
    }

    /// Other errors carry no busy flag and no retry time.
    @Test func onlyThePoolsRefusalsAreBusy() {
        let lost = OrderFlowError.translating(PostgresError(.connectionLost, "lost the connection to PostgreSQL at h:5432: reset"))
        #expect(lost?.isBusy == false)
        #expect(lost?.retryAfter == nil)
        var timedOut = PostgresError(.poolTimeout, "busy: all 8 connections in use, none became free within 10 s; retry shortly, or raise the pool size")
        timedOut.retryAfter = nil
        let busy = OrderFlowError.translating(timedOut)
        #expect(busy?.isBusy == true)
        #expect(busy?.retryAfter == .seconds(1), "a timeout with no estimate still suggests a retry time")
        #expect(busy?.message == "busy: all 8 connections in use, none became free within 10 s; retry shortly, or raise the pool size")
    }
}
