import Foundation
import PGKit
import WorkflowKit

/// The worker's SQL: claim orders, read what they need, write back what was sent. Each method
/// is one statement (one round trip) for a whole batch of orders.
struct OutboxStore: Sendable {
    let pool: PostgresPool

    struct OrderKey: Sendable, Hashable {
        var merchantID: String
        var orderID: String
    }

    // MARK: Claim

    /// What a claim leased: the orders read; those that changed after the read's snapshot
    /// (their leases are to be given back at once, for a claim that reads them afresh); and
    /// those whose row could not be read (their leases are kept, so they are looked at again
    /// when the lease expires, not in a hot loop).
    struct ClaimedBatch: Sendable {
        var orders: [OutboxOrder] = []
        var changed: [OrderKey] = []
        var unreadable: [(order: String, error: String)] = []

        var count: Int { orders.count + changed.count + unreadable.count }
    }

    /// The claim's settings (``PostgresQuery/withLocalSettings(_:)``). Its commit does not
    /// wait for the WAL flush. And it is planned without sequential scans: every row it reads
    /// has an index to it (the ready index, the primary keys), while the outbox's statistics
    /// may say it is empty (it was, at the last analyze) when a burst's rows, live or dead,
    /// fill its pages — and a plan that scans it whole does so once per candidate.
    static let claimSettings: [(name: StaticString, value: StaticString)] = [
        ("synchronous_commit", "off"), ("enable_seqscan", "off"),
    ]

