import Foundation
import PGKit
import WorkflowKit

extension OrderFlowEngine {
    /// Stores a device's push-to-start token for an `ActivityAttributes` type (it may rotate:
    /// the new one replaces the old). Orders the device follows that still wait for an
    /// activity are looked at again.
    public func registerPushToStartToken(deviceID: String, attributesType: String, token: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            try Self.validateIdentifier(attributesType, what: "attributes type")
            let token = try Self.normalizedToken(token)
            try await checkAttributesTypeIsKnown(attributesType)
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
            wakeSignal.signal()
        }
    }

    /// Stores the update token of an activity the app runs for an order (after a push-to-start,
    /// or one the app started itself). Tokens rotate: the newest replaces the old. The device
    /// follows the order from now on, and is sent the order's current state.
    public func registerActivityToken(orderID: String, deviceID: String, token: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            try Self.validateIdentifier(deviceID, what: "device id")
            let token = try Self.normalizedToken(token)
            try await follow(orderID: orderID, deviceID: deviceID, activityToken: token)
        }
    }

    /// Stores a device's ordinary APNs device token, used for alert notifications when the
    /// device shows no Live Activity for an order.
    public func registerDeviceToken(deviceID: String, token: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            let token = try Self.normalizedToken(token)
            try await pool.query(PostgresQuery("""
                INSERT INTO devices (merchant_id, device_id, alert_token) VALUES ($1, $2, $3)
                ON CONFLICT (merchant_id, device_id)
                DO UPDATE SET alert_token = EXCLUDED.alert_token, alert_token_invalid_at = NULL, updated_at = now()
                """, merchantID, deviceID, token))
        }
    }

    /// Makes a device follow an order: it gets its own Live Activity (started by push-to-start
    /// when the workflow says so and the device has a token), or alerts if it cannot show one.
    /// Following twice is harmless.
    public func follow(orderID: String, deviceID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            try Self.validateIdentifier(deviceID, what: "device id")
            try await follow(orderID: orderID, deviceID: deviceID, activityToken: nil)
        }
    }

    /// Stops sending an order's updates to a device.
    public func unfollow(orderID: String, deviceID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            try Self.validateIdentifier(deviceID, what: "device id")
            try await pool.transaction { [merchantID] connection in
                let removed = try await connection.query(PostgresQuery(
                    "DELETE FROM order_followers WHERE merchant_id = $1 AND order_id = $2 AND device_id = $3",
                    merchantID, orderID, deviceID)).affectedRows
                guard removed > 0 else {
                    throw OrderFlowError(.notFound, "device \(Self.shown(deviceID)) does not follow order \(Self.shown(orderID)); nothing to undo")
                }
                try await connection.query(PostgresQuery("""
                    UPDATE activities SET status = 'gone', update_token = NULL
                    WHERE merchant_id = $1 AND order_id = $2 AND device_id = $3 AND status <> 'ended'
                    """, merchantID, orderID, deviceID))
            }
        }
    }

    private func follow(orderID: String, deviceID: String, activityToken: String?) async throws {
        let followed = try await pool.transaction { [merchantID] connection -> Bool in
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
        guard followed else { throw Self.orderNotFound(orderID) }
        wakeSignal.signal()
    }

    /// A push-to-start token is only of use for an `ActivityAttributes` type some workflow
    /// starts (the names are case-sensitive Swift type names): a typo would store a token no
    /// push ever uses.
    private func checkAttributesTypeIsKnown(_ attributesType: String) async throws {
        var known: Set<String> = []
        for (name, version) in try await workflows.allVersions() {
            known.insert(try await workflows.workflow(named: name, version: version).attributesType)
        }
        guard !known.contains(attributesType) else { return }
        let hint = known.first { $0.lowercased() == attributesType.lowercased() }.map { " (did you mean \($0)?)" } ?? ""
        throw OrderFlowError(
            .notFound,
            "no workflow uses the attributes type \"\(Self.shown(attributesType))\"\(hint); "
                + (known.isEmpty ? "apply a workflow first" : "known types: \(known.sorted().joined(separator: ", "))"),
            candidates: known.sorted())
    }
}
