import Foundation
import PGKit

/// The SQL of the purge (migration 8): each method deletes one small batch in its own short
/// transaction, taking only rows nobody holds (`FOR UPDATE SKIP LOCKED`), so that two purgers
/// share the work, and an order being advanced, claimed or followed is simply left for the next
/// batch. Ages are seconds; `merchants` is a bound `text[]`, NULL for every merchant.
struct RetentionStore: Sendable {
    let pool: PostgresPool

    /// Rows deleted by one batch, by kind.
    typealias Counts = [PurgedRows.Kind: Int]

    /// At most `limit` finished orders older than their merchant's retention (else
    /// `defaultRetention`), with their transitions, deliveries, activities, followers and
    /// broadcast channel; devices registered by them forget the order's id.
    func purgeFinishedOrders(defaultRetention: TimeInterval, merchants: [String]?, limit: Int) async throws -> Counts {
        try await pool.transaction { connection in
            try await Self.allowPurge(connection)
            let row = try await connection.query(PostgresQuery("""
                WITH picked AS (
                    SELECT l.merchant_id, l.order_id
                    FROM (SELECT f.merchant_id, f.order_id
                          FROM orderflow_finished_orders(make_interval(secs => $1), $2::text[]) f LIMIT $3 * 2) f
                    -- One probe by primary key per candidate; an order someone holds is passed over.
                    CROSS JOIN LATERAL (
                        SELECT o.merchant_id, o.order_id FROM orders o
                        WHERE o.merchant_id = f.merchant_id AND o.order_id = f.order_id
                          AND (o.dispatch_lease_until IS NULL OR o.dispatch_lease_until < now())
                        FOR UPDATE SKIP LOCKED
                    ) l
                    LIMIT $3
                ), transitions AS (
                    DELETE FROM order_transitions t USING picked p
                    WHERE t.merchant_id = p.merchant_id AND t.order_id = p.order_id RETURNING 1
                ), deliveries AS (
                    DELETE FROM deliveries d USING picked p
                    WHERE d.merchant_id = p.merchant_id AND d.order_id = p.order_id RETURNING 1
                ), activities AS (
                    DELETE FROM activities a USING picked p
                    WHERE a.merchant_id = p.merchant_id AND a.order_id = p.order_id RETURNING 1
                ), followers AS (
                    DELETE FROM order_followers f USING picked p
                    WHERE f.merchant_id = p.merchant_id AND f.order_id = p.order_id RETURNING 1
                ), channels AS (
                    DELETE FROM order_channels c USING picked p
                    WHERE c.merchant_id = p.merchant_id AND c.order_id = p.order_id RETURNING 1
                ), commands AS (
                    DELETE FROM activity_commands c USING picked p
                    WHERE c.merchant_id = p.merchant_id AND c.order_id = p.order_id RETURNING 1
                ), registrations AS (
                    -- The order's id may be given to a new order: its devices are not that one's.
                    UPDATE devices d SET registered_by_order = NULL FROM picked p
                    WHERE d.merchant_id = p.merchant_id AND d.registered_by_order = p.order_id
                ), removed AS (
                    DELETE FROM orders o USING picked p
                    WHERE o.merchant_id = p.merchant_id AND o.order_id = p.order_id RETURNING 1
                )
                SELECT (SELECT count(*) FROM removed) AS orders, (SELECT count(*) FROM transitions) AS transitions,
                       (SELECT count(*) FROM deliveries) AS deliveries, (SELECT count(*) FROM activities) AS activities,
                       (SELECT count(*) FROM followers) AS followers, (SELECT count(*) FROM channels) AS channels,
                       (SELECT count(*) FROM commands) AS commands
                """, defaultRetention, merchants, limit)).single()
            return try Self.counts(row, [.orders, .transitions, .deliveries, .activities, .followers, .channels, .commands])
        }
    }

    /// At most `limit` dead letters (pushes that failed for good, not retried) older than `age`,
    /// oldest first.
    func purgeDeadLetters(age: TimeInterval, merchants: [String]?, limit: Int) async throws -> Counts {
        let deleted = try await pool.query(PostgresQuery("""
            WITH picked AS (
                SELECT d.merchant_id, d.order_id, d.id FROM deliveries d
                WHERE d.outcome = 'dead' AND d.retried_at IS NULL AND d.attempted_at < now() - make_interval(secs => $1)
                  AND ($2::text[] IS NULL OR d.merchant_id = ANY($2::text[]))
                ORDER BY d.attempted_at LIMIT $3
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM deliveries d USING picked p
            WHERE d.merchant_id = p.merchant_id AND d.order_id = p.order_id AND d.id = p.id
            """, age, merchants, limit)).affectedRows
        return [.deadLetters: deleted]
    }