    /// Leases up to `limit` orders that have commands due and no live lease, and reads them: each
    /// with its due commands, followers' activities and tokens, and the transitions not every
    /// follower has seen (at most `maximumTransitions` newest, always including the current one).
    /// One statement: the claim and the read are one round trip, on the path of every push.
    ///
    /// Candidates are orders, each once, at its oldest ready command, walked in `(available_at,
    /// id)` order (the index) and probed by primary key so that orders leased by other workers
    /// are passed over; the order rows are then locked `FOR UPDATE SKIP LOCKED` (so concurrent
    /// claims never return the same order, and an order being moved by the engine is taken next
    /// time) and leased. Every probe is a sub-select the planner cannot turn into a join over
    /// all orders, so the plan stays cheap at any table size (`scripts/bench-claim-plans`).
    /// Only the orders of `merchants` (a NULL set is every merchant's), none of `excluded`'s
    /// (merchants whose pushes are paused or held back).
    ///
    /// The read is of the statement's snapshot, so an order and its history agree; but the lock
    /// takes the order's newest row. When that is not the row of the snapshot, a transaction
    /// committed in between — another batch's completion that sent its pushes and released it,
    /// an advance — and what was read may be stale (sending it could repeat a push): such an
    /// order comes back in `changed`, unread, to be released for a fresh claim.
    ///
    /// The claim's commit does not wait for the WAL flush (`synchronous_commit` off for this
    /// transaction only): it is on the path of every push, and a lease lost in a crash loses
    /// nothing — the commands are still there, and the next claim takes them (the completion
    /// after the send waits for its flush, and with it for the claim's).
    ///
    /// Prepared once per connection, its plan kept: planned without sequential scans
    /// (``claimSettings``), it walks the indexes whatever the outbox's statistics say. A plan
    /// kept from while the outbox stood empty (a quiet hour, vacuumed to nothing) otherwise read
    /// `activity_commands` whole for each command once a burst filled it — claims of 100 took
    /// seconds with a few thousand queued — and planning each claim afresh instead costs more
    /// than a small claim runs, on the path of every push.
    func claim(workerID: String, limit: Int, lease: Duration, merchants: MerchantScope, excluding excluded: [String] = [],
               maximumTransitions: Int) async throws -> ClaimedBatch
    {
        let query = PostgresQuery("""
            WITH candidates AS (
                SELECT ready.merchant_id, ready.order_id
                FROM (
                    SELECT c.merchant_id, c.order_id
                    FROM activity_commands c
                    -- Probed per ready command, in the ready index's order (OFFSET 0 keeps the
                    -- sub-select from being flattened into a join: with a few hundred ready of
                    -- 50,000 orders, plans for the values at hand chose a hash join over every
                    -- order, 11 ms). Each order counts once, at its oldest ready command: the
                    -- candidates are orders, however many commands wait for each.
                    CROSS JOIN LATERAL (
                        SELECT FROM orders o
                        WHERE o.merchant_id = c.merchant_id AND o.order_id = c.order_id
                          AND (o.dispatch_lease_until IS NULL OR o.dispatch_lease_until < now())
                          AND NOT EXISTS (
                              SELECT FROM activity_commands e
                              WHERE e.merchant_id = c.merchant_id AND e.order_id = c.order_id
                                AND e.available_at <= now() AND (e.available_at, e.id) < (c.available_at, c.id))
                        OFFSET 0
                    ) free
                    WHERE c.available_at <= now()
                      AND ($4::text[] IS NULL OR c.merchant_id = ANY($4::text[]))
                      -- `|| ''` hides the column's statistics: with one merchant (most databases)
                      -- they make `<> ALL` look as if it kept no row, and the cached generic plan
                      -- then read and sorted every ready command (30–40 ms with 10,000 queued)
                      -- instead of walking the ready index (5 ms).
                      AND NOT (c.merchant_id || '' = ANY($5::text[]))
                    ORDER BY c.available_at, c.id
                    LIMIT $2 * 4
                ) ready
            ), locked AS (
                -- One probe by primary key per candidate, by construction: a sub-select that
                -- locks is never flattened into a join (as a join the planner chose a hash join
                -- over every order at 50,000 orders, 20–30 ms).
                SELECT l.merchant_id, l.order_id, l.version
                FROM candidates k
                CROSS JOIN LATERAL (
                    SELECT o.merchant_id, o.order_id, o.xmin AS version
                    FROM orders o
                    WHERE o.merchant_id = k.merchant_id AND o.order_id = k.order_id
                      AND (o.dispatch_lease_until IS NULL OR o.dispatch_lease_until < now())
                    FOR UPDATE SKIP LOCKED
                ) l
                LIMIT $2
            ), claimed AS (
                UPDATE orders o
                SET dispatch_lease_until = now() + make_interval(secs => $3), dispatch_owner = $1
                FROM locked
                WHERE o.merchant_id = locked.merchant_id AND o.order_id = locked.order_id
                RETURNING o.merchant_id, o.order_id, locked.version
            )
            SELECT o.merchant_id, o.order_id, o.xmin = k.version AS current, o.workflow_name, o.workflow_version, o.state, o.seq, o.attributes,
                   COALESCE((SELECT t.input FROM order_transitions t
                             WHERE t.merchant_id = o.merchant_id AND t.order_id = o.order_id AND t.seq = 1),
                            '{}'::jsonb) AS start_input,
                   COALESCE((SELECT json_agg(json_build_object('id', c.id, 'seq', c.seq, 'kind', c.kind, 'device', c.device_id)
                                             ORDER BY c.id)
                             FROM activity_commands c
                             WHERE c.merchant_id = o.merchant_id AND c.order_id = o.order_id AND c.available_at <= now()),
                            '[]'::json) AS commands,
                   COALESCE((SELECT json_agg(json_build_object(
                                 'device', f.device_id,
                                 'followedAt', extract(epoch FROM f.followed_at),
                                 'status', a.status,
                                 'updateToken', a.update_token,
                                 'tokenUpdatedAt', extract(epoch FROM a.token_updated_at),
                                 'startedAt', extract(epoch FROM a.started_at),
                                 'lastSeq', COALESCE(a.last_seq, 0),
                                 'lastAlertSeq', COALESCE(a.last_alert_seq, 0),
                                 'lastTimestamp', COALESCE(a.last_timestamp, 0),
                                 'lastPushedAt', extract(epoch FROM a.last_pushed_at),
                                 'nextAttemptAt', extract(epoch FROM a.next_attempt_at),
                                 'failures', COALESCE(a.failures, 0),
                                 'alertToken', CASE WHEN d.alert_token_invalid_at IS NULL THEN d.alert_token END,
                                 'pushToStartTokens', (SELECT json_object_agg(p.attributes_type, p.token)
                                                       FROM push_to_start_tokens p
                                                       WHERE p.merchant_id = f.merchant_id AND p.device_id = f.device_id
                                                         AND p.invalid_at IS NULL),
                                 'fcmToken', CASE WHEN d.fcm_token_invalid_at IS NULL THEN d.fcm_token END,
                                 'fcmLastSeq', COALESCE(a.fcm_last_seq, 0),
                                 'fcmLastPushedAt', extract(epoch FROM a.fcm_last_pushed_at),
                                 'fcmNextAttemptAt', extract(epoch FROM a.fcm_next_attempt_at),
                                 'fcmFailures', COALESCE(a.fcm_failures, 0),
                                 'fcmEndedAt', extract(epoch FROM a.fcm_ended_at))
                                             ORDER BY f.device_id)
                             FROM order_followers f
                             LEFT JOIN activities a
                                    ON a.merchant_id = f.merchant_id AND a.order_id = f.order_id AND a.device_id = f.device_id
                             LEFT JOIN devices d ON d.merchant_id = f.merchant_id AND d.device_id = f.device_id
                             WHERE f.merchant_id = o.merchant_id AND f.order_id = o.order_id),
                            '[]'::json) AS activities,
                   COALESCE((SELECT json_agg(json_build_object('seq', h.seq, 'occurredAt', extract(epoch FROM h.occurred_at),
                                                               'rendered', h.rendered,
                                                               -- The newest one's input, for the Android message's templates.
                                                               'input', CASE WHEN h.seq = o.seq THEN h.input END) ORDER BY h.seq)
                             FROM (SELECT t.seq, t.occurred_at, t.rendered, t.input
                                   FROM order_transitions t
                                   WHERE t.merchant_id = o.merchant_id AND t.order_id = o.order_id
                                     AND t.seq > LEAST(o.seq - 1, (
                                         SELECT min(LEAST(COALESCE(a.last_seq, 0), COALESCE(a.last_alert_seq, 0)))
                                         FROM order_followers f
                                         LEFT JOIN activities a ON a.merchant_id = f.merchant_id AND a.order_id = f.order_id
                                                               AND a.device_id = f.device_id
                                         WHERE f.merchant_id = o.merchant_id AND f.order_id = o.order_id), (
                                         -- A broadcast order: what its channel has not been sent.
                                         SELECT c.last_seq FROM order_channels c
                                         WHERE c.merchant_id = o.merchant_id AND c.order_id = o.order_id))
                                   ORDER BY t.seq DESC
                                   LIMIT $6) h),
                            '[]'::json) AS transitions,
                   (SELECT json_build_object(
                               'state', c.state, 'channelID', c.channel_id, 'bundleID', c.bundle_id,
                               'storagePolicy', c.storage_policy, 'generation', c.generation, 'lastSeq', c.last_seq,
                               'lastTimestamp', c.last_timestamp, 'lastPushedAt', extract(epoch FROM c.last_pushed_at),
                               'nextAttemptAt', extract(epoch FROM c.next_attempt_at), 'failures', c.failures,
                               'reason', c.reason, 'deleteAfter', extract(epoch FROM c.delete_after),
                               'openedAt', extract(epoch FROM c.opened_at), 'deletedAt', extract(epoch FROM c.deleted_at))
                    FROM order_channels c
                    WHERE c.merchant_id = o.merchant_id AND c.order_id = o.order_id) AS channel
            FROM claimed k
            JOIN orders o ON o.merchant_id = k.merchant_id AND o.order_id = k.order_id
            """, workerID, limit, lease.inSeconds, merchants.boundMerchantIDs, excluded, maximumTransitions)
        let rows = try await pool.query(query.withLocalSettings(Self.claimSettings))
        let decoder = JSONDecoder()
        var batch = ClaimedBatch()
        for row in rows {
            do {
                guard try row.decode("current", as: Bool.self) else {
                    batch.changed.append(OrderKey(merchantID: try row.decode("merchant_id"), orderID: try row.decode("order_id")))
                    continue
                }
                batch.orders.append(OutboxOrder(
                    merchantID: try row.decode("merchant_id"),
                    orderID: try row.decode("order_id"),
                    workflowName: try row.decode("workflow_name"),
                    workflowVersion: try row.decode("workflow_version"),
                    state: try row.decode("state"),
                    seq: try row.decode("seq"),
                    attributes: try JSONValue(postgres: row.decode("attributes")),
                    startInput: try JSONValue(postgres: row.decode("start_input")),
                    commands: try decoder.decode([OutboxCommand].self, from: Data(row.decode("commands", as: String.self).utf8)),
                    activities: try decoder.decode([OutboxActivity].self, from: Data(row.decode("activities", as: String.self).utf8)),
                    transitions: try OutboxTransition.list(json: row.decode("transitions", as: String.self)),
                    channel: try row.decode("channel", as: String?.self).map { try decoder.decode(OutboxChannel.self, from: Data($0.utf8)) }))
            } catch {
                batch.unreadable.append(((try? row.decode("order_id", as: String.self)) ?? "?", "\(error)"))
            }
        }
        return batch
    }

