import Foundation
import PGKit

/// The SQL of the merchant's event feed: its transitions and push attempts in the order their
/// transactions ended. Rows carry the id of the transaction that wrote them (migration 3); a
/// read stops before the oldest transaction of this database still running
/// (`orderflow_feed_horizon()`, migration 6), so a transaction that commits after a younger one
/// is never skipped by a reader that already went past the younger one.
///
/// That horizon can read lower than an earlier one (a transaction of another database that ends
/// during the read counts, as its database can no longer be told), so reads also stop no lower
/// than `floor`, the highest horizon this process saw: every transaction of this database below
/// a horizon had ended when it was read, and transactions begun since have higher ids. So a
/// reader never gets fewer events than a read before it gave.
struct FeedStore: Sendable {
    let pool: PostgresPool
    let merchantID: String
    let floor: SharedMutex<UInt64>

    /// Events of transactions from `fromTransaction` on (all of them when nil) that have ended,
    /// ordered by transaction, then transitions before pushes, then order and sequence;
    /// at most `limit` rows.
    func events(fromTransaction: UInt64?, limit: Int) async throws -> PostgresRows {
        let rows = try await pool.query(PostgresQuery("""
            WITH horizon AS MATERIALIZED (SELECT greatest(orderflow_feed_horizon(), $4::text::xid8) AS xmin)
            SELECT (SELECT xmin::text FROM horizon) AS horizon, tx::text AS tx, kind, order_id, workflow_name, seq, from_state, to_state, event, actor, at,
                   delivery_id, device_id, outcome, status, reason
            FROM (
                SELECT t.tx, 0 AS kind, t.order_id, o.workflow_name, t.seq, t.from_state, t.to_state, t.event, t.actor,
                       t.occurred_at AS at, NULL::bigint AS delivery_id, NULL::text AS device_id, NULL::text AS outcome,
                       NULL::smallint AS status, NULL::text AS reason
                FROM order_transitions t
                JOIN orders o ON o.merchant_id = t.merchant_id AND o.order_id = t.order_id
                CROSS JOIN horizon
                WHERE t.merchant_id = $1 AND t.tx >= coalesce($2::text::xid8, '0'::xid8) AND t.tx < horizon.xmin
                UNION ALL
                SELECT d.tx, 1, d.order_id, o.workflow_name, d.seq, NULL, NULL, d.event, NULL,
                       d.attempted_at, d.id, d.device_id, d.outcome, d.status, d.reason
                FROM deliveries d
                JOIN orders o ON o.merchant_id = d.merchant_id AND o.order_id = d.order_id
                CROSS JOIN horizon
                WHERE d.merchant_id = $1 AND d.tx >= coalesce($2::text::xid8, '0'::xid8) AND d.tx < horizon.xmin
            ) feed
            ORDER BY feed.tx, kind, order_id, seq, delivery_id
            LIMIT $3
            """, merchantID, fromTransaction.map(String.init), limit, String(floor.withLock { $0 })))
        // Events were given up to this horizon: later reads go at least as far.
        if let first = rows.first, let seen = UInt64(try first.decode("horizon", as: String.self)) {
            raiseFloor(to: seen)
        }
        return rows
    }

    /// The transaction horizon now: every event a reader will ever see from here on belongs to
    /// this transaction or a later one (where a feed that starts "from now" begins).
    func horizon() async throws -> UInt64 {
        let text: String = try await pool.query(PostgresQuery(
            "SELECT greatest(orderflow_feed_horizon(), $1::text::xid8)::text AS xmin", String(floor.withLock { $0 })))
            .single().decode("xmin")
        guard let value = UInt64(text) else { throw OrderFlowError(.unexpected, "the server's transaction horizon \(text) is not a number") }
        raiseFloor(to: value)
        return value
    }

    private func raiseFloor(to seen: UInt64) {
        floor.withLock { $0 = max($0, seen) }
    }
}
