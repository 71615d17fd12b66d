import APNS
import Foundation
import WorkflowKit

/// What became of one planned push.
enum PushAttempt: Sendable, Hashable {
    /// APNs accepted it.
    case sent(apnsID: UUID, status: Int, answeredAt: Double)
    /// APNs refused it, could not be reached, or the request could not be built.
    case failed(status: Int?, reason: String, action: APNSFailureAction, apnsID: UUID?, answeredAt: Double)
    /// Not sent: sending is paused, or the worker is stopping.
    case notAttempted
}

/// A `deliveries` row (encoded with snake-case keys for `jsonb_to_recordset`).
struct DeliveryRow: Sendable, Hashable {
    var merchantID: String
    var orderID: String
    var deviceID: String
    var seq: Int
    var merged: Int
    var event: String
    var tokenKind: String
    var tokenSuffix: String
    var priority: Int
    var apsTimestamp: Int?
    var alertTitle: String?
    var apnsId: String?
    var status: Int?
    var reason: String?
    var outcome: DeliveryOutcome
    var attemptedAt: Double
    var latencyMs: Double?
    /// `ios` (APNs) or `android` (FCM).
    var platform: DeliveryPlatform = .ios
}

/// An activity after its pushes: the row to write, the attempts to record, the tokens APNs
/// declared dead and when the order must be looked at again.
struct ActivityOutcome: Sendable, Hashable {
    var plan: ActivityPlan
    var state: ActivityState
    var deliveries: [DeliveryRow] = []
    var deadPushToStartToken: String?
    var deadAlertToken: String?
    /// The FCM token FCM declared gone.
    var deadFCMToken: String?
    /// The order's commands are deferred to then (rate limit, backoff).
    var revisitAt: Double?
    /// A push was not attempted (paused, stopping): the order's commands stay for a later claim.
    var unfinished = false

    /// Applies the attempts (a prefix of `plan.pushes`, in order) and the Android message's
    /// attempt to the planned state.
    init(plan: ActivityPlan, attempts: [PushAttempt], android: AndroidAttempt? = nil, configuration: WorkerConfiguration) {
        self.plan = plan
        self.state = plan.state
        self.revisitAt = [plan.notBefore, plan.androidNotBefore].compactMap { $0 }.min()
        applyAPNs(attempts, configuration: configuration)
        // An APNs backoff replaces the wake-up; the Android side's own must stay.
        if let androidNotBefore = plan.androidNotBefore { revisit(at: androidNotBefore) }
        if let message = plan.android {
            applyAndroid(message, attempt: android ?? .notAttempted, configuration: configuration)
        }
    }

    private mutating func applyAPNs(_ attempts: [PushAttempt], configuration: WorkerConfiguration) {
        for (index, push) in plan.pushes.enumerated() {
            guard index < attempts.count else {
                unfinished = true
                return
            }
            switch attempts[index] {
            case .notAttempted:
                unfinished = true
                return
            case .sent(let apnsID, let status, let answeredAt):
                record(push, outcome: .sent, status: status, reason: nil, apnsID: apnsID, at: answeredAt)
                applySuccess(push, at: answeredAt)
            case .failed(let status, let reason, let action, let apnsID, let answeredAt):
                applyFailure(push, status: status, reason: reason, action: action, apnsID: apnsID, at: answeredAt,
                             configuration: configuration)
                return
            }
        }
    }

    private mutating func applySuccess(_ push: PlannedPush, at time: Double) {
        state.lastPushedAt = time
        state.failures = 0
        state.nextAttemptAt = nil
        state.lastSeq = max(state.lastSeq, push.seq)
        if let alertSeq = push.alertSeq { state.lastAlertSeq = max(state.lastAlertSeq, alertSeq) }
        if push.event != .alert { state.lastTimestamp = max(state.lastTimestamp, push.apsTimestamp) }
        switch push.effect {
        case .updated:
            state.status = .active
        case .ended:
            state.status = .ended
            state.endedAt = time
        case .endedForRestart:
            // The old activity is over; the start that follows creates the next one. Should the
            // start fail, the activity waits for a start like a new one.
            state.status = .waiting
            state.clearUpdateToken = true
            state.startedAt = nil
        case .started:
            state.status = .starting
            state.startedAt = time
            state.endedAt = nil
            state.lastAlertSeq = max(state.lastAlertSeq, push.seq)
        case .alerted:
            state.status = .alerts
        }
    }