    // MARK: Complete

    /// What one batch changes, written in one statement.
    struct Completion: Sendable {
        var deliveries: [DeliveryRow] = []
        var activities: [ActivityRow] = []
        var deadPushToStartTokens: [DeadToken] = []
        var deadAlertTokens: [DeadToken] = []
        /// FCM registration tokens FCM declared gone (`devices.fcm_token_invalid_at`).
        var deadFCMTokens: [DeadToken] = []
        /// Commands that were handled (deleted).
        var handledCommands: [CommandRow] = []
        /// Wake-ups for deferred activities (rate limit, backoff).
        var deferrals: [Deferral] = []
        /// Orders whose lease ends now.
        var released: [OrderRow] = []
    }

    /// An activity to write back: its key, whether the row exists, and the merge's decision.
    struct ActivityRow: Sendable, Hashable, CompletionRow {
        var merchantID: String
        var orderID: String
        var deviceID: String
        var rowExists: Bool
        var state: ActivityState

        /// One flat object: the key's fields beside the state's.
        var completionJSON: JSONValue {
            .object([
                "merchant_id": .string(merchantID), "order_id": .string(orderID), "device_id": .string(deviceID),
                "row_exists": .bool(rowExists), "status": .string(state.status.rawValue),
                "seen_update_token": .orNull(state.seenUpdateToken), "clear_update_token": .bool(state.clearUpdateToken),
                "started_at": .orNull(state.startedAt), "ended_at": .orNull(state.endedAt), "last_seq": .int(state.lastSeq),
                "last_alert_seq": .int(state.lastAlertSeq), "last_timestamp": .int(state.lastTimestamp),
                "last_pushed_at": .orNull(state.lastPushedAt), "next_attempt_at": .orNull(state.nextAttemptAt),
                "failures": .int(state.failures),
                "fcm_last_seq": .int(state.android.lastSeq), "fcm_last_pushed_at": .orNull(state.android.lastPushedAt),
                "fcm_next_attempt_at": .orNull(state.android.nextAttemptAt), "fcm_failures": .int(state.android.failures),
                "fcm_ended_at": .orNull(state.android.endedAt),
            ])
        }
    }

