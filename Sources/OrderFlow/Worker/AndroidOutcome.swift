import APNSCore
import FCM
import Foundation

/// What became of one planned FCM message.
enum AndroidAttempt: Sendable, Hashable {
    /// FCM accepted it.
    case sent(status: Int, answeredAt: Double)
    /// FCM refused it, could not be reached, or the message could not be made.
    case failed(status: Int?, reason: String, action: FCMFailureAction, answeredAt: Double)
    /// Not sent: the merchant's FCM sending is paused, the lease runs out, or the worker stops.
    case notAttempted
}

extension ActivityOutcome {
    /// Applies the Android message's attempt, by the meaning of FCM's answer
    /// (``FCMFailureAction``): a gone token is never sent to again, a passing refusal backs off
    /// (honouring `Retry-After`) and retries with whatever is newest by then, a message FCM can
    /// never accept is a dead letter with FCM's reason, and a refused project or service
    /// account leaves the order's commands for when the merchant sends again.
    mutating func applyAndroid(_ message: PlannedAndroidMessage, attempt: AndroidAttempt, configuration: WorkerConfiguration) {
        switch attempt {
        case .notAttempted:
            unfinished = true
        case .sent(let status, let time):
            recordAndroid(message, outcome: .sent, status: status, reason: nil, at: time)
            state.android.lastSeq = max(state.android.lastSeq, message.seq)
            state.android.lastPushedAt = time
            state.android.failures = 0
            state.android.nextAttemptAt = nil
            if message.isEnd { state.android.endedAt = time }
        case .failed(let status, let reason, let action, let time):
            switch action {
            case .tokenDead:
                recordAndroid(message, outcome: .tokenDead, status: status, reason: reason, at: time)
                deadFCMToken = message.token
            case .retry(let retryAfter):
                state.android.failures += 1
                if state.android.failures >= configuration.maximumAttempts {
                    state.android.failures = configuration.maximumAttempts
                    state.android.nextAttemptAt = nil
                    recordAndroid(message, outcome: .dead, status: status, reason: reason, at: time)
                } else {
                    let delay = max(retryAfter?.inSeconds ?? 0, configuration.backoff(afterFailures: state.android.failures))
                    state.android.nextAttemptAt = time + delay
                    revisit(at: time + delay)
                    recordAndroid(message, outcome: .retry, status: status, reason: reason, at: time)
                }
            case .messageRejected:
                // A dead letter at once: the same message would be refused again. A new
                // transition or `deliveries retry` starts a fresh series.
                state.android.failures = configuration.maximumAttempts
                state.android.nextAttemptAt = nil
                recordAndroid(message, outcome: .dead, status: status, reason: reason, at: time)
            case .configurationError, .credentialsError:
                // The merchant's FCM sending is paused (MerchantRouter); its orders wait.
                unfinished = true
                recordAndroid(message, outcome: .retry, status: status, reason: reason, at: time)
            }
        }
    }

    private mutating func recordAndroid(_ message: PlannedAndroidMessage, outcome: DeliveryOutcome, status: Int?, reason: String?,
                                        at time: Double)
    {
        deliveries.append(DeliveryRow(
            merchantID: plan.merchantID, orderID: plan.orderID, deviceID: plan.device, seq: message.seq,
            merged: message.merged, event: message.event.rawValue, tokenKind: PlannedAndroidMessage.tokenKind,
            tokenSuffix: APNSTokenRedaction.visibleSuffix(message.token), priority: message.priority,
            apsTimestamp: message.timestamp, alertTitle: message.alertTitle, apnsId: nil, status: status, reason: reason,
            outcome: outcome, attemptedAt: time, latencyMs: max(0, (time - message.occurredAt) * 1000), platform: .android))
    }
}

extension PlannedAndroidMessage {
    /// `deliveries.token_kind` of an FCM message: the device's registration token.
    static let tokenKind = "fcm"
}

