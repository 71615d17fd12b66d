import Foundation
import WorkflowKit

/// Decides what one activity (an order on one device) is sent: the merge of every transition
/// it has not seen into one push carrying the newest state.
///
/// The rules, in order:
/// - a dead-lettered activity (failures at the bound) waits for a new transition or an
///   operator's retry; an ended or gone one is never sent anything again;
/// - near the 8-hour limit the workflow's `on-time-limit` policy applies (end, or end and
///   push-to-start again);
/// - with an update token: one `update` (or `end` in a final state) with the newest content,
///   the newest alert among the unseen transitions and the highest priority among them;
/// - without one: a push-to-start when the workflow starts activities by push and the device
///   has a token for the attributes type; while `starting`, nothing until the token arrives;
/// - a device that can show no activity for the order (no update token, no start under way,
///   and no push-to-start going out: no valid token for this workflow's attributes type, a
///   workflow the app starts itself, or an order already final) but with a valid ordinary
///   device token gets the newest unseen alert as an ordinary notification; once the order is
///   final, only the final transition's own alert (an older one would arrive after the end);
///   an activity the customer dismissed or that ended (`ended`, `gone`) gets nothing;
/// - at most one push per ``WorkerConfiguration/minimumPushInterval``, none before a backoff
///   ends: the activity is deferred and later transitions merge into the deferred push;
/// - a follower with a usable FCM token (an Android phone) also gets one FCM data message of the
///   same merge (``planAndroid(order:workflow:activity:into:)``). A device row holds whatever
///   tokens its app registered, and each is served: APNs tokens by the rules above, the FCM
///   token by its own progress (`activities.fcm_*`), so neither side waits for the other.
struct ActivityMerge {
    let configuration: WorkerConfiguration
    /// Epoch seconds.
    let now: Double

    /// A broadcast order's channel, as far as its followers are concerned.
    struct Broadcast {
        /// nil until the channel is created: followers wait.
        var channelID: String?
        /// Whether new followers may join (not after the end, nor once the channel is gone).
        var acceptsFollowers = true
    }

    /// The follower's APNs pushes and, for an Android phone, its FCM message (``planAndroid``).
    func plan(order: OutboxOrder, workflow: Workflow, activity: OutboxActivity, broadcast: Broadcast? = nil) -> ActivityPlan {
        var plan = planAPNs(order: order, workflow: workflow, activity: activity, broadcast: broadcast)
        planAndroid(order: order, workflow: workflow, activity: activity, into: &plan)
        return plan
    }