    /// At most `limit` activity commands due for longer than `age` and never handled (their
    /// merchant's pushes paused all that time): no Live Activity lives that long.
    func purgeStaleCommands(age: TimeInterval, merchants: [String]?, limit: Int) async throws -> Counts {
        let deleted = try await pool.query(PostgresQuery("""
            WITH picked AS (
                SELECT c.merchant_id, c.order_id, c.id FROM activity_commands c
                WHERE c.available_at < now() - make_interval(secs => $1)
                  AND ($2::text[] IS NULL OR c.merchant_id = ANY($2::text[]))
                ORDER BY c.available_at, c.id LIMIT $3
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM activity_commands c USING picked p
            WHERE c.merchant_id = p.merchant_id AND c.order_id = p.order_id AND c.id = p.id
            """, age, merchants, limit)).affectedRows
        return [.staleCommands: deleted]
    }

    /// At most `limit` devices without a token left for longer than `age` that follow no
    /// order: their row (with its credential) and their dead push-to-start tokens.
    func purgeTokenlessDevices(age: TimeInterval, merchants: [String]?, limit: Int) async throws -> Counts {
        let row = try await pool.query(PostgresQuery("""
            WITH picked AS (
                SELECT k.merchant_id, k.device_id
                FROM orderflow_tokenless_devices(now() - make_interval(secs => $1), $2::text[]) k
                WHERE NOT EXISTS (SELECT FROM order_followers f WHERE f.merchant_id = k.merchant_id AND f.device_id = k.device_id)
                LIMIT $3
            ), locked_devices AS (
                SELECT d.merchant_id, d.device_id FROM picked k
                CROSS JOIN LATERAL (
                    SELECT d.merchant_id, d.device_id FROM devices d
                    WHERE d.merchant_id = k.merchant_id AND d.device_id = k.device_id
                      AND (d.alert_token IS NULL OR d.alert_token_invalid_at IS NOT NULL)
                    FOR UPDATE SKIP LOCKED
                ) d
            ), locked_tokens AS (
                SELECT p.merchant_id, p.device_id, p.attributes_type FROM picked k
                CROSS JOIN LATERAL (
                    SELECT p.merchant_id, p.device_id, p.attributes_type FROM push_to_start_tokens p
                    WHERE p.merchant_id = k.merchant_id AND p.device_id = k.device_id AND p.invalid_at IS NOT NULL
                    FOR UPDATE SKIP LOCKED
                ) p
            ), tokens AS (
                DELETE FROM push_to_start_tokens p USING locked_tokens l
                WHERE p.merchant_id = l.merchant_id AND p.device_id = l.device_id AND p.attributes_type = l.attributes_type
                RETURNING 1
            ), removed AS (
                DELETE FROM devices d USING locked_devices l
                WHERE d.merchant_id = l.merchant_id AND d.device_id = l.device_id RETURNING 1
            )
            SELECT (SELECT count(*) FROM removed) AS devices, (SELECT count(*) FROM tokens) AS push_to_start_tokens
            """, age, merchants, limit)).single()
        return try Self.counts(row, [.devices, .pushToStartTokens])
    }

    /// At most `limit` idempotency keys older than the day they answer for (`RequestKeyStore`).
    func purgeRequestKeys(merchants: [String]?, limit: Int) async throws -> Counts {
        let deleted = try await pool.query(PostgresQuery("""
            WITH picked AS (
                SELECT r.merchant_id, r.idempotency_key FROM request_keys r
                WHERE r.created_at <= now() - interval '1 day' AND ($1::text[] IS NULL OR r.merchant_id = ANY($1::text[]))
                ORDER BY r.created_at LIMIT $2
                FOR UPDATE SKIP LOCKED
            )
            DELETE FROM request_keys r USING picked p
            WHERE r.merchant_id = p.merchant_id AND r.idempotency_key = p.idempotency_key
            """, merchants, limit)).affectedRows
        return [.requestKeys: deleted]
    }

