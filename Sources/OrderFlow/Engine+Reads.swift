import Foundation
import PGKit
import WorkflowKit

extension OrderFlowEngine {
    /// An order with each device's activity.
    public func order(_ orderID: String) async throws -> OrderDetails {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            let snapshot = try await orderSnapshot(orderID)
            let activities = try await pool.query(PostgresQuery("""
                SELECT device_id, status, right(update_token, 8) AS suffix, last_seq, last_pushed_at
                FROM activities WHERE merchant_id = $1 AND order_id = $2 ORDER BY device_id
                """, merchantID, orderID)).map { row in
                ActivityInfo(deviceID: try row.decode("device_id"), status: try row.decode("status"),
                             tokenSuffix: try row.decode("suffix", as: String?.self), lastSeq: try row.decode("last_seq"),
                             lastPushedAt: try row.decode("last_pushed_at", as: Date?.self))
            }
            let pending = try await pool.query(PostgresQuery(
                "SELECT count(*) AS n FROM activity_commands WHERE merchant_id = $1 AND order_id = $2", merchantID, orderID)
            ).single().decode("n", as: Int.self)
            return OrderDetails(order: snapshot, activities: activities, pendingCommands: pending)
        }
    }

    /// Every transition of an order, and every push attempt made for it.
    public func history(_ orderID: String) async throws -> OrderHistory {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            let snapshot = try await orderSnapshot(orderID)
            let transitions = try await pool.query(PostgresQuery("""
                SELECT seq, from_state, to_state, event, input, rendered, actor, idempotency_key, occurred_at
                FROM order_transitions WHERE merchant_id = $1 AND order_id = $2 ORDER BY seq
                """, merchantID, orderID)).map(TransitionRecord.init(row:))
            let deliveries = try await pool.query(PostgresQuery("""
                SELECT id, order_id, device_id, seq, merged, event, token_kind, token_suffix, priority, aps_timestamp,
                       alert_title, apns_id, status, reason, outcome, attempted_at, latency_ms, retried_at
                FROM deliveries WHERE merchant_id = $1 AND order_id = $2 ORDER BY id
                """, merchantID, orderID)).map(DeliveryRecord.init(row:))
            return OrderHistory(order: snapshot, transitions: transitions, deliveries: deliveries)
        }
    }

    /// Orders filtered by workflow and state, in order-id order, a page at a time.
    public func orders(_ query: OrderQuery = OrderQuery()) async throws -> OrderPage {
        try await translatingErrors {
            try Self.validateIdentifier(query.workflow, what: "workflow name")
            try Self.validateIdentifier(query.state, what: "state name")
            try Self.validateIdentifier(query.after, what: "page cursor")
            let rows = try await pool.query(PostgresQuery("""
                SELECT o.order_id, o.workflow_name, o.workflow_version, o.state, o.seq, o.attributes, o.content,
                       o.created_at, o.updated_at, o.state_entered_at,
                       ARRAY(SELECT a.status FROM activities a
                             WHERE a.merchant_id = o.merchant_id AND a.order_id = o.order_id ORDER BY a.device_id) AS statuses
                FROM orders o
                WHERE o.merchant_id = $1 AND ($2::text IS NULL OR o.workflow_name = $2)
                  AND ($3::text IS NULL OR o.state = $3) AND ($4::text IS NULL OR o.order_id > $4)
                ORDER BY o.order_id LIMIT $5
                """, merchantID, query.workflow, query.state, query.after, query.limit + 1))
            var summaries: [OrderSummary] = []
            for row in rows.prefix(query.limit) {
                let workflow = try await workflows.workflow(
                    named: try row.decode("workflow_name"), version: try row.decode("workflow_version"))
                summaries.append(OrderSummary(
                    order: try OrderSnapshot(row: row, finalStates: workflow.finalStates),
                    activityStatuses: try row.decode("statuses", as: [String].self)))
            }
            let next = rows.count > query.limit ? summaries.last?.order.orderID : nil
            return OrderPage(orders: summaries, nextCursor: next)
        }
    }

    /// Push attempts, newest first; `failedOnly` lists the dead letters not yet retried.
    public func deliveries(failedOnly: Bool = false, limit: Int = 100) async throws -> [DeliveryRecord] {
        try await translatingErrors {
            try await pool.query(PostgresQuery("""
                SELECT id, order_id, device_id, seq, merged, event, token_kind, token_suffix, priority, aps_timestamp,
                       alert_title, apns_id, status, reason, outcome, attempted_at, latency_ms, retried_at
                FROM deliveries
                WHERE merchant_id = $1 AND (NOT $2 OR (outcome = 'dead' AND retried_at IS NULL))
                ORDER BY attempted_at DESC, id DESC LIMIT $3
                """, merchantID, failedOnly, min(max(1, limit), 10_000))).map(DeliveryRecord.init(row:))
        }
    }

    /// Re-queues a dead letter: the device's activity is sent the order's current state again.
    public func retryDelivery(id: Int64) async throws {
        try await translatingErrors {
            let requeued = try await pool.transaction { [merchantID] connection -> Bool in
                let row = try await connection.query(PostgresQuery("""
                    UPDATE deliveries SET retried_at = now()
                    WHERE merchant_id = $1 AND id = $2 AND outcome = 'dead' AND retried_at IS NULL
                    RETURNING order_id, device_id
                    """, merchantID, id)).first
                guard let row else { return false }
                let orderID: String = try row.decode("order_id")
                let deviceID: String = try row.decode("device_id")
                try await connection.query(PostgresQuery("""
                    UPDATE activities SET failures = 0, next_attempt_at = NULL
                    WHERE merchant_id = $1 AND order_id = $2 AND device_id = $3
                    """, merchantID, orderID, deviceID))
                try await connection.query(PostgresQuery("""
                    INSERT INTO activity_commands (merchant_id, order_id, seq, kind, device_id)
                    SELECT merchant_id, order_id, seq, 'retry', $3 FROM orders WHERE merchant_id = $1 AND order_id = $2
                    """, merchantID, orderID, deviceID))
                return true
            }
            guard requeued else {
                throw OrderFlowError(.notFound, "delivery \(id) is not a dead letter waiting for a retry; see `orderflow deliveries list --failed`")
            }
            wakeSignal.signal()
        }
    }
}