    private func planAPNs(order: OutboxOrder, workflow: Workflow, activity: OutboxActivity, broadcast: Broadcast?) -> ActivityPlan {
        var state = ActivityState(activity)
        var plan = ActivityPlan(
            merchantID: order.merchantID, orderID: order.orderID, device: activity.device,
            exists: activity.status != nil, original: state, state: state, pushes: [], notBefore: nil,
            attributesType: workflow.attributesType)

        // A new transition, a token registration or an operator's retry gives a dead letter a
        // fresh series of attempts.
        let concernsDevice = order.commands.contains { $0.device == activity.device }
        let newTransition = order.commands.contains { $0.device == nil }
        let retried = order.commands.contains { $0.kind == .retry && $0.device == activity.device }
        if retried || (state.failures >= configuration.maximumAttempts && (concernsDevice || newTransition)) {
            state.failures = 0
            state.nextAttemptAt = nil
        }
        // Every return hands back the state decided so far (a `defer` would run after the
        // plan is copied for the return, and its assignment would be lost).
        func finished() -> ActivityPlan {
            plan.state = state
            return plan
        }
        guard state.failures < configuration.maximumAttempts, let newest = order.newest else { return finished() }

        let isFinal = workflow.isFinal(order.state)
        // The device's push-to-start token serves the first start only when the workflow starts
        // by push; a restart at the time limit uses it whatever started the activity.
        let restartToken = workflow.startsByPush ? activity.pushToStartTokens?[workflow.attributesType] : nil
        let pushToStartToken = workflow.lifecycle.start == .pushToStart ? restartToken : nil

        var pushes: [PlannedPush] = []
        switch state.status {
        case .ended:
            return finished()
        case .gone where activity.updateToken == nil:
            return finished()
        default:
            break
        }

        if let broadcast {
            // A broadcast event: updates go to the channel, never to a follower's own token.
            // A follower joins by a push-to-start carrying the channel id, once.
            guard activity.updateToken == nil, state.status == .waiting, !isFinal, broadcast.acceptsFollowers,
                  let channelID = broadcast.channelID,
                  let pushToStartToken,
                  var start = start(order: order, workflow: workflow, newest: newest, state: state, token: pushToStartToken)
            else {
                // A joined follower's activity ends with the event (the channel's end reaches it),
                // or on its own at the time limit: nothing more is tracked for it.
                if state.status == .starting || state.status == .active {
                    let atLimit = state.startedAt.map { now - $0 >= configuration.timeLimitAge } ?? false
                    if (isFinal && broadcast.channelID != nil) || atLimit {
                        state.status = .ended
                        state.endedAt = now
                    }
                }
                if broadcast.channelID != nil, state.status != .waiting || activity.updateToken != nil {
                    // The channel carries this follower's updates: nothing of the order is pending for it.
                    state.lastSeq = max(state.lastSeq, order.seq)
                    state.lastAlertSeq = max(state.lastAlertSeq, order.seq)
                }
                return finished()
            }
            if case .liveActivity(var spec) = start.payload {
                spec.inputPushChannel = channelID
                start.payload = .liveActivity(spec)
            }
            pushes = [start]
        } else if let updateToken = activity.updateToken {
            state.status = .active
            if !isFinal, let startedAt = state.startedAt, now - startedAt >= configuration.timeLimitAge {
                pushes = timeLimitPushes(order: order, workflow: workflow, newest: newest, state: state,
                                         updateToken: updateToken, pushToStartToken: restartToken)
            } else if state.lastSeq < order.seq {
                pushes = [update(order: order, newest: newest, state: state, token: updateToken, activity: activity)]
            }
        } else if state.status == .starting {
            // The start went out; the app has not reported the activity's token yet.
            if !isFinal, let startedAt = state.startedAt, now - startedAt >= configuration.timeLimitAge {
                // The unreachable activity is about to end on its own: start afresh or give up.
                if workflow.lifecycle.onTimeLimit == .restart, let restartToken,
                   let start = start(order: order, workflow: workflow, newest: newest, state: state, token: restartToken)
                {
                    pushes = [start]
                } else {
                    state.status = .ended
                    state.endedAt = now
                }
            }
        } else if let pushToStartToken, !isFinal {
            state.status = .waiting
            if let start = start(order: order, workflow: workflow, newest: newest, state: state, token: pushToStartToken) {
                pushes = [start]
            }
        } else if let alertToken = activity.alertToken {
            // Nothing can show this order's activity now: push-to-start tokens for other
            // attributes types, a refused one, a workflow the app starts, or an order that ended
            // before any start (a start to show a finished order is not sent). The alert still
            // reaches the customer, as an ordinary notification.
            state.status = .alerts
            if let alert = alertPush(order: order, state: state, token: alertToken, isFinal: isFinal) {
                pushes = [alert]
            } else {
                state.lastSeq = max(state.lastSeq, order.seq)
            }
        } else {
            state.status = .waiting
        }

        guard !pushes.isEmpty else { return finished() }
        // Pace: one push per interval per activity, none during a backoff.
        var notBefore = state.nextAttemptAt ?? 0
        if let lastPushedAt = state.lastPushedAt {
            notBefore = max(notBefore, lastPushedAt + configuration.minimumPushInterval.inSeconds)
        }
        if notBefore > now {
            plan.notBefore = notBefore
            return finished()
        }
        plan.pushes = pushes
        return finished()
    }

    // MARK: Pushes

    /// The transitions the activity has not been sent, oldest first.
    private func unseen(_ order: OutboxOrder, after seq: Int) -> ArraySlice<OutboxTransition> {
        let start = order.transitions.firstIndex { $0.seq > seq } ?? order.transitions.endIndex
        return order.transitions[start...]
    }

    /// The newest alert among `transitions` (with the transition's seq).
    private func newestAlert(in transitions: some BidirectionalCollection<OutboxTransition>) -> (ActivityAlert, Int)? {
        for transition in transitions.reversed() {
            if let alert = transition.rendered.alert { return (alert, transition.seq) }
        }
        return nil
    }

    private func timestamp(for newest: OutboxTransition, after last: Int) -> Int {
        max(newest.rendered.timestamp, last + 1)
    }

    /// One update (or end) carrying the newest state, the newest unseen alert and the highest
    /// unseen priority.
    private func update(order: OutboxOrder, newest: OutboxTransition, state: ActivityState, token: String,
                        activity: OutboxActivity) -> PlannedPush
    {
        let window = unseen(order, after: state.lastSeq)
        // The first push to an activity the app started itself catches it up: the alerts of
        // transitions from before the app registered the token are old news.
        var alertWindow = window.filter { $0.seq > state.lastAlertSeq }
        if state.lastSeq == 0, let registered = activity.tokenUpdatedAt {
            alertWindow = alertWindow.filter { $0.occurredAt >= registered }
        }
        let alert = newestAlert(in: alertWindow)
        let priority = window.map(\.rendered.priority).max() ?? newest.rendered.priority
        let isEnd = newest.rendered.isEnd
        let payload = LiveActivityPayloadSpec(
            event: isEnd ? .end : .update,
            timestamp: timestamp(for: newest, after: state.lastTimestamp),
            content: newest.rendered.content,
            alert: alert?.0,
            staleDate: isEnd ? nil : newest.rendered.staleDate,
            dismissalDate: isEnd ? newest.rendered.dismissalDate : nil,
            relevanceScore: isEnd ? nil : newest.rendered.relevanceScore)
        return PlannedPush(
            event: isEnd ? .end : .update, tokenKind: .activity, token: token, payload: .liveActivity(payload),
            priority: alert == nil ? priority : max(priority, 10), seq: order.seq, merged: max(window.count, 1),
            alertSeq: alert?.1, alertTitle: alert?.0.title.loggedText, apsTimestamp: payload.timestamp,
            occurredAt: newest.occurredAt, effect: isEnd ? .ended : .updated)
    }

