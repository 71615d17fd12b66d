import FCM
import Foundation
import WorkflowKit

/// One FCM data message the merge decided on for an Android follower: the newest state of the
/// order, rendered by ``Workflow/renderAndroid(_:from:order:attributes:input:previous:)``.
struct PlannedAndroidMessage: Sendable, Hashable {
    /// The message; nil when it cannot be made (``renderFailure`` says why: a dead letter).
    var message: FCMMessage?
    var renderFailure: String?
    var token: String
    var event: ActivityEvent
    /// The newest transition the message carries.
    var seq: Int
    /// Transitions folded into it.
    var merged: Int
    /// 10 where the iPhone side would send `apns-priority: 10` (`android.priority` HIGH), else 5.
    var priority: Int
    /// The transition time, epoch seconds (the data's `timestamp` is it in milliseconds).
    var timestamp: Int
    var alertTitle: String?
    /// Commit time of the newest transition (epoch seconds).
    var occurredAt: Double

    var isEnd: Bool { event == .end }
}

extension ActivityMerge {
    /// The Android side of one follower, beside its iPhone side: a follower with a usable FCM
    /// token gets one message carrying the order's newest state whenever it has not been sent
    /// it — the newest content, the newest unseen alert, the highest unseen priority; the end
    /// last, and nothing once the end went out. Paced and backed off like an activity's pushes,
    /// on its own clock: a throttled iPhone never holds back the Android message, nor the reverse.
    func planAndroid(order: OutboxOrder, workflow: Workflow, activity: OutboxActivity, into plan: inout ActivityPlan) {
        guard let token = activity.fcmToken, let newest = order.newest else { return }
        var progress = plan.state.android
        defer { plan.state.android = progress }
        // A new transition, a token registration or an operator's retry gives a dead letter a
        // fresh series, as on the iPhone side.
        let retried = order.commands.contains { $0.kind == .retry && $0.device == activity.device }
        let newWork = order.commands.contains { $0.device == nil || $0.device == activity.device }
        if retried || (progress.failures >= configuration.maximumAttempts && newWork) {
            progress.failures = 0
            progress.nextAttemptAt = nil
        }
        guard progress.endedAt == nil, progress.failures < configuration.maximumAttempts, progress.lastSeq < order.seq else { return }

        var notBefore = progress.nextAttemptAt ?? 0
        if let lastPushedAt = progress.lastPushedAt {
            notBefore = max(notBefore, lastPushedAt + configuration.minimumPushInterval.inSeconds)
        }
        if notBefore > now {
            plan.androidNotBefore = notBefore
            return
        }
        plan.android = androidMessage(order: order, workflow: workflow, newest: newest, after: progress.lastSeq, token: token)
    }

    private func androidMessage(order: OutboxOrder, workflow: Workflow, newest: OutboxTransition, after lastSeq: Int,
                                token: String) -> PlannedAndroidMessage
    {
        let window = order.transitions.filter { $0.seq > lastSeq }
        let (alert, priority) = StoredRendering.androidAlertAndPriority(of: window.map(\.rendered), newest: newest.rendered)
        let stored = newest.rendered
        let previous = order.transitions.last { $0.seq < newest.seq }
        var planned = PlannedAndroidMessage(
            message: nil, renderFailure: nil, token: token, event: stored.event, seq: order.seq, merged: max(window.count, 1),
            priority: priority, timestamp: stored.timestamp, alertTitle: alert?.title.loggedText, occurredAt: newest.occurredAt)
        do {
            let rendered = try workflow.renderAndroid(
                stored, alert: alert, priority: priority, previous: previous?.rendered, order: order.orderID,
                attributes: order.attributes, input: newest.input)
            planned.message = FCMMessage(
                token: token, data: rendered.data, priority: rendered.priority == .high ? .high : .normal,
                collapseKey: rendered.collapseKey, timeToLive: rendered.ttl.seconds)
        } catch {
            planned.renderFailure = String("cannot render the Android message: \(error)".prefix(300))
        }
        return planned
    }
}