    struct DeadToken: Sendable, Hashable, CompletionRow {
        var merchantID: String
        var deviceID: String
        var attributesType: String?
        var token: String

        var completionJSON: JSONValue {
            .object(["merchant_id": .string(merchantID), "device_id": .string(deviceID),
                     "attributes_type": .orNull(attributesType), "token": .string(token)])
        }
    }

    struct CommandRow: Sendable, Hashable, CompletionRow {
        var merchantID: String
        var orderID: String
        var id: Int64

        var completionJSON: JSONValue {
            .object(["merchant_id": .string(merchantID), "order_id": .string(orderID), "id": .int(Int(id))])
        }
    }

    struct Deferral: Sendable, Hashable, CompletionRow {
        var merchantID: String
        var orderID: String
        /// nil: the order's broadcast channel.
        var deviceID: String?
        var seq: Int
        var availableAt: Double

        var completionJSON: JSONValue {
            .object(["merchant_id": .string(merchantID), "order_id": .string(orderID), "device_id": .orNull(deviceID),
                     "seq": .int(seq), "available_at": .double(availableAt)])
        }
    }

    struct OrderRow: Sendable, Hashable, CompletionRow {
        var merchantID: String
        var orderID: String

        var completionJSON: JSONValue { .object(["merchant_id": .string(merchantID), "order_id": .string(orderID)]) }
    }

