import APNS
import Foundation
import WorkflowKit

/// An `order_channels` row as the worker read it.
struct OutboxChannel: Sendable, Hashable, Codable {
    var state: BroadcastChannelInfo.State
    var channelID: String?
    var bundleID: String?
    var storagePolicy: Int
    var generation: Int
    var lastSeq: Int
    var lastTimestamp: Int
    var lastPushedAt: Double?
    var nextAttemptAt: Double?
    var failures: Int
    var reason: String?
    var deleteAfter: Double?
    var openedAt: Double?
    var deletedAt: Double?
}

/// What one step of a channel did: the row to write back, the broadcast's record and when the
/// order must be looked at again.
struct ChannelOutcome: Sendable {
    var channel: OutboxChannel
    var deliveries: [DeliveryRow] = []
    var revisitAt: Double?
    /// Nothing could be attempted (paused, stopping): the order's commands stay.
    var unfinished = false
}

/// The broadcast side of an order's dispatch (iOS 18 channels). Per channel, the merge rules of
/// ``ActivityMerge`` hold: one broadcast carries the newest content with the newest unseen alert
/// and the highest unseen priority; at most one per ``WorkerConfiguration/minimumPushInterval``;
/// `aps.timestamp` strictly increases; the end is the last broadcast. The creation itself is not
/// broadcast (a broadcast cannot start an activity: devices join by push-to-start, which shows
/// the current state). After the end was accepted the channel is kept for its retention, then
/// deleted.
struct ChannelStep {
    let configuration: WorkerConfiguration
    let now: Double

    enum Action: Sendable {
        case none
        case revisit(at: Double)
        case create
        case broadcast(APNSBroadcastRequest, PlannedPush)
        case delete
    }

    /// The broadcast of the unseen transitions (nil when the channel is up to date).
    func broadcast(order: OutboxOrder, channel: OutboxChannel, bundleID: String) -> (APNSBroadcastRequest, PlannedPush)? {
        guard let channelID = channel.channelID, let newest = order.newest, order.seq > max(channel.lastSeq, 1) else { return nil }
        let window = order.transitions.filter { $0.seq > channel.lastSeq }
        var alert: (ActivityAlert, Int)?
        for transition in window.reversed() {
            if let found = transition.rendered.alert { alert = (found, transition.seq); break }
        }
        let priority = window.map(\.rendered.priority).max() ?? newest.rendered.priority
        let effective = alert == nil ? priority : max(priority, 10)
        let isEnd = newest.rendered.isEnd
        let spec = LiveActivityPayloadSpec(
            event: isEnd ? .end : .update,
            timestamp: max(newest.rendered.timestamp, channel.lastTimestamp + 1),
            content: newest.rendered.content,
            alert: alert?.0,
            staleDate: isEnd ? nil : newest.rendered.staleDate,
            dismissalDate: isEnd ? newest.rendered.dismissalDate : nil,
            relevanceScore: isEnd ? nil : newest.rendered.relevanceScore)
        // A channel that stores nothing takes only `0`; otherwise APNs keeps the message for
        // late joiners as long as it may (8 hours).
        let expiration = channel.storagePolicy == 0 ? 0 : Int(now) + 8 * 3600
        let push = PlannedPush(
            event: isEnd ? .end : .update, tokenKind: .activity, token: channelID, payload: .liveActivity(spec),
            priority: effective, seq: order.seq, merged: max(window.count, 1), alertSeq: alert?.1,
            alertTitle: alert?.0.title.loggedText, apsTimestamp: spec.timestamp, occurredAt: newest.occurredAt,
            effect: isEnd ? .ended : .updated)
        guard let payload = try? spec.payload(),
              let request = try? APNSBroadcastRequest(
                  liveActivity: payload, channelID: channelID, bundleID: bundleID,
                  priority: effective >= 10 ? .immediate : .conservePower, expiration: expiration)
        else {
            // Too large or not encodable: as APNs would refuse it; recorded as rejected by the caller.
            return (APNSBroadcastRequest(channelID: channelID, bundleID: bundleID, priority: .immediate, payload: Data()), push)
        }
        return (request, push)
    }

    /// What to do next with the channel.
    func action(order: OutboxOrder, channel: OutboxChannel, bundleID: String) -> Action {
        switch channel.state {
        case .deleted, .failed:
            return .none
        case .pending:
            if let next = channel.nextAttemptAt, next > now { return .revisit(at: next) }
            return .create
        case .ended:
            let due = max(channel.deleteAfter ?? now, channel.nextAttemptAt ?? 0)
            return due > now ? .revisit(at: due) : .delete
        case .open:
            guard let (request, push) = broadcast(order: order, channel: channel, bundleID: bundleID) else { return .none }
            var notBefore = channel.nextAttemptAt ?? 0
            if let last = channel.lastPushedAt {
                notBefore = max(notBefore, last + configuration.minimumPushInterval.inSeconds)
            }
            if notBefore > now { return .revisit(at: notBefore) }
            return .broadcast(request, push)
        }
    }

    /// When the channel of an ended event is deleted.
    func deletionTime(storagePolicy: Int) -> Double {
        now + (storagePolicy == 0 ? configuration.minimumPushInterval : configuration.channelRetention).inSeconds
    }
}
