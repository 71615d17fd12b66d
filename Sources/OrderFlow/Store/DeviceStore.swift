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
}
