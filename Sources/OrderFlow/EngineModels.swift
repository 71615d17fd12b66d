import Foundation
import PGKit
import WorkflowKit

/// What a merchant backend gives to create an order.
public struct NewOrder: Sendable {
    /// The merchant's own id for the order ("1042").
    public var orderID: String
    /// The workflow's name; the order is pinned to its newest version unless `workflowVersion`
    /// names one.
    public var workflow: String
    public var workflowVersion: Int?
    /// The activity's static attributes, checked against the workflow's schema.
    public var attributes: JSONValue
    /// Input for the initial state's templates (the workflow's `start-input`).
    public var input: JSONValue
    /// Retrying with the same key returns the order created the first time.
    public var idempotencyKey: String?
    /// Who or what created it, for the history ("cli:alice", "pos").
    public var actor: String?

    public init(orderID: String, workflow: String, workflowVersion: Int? = nil, attributes: JSONValue,
                input: JSONValue = [:], idempotencyKey: String? = nil, actor: String? = nil) {
        self.orderID = orderID
        self.workflow = workflow
        self.workflowVersion = workflowVersion
        self.attributes = attributes
        self.input = input
        self.idempotencyKey = idempotencyKey
        self.actor = actor
    }
}

/// An order as it is now.
public struct OrderSnapshot: Sendable, Hashable, Codable {
    public var orderID: String
    public var workflow: String
    public var workflowVersion: Int
    public var state: String
    /// Sequence number of the latest transition (1 is the creation).
    public var seq: Int
    public var isFinal: Bool
    public var attributes: JSONValue
    /// The ContentState the activity shows now.
    public var content: JSONValue
    public var createdAt: Date
    public var updatedAt: Date
    public var stateEnteredAt: Date
    /// The APNs broadcast channel of an order whose workflow has `audience: broadcast`; nil
    /// for per-device orders (and in lists).
    public var channel: BroadcastChannelInfo? = nil
}

/// An order's broadcast channel (iOS 18): what the app needs to subscribe
/// (`pushType: .channel(id)`) and where the channel stands.
public struct BroadcastChannelInfo: Sendable, Hashable, Codable {
    public enum State: String, Sendable, Hashable, Codable {
        /// The worker has not created the channel yet (the id follows within moments).
        case pending
        /// The channel exists; updates are broadcast to it.
        case open
        /// The end was broadcast; the channel is deleted once its retention has passed.
        case ended
        /// The channel was deleted after the end.
        case deleted
        /// The worker gave up on the channel; ``reason`` says why.
        case failed
    }

    /// APNs' channel id (base64); nil while pending.
    public var id: String?
    public var state: State
    /// `latest` (APNs keeps the newest update for late joiners) or `none`.
    public var storage: ChannelStorage
    /// The last refusal or failure, for people.
    public var reason: String?
}

extension ChannelStorage: Codable {}

/// One entry of an order's history.
public struct TransitionRecord: Sendable, Hashable, Codable {
    public var seq: Int
    /// Nil for the creation.
    public var from: String?
    public var to: String
    public var event: String?
    public var input: JSONValue
    public var rendered: StoredRendering
    public var actor: String?
    public var idempotencyKey: String?
    public var occurredAt: Date
    /// The FCM data message the transition renders for Android phones, as sent (keys are
    /// `AndroidData`'s); filled by ``OrderFlowEngine/history(_:)`` for an order an Android phone
    /// follows or was sent to, nil elsewhere and where it cannot be rendered.
    public var android: [String: String]? = nil
}

/// The outcome of `advance`.
public struct AdvanceResult: Sendable, Hashable, Codable {
    public var order: OrderSnapshot
    public var transition: TransitionRecord
    /// True when the idempotency key had been used: nothing changed, this is the first result.
    public var replayed: Bool
}