    /// Records the attempts, writes the activities back, invalidates dead tokens, deletes the
    /// handled commands, schedules deferred ones and ends the leases: one atomic statement.
    ///
    /// Activity rows change only where this worker's view still holds: status and start time
    /// only while the row keeps the update token the worker saw (a token registered meanwhile
    /// wins), sequence numbers and timestamps only forwards.
    /// `planning`: `.eachRun` for a full batch, whose queue may be long (a plan kept from a short queue may walk it whole).
    func complete(workerID: String, _ completion: Completion, planning: PostgresQuery.Planning = .cached) async throws {
        // Each row as the JSON object its recordset below reads (snake_case names), built
        // directly: `JSONEncoder` with `.convertToSnakeCase` costs more than the record's
        // statement under load.
        func json<Row: CompletionRow>(_ rows: [Row]) -> PostgresJSON {
            PostgresJSON(JSONValue.array(rows.map(\.completionJSON)).jsonString)
        }
        // The rows that find others by key come as a `jsonb[]`, read through a sub-select:
        // the planner then expects 10 of them, as it does for a group's advances
        // (OrderStore.writeTransitions), and probes each key. A `jsonb_to_recordset` over one
        // JSON array is taken for 100 rows: against tables of a few thousand rows (a small
        // merchant, the e2e benchmark) the generic plan then read all of `activities` and all
        // of `orders` on every record, a sequential scan per push recorded.
        func keyed<Row: CompletionRow>(_ rows: [Row]) -> [PostgresJSON] {
            rows.map { PostgresJSON($0.completionJSON.jsonString) }
        }
        var query = PostgresQuery("""
            WITH delivered AS (
                INSERT INTO deliveries (merchant_id, order_id, device_id, seq, merged, event, token_kind, token_suffix,
                                        priority, aps_timestamp, alert_title, apns_id, status, reason, outcome,
                                        attempted_at, latency_ms, platform)
                SELECT r.merchant_id, r.order_id, r.device_id, r.seq, r.merged, r.event, r.token_kind, r.token_suffix,
                       r.priority, r.aps_timestamp, r.alert_title, r.apns_id, r.status, r.reason, r.outcome,
                       to_timestamp(r.attempted_at), r.latency_ms, r.platform
                FROM jsonb_to_recordset($2::jsonb) AS r(
                    merchant_id text, order_id text, device_id text, seq integer, merged integer, event text,
                    token_kind text, token_suffix text, priority smallint, aps_timestamp bigint, alert_title text,
                    apns_id uuid, status smallint, reason text, outcome text, attempted_at double precision,
                    latency_ms double precision, platform text)
            ), activity_rows AS (
                SELECT r.* FROM unnest((SELECT $3::jsonb[])) AS e(row) CROSS JOIN LATERAL jsonb_to_record(e.row) AS r(
                    merchant_id text, order_id text, device_id text, row_exists boolean, seen_update_token text,
                    clear_update_token boolean, status text, started_at double precision, ended_at double precision,
                    last_seq integer, last_alert_seq integer, last_timestamp bigint, last_pushed_at double precision,
                    next_attempt_at double precision, failures integer, fcm_last_seq integer,
                    fcm_last_pushed_at double precision, fcm_next_attempt_at double precision, fcm_failures integer,
                    fcm_ended_at double precision)
            ), updated AS (
                UPDATE activities a SET
                    -- The customer dismissed it (the app said so while the push was out): it stays ended.
                    status = CASE WHEN a.app_state IN ('dismissed', 'ended') AND a.status = 'ended' THEN 'ended'
                                  WHEN a.update_token IS NOT DISTINCT FROM r.seen_update_token THEN r.status ELSE a.status END,
                    update_token = CASE WHEN r.clear_update_token AND a.update_token IS NOT DISTINCT FROM r.seen_update_token
                                        THEN NULL ELSE a.update_token END,
                    started_at = CASE WHEN a.update_token IS NOT DISTINCT FROM r.seen_update_token
                                      THEN to_timestamp(r.started_at) ELSE a.started_at END,
                    ended_at = CASE WHEN a.update_token IS NOT DISTINCT FROM r.seen_update_token
                                    THEN to_timestamp(r.ended_at) ELSE a.ended_at END,
                    last_seq = GREATEST(a.last_seq, r.last_seq),
                    last_alert_seq = GREATEST(a.last_alert_seq, r.last_alert_seq),
                    last_timestamp = GREATEST(a.last_timestamp, r.last_timestamp),
                    last_pushed_at = GREATEST(a.last_pushed_at, to_timestamp(r.last_pushed_at)),
                    next_attempt_at = to_timestamp(r.next_attempt_at),
                    failures = r.failures,
                    -- The Android side: forwards only, and an end once sent stays.
                    fcm_last_seq = GREATEST(a.fcm_last_seq, r.fcm_last_seq),
                    fcm_last_pushed_at = GREATEST(a.fcm_last_pushed_at, to_timestamp(r.fcm_last_pushed_at)),
                    fcm_next_attempt_at = to_timestamp(r.fcm_next_attempt_at),
                    fcm_failures = r.fcm_failures,
                    fcm_ended_at = COALESCE(a.fcm_ended_at, to_timestamp(r.fcm_ended_at))
                FROM activity_rows r
                WHERE r.row_exists AND a.merchant_id = r.merchant_id AND a.order_id = r.order_id
                  AND a.device_id = r.device_id
            ), inserted AS (
                INSERT INTO activities (merchant_id, order_id, device_id, status, started_at, ended_at, last_seq,
                                        last_alert_seq, last_timestamp, last_pushed_at, next_attempt_at, failures,
                                        fcm_last_seq, fcm_last_pushed_at, fcm_next_attempt_at, fcm_failures, fcm_ended_at)
                SELECT r.merchant_id, r.order_id, r.device_id, r.status, to_timestamp(r.started_at),
                       to_timestamp(r.ended_at), r.last_seq, r.last_alert_seq, r.last_timestamp,
                       to_timestamp(r.last_pushed_at), to_timestamp(r.next_attempt_at), r.failures,
                       r.fcm_last_seq, to_timestamp(r.fcm_last_pushed_at), to_timestamp(r.fcm_next_attempt_at),
                       r.fcm_failures, to_timestamp(r.fcm_ended_at)
                FROM activity_rows r
                WHERE NOT r.row_exists
                ON CONFLICT (merchant_id, order_id, device_id) DO NOTHING
            ), dead_push_to_start AS (
                UPDATE push_to_start_tokens p SET invalid_at = now()
                FROM unnest((SELECT $4::jsonb[])) AS e(row)
                CROSS JOIN LATERAL jsonb_to_record(e.row) AS r(merchant_id text, device_id text, attributes_type text, token text)
                WHERE p.merchant_id = r.merchant_id AND p.device_id = r.device_id
                  AND p.attributes_type = r.attributes_type AND p.token = r.token
            ), dead_alert AS (
                UPDATE devices d SET alert_token_invalid_at = now()
                FROM unnest((SELECT $5::jsonb[])) AS e(row)
                CROSS JOIN LATERAL jsonb_to_record(e.row) AS r(merchant_id text, device_id text, token text)
                WHERE d.merchant_id = r.merchant_id AND d.device_id = r.device_id AND d.alert_token = r.token
            ), dead_fcm AS (
                -- Only the token FCM refused: one the app registered meanwhile stays usable.
                UPDATE devices d SET fcm_token_invalid_at = now()
                FROM unnest((SELECT $9::jsonb[])) AS e(row)
                CROSS JOIN LATERAL jsonb_to_record(e.row) AS r(merchant_id text, device_id text, token text)
                WHERE d.merchant_id = r.merchant_id AND d.device_id = r.device_id AND d.fcm_token = r.token
            ), handled AS (
                DELETE FROM activity_commands c
                USING unnest((SELECT $6::jsonb[])) AS e(row)
                CROSS JOIN LATERAL jsonb_to_record(e.row) AS r(merchant_id text, order_id text, id bigint)
                WHERE c.merchant_id = r.merchant_id AND c.order_id = r.order_id AND c.id = r.id
            ), deferred AS (
                INSERT INTO activity_commands (merchant_id, order_id, seq, kind, device_id, available_at)
                SELECT r.merchant_id, r.order_id, r.seq, 'sync', r.device_id, to_timestamp(r.available_at)
                FROM jsonb_to_recordset($7::jsonb) AS r(merchant_id text, order_id text, device_id text, seq integer,
                                                        available_at double precision)
            )
            -- The leases end in the order of the orders' keys (bytes), the order in which an
            -- engine's group of advances takes them too (OrderStore.writeTransitions): a group
            -- and a completion that share orders then wait for each other, never in a circle.
            -- (In the orders' order as the plan met them, a group of 64 advances and a batch of
            -- 100 completions deadlocked under overload, each time a second's wait.)
            UPDATE orders o SET dispatch_lease_until = NULL, dispatch_owner = NULL
            WHERE (o.merchant_id, o.order_id) IN (
                SELECT l.merchant_id, l.order_id
                FROM orders l
                JOIN (unnest((SELECT $8::jsonb[])) AS e(row)
                      CROSS JOIN LATERAL jsonb_to_record(e.row) AS r(merchant_id text, order_id text))
                  ON l.merchant_id = r.merchant_id AND l.order_id = r.order_id
                WHERE l.dispatch_owner = $1
                ORDER BY l.merchant_id COLLATE "C", l.order_id COLLATE "C"
                FOR NO KEY UPDATE OF l)
            """, workerID, json(completion.deliveries), keyed(completion.activities),
            keyed(completion.deadPushToStartTokens), keyed(completion.deadAlertTokens),
            keyed(completion.handledCommands), json(completion.deferrals), keyed(completion.released),
            keyed(completion.deadFCMTokens))
        if planning == .eachRun { query = query.plannedEachRun() }
        try await pool.query(query)
    }

