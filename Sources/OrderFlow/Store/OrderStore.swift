import Foundation
import PGKit
import WorkflowKit

/// The SQL of orders, their transitions and their push records: every statement the engine
/// runs for creating, advancing, reading and retrying, one function each. The advance's own
/// statements take the connection the advance is isolated to, so that they add no hop.
struct OrderStore: Sendable {
    let pool: PostgresPool
    let merchantID: String

    // MARK: Create

    /// Inserts the order, its first transition and its `start` command in one statement;
    /// returns false when an order with this id exists (nothing is written then).
    func insertOrder(
        orderID: String, workflow: String, version: Int, state: String, attributes: PostgresJSON, content: PostgresJSON,
        creationKey: String?, at time: Date, input: PostgresJSON, rendered: PostgresJSON, actor: String?,
        channelStoragePolicy: Int? = nil
    ) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            WITH new_order AS (
                INSERT INTO orders (merchant_id, order_id, workflow_name, workflow_version, state, seq, attributes,
                                    content, creation_key, created_at, updated_at, state_entered_at)
                VALUES ($1, $2, $3, $4, $5, 1, $6::jsonb, $7::jsonb, $8, $9, $9, $9)
                ON CONFLICT (merchant_id, order_id) DO NOTHING
                RETURNING merchant_id, order_id
            ), history AS (
                INSERT INTO order_transitions (merchant_id, order_id, seq, from_state, to_state, input, rendered,
                                               actor, idempotency_key, occurred_at)
                SELECT merchant_id, order_id, 1, NULL, $5, $10::jsonb, $11::jsonb, $12, $8, $9 FROM new_order
            ), command AS (
                INSERT INTO activity_commands (merchant_id, order_id, seq, kind)
                SELECT merchant_id, order_id, 1, 'start' FROM new_order
            ), channel AS (
                -- A broadcast event: the worker creates its channel (no APNs call in here).
                INSERT INTO order_channels (merchant_id, order_id, storage_policy)
                SELECT merchant_id, order_id, $13 FROM new_order WHERE $13::smallint IS NOT NULL
            )
            SELECT count(*) AS created FROM new_order
            """, merchantID, orderID, workflow, version, state, attributes, content, creationKey, time, input, rendered, actor,
            channelStoragePolicy)
        ).single().decode("created", as: Int.self) > 0
    }

    /// The order created with this idempotency key, if any.
    func order(creationKey: String) async throws -> String? {
        try await pool.query(PostgresQuery(
            "SELECT order_id FROM orders WHERE merchant_id = $1 AND creation_key = $2", merchantID, creationKey)
        ).first?.decode("order_id")
    }

    /// The idempotency key the order was created with.
    func creationKey(orderID: String) async throws -> String? {
        try await pool.query(PostgresQuery(
            "SELECT creation_key FROM orders WHERE merchant_id = $1 AND order_id = $2", merchantID, orderID)
        ).single().decode("creation_key", as: String?.self)
    }

    // MARK: Advance (on the advance's connection)

    /// The order as an advance needs it, and the step an earlier use of `idempotencyKey`
    /// wrote (`replay_seq`), in one round trip; nil when the order does not exist.
    func orderForAdvance(
        _ connection: isolated PostgresConnection, orderID: String, idempotencyKey: String?
    ) async throws -> PostgresRow? {
        // Two statements, not one with `t.idempotency_key = $3` for both: with a NULL key
        // PostgreSQL's custom plan drops the subquery and always looks cheaper than the generic
        // plan, so the one statement was planned again on every keyless read
        // (pg_stat_statements shows as many plans as calls), which costs more than it runs.
        guard let idempotencyKey else {
            return try await connection.query(PostgresQuery("""
                SELECT workflow_name, workflow_version, state, seq, attributes, content, created_at, NULL::integer AS replay_seq
                FROM orders WHERE merchant_id = $1 AND order_id = $2
                """, merchantID, orderID)).first
        }
        return try await connection.query(PostgresQuery("""
            SELECT o.workflow_name, o.workflow_version, o.state, o.seq, o.attributes, o.content, o.created_at,
                   (SELECT t.seq FROM order_transitions t
                     WHERE t.merchant_id = o.merchant_id AND t.order_id = o.order_id AND t.idempotency_key = $3) AS replay_seq
            FROM orders o WHERE o.merchant_id = $1 AND o.order_id = $2
            """, merchantID, orderID, idempotencyKey)).first
    }

    /// When the order last changed; nil when it does not exist.
    func updatedAt(_ connection: isolated PostgresConnection, orderID: String) async throws -> Date? {
        try await connection.query(PostgresQuery(
            "SELECT updated_at FROM orders WHERE merchant_id = $1 AND order_id = $2", merchantID, orderID)
        ).first?.decode("updated_at", as: Date.self)
    }

    /// The order's broadcast channel as it stands, on the connection of the advance that moved
    /// it (the answer carries the channel, as every read of the order does); nil without one.
    func channel(_ connection: isolated PostgresConnection, orderID: String) async throws -> BroadcastChannelInfo? {
        try await connection.query(PostgresQuery("""
            SELECT state AS channel_state, channel_id, storage_policy AS channel_storage_policy, reason AS channel_reason
            FROM order_channels WHERE merchant_id = $1 AND order_id = $2
            """, merchantID, orderID)).first.map(BroadcastChannelInfo.init(row:))
    }

    /// Moves the order, appends the transition and enqueues its activity command in one
    /// statement, guarded by the sequence number the caller saw: the new sequence number, or
    /// nil when the order moved meanwhile (nothing is written then). A unique violation means
    /// the idempotency key was used concurrently.
    func writeTransition(
        orderID: String, from state: String, expectedSeq: Int, to target: String,
        event: String?, content: PostgresJSON, input: PostgresJSON, rendered: PostgresJSON, actor: String?,
        idempotencyKey: String?, commandKind: String, at time: Date
    ) async throws(PostgresError) -> Int? {
        // Committed together with other callers' advances when several come at once (one
        // round trip and one commit for the group); each still commits exactly once, with its
        // history and outbox rows, or fails on its own (`queryCommittingTogether`). The caller
        // holds no connection while it waits: groups are not capped at the pool's size.
        let written = try await pool.queryCommittingTogether(PostgresQuery("""
            WITH moved AS (
                UPDATE orders SET state = $3, seq = seq + 1, content = $4::jsonb, updated_at = $5, state_entered_at = $5
                WHERE merchant_id = $1 AND order_id = $2 AND seq = $6
                RETURNING merchant_id, order_id, seq
            ), history AS (
                INSERT INTO order_transitions (merchant_id, order_id, seq, from_state, to_state, event, input,
                                               rendered, actor, idempotency_key, occurred_at)
                SELECT merchant_id, order_id, seq, $7, $3, $8, $9::jsonb, $10::jsonb, $11, $12, $5 FROM moved
            ), command AS (
                INSERT INTO activity_commands (merchant_id, order_id, seq, kind)
                SELECT merchant_id, order_id, seq, $13 FROM moved
            )
            SELECT seq FROM moved
            """, merchantID, orderID, target, content, time, expectedSeq, state, event, input, rendered, actor,
            idempotencyKey, commandKind), batch: Self.writeTransitions)
        return try written.first?.decode("seq", as: Int.self)
    }

    /// `writeTransition`'s statement for a group of advances at once: each parameter is the
    /// array of the group's values. An order twice in the group moves once (the other finds
    /// its sequence number taken, as it would if it came second), and with a join row per
    /// advance the update, history and command are those of the advance that moved it.
    ///
    /// The orders are moved in the order of their keys' bytes, as the worker ends its leases
    /// (`OutboxStore.complete`): two statements that lock the same orders in one order wait for
    /// each other but cannot deadlock. (The plan walks the sorted input and probes each order's
    /// key; a plan that did not would only bring back the deadlock, which PostgreSQL breaks after
    /// a second: this group then runs one statement at a time, and the worker records again.)
    ///
    /// Each array is read through a sub-select so that the planner cannot see how long it is:
    /// with the length in sight every group size looks cheaper planned afresh, and PostgreSQL
    /// planned the statement on every call (pg_stat_statements shows it: more time planning
    /// a group than executing it); blind, it keeps one generic plan per connection.
    private static let writeTransitions: StaticString = """
        WITH input AS (
            SELECT * FROM unnest((SELECT $1::text[]), (SELECT $2::text[]), (SELECT $3::text[]), (SELECT $4::jsonb[]),
                                 (SELECT $5::timestamptz[]), (SELECT $6::integer[]), (SELECT $7::text[]), (SELECT $8::text[]),
                                 (SELECT $9::jsonb[]), (SELECT $10::jsonb[]), (SELECT $11::text[]), (SELECT $12::text[]),
                                 (SELECT $13::text[]))
                WITH ORDINALITY AS i(merchant_id, order_id, to_state, content, occurred_at, expected_seq, from_state, event,
                                     input, rendered, actor, idempotency_key, kind, batch_ordinal)
        ), moved AS (
            UPDATE orders o SET state = i.to_state, seq = o.seq + 1, content = i.content, updated_at = i.occurred_at,
                                state_entered_at = i.occurred_at
            FROM (SELECT * FROM input ORDER BY merchant_id COLLATE "C", order_id COLLATE "C") i
            WHERE o.merchant_id = i.merchant_id AND o.order_id = i.order_id AND o.seq = i.expected_seq
            RETURNING o.merchant_id, o.order_id, o.seq, i.batch_ordinal, i.from_state, i.to_state, i.event, i.input,
                      i.rendered, i.actor, i.idempotency_key, i.kind, i.occurred_at
        ), history AS (
            INSERT INTO order_transitions (merchant_id, order_id, seq, from_state, to_state, event, input, rendered, actor,
                                           idempotency_key, occurred_at)
            SELECT merchant_id, order_id, seq, from_state, to_state, event, input, rendered, actor, idempotency_key,
                   occurred_at FROM moved
        ), command AS (
            INSERT INTO activity_commands (merchant_id, order_id, seq, kind) SELECT merchant_id, order_id, seq, kind FROM moved
        )
        SELECT batch_ordinal, seq FROM moved
        """

    // MARK: Reads

    /// The order's row for an `OrderSnapshot`; nil when it does not exist.
    func snapshotRow(orderID: String) async throws -> PostgresRow? {
        try await pool.query(PostgresQuery("""
            SELECT o.order_id, o.workflow_name, o.workflow_version, o.state, o.seq, o.attributes, o.content, o.created_at,
                   o.updated_at, o.state_entered_at,
                   c.state AS channel_state, c.channel_id, c.storage_policy AS channel_storage_policy, c.reason AS channel_reason
            FROM orders o
            LEFT JOIN order_channels c ON c.merchant_id = o.merchant_id AND c.order_id = o.order_id
            WHERE o.merchant_id = $1 AND o.order_id = $2
            """, merchantID, orderID)).first
    }

    /// One transition of the order.
    func transition(orderID: String, seq: Int) async throws -> TransitionRecord {
        try TransitionRecord(row: try await pool.query(PostgresQuery("""
            SELECT seq, from_state, to_state, event, input, rendered, actor, idempotency_key, occurred_at
            FROM order_transitions WHERE merchant_id = $1 AND order_id = $2 AND seq = $3
            """, merchantID, orderID, seq)).single())
    }

    /// The step written with `idempotencyKey`.
    func transitionSeq(orderID: String, idempotencyKey: String) async throws -> Int {
        try await pool.query(PostgresQuery(
            "SELECT seq FROM order_transitions WHERE merchant_id = $1 AND order_id = $2 AND idempotency_key = $3",
            merchantID, orderID, idempotencyKey)).single().decode("seq", as: Int.self)
    }

    /// Every transition of the order, oldest first, and whether an Android phone follows the
    /// order: a follower with an FCM token, a rejected one included (asked in the same statement,
    /// evaluated once, to spare a history a round trip).
    func transitions(orderID: String) async throws -> (transitions: [TransitionRecord], followedOnAndroid: Bool) {
        let rows = try await pool.query(PostgresQuery("""
            SELECT seq, from_state, to_state, event, input, rendered, actor, idempotency_key, occurred_at,
                   EXISTS (SELECT 1 FROM order_followers f
                           JOIN devices d ON d.merchant_id = f.merchant_id AND d.device_id = f.device_id
                           WHERE f.merchant_id = $1 AND f.order_id = $2 AND d.fcm_token IS NOT NULL) AS followed_on_android
            FROM order_transitions WHERE merchant_id = $1 AND order_id = $2 ORDER BY seq
            """, merchantID, orderID))
        return (try rows.map(TransitionRecord.init(row:)),
                try rows.first?.decode("followed_on_android", as: Bool.self) ?? false)
    }

    /// The order, its devices' activities and its commands not handled yet, in one statement
    /// (one round trip, one snapshot): a row per activity, by device, each with the order's
    /// columns (`OrderSnapshot(row:)`) and the count (`pending`); one row with a null
    /// `device_id` when no device follows it; none when the order does not exist.
    func details(orderID: String) async throws -> PostgresRows {
        // Planned at each run: the queue empties and fills (OutboxStore.claim says why).
        try await pool.query(PostgresQuery("""
            SELECT o.order_id, o.workflow_name, o.workflow_version, o.state, o.seq, o.attributes, o.content, o.created_at,
                   o.updated_at, o.state_entered_at,
                   c.state AS channel_state, c.channel_id, c.storage_policy AS channel_storage_policy, c.reason AS channel_reason,
                   (SELECT count(*) FROM activity_commands ac WHERE ac.merchant_id = o.merchant_id AND ac.order_id = o.order_id) AS pending,
                   a.device_id, a.status, right(a.update_token, 8) AS suffix, a.last_seq, a.last_pushed_at, a.app_state,
                   a.app_reported_at, a.app_applied_at, a.app_applied_seq
            FROM orders o
            LEFT JOIN order_channels c ON c.merchant_id = o.merchant_id AND c.order_id = o.order_id
            LEFT JOIN activities a ON a.merchant_id = o.merchant_id AND a.order_id = o.order_id
            WHERE o.merchant_id = $1 AND o.order_id = $2
            ORDER BY a.device_id
            """, merchantID, orderID).plannedEachRun())
    }

    /// A page of orders (one more than `limit`, to tell whether another page follows), with
    /// their activities' statuses.
    func orderPage(workflow: String?, state: String?, after: String?, limit: Int) async throws -> PostgresRows {
        try await pool.query(PostgresQuery("""
            SELECT o.order_id, o.workflow_name, o.workflow_version, o.state, o.seq, o.attributes, o.content,
                   o.created_at, o.updated_at, o.state_entered_at,
                   ARRAY(SELECT a.status FROM activities a
                         WHERE a.merchant_id = o.merchant_id AND a.order_id = o.order_id ORDER BY a.device_id) AS statuses
            FROM orders o
            WHERE o.merchant_id = $1 AND ($2::text IS NULL OR o.workflow_name = $2)
              AND ($3::text IS NULL OR o.state = $3) AND ($4::text IS NULL OR o.order_id > $4)
            ORDER BY o.order_id LIMIT $5
            """, merchantID, workflow, state, after, limit + 1))
    }

    /// Orders of a workflow version that have been in `state` since `dueBefore` or earlier,
    /// longest first: those a timer of that state is due for.
    func ordersDueForTimer(
        workflow: String, version: Int, state: String, dueBefore: Date, limit: Int
    ) async throws -> [(orderID: String, seq: Int)] {
        try await pool.query(PostgresQuery("""
            SELECT order_id, seq FROM orders
            WHERE merchant_id = $1 AND workflow_name = $2 AND workflow_version = $3 AND state = $4
              AND state_entered_at <= $5
            ORDER BY state_entered_at LIMIT $6
            """, merchantID, workflow, version, state, dueBefore, limit)
        ).map { (try $0.decode("order_id", as: String.self), try $0.decode("seq", as: Int.self)) }
    }

    // MARK: Push records

    /// Every push attempt for the order, oldest first.
    func deliveries(orderID: String) async throws -> [DeliveryRecord] {
        try await pool.query(PostgresQuery("""
            SELECT id, order_id, device_id, seq, merged, event, token_kind, token_suffix, priority, aps_timestamp,
                   alert_title, apns_id, status, reason, outcome, attempted_at, latency_ms, retried_at, platform
            FROM deliveries WHERE merchant_id = $1 AND order_id = $2 ORDER BY id
            """, merchantID, orderID)).map(DeliveryRecord.init(row:))
    }

    /// Push attempts, newest first; with `failedOnly`, the dead letters not yet retried.
    func recentDeliveries(failedOnly: Bool, limit: Int) async throws -> [DeliveryRecord] {
        try await pool.query(PostgresQuery("""
            SELECT id, order_id, device_id, seq, merged, event, token_kind, token_suffix, priority, aps_timestamp,
                   alert_title, apns_id, status, reason, outcome, attempted_at, latency_ms, retried_at, platform
            FROM deliveries
            WHERE merchant_id = $1 AND (NOT $2 OR (outcome = 'dead' AND retried_at IS NULL))
            ORDER BY attempted_at DESC, id DESC LIMIT $3
            """, merchantID, failedOnly, limit)).map(DeliveryRecord.init(row:))
    }

    /// What became of a dead letter's retry.
    enum RequeueOutcome: Sendable {
        case requeued
        /// The delivery exists but is not a dead letter waiting for a retry.
        case notDeadLetter
        case notFound
    }

    /// Marks a dead letter retried, clears its activity's failures and queues a `retry` of the
    /// order's current state for its device, in one transaction.
    func requeueDeadLetter(id: Int64) async throws -> RequeueOutcome {
        try await pool.transaction { [merchantID] connection -> RequeueOutcome in
            let row = try await connection.query(PostgresQuery("""
                UPDATE deliveries SET retried_at = now()
                WHERE merchant_id = $1 AND id = $2 AND outcome = 'dead' AND retried_at IS NULL
                RETURNING order_id, device_id
                """, merchantID, id)).first
            guard let row else {
                let exists = try await connection.query(PostgresQuery(
                    "SELECT 1 AS found FROM deliveries WHERE merchant_id = $1 AND id = $2", merchantID, id)).first != nil
                return exists ? .notDeadLetter : .notFound
            }
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
            return .requeued
        }
    }
}