    private mutating func applyFailure(
        _ push: PlannedPush, status: Int?, reason: String, action: APNSFailureAction, apnsID: UUID?, at time: Double,
        configuration: WorkerConfiguration
    ) {
        switch action {
        case .tokenDead:
            record(push, outcome: .tokenDead, status: status, reason: reason, apnsID: apnsID, at: time)
            switch push.tokenKind {
            case .activity:
                state.clearUpdateToken = true
                state.status = .gone
            case .pushToStart:
                deadPushToStartToken = push.token
                // Looked at again at once, without the dead token: the alert falls back to the
                // device's ordinary token instead of waiting for the next transition.
                revisitAt = time
            case .device:
                deadAlertToken = push.token
            }
        case .backOffToken(let retryAfter):
            // APNs throttles this device: wait, then send whatever is newest by then.
            state.failures += 1
            let delay = max(retryAfter.map(\.inSeconds) ?? 0, configuration.backoff(afterFailures: state.failures))
            state.nextAttemptAt = time + delay
            revisitAt = state.nextAttemptAt
            record(push, outcome: .retry, status: status, reason: reason, apnsID: apnsID, at: time)
        case .retryWithBackoff, .refreshProviderToken:
            state.failures += 1
            if state.failures >= configuration.maximumAttempts {
                // A dead letter: kept in `deliveries` for operators; a new transition or
                // `deliveries retry` starts a fresh series.
                state.failures = configuration.maximumAttempts
                state.nextAttemptAt = nil
                record(push, outcome: .dead, status: status, reason: reason, apnsID: apnsID, at: time)
            } else {
                // A refreshed provider token is usable at once: retry after the shortest delay.
                let delay = action == .refreshProviderToken
                    ? configuration.backoff(afterFailures: 1) : configuration.backoff(afterFailures: state.failures)
                state.nextAttemptAt = time + delay
                revisitAt = state.nextAttemptAt
                record(push, outcome: .retry, status: status, reason: reason, apnsID: apnsID, at: time)
            }
        case .payloadRejected:
            // Never retried as is: the next transition brings another payload.
            state.lastSeq = max(state.lastSeq, push.seq)
            record(push, outcome: .rejected, status: status, reason: reason, apnsID: apnsID, at: time)
        case .configurationError, .credentialsError:
            // Sending is paused for the whole worker; the order's commands stay.
            unfinished = true
            record(push, outcome: .retry, status: status, reason: reason, apnsID: apnsID, at: time)
        }
    }

    private mutating func record(_ push: PlannedPush, outcome: DeliveryOutcome, status: Int?, reason: String?, apnsID: UUID?,
                                 at time: Double)
    {
        deliveries.append(DeliveryRow(
            merchantID: plan.merchantID, orderID: plan.orderID, deviceID: plan.device, seq: push.seq,
            merged: push.merged, event: push.event.rawValue, tokenKind: push.tokenKind.rawValue,
            tokenSuffix: APNSTokenRedaction.visibleSuffix(push.token), priority: push.priority,
            apsTimestamp: push.event == .alert ? nil : push.apsTimestamp, alertTitle: push.alertTitle,
            apnsId: apnsID?.uuidString.lowercased(), status: status, reason: reason, outcome: outcome,
            attemptedAt: time, latencyMs: max(0, (time - push.occurredAt) * 1000)))
    }

    /// Moves the retry time earlier to `time` when it is.
    mutating func revisit(at time: Double) {
        revisitAt = min(revisitAt ?? time, time)
    }
}

/// `deliveries.platform`: which service carried a delivery.
enum DeliveryPlatform: String, Sendable, Hashable, CaseIterable {
    case ios, android
}

// MARK: - Requests

extension PlannedPush {
    /// The APNs request; throws an ``APNSPayloadError`` when the payload cannot be sent.
    func request(bundleID: String) throws -> APNSRequest {
        let apnsPriority: APNSPriority = priority >= 10 ? .immediate : .conservePower
        switch payload {
        case .liveActivity(let spec):
            return try APNSRequest(liveActivity: spec.payload(), deviceToken: token, bundleID: bundleID, priority: apnsPriority)
        case .alert(let spec):
            let payload = AlertPayload(
                title: APNSAlertText(spec.alert.title), body: APNSAlertText(spec.alert.body),
                sound: spec.alert.sound.map(APNSSound.init(named:)),
                threadID: spec.orderID,
                customData: try APNSJSONObject(value: ["orderID": .string(spec.orderID)]))
            return try APNSRequest(alert: payload, deviceToken: token, bundleID: bundleID, priority: .immediate)
        }
    }
}

extension LiveActivityPayloadSpec {
    /// The APNs payload. A start asks for the new activity's update token, unless it joins a
    /// broadcast channel (`input-push-channel`): such an activity is updated through the channel.
    func payload() throws -> LiveActivityPayload {
        LiveActivityPayload(
            event: LiveActivityPayload.Event(event),
            timestamp: Date(timeIntervalSince1970: TimeInterval(timestamp)),
            contentState: try content.map(APNSJSONObject.init(value:)),
            alert: alert.map(LiveActivityAlert.init),
            staleDate: staleDate.map { Date(timeIntervalSince1970: TimeInterval($0)) },
            dismissalDate: dismissalDate.map { Date(timeIntervalSince1970: TimeInterval($0)) },
            relevanceScore: relevanceScore,
            attributesType: attributesType,
            attributes: try attributes.map(APNSJSONObject.init(value:)),
            inputPushToken: event == .start && inputPushChannel == nil,
            inputPushChannel: inputPushChannel)
    }
}
