import Foundation
import OrderFlow
import PGKit

/// Finished orders 40 days old, written straight into the tables as a month of traffic leaves
/// them: each delivered, with 6 transitions (a real rendering's size), 8 push attempts, one
/// follower and its ended activity. Written in statements of 1,000 orders, far faster than
/// through the engine; the purge cannot tell them from orders the engine moved.
enum OldOrders {
    /// Rows of every kind one old order has: the order, 6 transitions, 8 deliveries, a follower
    /// and an activity.
    static let rowsPerOrder = 17

    static func seed(_ pool: PostgresPool, prefix: String, count: Int) async throws {
        var first = 0
        while first < count {
            let chunk = min(1_000, count - first)
            try await pool.query(PostgresQuery("""
                WITH o AS (
                    INSERT INTO orders (merchant_id, order_id, workflow_name, workflow_version, state, seq, attributes, content,
                                        created_at, updated_at, state_entered_at)
                    SELECT 'default', $1 || g, 'food-order', 1, 'delivered', 6,
                           '{"merchantName": "Bench Bistro", "orderNumber": "1042", "itemCount": 2}',
                           '{"status": "delivered", "message": "Delivered. Enjoy your meal!", "eta": null, "driverName": "Sam"}',
                           now() - interval '41 days', now() - interval '40 days', now() - interval '40 days'
                    FROM generate_series($2::integer, $3::integer) AS g
                    RETURNING order_id
                ), transitions AS (
                    INSERT INTO order_transitions (merchant_id, order_id, seq, from_state, to_state, event, input, rendered, actor,
                                                   occurred_at)
                    SELECT 'default', o.order_id, s, 'ready', 'delivered', 'deliver', '{"eta": "2026-01-01T12:20:00Z"}',
                           '{"event": "update", "content": {"status": "delivered", "message": "Delivered. Enjoy your meal!", "eta": null, "driverName": "Sam"}, "alert": {"title": "Delivered", "body": "Order 1042 from Bench Bistro has arrived."}, "staleDate": null, "relevanceScore": null, "priority": 10, "timestamp": 1767268800}',
                           'api:bench', now() - interval '40 days'
                    FROM o, generate_series(1, 6) AS s
                ), deliveries AS (
                    INSERT INTO deliveries (merchant_id, order_id, device_id, seq, event, token_kind, token_suffix, priority,
                                            aps_timestamp, alert_title, apns_id, status, outcome, attempted_at, latency_ms)
                    SELECT 'default', o.order_id, 'phone', s, 'update', 'activity', 'abcd1234', 10, 1767268800, 'Delivered',
                           gen_random_uuid(), 200, 'sent', now() - interval '40 days', 42.0
                    FROM o, generate_series(1, 8) AS s
                ), followers AS (
                    INSERT INTO order_followers (merchant_id, order_id, device_id, followed_at)
                    SELECT 'default', o.order_id, 'phone', now() - interval '41 days' FROM o
                )
                INSERT INTO activities (merchant_id, order_id, device_id, status, started_at, ended_at, last_seq, last_alert_seq)
                SELECT 'default', o.order_id, 'phone', 'ended', now() - interval '41 days', now() - interval '40 days', 6, 6 FROM o
                """, prefix, first + 1, first + chunk))
            first += chunk
        }
        try await pool.query(PostgresQuery("ANALYZE"))
    }

    /// The server's WAL position in bytes.
    static func walPosition(_ pool: PostgresPool) async throws -> Double {
        try await pool.query(PostgresQuery("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS position")).single()
            .decode("position", as: Double.self)
    }
}