    // MARK: Housekeeping

    /// Queues a `sync` for every running activity that reached `age` seconds and has nothing
    /// pending, so the time-limit policy is applied although no transition happens.
    func queueTimeLimitChecks(age: TimeInterval, maximumAttempts: Int, merchants: MerchantScope) async throws -> Int {
        try await pool.query(PostgresQuery("""
            INSERT INTO activity_commands (merchant_id, order_id, seq, kind, device_id)
            SELECT a.merchant_id, a.order_id, o.seq, 'sync', a.device_id
            FROM activities a
            JOIN orders o ON o.merchant_id = a.merchant_id AND o.order_id = a.order_id
            WHERE a.status IN ('active', 'starting')
              AND a.started_at <= now() - make_interval(secs => $1)
              AND a.failures < $2
              AND ($3::text[] IS NULL OR a.merchant_id = ANY($3::text[]))
              AND NOT EXISTS (SELECT 1 FROM activity_commands c
                              WHERE c.merchant_id = a.merchant_id AND c.order_id = a.order_id)
            """, age, maximumAttempts, merchants.boundMerchantIDs).plannedEachRun()).affectedRows  // probes the queue: as the claim
    }

    /// Commands waiting, due or deferred, of `merchants`, per merchant (those with none are absent).
    func queueDepth(merchants: MerchantScope) async throws -> [String: Int] {
        var depths: [String: Int] = [:]
        for row in try await pool.query(PostgresQuery("""
            SELECT merchant_id, count(*) AS depth FROM activity_commands
            WHERE $1::text[] IS NULL OR merchant_id = ANY($1::text[])
            GROUP BY merchant_id
            """, merchants.boundMerchantIDs)) {
            depths[try row.decode("merchant_id")] = try row.decode("depth")
        }
        return depths
    }
}