/// The Live Activity of one device for one order.
public struct ActivityInfo: Sendable, Hashable, Codable {
    public var deviceID: String
    /// waiting (for a token), starting (push-to-start sent), active, ended, gone (token dead),
    /// alerts (device gets ordinary notifications).
    public var status: String
    /// The last characters of the activity's update token, never the whole token.
    public var tokenSuffix: String?
    /// The newest transition this device was sent.
    public var lastSeq: Int
    public var lastPushedAt: Date?
    /// What the customer's app last reported (active, stale, ended, dismissed), and when.
    public var appState: String?
    public var appReportedAt: Date?
    /// When the app applied the content it shows (its clock), and the newest transition the
    /// device had been sent by then.
    public var appAppliedAt: Date?
    public var appAppliedSeq: Int?
}

extension ActivityInfo {
    init(row: PostgresRow) throws {
        deviceID = try row.decode("device_id")
        status = try row.decode("status")
        tokenSuffix = try row.decode("suffix", as: String?.self)
        lastSeq = try row.decode("last_seq")
        lastPushedAt = try row.decode("last_pushed_at", as: Date?.self)
        appState = try row.decode("app_state", as: String?.self)
        appReportedAt = try row.decode("app_reported_at", as: Date?.self)
        appAppliedAt = try row.decode("app_applied_at", as: Date?.self)
        appAppliedSeq = try row.decode("app_applied_seq", as: Int?.self)
    }
}

public struct OrderDetails: Sendable, Hashable, Codable {
    public var order: OrderSnapshot
    public var activities: [ActivityInfo]
    /// Activity commands not yet handled by a worker.
    public var pendingCommands: Int
}

/// What became of one push attempt (`deliveries.outcome`).
public enum DeliveryOutcome: String, Sendable, Hashable, Codable, CaseIterable, PostgresDecodable {
    /// APNs accepted the push.
    case sent
    /// It failed in a way worth another try (5xx, 429, no answer): it will be sent again.
    case retry
    /// It failed `WorkerConfiguration.maximumAttempts` times: a dead letter, kept here.
    case dead
    /// APNs declared the token invalid or expired: nothing more is sent to it.
    case tokenDead = "token_dead"
    /// APNs refused the payload itself: not retried.
    case rejected

    /// Whether the push ended without reaching the device (and will not be tried again).
    public var isFailure: Bool { self == .dead || self == .tokenDead || self == .rejected }

    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        guard let outcome = DeliveryOutcome(rawValue: text) else {
            throw PostgresDecodingFailure("'\(text.prefix(30))' is not a delivery outcome")
        }
        self = outcome
    }
}

/// One push attempt and its outcome: through APNs to an iPhone, or through FCM to an Android phone.
public struct DeliveryRecord: Sendable, Hashable, Codable {
    public var id: Int64
    public var orderID: String
    public var deviceID: String
    public var seq: Int
    /// Transitions merged into this push.
    public var merged: Int
    public var event: String
    public var tokenKind: String
    public var tokenSuffix: String
    public var priority: Int
    public var apsTimestamp: Int?
    public var alertTitle: String?
    public var apnsID: UUID?
    public var status: Int?
    public var reason: String?
    public var outcome: DeliveryOutcome
    public var attemptedAt: Date
    public var latencyMilliseconds: Double?
    public var retriedAt: Date?
    /// `ios` (through APNs) or `android` (an FCM data message).
    public var platform: String = "ios"
    /// In a history, for an Android delivery: the data message it sent, rendered again from the
    /// stored transitions it carried (a redacted order's from its redactions).
    public var android: [String: String]? = nil
}

public struct OrderHistory: Sendable, Hashable, Codable {
    public var order: OrderSnapshot
    public var transitions: [TransitionRecord]
    public var deliveries: [DeliveryRecord]
}

/// Filters for `orders(_:)`.
public struct OrderQuery: Sendable, Hashable {
    public var workflow: String?
    public var state: String?
    /// The `nextCursor` of the previous page.
    public var after: String?
    public var limit: Int

