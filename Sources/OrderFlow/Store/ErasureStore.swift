import Foundation
import PGKit

/// The SQL of erasure: forgetting a device, redacting a finished order (migration 9).
struct ErasureStore: Sendable {
    let pool: PostgresPool
    let merchantID: String

    /// What a delivery of a forgotten device is recorded under: the push stays counted in its
    /// order's history, no longer tied to the device.
    static let forgottenDevice = "(forgotten)"

    /// What a device's forgetting found.
    struct Forgotten: Sendable {
        /// Whether anything of the device was there.
        var existed: Bool
        /// Orders it followed that a worker held a lease on at the time: a push to the device
        /// may have been on its way.
        var leasedOrders: [String]
    }

    /// Deletes the device's tokens, follows, activities, queued commands and credential, and
    /// unties its deliveries from it, in one transaction.
    func forgetDevice(_ deviceID: String) async throws -> Forgotten {
        try await pool.transaction { [merchantID] connection -> Forgotten in
            // The device's orders, locked in key order (as advances lock them): a claim skips a
            // locked order, so no worker takes the device's tokens from here on; one that took
            // them before holds a lease, awaited by the caller.
            let leased: [String] = try await connection.query(PostgresQuery("""
                SELECT o.order_id, o.dispatch_lease_until > now() AS leased FROM orders o
                WHERE o.merchant_id = $1
                  AND (EXISTS (SELECT 1 FROM order_followers f
                               WHERE f.merchant_id = o.merchant_id AND f.order_id = o.order_id AND f.device_id = $2)
                       OR EXISTS (SELECT 1 FROM activities a
                                  WHERE a.merchant_id = o.merchant_id AND a.order_id = o.order_id AND a.device_id = $2))
                ORDER BY o.order_id FOR UPDATE OF o
                """, merchantID, deviceID)).filter { try $0.decode("leased", as: Bool?.self) == true }.map { try $0.decode("order_id") }
            let row = try await connection.query(PostgresQuery("""
                WITH tokens AS (
                    DELETE FROM push_to_start_tokens WHERE merchant_id = $1 AND device_id = $2 RETURNING 1
                ), commands AS (
                    DELETE FROM activity_commands WHERE merchant_id = $1 AND device_id = $2 RETURNING 1
                ), activity_rows AS (
                    DELETE FROM activities WHERE merchant_id = $1 AND device_id = $2 RETURNING 1
                ), follows AS (
                    DELETE FROM order_followers WHERE merchant_id = $1 AND device_id = $2 RETURNING 1
                ), device AS (
                    DELETE FROM devices WHERE merchant_id = $1 AND device_id = $2 RETURNING 1
                ), pushes AS (
                    UPDATE deliveries SET device_id = $3, token_suffix = ''
                    WHERE merchant_id = $1 AND device_id = $2 RETURNING 1
                )
                SELECT (SELECT count(*) FROM tokens) + (SELECT count(*) FROM activity_rows) + (SELECT count(*) FROM follows)
                     + (SELECT count(*) FROM device) + (SELECT count(*) FROM pushes) AS found
                """, merchantID, deviceID, Self.forgottenDevice)).single()
            return Forgotten(existed: try row.decode("found", as: Int.self) > 0, leasedOrders: leased)
        }
    }

    /// Whether any of these orders is still leased by a worker.
    func anyLeased(_ orderIDs: [String]) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            SELECT EXISTS (SELECT 1 FROM orders WHERE merchant_id = $1 AND order_id = ANY($2) AND dispatch_lease_until > now()) AS leased
            """, merchantID, orderIDs)).single().decode("leased", as: Bool.self)
    }

    /// Unties deliveries recorded for the device after it was forgotten (a push that was on its
    /// way then).
    func untieDeliveries(of deviceID: String) async throws {
        try await pool.query(PostgresQuery(
            "UPDATE deliveries SET device_id = $3, token_suffix = '' WHERE merchant_id = $1 AND device_id = $2",
            merchantID, deviceID, Self.forgottenDevice))
    }

    /// Replaces the order's personal data with redactions, keeping its shape, in one
    /// transaction: its attributes and content, its transitions' inputs and renderings, its
    /// deliveries' alert titles, its activities' tokens; its queued commands are dropped, so
    /// nothing more is sent for it. Only while the order is in one of `finalStates` and no
    /// worker holds its lease (both checked under the row's lock).
    func redactOrder(_ orderID: String, finalStates: Set<String>) async throws -> RedactOutcome {
        try await pool.transaction { [merchantID] connection -> RedactOutcome in
            // Locked: a claim skips the order from here on, and its commands are deleted below.
            guard let row = try await connection.query(PostgresQuery("""
                SELECT state, dispatch_lease_until > now() AS leased FROM orders WHERE merchant_id = $1 AND order_id = $2 FOR UPDATE
                """, merchantID, orderID)).first else { return .notFound }
            let state: String = try row.decode("state")
            guard finalStates.contains(state) else { return .live(state: state) }
            // A worker sending the order's pushes would record them after the redaction.
            guard try row.decode("leased", as: Bool?.self) != true else { return .leased }
            try await connection.query(PostgresQuery("""
                WITH flag AS (
                    SELECT set_config('orderflow.redacting', 'on', true)
                ), order_row AS (
                    UPDATE orders SET attributes = orderflow_redacted(attributes), content = orderflow_redacted(content)
                    WHERE merchant_id = $1 AND order_id = $2
                ), commands AS (
                    DELETE FROM activity_commands WHERE merchant_id = $1 AND order_id = $2
                ), pushes AS (
                    UPDATE deliveries SET alert_title = '(redacted)'
                    WHERE merchant_id = $1 AND order_id = $2 AND alert_title IS NOT NULL AND alert_title <> '(redacted)'
                ), activity_rows AS (
                    UPDATE activities SET update_token = NULL
                    WHERE merchant_id = $1 AND order_id = $2 AND update_token IS NOT NULL
                )
                SELECT count(*) FROM flag
                """, merchantID, orderID))
            // The flag is set by the statement before: a data-modifying CTE and the flag's
            // select in one statement run in no promised order.
            try await connection.query(PostgresQuery("""
                UPDATE order_transitions SET
                    input = orderflow_redacted(input),
                    rendered = rendered || jsonb_build_object('content', orderflow_redacted(rendered -> 'content'))
                        || CASE WHEN rendered ? 'alert' THEN jsonb_build_object('alert', orderflow_redacted(rendered -> 'alert'))
                                ELSE '{}'::jsonb END
                WHERE merchant_id = $1 AND order_id = $2
                """, merchantID, orderID))
            return .redacted
        }
    }

    enum RedactOutcome: Sendable {
        case notFound, redacted, leased
        case live(state: String)
    }
}