/// A row of `OutboxStore.complete`'s statement, as the JSON object its `jsonb_to_recordset` or
/// `jsonb_to_record` reads: snake_case names; nil is `null`, which is read as NULL.
protocol CompletionRow {
    var completionJSON: JSONValue { get }
}

extension DeliveryRow: CompletionRow {
    var completionJSON: JSONValue {
        .object([
            "merchant_id": .string(merchantID), "order_id": .string(orderID), "device_id": .string(deviceID), "seq": .int(seq),
            "merged": .int(merged), "event": .string(event), "token_kind": .string(tokenKind), "token_suffix": .string(tokenSuffix),
            "priority": .int(priority), "aps_timestamp": .orNull(apsTimestamp), "alert_title": .orNull(alertTitle),
            "apns_id": .orNull(apnsId), "status": .orNull(status), "reason": .orNull(reason), "outcome": .string(outcome.rawValue),
            "attempted_at": .double(attemptedAt), "latency_ms": .orNull(latencyMs), "platform": .string(platform.rawValue),
        ])
    }
}

extension JSONValue {
    static func orNull(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
    static func orNull(_ value: Int?) -> JSONValue { value.map(JSONValue.int) ?? .null }
    static func orNull(_ value: Double?) -> JSONValue { value.map(JSONValue.double) ?? .null }
}
