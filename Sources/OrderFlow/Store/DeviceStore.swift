import Foundation
import PGKit

/// The SQL of devices, tokens and followers: what a phone registers and which orders it follows.
struct DeviceStore: Sendable {
    let pool: PostgresPool
    let merchantID: String

    /// Saves (or replaces) a push-to-start token and queues a `sync` for every activity of the
    /// device still waiting for a way to start, in one transaction.
    func savePushToStartToken(deviceID: String, attributesType: String, token: String) async throws {
        try await pool.transaction { [merchantID] connection in
            try await connection.query(PostgresQuery("""
                INSERT INTO push_to_start_tokens (merchant_id, device_id, attributes_type, token)
                VALUES ($1, $2, $3, $4)
                ON CONFLICT (merchant_id, device_id, attributes_type)
                DO UPDATE SET token = EXCLUDED.token, invalid_at = NULL, updated_at = now()
                """, merchantID, deviceID, attributesType, token))
            try await connection.query(PostgresQuery("""
                INSERT INTO activity_commands (merchant_id, order_id, seq, kind, device_id)
                SELECT a.merchant_id, a.order_id, o.seq, 'sync', a.device_id
                FROM activities a JOIN orders o ON o.merchant_id = a.merchant_id AND o.order_id = a.order_id
                WHERE a.merchant_id = $1 AND a.device_id = $2 AND a.status IN ('waiting', 'alerts')
                """, merchantID, deviceID))
        }
    }

    /// Saves (or replaces) a device's ordinary alert token.
    func saveAlertToken(deviceID: String, token: String) async throws {
        try await pool.query(PostgresQuery("""
            INSERT INTO devices (merchant_id, device_id, alert_token) VALUES ($1, $2, $3)
            ON CONFLICT (merchant_id, device_id)
            DO UPDATE SET alert_token = EXCLUDED.alert_token, alert_token_invalid_at = NULL, updated_at = now()
            """, merchantID, deviceID, token))
    }

    /// Makes the device follow the order, with its activity (`active` with `activityToken`,
    /// else `waiting`) and a `sync` to send the order's current state. False when the order
    /// does not exist.
    func addFollower(orderID: String, deviceID: String, activityToken: String?) async throws -> Bool {
        try await pool.transaction { [merchantID] connection -> Bool in
            let seq = try await connection.query(PostgresQuery(
                "SELECT seq FROM orders WHERE merchant_id = $1 AND order_id = $2 FOR SHARE", merchantID, orderID)
            ).first?.decode("seq", as: Int.self)
            guard let seq else { return false }
            try await connection.query(PostgresQuery("""
                INSERT INTO order_followers (merchant_id, order_id, device_id) VALUES ($1, $2, $3)
                ON CONFLICT DO NOTHING
                """, merchantID, orderID, deviceID))
            if let activityToken {
                try await connection.query(PostgresQuery("""
                    INSERT INTO activities (merchant_id, order_id, device_id, status, update_token, token_updated_at, started_at)
                    VALUES ($1, $2, $3, 'active', $4, now(), now())
                    ON CONFLICT (merchant_id, order_id, device_id) DO UPDATE
                    SET update_token = EXCLUDED.update_token, token_updated_at = now(),
                        status = CASE WHEN activities.status = 'ended' THEN 'ended' ELSE 'active' END,
                        started_at = COALESCE(activities.started_at, now())
                    """, merchantID, orderID, deviceID, activityToken))
            } else {
                try await connection.query(PostgresQuery("""
                    INSERT INTO activities (merchant_id, order_id, device_id, status) VALUES ($1, $2, $3, 'waiting')
                    ON CONFLICT DO NOTHING
                    """, merchantID, orderID, deviceID))
            }
            try await connection.query(PostgresQuery("""
                INSERT INTO activity_commands (merchant_id, order_id, seq, kind, device_id) VALUES ($1, $2, $3, 'sync', $4)
                """, merchantID, orderID, seq, deviceID))
            return true
        }
    }

    /// What an app's report changed.
    struct AppReportOutcome: Sendable {
        var activity: ActivityInfo
        /// When the newest transition the app applied occurred, if this report moved it on.
        var newlyAppliedOccurredAt: Date?
        /// Pushes APNs accepted more than 30 seconds before the app's report that carried
        /// transitions newer than the one it applied: accepted, never shown.
        var acceptedNotApplied: Int
    }