    /// A push-to-start showing the order's current state; nil when no alert can be given (a
    /// start without an alert silently fails on the device).
    private func start(order: OutboxOrder, workflow: Workflow, newest: OutboxTransition, state: ActivityState,
                       token: String) -> PlannedPush?
    {
        let rendered = try? workflow.renderStart(
            in: order.state, attributes: order.attributes,
            input: order.state == workflow.initialState ? order.startInput : [:],
            previous: newest.rendered.content, at: Date(timeIntervalSince1970: TimeInterval(newest.rendered.timestamp)))
        let fallbackAlert = newestAlert(in: order.transitions.filter { $0.seq <= order.seq })
        guard let alert = rendered?.update.alert ?? fallbackAlert?.0, !alert.isBlank else { return nil }
        guard let attributes = rendered?.attributes ?? (try? workflow.appAttributes(order.attributes)) else { return nil }
        let payload = LiveActivityPayloadSpec(
            event: .start,
            timestamp: timestamp(for: newest, after: state.lastTimestamp),
            content: newest.rendered.content,
            alert: alert,
            staleDate: newest.rendered.staleDate,
            relevanceScore: newest.rendered.relevanceScore,
            attributesType: workflow.attributesType,
            attributes: attributes)
        let window = unseen(order, after: state.lastSeq)
        return PlannedPush(
            event: .start, tokenKind: .pushToStart, token: token, payload: .liveActivity(payload), priority: 10,
            seq: order.seq, merged: max(window.count, 1), alertSeq: nil, alertTitle: alert.title.loggedText,
            apsTimestamp: payload.timestamp, occurredAt: newest.occurredAt, effect: .started)
    }

    /// At the 8-hour limit: end the activity, and with `restart` start a new one by push.
    private func timeLimitPushes(order: OutboxOrder, workflow: Workflow, newest: OutboxTransition,
                                 state: ActivityState, updateToken: String, pushToStartToken: String?) -> [PlannedPush]
    {
        let restart = workflow.lifecycle.onTimeLimit == .restart
        let endTimestamp = timestamp(for: newest, after: state.lastTimestamp)
        let end = LiveActivityPayloadSpec(
            event: .end, timestamp: endTimestamp, content: newest.rendered.content,
            // Replaced at once by the new activity; otherwise the system's default.
            dismissalDate: restart ? Int(now.rounded(.down)) : nil)
        var pushes = [PlannedPush(
            event: .end, tokenKind: .activity, token: updateToken, payload: .liveActivity(end), priority: 10,
            seq: order.seq, merged: max(unseen(order, after: state.lastSeq).count, 1), alertSeq: nil, alertTitle: nil,
            apsTimestamp: endTimestamp, occurredAt: newest.occurredAt, effect: restart ? .endedForRestart : .ended)]
        if restart, let pushToStartToken {
            var next = state
            next.lastTimestamp = endTimestamp
            if let start = start(order: order, workflow: workflow, newest: newest, state: next, token: pushToStartToken) {
                pushes.append(start)
            } else {
                pushes[0].effect = .ended
            }
        } else {
            pushes[0].effect = .ended
        }
        return pushes
    }

    /// The newest alert the device has not been sent, as an ordinary notification. In a final
    /// state only the final transition's alert: unlike an activity's end, a notification has no
    /// content beside it, and "ready for pickup" after the order was cancelled would misinform.
    private func alertPush(order: OutboxOrder, state: ActivityState, token: String, isFinal: Bool) -> PlannedPush? {
        let window = unseen(order, after: state.lastAlertSeq)
        let candidates = isFinal ? window.filter { $0.seq == order.seq } : Array(window)
        guard let (alert, alertSeq) = newestAlert(in: candidates), let newest = order.newest else { return nil }
        return PlannedPush(
            event: .alert, tokenKind: .device, token: token,
            payload: .alert(AlertPayloadSpec(alert: alert, orderID: order.orderID)), priority: 10,
            seq: order.seq, merged: window.filter { $0.rendered.alert != nil }.count, alertSeq: alertSeq,
            alertTitle: alert.title.loggedText, apsTimestamp: newest.rendered.timestamp,
            occurredAt: newest.occurredAt, effect: .alerted)
    }
}

extension LocalizableText {
    /// The text for logs and `deliveries.alert_title`: plain text, or the localization key.
    var loggedText: String {
        switch self {
        case .plain(let text): text
        case .localized(let key, _): key
        }
    }

    var isBlank: Bool { loggedText.trimmingCharacters(in: .whitespaces).isEmpty }
}

extension ActivityAlert {
    /// An alert with neither title nor body: a start carrying it would silently fail.
    var isBlank: Bool { title.isBlank && body.isBlank }
}