    public init(workflow: String? = nil, state: String? = nil, after: String? = nil, limit: Int = 50) {
        self.workflow = workflow
        self.state = state
        self.after = after
        self.limit = min(max(1, limit), 1000)
    }
}

/// One order on the board.
public struct OrderSummary: Sendable, Hashable, Codable {
    public var order: OrderSnapshot
    /// Each device's activity status ("active", "waiting", …).
    public var activityStatuses: [String]
}

public struct OrderPage: Sendable, Hashable, Codable {
    public var orders: [OrderSummary]
    /// Pass as `OrderQuery.after` for the next page; nil on the last page.
    public var nextCursor: String?
}

// MARK: - Decoding rows

extension JSONValue {
    init(postgres json: PostgresJSON) throws {
        self = try JSONValue(json: json.text)
    }

    var postgresJSON: PostgresJSON { PostgresJSON(jsonString) }
}

extension OrderSnapshot {
    /// Reads the columns every order query selects: order_id, workflow_name, workflow_version,
    /// state, seq, attributes, content, created_at, updated_at, state_entered_at.
    init(row: PostgresRow, finalStates: Set<String>?) throws {
        orderID = try row.decode("order_id")
        workflow = try row.decode("workflow_name")
        workflowVersion = try row.decode("workflow_version")
        state = try row.decode("state")
        seq = try row.decode("seq")
        attributes = try JSONValue(postgres: row.decode("attributes"))
        content = try JSONValue(postgres: row.decode("content"))
        createdAt = try row.decode("created_at")
        updatedAt = try row.decode("updated_at")
        stateEnteredAt = try row.decode("state_entered_at")
        isFinal = finalStates?.contains(state) ?? false
        // Only reads that join `order_channels` have these columns.
        if let noChannel = try? row.isNull("channel_state"), !noChannel {
            channel = try BroadcastChannelInfo(row: row)
        }
    }
}

extension BroadcastChannelInfo {
    /// From a row with `channel_state`, `channel_id`, `channel_storage_policy` and `channel_reason`.
    init(row: PostgresRow) throws {
        self.init(
            id: try row.decode("channel_id", as: String?.self),
            state: State(rawValue: try row.decode("channel_state")) ?? .failed,
            storage: try row.decode("channel_storage_policy", as: Int.self) == 0 ? .none : .latest,
            reason: try row.decode("channel_reason", as: String?.self))
    }
}

extension TransitionRecord {
    init(row: PostgresRow) throws {
        seq = try row.decode("seq")
        from = try row.decode("from_state", as: String?.self)
        to = try row.decode("to_state")
        event = try row.decode("event", as: String?.self)
        input = try JSONValue(postgres: row.decode("input"))
        rendered = try row.decode("rendered", as: PostgresJSON.self).decode(StoredRendering.self)
        actor = try row.decode("actor", as: String?.self)
        idempotencyKey = try row.decode("idempotency_key", as: String?.self)
        occurredAt = try row.decode("occurred_at")
    }
}

extension DeliveryRecord {
    init(row: PostgresRow) throws {
        id = try row.decode("id")
        orderID = try row.decode("order_id")
        deviceID = try row.decode("device_id")
        seq = try row.decode("seq")
        merged = try row.decode("merged")
        event = try row.decode("event")
        tokenKind = try row.decode("token_kind")
        tokenSuffix = try row.decode("token_suffix")
        priority = try row.decode("priority")
        apsTimestamp = try row.decode("aps_timestamp", as: Int?.self)
        alertTitle = try row.decode("alert_title", as: String?.self)
        apnsID = try row.decode("apns_id", as: UUID?.self)
        status = try row.decode("status", as: Int?.self)
        reason = try row.decode("reason", as: String?.self)
        outcome = try row.decode("outcome")
        attemptedAt = try row.decode("attempted_at")
        latencyMilliseconds = try row.decode("latency_ms", as: Double?.self)
        retriedAt = try row.decode("retried_at", as: Date?.self)
        platform = try row.decode("platform")
    }
}