    /// Records what the app says of its activity. A dismissed or ended activity ends for
    /// OrderFlow too (nothing more is sent, no push-to-start again); `appliedAt` also finds the
    /// newest transition the device had been sent by then. Nil when the device has no activity
    /// for the order.
    func recordAppReport(orderID: String, deviceID: String, state: String, appliedAt: Date?) async throws -> AppReportOutcome? {
        try await pool.query(PostgresQuery("""
            WITH old AS (
                SELECT app_applied_seq FROM activities
                WHERE merchant_id = $1 AND order_id = $2 AND device_id = $3 FOR UPDATE
            ), applied AS (
                SELECT max(d.seq) AS seq FROM deliveries d
                WHERE d.merchant_id = $1 AND d.order_id = $2 AND d.device_id = $3 AND d.outcome = 'sent'
                  AND $5::timestamptz IS NOT NULL AND d.attempted_at <= least($5::timestamptz, now())
            ), updated AS (
                UPDATE activities a SET
                    app_state = $4, app_reported_at = now(),
                    app_applied_at = coalesce($5, a.app_applied_at),
                    app_applied_seq = coalesce(greatest(a.app_applied_seq, (SELECT seq FROM applied)), a.app_applied_seq),
                    status = CASE WHEN $4 IN ('dismissed', 'ended') AND a.status <> 'gone' THEN 'ended' ELSE a.status END,
                    ended_at = CASE WHEN $4 IN ('dismissed', 'ended') THEN coalesce(a.ended_at, now()) ELSE a.ended_at END
                WHERE a.merchant_id = $1 AND a.order_id = $2 AND a.device_id = $3
                RETURNING a.device_id, a.status, right(a.update_token, 8) AS suffix, a.last_seq, a.last_pushed_at, a.app_state,
                          a.app_reported_at, a.app_applied_at, a.app_applied_seq
            )
            SELECT u.*,
                   (SELECT t.occurred_at FROM order_transitions t
                    WHERE t.merchant_id = $1 AND t.order_id = $2 AND t.seq = u.app_applied_seq
                      AND u.app_applied_seq IS DISTINCT FROM (SELECT app_applied_seq FROM old)) AS newly_applied_occurred_at,
                   (SELECT count(*) FROM deliveries d
                    WHERE $5::timestamptz IS NOT NULL AND d.merchant_id = $1 AND d.order_id = $2 AND d.device_id = $3
                      AND d.outcome = 'sent' AND d.event IN ('update', 'end')
                      AND d.seq > coalesce(u.app_applied_seq, 0)
                      AND d.attempted_at < least($5::timestamptz, now()) - interval '30 seconds') AS accepted_not_applied
            FROM updated u
            """, merchantID, orderID, deviceID, state, appliedAt)).first.map { row in
            AppReportOutcome(
                activity: try ActivityInfo(row: row),
                newlyAppliedOccurredAt: try row.decode("newly_applied_occurred_at", as: Date?.self),
                acceptedNotApplied: try row.decode("accepted_not_applied"))
        }
    }

    /// Stops the device following the order and retires its activity. False when it did not
    /// follow the order (nothing changes then).
    func removeFollower(orderID: String, deviceID: String) async throws -> Bool {
        try await pool.transaction { [merchantID] connection -> Bool in
            let removed = try await connection.query(PostgresQuery(
                "DELETE FROM order_followers WHERE merchant_id = $1 AND order_id = $2 AND device_id = $3",
                merchantID, orderID, deviceID)).affectedRows
            guard removed > 0 else { return false }
            try await connection.query(PostgresQuery("""
                UPDATE activities SET status = 'gone', update_token = NULL
                WHERE merchant_id = $1 AND order_id = $2 AND device_id = $3 AND status <> 'ended'
                """, merchantID, orderID, deviceID))
            return true
        }
    }

    // MARK: Device credentials

    /// Stores the hash of a device's new credential, making the device's row if it has none.
    /// A device that has a credential keeps it unless `replacing`: false then, nothing changed.
    func issueCredential(deviceID: String, hash: Data, replacing: Bool) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            INSERT INTO devices (merchant_id, device_id, credential_hash, credential_issued_at)
            VALUES ($1, $2, decode($3, 'base64'), now())
            ON CONFLICT (merchant_id, device_id) DO UPDATE
            SET credential_hash = EXCLUDED.credential_hash, credential_issued_at = now(), updated_at = now()
            WHERE devices.credential_hash IS NULL OR $4
            RETURNING device_id
            """, merchantID, deviceID, hash.base64EncodedString(), replacing)).count == 1
    }

    /// Like ``issueCredential(deviceID:hash:replacing:)`` for a device id never seen,
    /// registered on an order's client secret: only while that order has registered fewer than
    /// `limit` devices. Nil when the order is at its limit; false when the id is known.
    func issueCredential(deviceID: String, hash: Data, registeredBy orderID: String, limit: Int) async throws -> Bool? {
        let row = try await pool.query(PostgresQuery("""
            WITH registered AS (
                SELECT count(*) AS n FROM devices WHERE merchant_id = $1 AND registered_by_order = $4
            ), inserted AS (
                INSERT INTO devices (merchant_id, device_id, credential_hash, credential_issued_at, registered_by_order)
                SELECT $1, $2, decode($3, 'base64'), now(), $4
                WHERE (SELECT n FROM registered) < $5
                  AND NOT EXISTS (SELECT 1 FROM push_to_start_tokens WHERE merchant_id = $1 AND device_id = $2)
                  AND NOT EXISTS (SELECT 1 FROM order_followers WHERE merchant_id = $1 AND device_id = $2)
                  AND NOT EXISTS (SELECT 1 FROM activities WHERE merchant_id = $1 AND device_id = $2)
                ON CONFLICT (merchant_id, device_id) DO NOTHING
                RETURNING device_id
            )
            SELECT (SELECT count(*) FROM inserted) AS inserted, (SELECT n FROM registered) AS registered
            """, merchantID, deviceID, hash.base64EncodedString(), orderID, limit)).single()
        if try row.decode("inserted", as: Int.self) == 1 { return true }
        return try row.decode("registered", as: Int.self) >= limit ? nil : false
    }

    /// The hash of the device's credential; nil when it has none (or no row).
    func credentialHash(deviceID: String) async throws -> Data? {
        guard let text = try await pool.query(PostgresQuery(
            "SELECT encode(credential_hash, 'base64') AS hash FROM devices WHERE merchant_id = $1 AND device_id = $2",
            merchantID, deviceID)).first?.decode("hash", as: String?.self)
        else { return nil }
        return Data(base64Encoded: text)
    }

    /// The device of this merchant whose credential has this hash.
    func device(credentialHash hash: Data) async throws -> String? {
        try await pool.query(PostgresQuery(
            "SELECT device_id FROM devices WHERE credential_hash = decode($2, 'base64') AND merchant_id = $1",
            merchantID, hash.base64EncodedString())).first?.decode("device_id")
    }
}
