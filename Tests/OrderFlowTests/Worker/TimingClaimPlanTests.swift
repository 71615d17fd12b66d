import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import TestTags
import Testing

/// The worker's claims after the outbox stood empty: a plan PostgreSQL kept from then (a quiet
/// hour, the table vacuumed to nothing) could read the whole table once per command a burst
/// queued — claims of 100 took seconds with a few thousand commands waiting, and the worker fell
/// behind until autovacuum analyzed the table again. Timing-sensitive (a claim's duration), so with
/// the suites `scripts/test` runs after the rest.
@Suite("Timing: the worker's claims after the outbox stood empty", .tags(.timing), .serialized)
struct TimingClaimPlanTests {
    @Test func aClaimOnThePlanKeptFromAnEmptyOutboxWalksItsIndexes() async throws {
        // One connection: every statement below runs in the session whose plans would be kept.
        let fixture = try await EngineFixture.make(maximumConnections: 1)
        let pool = fixture.engine.pool
        let store = OutboxStore(pool: pool)
        // The outbox empty and vacuumed to no pages, as after a quiet hour, and the claim's plan
        // cached from then (PostgreSQL keeps a generic plan after five runs).
        try await pool.query(PostgresQuery("VACUUM ANALYZE activity_commands"))
        var last = 0
        for _ in 0..<8 {
            last = try await store.claim(workerID: "w", limit: 100, lease: .seconds(30), merchants: .all, maximumTransitions: 10).count
        }
        #expect(last == 0)

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

        // The claim is planned without sequential scans (OutboxStore.claimSettings): the plan
        // kept from the empty outbox reads it by its indexes.
        let started = ContinuousClock.now
        let claimed = try await store.claim(workerID: "w", limit: 100, lease: .seconds(30), merchants: .all, maximumTransitions: 10)
        let took = ContinuousClock.now - started
        #expect(claimed.count == 100)
        // Walking the ready index takes milliseconds; a plan that scans the table took seconds.
        #expect(took < .seconds(1), "a claim of 100 with 6,000 queued, on the plan kept from the empty outbox, took \(took)")
        await fixture.shutdown()
    }
}
