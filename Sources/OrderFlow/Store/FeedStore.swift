import Foundation
import PGKit

/// The SQL of the merchant's event feed: its transitions and push attempts in the order their
/// transactions ended. Rows carry the id of the transaction that wrote them (migration 3); a
/// read stops before the oldest transaction of this database still running
/// (`orderflow_feed_horizon()`, migration 6), so a transaction that commits after a younger one
/// is never skipped by a reader that already went past the younger one.
struct FeedStore: Sendable {
    let pool: PostgresPool
    let merchantID: String

    /// Events of transactions from `fromTransaction` on (all of them when nil) that have ended,
    /// ordered by transaction, then transitions before pushes, then order and sequence;
    /// at most `limit` rows.
    func events(fromTransaction: UInt64?, limit: Int) async throws -> PostgresRows {
        try await pool.query(PostgresQuery("""
            WITH horizon AS MATERIALIZED (SELECT orderflow_feed_horizon() AS xmin)
            SELECT tx::text AS tx, kind, order_id, workflow_name, seq, from_state, to_state, event, actor, at,
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
            """, merchantID, fromTransaction.map(String.init), limit))
    }

    /// The transaction horizon now: every event a reader will ever see from here on belongs to
    /// this transaction or a later one (where a feed that starts "from now" begins).
    func horizon() async throws -> UInt64 {
        let text: String = try await pool.query(PostgresQuery(
            "SELECT orderflow_feed_horizon()::text AS xmin")).single().decode("xmin")
        guard let value = UInt64(text) else { throw OrderFlowError(.unexpected, "the server's transaction horizon \(text) is not a number") }
        return value
    }
}
