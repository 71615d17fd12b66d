import Foundation
import WorkflowKit

/// One claimed order as the worker read it: the order, its pending commands, its followers'
/// activities and the transitions they have not been sent, all from one snapshot.
struct OutboxOrder: Sendable {
    var merchantID: String
    var orderID: String
    var workflowName: String
    var workflowVersion: Int
    var state: String
    var seq: Int
    /// The static attributes as given at creation (normalized).
    var attributes: JSONValue
    /// The creation's input (`lifecycle.start-input`), for the start alert's templates.
    var startInput: JSONValue
    var commands: [OutboxCommand]
    var activities: [OutboxActivity]
    /// Ascending by `seq`; always includes the order's newest transition.
    var transitions: [OutboxTransition]
    /// The broadcast channel of an `audience: broadcast` order.
    var channel: OutboxChannel? = nil

    /// The rendering of the order's current state.
    var newest: OutboxTransition? { transitions.last { $0.seq == seq } }
}

/// A pending `activity_commands` row.
struct OutboxCommand: Sendable, Hashable, Decodable {
    enum Kind: String, Sendable, Decodable {
        case start, update, end, sync, retry
    }

    var id: Int64
    var seq: Int
    var kind: Kind
    /// For `sync` and `retry`: the one device concerned.
    var device: String?
}

/// A follower of the order and its `activities` row (absent fields: no row yet).
struct OutboxActivity: Sendable, Hashable, Decodable {
    var device: String
    var followedAt: Double
    /// `activities.status`; nil when the row does not exist yet.
    var status: String?
    var updateToken: String?
    var tokenUpdatedAt: Double?
    var startedAt: Double?
    var lastSeq: Int
    var lastAlertSeq: Int
    var lastTimestamp: Int
    var lastPushedAt: Double?
    var nextAttemptAt: Double?
    var failures: Int
    /// The device's ordinary APNs token, when still valid.
    var alertToken: String?
    /// Valid push-to-start tokens by `ActivityAttributes` type.
    var pushToStartTokens: [String: String]?
    /// The device's FCM registration token, when it has one FCM has not declared gone: an
    /// Android phone.
    var fcmToken: String? = nil
    /// The Android side's progress (`activities.fcm_*`).
    var fcmLastSeq: Int = 0
    var fcmLastPushedAt: Double? = nil
    var fcmNextAttemptAt: Double? = nil
    var fcmFailures: Int = 0
    var fcmEndedAt: Double? = nil
}

/// A transition the merge may fold into a push.
struct OutboxTransition: Sendable, Hashable {
    var seq: Int
    /// Commit time, epoch seconds with fractions: the base of the end-to-end latency.
    var occurredAt: Double
    var rendered: StoredRendering
    /// The transition's validated input; read for the order's newest transition only (the
    /// `android:` templates of the state it entered may use it).
    var input: JSONValue? = nil
}

extension OutboxTransition {
    /// From the store's JSON (`seq`, `occurredAt`, `rendered`), already parsed.
    init(json: JSONValue) throws {
        guard let seq = json["seq"]?.intValue, let occurredAt = json["occurredAt"]?.doubleValue, let rendered = json["rendered"] else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "a pending transition lacks its seq, occurredAt or rendering"))
        }
        let input = json["input"].flatMap { $0.isNull ? nil : $0 }
        self.init(seq: seq, occurredAt: occurredAt, rendered: try StoredRendering(json: rendered), input: input)
    }

    /// The store's JSON array of pending transitions (see `OutboxStore.load`), parsed once by
    /// the project's parser rather than member by member by `JSONDecoder`.
    static func list(json text: String) throws -> [OutboxTransition] {
        guard let items = try JSONValue(json: text).arrayValue else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "the pending transitions are not a JSON array"))
        }
        return try items.map(OutboxTransition.init(json:))
    }
}

/// An activity's row as the worker will write it back (encoded for the store's statement).
struct ActivityState: Sendable, Hashable {
    enum Status: String, Sendable, Hashable {
        case waiting, starting, active, ended, gone, alerts
    }

    var status: Status
    /// The update token the worker saw. Status and start time are written back only while the
    /// row still holds this token: a token the app registered meanwhile wins.
    var seenUpdateToken: String?
    /// Set when APNs declared the seen update token dead.
    var clearUpdateToken = false
    var startedAt: Double?
    var endedAt: Double?
    var lastSeq: Int
    var lastAlertSeq: Int
    var lastTimestamp: Int
    var lastPushedAt: Double?
    var nextAttemptAt: Double?
    var failures: Int
    /// The Android side, tracked apart: an FCM message neither waits for nor stops the APNs pushes.
    var android: AndroidProgress

