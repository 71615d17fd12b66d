import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import TestTags
import Testing

/// The database server lost: a primary and its synchronous standby (`StandbyPair`), the primary
/// killed with SIGKILL under load, the standby promoted. The engine, the worker's pool and its
/// LISTEN connection are given both servers (`target_session_attrs=read-write`) and must find
/// the new primary by themselves; nothing the engine acknowledged may be missing there.
@Suite("Reliability: failover to a synchronous standby", .tags(.reliability), .serialized)
struct ReliabilityFailoverTests {
    static let clients = 8
    static let ordersPerClient = 5

    @Test(.timeLimit(.minutes(3)))
    func primaryKilledStandbyPromotedLosesNothing() async throws {
        let pair = try StandbyPair()
        do {
            try await pair.start()
            try await failover(pair)
        } catch {
            await pair.destroy()
            throw error
        }
        await pair.destroy()
    }

    private func failover(_ pair: StandbyPair) async throws {
        let database = try PostgresConfiguration(pair.url)
        _ = try await Schema.migrate(database)
        let rig = try await PostgresFaultRig.start(database, workerID: "failover")
        let engine = rig.engine
        let orderIDs = (0..<Self.clients).flatMap { client in (0..<Self.ordersPerClient).map { "F\(client)-\($0)" } }
        var tokens = try await rig.createOrders(orderIDs, firstToken: 9000)

        // The load: eight clients, each taking its five orders through eleven steps, one step
        // every 60 ms, retrying with the same idempotency key while there is no primary.
        let load = TickerLoad()
        let started = ContinuousClock.now
        let running = Task { try await load.run(engine, orders: orderIDs.chunks(of: Self.ordersPerClient)) }
        // The primary's machine dies mid-load; a second later (a failover manager's detection
        // time) the standby is promoted.
        try await Task.sleep(for: .milliseconds(700))
        let acknowledgedBeforeKill = load.acknowledgedAt.value.count
        try pair.kill(0)
        let killedAt = ContinuousClock.now
        try await Task.sleep(for: .seconds(1))
        try await pair.promote(1)
        let promotedAt = ContinuousClock.now
        try await running.value
        let loadTime = ContinuousClock.now - started
        // Until the promotion, no advance can commit; the time to recovery is the kill to the
        // first advance acknowledged after the promotion (which the test delays by 1 s).
        let firstAfterPromotion = load.acknowledgedAt.value.filter { $0 > promotedAt }.min()
        let recovery = try #require(firstAfterPromotion, "no advance was acknowledged after the promotion") - killedAt

        // Every acknowledged transition is on the new primary (node 1, read directly): every
        // history gapless (create + 11 steps), every acknowledged sequence number there once.
        let port: Int = try await engine.pool.query(PostgresQuery("SELECT inet_server_port() AS port")).single().decode("port")
        #expect(port == pair.ports[1], "the engine writes to port \(port), not the promoted standby's")
        let histories = try await pair.admin(1, database: StandbyPair.database) { connection in
            try await connection.query(PostgresQuery(
                "SELECT order_id, array_agg(seq ORDER BY seq)::text AS seqs FROM order_transitions GROUP BY order_id")
            ).map { (try $0.decode("order_id", as: String.self), try $0.decode("seqs", as: String.self)) }
        }
        let onNewPrimary = Dictionary(uniqueKeysWithValues: histories)
        let gapless = "{" + (1...12).map(String.init).joined(separator: ",") + "}"
        for orderID in orderIDs {
            #expect(onNewPrimary[orderID] == gapless, "\(orderID) on the new primary: \(onNewPrimary[orderID] ?? "none")")
            let seen = load.acknowledged.withLock { $0[orderID] ?? [] }
            #expect(seen == Array(2...12), "\(orderID) acknowledged \(seen)")
        }
        let seenErrors = load.errors.value
        #expect(!seenErrors.isEmpty, "no client ever saw the primary gone")
        try await rig.waitUntilDrained(timeout: .seconds(40))

        // The old primary comes back as a standby of the new one, and nothing breaks: the
        // engine, the worker and a newly started engine (whose list names the old primary,
        // now read-only, first) carry on on the new primary; the old one replays it all.
        try await pair.rejoinAsStandby(0, following: 1)
        try await pair.requireSynchronousStandby(primary: 1)
        let afterIDs = (0..<10).map { "R\($0)" }
        tokens += try await rig.createOrders(afterIDs, firstToken: 9500)
        for step in 1...11 {
            for orderID in afterIDs {
                _ = try await TickerLoad.advanceRetrying(engine, orderID, step: step, errors: load.errors)
            }
        }
        let fresh = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 2))
        let freshPort: Int = try await fresh.pool.query(PostgresQuery("SELECT inet_server_port() AS port")).single().decode("port")
        #expect(freshPort == pair.ports[1], "a new connection went to port \(freshPort), not the primary's")
        #expect(try await fresh.history("R0").transitions.count == 12)
        await fresh.shutdown()
        try await rig.waitUntilDrained(timeout: .seconds(40))
        let transitionsOnPrimary: Int = try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM order_transitions")).single().decode("n")
        #expect(transitionsOnPrimary == (orderIDs.count + afterIDs.count) * 12)
        try await eventually("the old primary replays the new one's transitions", timeout: .seconds(20)) {
            try await pair.admin(0, database: StandbyPair.database) { connection in
                try await connection.query(PostgresQuery("SELECT count(*) AS n FROM order_transitions")).single().decode("n", as: Int.self)
            } == transitionsOnPrimary
        }

        let deadLetters = try await rig.deadLetters()
        let audit = rig.audit(
            scenario: "primary SIGKILLed, synchronous standby promoted",
            load: "\(Self.clients) clients, \(orderIDs.count) orders, \(orderIDs.count * 11) transitions in \(DeliveryAudit.format(loadTime)) (idempotency keys); then \(afterIDs.count) orders × 11 steps after the old primary rejoined",
            faults: "primary (postmaster and backends) SIGKILLed after \(acknowledgedBeforeKill) acknowledged steps, standby promoted \(DeliveryAudit.format(promotedAt - killedAt)) later; old primary back as a standby (pg_rewind)",
            tokens: tokens,
            notes: [
                "time to recovery \(DeliveryAudit.format(recovery)) (kill to the first advance acknowledged after the promotion; \(Self.milliseconds(recovery - (promotedAt - killedAt))) after the promotion)",
                "errors seen by clients meanwhile \(seenErrors.values.reduce(0, +)), all databaseUnavailable, the slowest after \(Self.milliseconds(load.slowestError.value))",
                "acknowledged transitions missing on the new primary 0, histories gapless",
                "dead letters \(deadLetters)",
            ])
        audit.report()
        #expect(audit.lost == 0, "\(audit)")
        #expect(deadLetters == 0)
        try await rig.shutdown()
    }

    /// An advance in flight when the primary dies has an unknown fate: its caller hears
    /// "database unavailable", never whether it was applied. The retry with the same idempotency
    /// key settles it, once, both ways: (a) committed on the primary and streamed to the standby,
    /// but never acknowledged (the primary was waiting for its synchronous standby): the retry
    /// finds it; (b) never committed (waiting for a row lock): the retry applies it.
    @Test(.timeLimit(.minutes(3)))
    func advanceInFlightIsSettledByItsRetry() async throws {
        let pair = try StandbyPair()
        do {
            try await pair.start()
            try await inFlight(pair)
        } catch {
            await pair.destroy()
            throw error
        }
        await pair.destroy()
    }

    private func inFlight(_ pair: StandbyPair) async throws {
        let database = try PostgresConfiguration(pair.url)
        _ = try await Schema.migrate(database)
        var configuration = OrderFlowConfiguration(database: database, maximumConnections: 4)
        configuration.acquireTimeout = .seconds(2)
        let engine = OrderFlowEngine(configuration: configuration)
        _ = try await engine.applyWorkflow(yaml: WorkerHarness.tickerWorkflow, file: "ticker.yaml")
        _ = try await engine.createOrder(NewOrder(orderID: "U1", workflow: "ticker", attributes: ["label": "unknown fate"]))
        _ = try await engine.advance("U1", to: "s1", idempotencyKey: "U1-s1")
        let errors = LockedValue<[String: Int]>([:])

        // (a) The primary stops acknowledging commits (its synchronous standby is now one that
        // does not exist); the advance commits there, streams to the standby, waits; the
        // primary dies.
        try await pair.admin(0) { connection in
            try await connection.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody_at_all'")
            try await connection.execute("SELECT pg_reload_conf()")
        }
        try await Task.sleep(for: .milliseconds(200))
        let committedUnacknowledged = Task { try await engine.advance("U1", to: "s2", idempotencyKey: "U1-s2") }
        try await eventually("the advance waits for its commit's acknowledgement", timeout: .seconds(10)) {
            try await pair.admin(0) { connection in
                try await connection.query(PostgresQuery("""
                    SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'
                    AND (SELECT bool_and(flush_lsn >= pg_current_wal_lsn()) FROM pg_stat_replication)
                    """)).single().decode("n", as: Int.self) > 0
            }
        }
        try pair.kill(0)
        let lostA = await committedUnacknowledged.result
        #expect(Self.isDatabaseUnavailable(lostA), "the caller must hear a retryable error: \(lostA)")
        try await pair.promote(1)
        // The change did survive: it is on the new primary although nobody was told so.
        let survived = try await Self.transitionCount(pair, node: 1, orderID: "U1", seq: 3)
        #expect(survived == 1)
        let retryA = try await TickerLoad.advanceRetrying(engine, "U1", step: 2, errors: errors, key: "U1-s2")
        #expect(retryA.replayed && retryA.transition.seq == 3 && retryA.order.state == "s2", "\(retryA)")
        let againA = try await engine.advance("U1", to: "s2", idempotencyKey: "U1-s2")
        #expect(againA.replayed && againA.transition.seq == 3)
        #expect(try await engine.history("U1").transitions.map(\.seq) == [1, 2, 3])

        // (b) The old primary rejoins as the synchronous standby; the next advance waits for a
        // row lock another session holds on the new primary, which dies before it commits.
        try await pair.rejoinAsStandby(0, following: 1)
        try await pair.requireSynchronousStandby(primary: 1)
        let locked = LockedValue(false)
        let locker = Task {
            try await pair.admin(1, database: StandbyPair.database) { connection in
                try await connection.transaction { connection in
                    try await connection.query(PostgresQuery("SELECT 1 FROM orders WHERE order_id = $1 FOR UPDATE", "U1"))
                    locked.withLock { $0 = true }
                    try await Task.sleep(for: .seconds(60))
                }
            }
        }
        try await eventually("another session holds the order's row lock", timeout: .seconds(10)) { locked.value }
        let neverCommitted = Task { try await engine.advance("U1", to: "s3", idempotencyKey: "U1-s3") }
        try await eventually("the advance waits for the row lock", timeout: .seconds(10)) {
            try await pair.admin(1) { connection in
                try await connection.query(PostgresQuery(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                )).single().decode("n", as: Int.self) > 0
            }
        }
        try pair.kill(1)
        let lostB = await neverCommitted.result
        #expect(Self.isDatabaseUnavailable(lostB), "the caller must hear a retryable error: \(lostB)")
        locker.cancel()
        _ = await locker.result
        try await pair.promote(0)
        #expect(try await Self.transitionCount(pair, node: 0, orderID: "U1", seq: 4) == 0)
        let retryB = try await TickerLoad.advanceRetrying(engine, "U1", step: 3, errors: errors, key: "U1-s3")
        #expect(!retryB.replayed && retryB.transition.seq == 4 && retryB.order.state == "s3", "\(retryB)")
        let againB = try await engine.advance("U1", to: "s3", idempotencyKey: "U1-s3")
        #expect(againB.replayed && againB.transition.seq == 4)
        #expect(try await engine.history("U1").transitions.map(\.seq) == [1, 2, 3, 4])
        await engine.shutdown()

        DeliveryAudit.report(line: [
            "reliability: advance in flight when the primary died",
            "faults: (a) commit streamed to the standby, acknowledgement never sent, primary SIGKILLed, standby promoted; (b) advance waiting for a row lock, primary SIGKILLed, old primary (rejoined with pg_rewind) promoted",
            "both callers heard databaseUnavailable; retries with the same key while no primary: \(errors.value.values.reduce(0, +))",
            "(a) retry replayed the surviving step 3 (applied once); (b) retry applied step 4 (once); histories 1–4 gapless",
        ].joined(separator: " | "))
    }

    static func milliseconds(_ duration: Duration) -> String {
        "\(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000) ms"
    }

    static func isDatabaseUnavailable(_ result: Result<AdvanceResult, any Error>) -> Bool {
        guard case .failure(let error) = result, let error = error as? OrderFlowError else { return false }
        return error.code == .databaseUnavailable || error.code == .busy
    }

    static func transitionCount(_ pair: StandbyPair, node: Int, orderID: String, seq: Int) async throws -> Int {
        try await pair.admin(node, database: StandbyPair.database) { connection in
            try await connection.query(PostgresQuery(
                "SELECT count(*) AS n FROM order_transitions WHERE order_id = $1 AND seq = $2", orderID, seq
            )).single().decode("n", as: Int.self)
        }
    }
}