    /// What a purge with these ages would delete now, counted in one read: nothing is locked or
    /// changed. Devices are counted as if the finished orders they follow were gone already.
    func purgeable(defaultRetention: TimeInterval, deadLetterAge: TimeInterval, deviceAge: TimeInterval,
                   merchants: [String]?) async throws -> Counts {
        let row = try await pool.query(PostgresQuery("""
            WITH f AS MATERIALIZED (
                SELECT merchant_id, order_id FROM orderflow_finished_orders(make_interval(secs => $1), $4::text[])
            ), k AS MATERIALIZED (
                SELECT k.merchant_id, k.device_id FROM orderflow_tokenless_devices(now() - make_interval(secs => $3), $4::text[]) k
                WHERE NOT EXISTS (SELECT FROM order_followers w
                                  WHERE w.merchant_id = k.merchant_id AND w.device_id = k.device_id
                                    AND NOT EXISTS (SELECT FROM f WHERE f.merchant_id = w.merchant_id AND f.order_id = w.order_id))
            )
            SELECT (SELECT count(*) FROM f) AS orders,
                   (SELECT count(*) FROM order_transitions t JOIN f USING (merchant_id, order_id)) AS transitions,
                   (SELECT count(*) FROM deliveries d JOIN f USING (merchant_id, order_id)) AS deliveries,
                   (SELECT count(*) FROM activities a JOIN f USING (merchant_id, order_id)) AS activities,
                   (SELECT count(*) FROM order_followers w JOIN f USING (merchant_id, order_id)) AS followers,
                   (SELECT count(*) FROM order_channels c JOIN f USING (merchant_id, order_id)) AS channels,
                   0::bigint AS commands,
                   (SELECT count(*) FROM deliveries d
                    WHERE d.outcome = 'dead' AND d.retried_at IS NULL AND d.attempted_at < now() - make_interval(secs => $2)
                      AND ($4::text[] IS NULL OR d.merchant_id = ANY($4::text[]))
                      AND NOT EXISTS (SELECT FROM f WHERE f.merchant_id = d.merchant_id AND f.order_id = d.order_id)) AS dead_letters,
                   (SELECT count(*) FROM activity_commands c
                    WHERE c.available_at < now() - make_interval(secs => $2)
                      AND ($4::text[] IS NULL OR c.merchant_id = ANY($4::text[]))) AS stale_commands,
                   (SELECT count(*) FROM devices d JOIN k USING (merchant_id, device_id)) AS devices,
                   (SELECT count(*) FROM push_to_start_tokens p JOIN k USING (merchant_id, device_id)
                    WHERE p.invalid_at IS NOT NULL) AS push_to_start_tokens,
                   (SELECT count(*) FROM request_keys r
                    WHERE r.created_at <= now() - interval '1 day'
                      AND ($4::text[] IS NULL OR r.merchant_id = ANY($4::text[]))) AS request_keys
            """, defaultRetention, deadLetterAge, deviceAge, merchants)).single()
        return try Self.counts(row, PurgedRows.Kind.allCases)
    }

    // MARK: Merchants' retention

    /// Sets (nil: clears) a merchant's retention; false when there is no such merchant. The
    /// `ensureRow` merchant (the engine's own, which needs no `merchant add`) gets a row.
    func setRetention(merchantID: String, seconds: TimeInterval?, ensureRow: Bool) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            INSERT INTO merchants (merchant_id, retention)
            SELECT $1, make_interval(secs => $2) WHERE $3 OR EXISTS (SELECT FROM merchants WHERE merchant_id = $1)
            ON CONFLICT (merchant_id) DO UPDATE SET retention = EXCLUDED.retention
            """, merchantID, seconds, ensureRow)).affectedRows == 1
    }

    /// The merchant's own retention in seconds: `.some(nil)` when it has none, nil when there is
    /// no such merchant.
    func retention(merchantID: String) async throws -> TimeInterval?? {
        guard let row = try await pool.query(PostgresQuery(
            "SELECT extract(epoch FROM retention)::float8 AS seconds FROM merchants WHERE merchant_id = $1", merchantID)).first
        else { return nil }
        return .some(try row.decode("seconds", as: Double?.self))
    }

    // MARK: Helpers

    /// Lets this transaction delete history rows (`orderflow_refuse_change`), and gives up
    /// rather than wait long for a row someone else holds.
    private static func allowPurge(_ connection: isolated PostgresConnection) async throws {
        try await connection.query(PostgresQuery(
            "SELECT set_config('orderflow.purging', 'on', true), set_config('lock_timeout', '2s', true)"))
    }

    private static func counts(_ row: PostgresRow, _ kinds: [PurgedRows.Kind]) throws -> Counts {
        var counts: Counts = [:]
        for kind in kinds { counts[kind] = try row.decode(kind.rawValue, as: Int.self) }
        return counts
    }
}