    init(_ activity: OutboxActivity) {
        status = activity.status.flatMap(Status.init(rawValue:)) ?? .waiting
        seenUpdateToken = activity.updateToken
        startedAt = activity.startedAt
        lastSeq = activity.lastSeq
        lastAlertSeq = activity.lastAlertSeq
        lastTimestamp = activity.lastTimestamp
        lastPushedAt = activity.lastPushedAt
        nextAttemptAt = activity.nextAttemptAt
        failures = activity.failures
        android = AndroidProgress(
            lastSeq: activity.fcmLastSeq, lastPushedAt: activity.fcmLastPushedAt, nextAttemptAt: activity.fcmNextAttemptAt,
            failures: activity.fcmFailures, endedAt: activity.fcmEndedAt)
    }
}

/// An Android follower's progress on one order (`activities.fcm_*`).
struct AndroidProgress: Sendable, Hashable {
    /// The newest transition FCM accepted for the device.
    var lastSeq: Int
    var lastPushedAt: Double?
    var nextAttemptAt: Double?
    /// Consecutive failures; at ``WorkerConfiguration/maximumAttempts`` a dead letter.
    var failures: Int
    /// When the end went out: nothing is sent after it.
    var endedAt: Double?
}

/// One push the merge decided on.
struct PlannedPush: Sendable, Hashable {
    enum Event: String, Sendable, Hashable {
        case start, update, end, alert
    }

    /// `deliveries.token_kind`.
    enum TokenKind: String, Sendable, Hashable {
        case activity
        case pushToStart = "push-to-start"
        case device
    }

    /// What a success changes on the activity.
    enum Effect: Sendable, Hashable {
        /// The activity shows the order's current state.
        case updated
        /// The activity has ended for good.
        case ended
        /// The old activity ended at the time limit; a start follows.
        case endedForRestart
        /// A push-to-start went out; the app will report the new activity's token.
        case started
        /// An alert notification went out instead of a Live Activity.
        case alerted
    }

    enum Payload: Sendable, Hashable {
        case liveActivity(LiveActivityPayloadSpec)
        case alert(AlertPayloadSpec)
    }

    var event: Event
    var tokenKind: TokenKind
    var token: String
    var payload: Payload
    /// 5 or 10.
    var priority: Int
    /// The newest transition the push carries.
    var seq: Int
    /// Transitions folded into it.
    var merged: Int
    /// The transition whose alert it carries, if any.
    var alertSeq: Int?
    var alertTitle: String?
    var apsTimestamp: Int
    /// Commit time of the newest transition (epoch seconds).
    var occurredAt: Double
    var effect: Effect
}

/// The parts of a Live Activity payload, kept as plain values so the merge is testable and the
/// request is built (and size-checked) only when sending.
struct LiveActivityPayloadSpec: Sendable, Hashable {
    var event: ActivityEvent
    var timestamp: Int
    var content: JSONValue?
    var alert: ActivityAlert?
    var staleDate: Int?
    var dismissalDate: Int?
    var relevanceScore: Double?
    var attributesType: String?
    var attributes: JSONValue?
    /// For a push-to-start of a broadcast event: the channel the new activity subscribes to.
    var inputPushChannel: String? = nil
}

struct AlertPayloadSpec: Sendable, Hashable {
    var alert: ActivityAlert
    var orderID: String
}

/// What the merge decided for one activity.
struct ActivityPlan: Sendable, Hashable {
    var merchantID: String
    var orderID: String
    var device: String
    /// Whether an `activities` row exists (else it is inserted).
    var exists: Bool
    /// The row as read.
    var original: ActivityState
    /// The row to write when nothing is sent (status normalised, failures reset by a retry).
    var state: ActivityState
    /// Sent in order, each only after the previous one succeeded.
    var pushes: [PlannedPush]
    /// Nothing is sent before this (rate limit or backoff); the order is looked at again then.
    var notBefore: Double?
    /// The push-to-start attributes type (to invalidate a dead push-to-start token).
    var attributesType: String
    /// The Android follower's FCM message, sent whatever becomes of ``pushes``.
    var android: PlannedAndroidMessage? = nil
    /// No FCM message before this (rate limit or backoff).
    var androidNotBefore: Double? = nil
}
