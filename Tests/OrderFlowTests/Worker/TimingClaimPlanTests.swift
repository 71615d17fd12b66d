import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import TestTags
import Testing

/// The worker's statements over the outbox after it stood empty: a plan PostgreSQL kept from
/// then (a quiet hour, the table vacuumed to nothing) read the whole table once per command a
/// burst queued — claims of 100 took seconds with a few thousand commands waiting, and the
/// worker fell behind until autovacuum analyzed the table again. Timing-sensitive (a claim's
/// duration), so with the suites `scripts/test` runs after the rest.
@Suite("Timing: the worker's claims after the outbox stood empty", .tags(.timing), .serialized)
struct TimingClaimPlanTests {
    @Test func aClaimStaysFastWhenABurstFillsAnOutboxThatStoodEmpty() async throws {
        // One connection: every statement below runs in the session whose plans would be kept.
        let fixture = try await EngineFixture.make(maximumConnections: 1)
        let pool = fixture.engine.pool
        let store = OutboxStore(pool: pool)
        // The outbox empty and vacuumed to no pages, as after a quiet hour.
        try await pool.query(PostgresQuery("VACUUM ANALYZE activity_commands"))
        for _ in 0..<8 {
            let idle = try await store.claim(workerID: "w", limit: 100, lease: .seconds(30), merchants: .all, maximumTransitions: 10)
            #expect(idle.count == 0)
        }
        let kept = try await pool.query(PostgresQuery(
            "SELECT count(*)::bigint AS n FROM pg_prepared_statements WHERE statement LIKE '%no_flush' || '_wait AS%'")).single().decode("n", as: Int.self)
        // (The pattern is split so that this statement, itself prepared, does not match it.)
        #expect(kept == 0, "the claim is planned at each run, not prepared once for the session")

        // A burst: 6,000 orders with a command each, and no analyze since.
        try await pool.query(PostgresQuery("""
            INSERT INTO orders (merchant_id, order_id, workflow_name, workflow_version, state, seq, attributes, content,
                                created_at, updated_at, state_entered_at)
            SELECT 'default', 'burst-' || g, 'food-order', 1, 'received', 1, '{}', '{}', now(), now(), now()
            FROM generate_series(1, 6000) g
            """))
        try await pool.query(PostgresQuery("""
            INSERT INTO activity_commands (merchant_id, order_id, seq, kind)
            SELECT 'default', 'burst-' || g, 1, 'start' FROM generate_series(1, 6000) g
            """))

        let started = ContinuousClock.now
        let claimed = try await store.claim(workerID: "w", limit: 100, lease: .seconds(30), merchants: .all, maximumTransitions: 10)
        let took = ContinuousClock.now - started
        #expect(claimed.count == 100)
        // Walking the ready index takes milliseconds; a plan that reads the table per command
        // takes seconds at this size.
        #expect(took < .seconds(1), "a claim of 100 with 6,000 queued took \(took)")
        await fixture.shutdown()
    }
}
