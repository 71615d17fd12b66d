import APNS
import Foundation
import Logging

/// Moves the channels of a batch's broadcast orders (`audience: broadcast`) on, before their
/// followers' pushes: creates a channel, broadcasts the unseen transitions as one request, deletes
/// it after the end (what to do next is ``ChannelStep``'s; this does it and reads APNs' answers).
/// Broadcasts and channel management go through the route's sender's
/// ``PushSender/broadcaster``; a sender without one fails the order's channel, said so.
final class BroadcastChannelDriver: Sendable {
    private let configuration: WorkerConfiguration
    private let store: OutboxStore
    private let router: MerchantRouter
    private let gate: SendGate
    private let logger: Logger

    init(configuration: WorkerConfiguration, store: OutboxStore, router: MerchantRouter, gate: SendGate, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.router = router
        self.gate = gate
        self.logger = logger
    }

    /// Runs the channel steps of the batch's broadcast orders, concurrently (bounded); the
    /// outcomes by the orders' index in the batch.
    func advance(_ orders: [OutboxOrder], lease: BatchLease) async -> [Int: ChannelOutcome] {
        let broadcast = orders.indices.filter { orders[$0].channel != nil }
        guard !broadcast.isEmpty else { return [:] }
        let found = await router.routes(for: Set(broadcast.map { orders[$0].merchantID }))
        return await withTaskGroup(of: (Int, ChannelOutcome).self) { group in
            var results: [Int: ChannelOutcome] = [:]
            var running = 0
            for index in broadcast {
                if running >= configuration.concurrentSends, let (done, outcome) = await group.next() {
                    results[done] = outcome
                    running -= 1
                }
                let order = orders[index]
                let route = found[order.merchantID]!
                group.addTask { (index, await self.advance(order, order.channel!, route: route, lease: lease)) }
                running += 1
            }
            for await (done, outcome) in group { results[done] = outcome }
            return results
        }
    }

    /// Writes the channels back (before their followers' pushes are sent: a push-to-start
    /// carries the channel's id). False when they could not be written: the batch stops there.
    func record(_ outcomes: [Int: ChannelOutcome], of orders: [OutboxOrder]) async -> Bool {
        do {
            try await store.writeChannels(outcomes.sorted { $0.key < $1.key }.map { index, outcome in
                OutboxStore.ChannelRow(merchantID: orders[index].merchantID, orderID: orders[index].orderID, outcome.channel)
            })
            return true
        } catch {
            // The broadcasts went out but are not recorded: they may be sent again after the lease.
            logger.error("cannot record broadcast channels; their orders are retried when their leases expire", metadata: [
                "orderflow.error": "\(error)"])
            return false
        }
    }

    /// Moves a broadcast order's channel on: creates it, broadcasts the unseen transitions as one
    /// request, deletes it after the end. Up to three steps in one pass (create, then broadcast).
    private func advance(_ order: OutboxOrder, _ start: OutboxChannel, route: PushRoute, lease: BatchLease) async -> ChannelOutcome {
        var outcome = ChannelOutcome(channel: start)
        guard let sender = route.sender.broadcaster else {
            outcome.channel.state = .failed
            outcome.channel.reason = "the worker's sender cannot broadcast (it is not an APNSClient); broadcast orders need APNs' broadcast and channel management APIs"
            logger.error("a broadcast order's channel cannot be created: the sender cannot broadcast",
                         metadata: ["orderflow.order": "\(order.orderID)"])
            return outcome
        }
        for _ in 0..<3 {
            let step = ChannelStep(configuration: configuration, now: WorkerClock.now())
            let bundleID = outcome.channel.bundleID ?? route.bundleID
            let action = step.action(order: order, channel: outcome.channel, bundleID: bundleID)
            switch action {
            case .none:
                return outcome
            case .revisit(let time):
                outcome.revisitAt = time
                return outcome
            default:
                break
            }
            if !gate.allows(route, lease: lease) {
                outcome.unfinished = true
                return outcome
            }
            switch action {
            case .none, .revisit:
                return outcome
            case .create:
                let policy = APNSMessageStoragePolicy(rawValue: outcome.channel.storagePolicy) ?? .mostRecentMessageStored
                do {
                    let id = try await sender.createChannel(bundleID: route.bundleID, storagePolicy: policy)
                    do {
                        try await store.recordChannelCreated(merchantID: order.merchantID, orderID: order.orderID,
                                                             channelID: id, bundleID: route.bundleID)
                    } catch {
                        logger.error("a channel was created but its id could not be recorded; it is created again, and the unrecorded one expires unused at APNs",
                                     metadata: ["orderflow.order": "\(order.orderID)", "orderflow.error": "\(error)"])
                        outcome.revisitAt = WorkerClock.now() + configuration.backoff(afterFailures: 1)
                        return outcome
                    }
                    await router.noteSent(merchantID: order.merchantID)
                    outcome.channel.channelID = id
                    outcome.channel.bundleID = route.bundleID
                    outcome.channel.state = .open
                    // A replacement keeps saying why the order's channel id changed.
                    if outcome.channel.generation == 0 { outcome.channel.reason = nil }
                    outcome.channel.generation += 1
                    outcome.channel.failures = 0
                    outcome.channel.nextAttemptAt = nil
                    logger.debug("broadcast channel created", metadata: [
                        "orderflow.order": "\(order.orderID)", "orderflow.channel": "\(id)"])
                } catch {
                    if Task.isCancelled { outcome.unfinished = true; return outcome }
                    await channelFailure(error, what: "create the channel of", order: order, route: route, outcome: &outcome)
                    return outcome
                }
            case .broadcast(let request, let push):
                guard !request.payload.isEmpty else {
                    outcome.channel.lastSeq = max(outcome.channel.lastSeq, push.seq)
                    outcome.channel.reason = "the broadcast of transition \(push.seq) could not be built (over APNs' size limit); skipped"
                    outcome.deliveries.append(channelDelivery(order, push, outcome: .rejected, status: nil,
                                                              reason: outcome.channel.reason, apnsID: nil))
                    continue
                }
                do {
                    let result = try await sender.broadcast(request)
                    await router.noteSent(merchantID: order.merchantID)
                    let time = WorkerClock.now()
                    outcome.deliveries.append(channelDelivery(order, push, outcome: .sent, status: 200, reason: nil,
                                                              apnsID: result.apnsID, at: time))
                    outcome.channel.lastSeq = max(outcome.channel.lastSeq, push.seq)
                    outcome.channel.lastTimestamp = max(outcome.channel.lastTimestamp, push.apsTimestamp)
                    outcome.channel.lastPushedAt = time
                    outcome.channel.failures = 0
                    outcome.channel.nextAttemptAt = nil
                    if push.event == .end {
                        // The end is the channel's last message: delete it after its retention.
                        outcome.channel.state = .ended
                        outcome.channel.deleteAfter = step.deletionTime(storagePolicy: outcome.channel.storagePolicy)
                    }
                } catch {
                    if Task.isCancelled { outcome.unfinished = true; return outcome }
                    let failure = error as? APNSError
                    if failure?.reason == .channelNotRegistered {
                        outcome.deliveries.append(channelDelivery(order, push, outcome: .tokenDead, status: failure?.status,
                                                                  reason: failure?.reason.rawValue, apnsID: failure?.apnsID))
                        channelLost(order, push: push, outcome: &outcome)
                        if outcome.channel.state != .pending { return outcome }
                        continue
                    }
                    let (deliveryOutcome, status, reason) = await channelFailure(
                        error, what: "broadcast to the channel of", order: order, route: route, outcome: &outcome)
                    if deliveryOutcome == .rejected { outcome.channel.lastSeq = max(outcome.channel.lastSeq, push.seq) }
                    outcome.deliveries.append(channelDelivery(order, push, outcome: deliveryOutcome, status: status,
                                                              reason: reason, apnsID: failure?.apnsID))
                    if deliveryOutcome == .rejected { continue }
                    return outcome
                }
            case .delete:
                guard let id = outcome.channel.channelID else {
                    outcome.channel.state = .deleted
                    return outcome
                }
                do {
                    try await sender.deleteChannel(bundleID: bundleID, id: id)
                    outcome.channel.state = .deleted
                    outcome.channel.deletedAt = WorkerClock.now()
                    outcome.channel.nextAttemptAt = nil
                    outcome.channel.failures = 0
                    logger.debug("broadcast channel deleted after the end", metadata: [
                        "orderflow.order": "\(order.orderID)", "orderflow.channel": "\(id)"])
                } catch let error as APNSError where error.reason == .channelNotRegistered {
                    // Already gone (expired, or deleted by someone else): nothing left to do.
                    outcome.channel.state = .deleted
                    outcome.channel.deletedAt = WorkerClock.now()
                    outcome.channel.reason = "APNs no longer knew the channel when it was deleted (ChannelNotRegistered)"
                } catch {
                    if Task.isCancelled { outcome.unfinished = true; return outcome }
                    await channelFailure(error, what: "delete the channel of", order: order, route: route, outcome: &outcome)
                }
                return outcome
            }
        }
        return outcome
    }

    /// `ChannelNotRegistered` on a broadcast: APNs has forgotten the channel (deleted, expired,
    /// or of the other environment). An event that goes on gets a new channel (at most
    /// ``WorkerConfiguration/maximumChannelsPerOrder`` in all) carrying its current state;
    /// devices that followed the old one must join again, which is said loudly.
    private func channelLost(_ order: OutboxOrder, push: PlannedPush, outcome: inout ChannelOutcome) {
        let old = outcome.channel.channelID ?? "?"
        if push.event == .end {
            outcome.channel.state = .deleted
            outcome.channel.deletedAt = WorkerClock.now()
            outcome.channel.reason = "APNs no longer knew the channel when the end was broadcast (ChannelNotRegistered); its followers' activities end on their own"
            logger.warning("the channel of an ended broadcast order was gone before its end was sent",
                           metadata: ["orderflow.order": "\(order.orderID)", "orderflow.channel": "\(old)"])
            return
        }
        if outcome.channel.generation >= configuration.maximumChannelsPerOrder {
            outcome.channel.state = .failed
            outcome.channel.reason = "APNs forgot the order's channel (ChannelNotRegistered) \(outcome.channel.generation) times; no new channel is created. Check that the app's Broadcast Capability is on and that the worker uses the environment the channels were made in"
            logger.error("a broadcast order's channel keeps disappearing; its updates stop", metadata: [
                "orderflow.order": "\(order.orderID)", "orderflow.channel": "\(old)",
                "orderflow.channels_created": "\(outcome.channel.generation)"])
            return
        }
        outcome.channel.state = .pending
        outcome.channel.channelID = nil
        // The new channel gets the current state; timestamps keep increasing.
        outcome.channel.lastSeq = 0
        outcome.channel.reason = "APNs no longer knew channel \(old) (ChannelNotRegistered); a new channel was created: devices that followed the old one must join the new one (its id is in the order)"
        logger.warning("a broadcast order's channel was gone; creating a new one (its followers must join again)", metadata: [
            "orderflow.order": "\(order.orderID)", "orderflow.channel": "\(old)"])
    }

    /// A refused or failed channel request: paused, backed off or given up, as the failure says.
    @discardableResult
    private func channelFailure(_ error: any Error, what: String, order: OutboxOrder, route: PushRoute,
                                outcome: inout ChannelOutcome) async -> (DeliveryOutcome, Int?, String)
    {
        let failure = error as? any APNSSendFailure
        let action = failure?.action ?? .retryWithBackoff
        let reason = failure?.recordedReason ?? String("\(error)".prefix(200))
        let status = (error as? APNSError)?.status
        outcome.channel.reason = "APNs refused to \(what) the order: \(failure?.description ?? reason)"
        switch action {
        case .configurationError, .credentialsError:
            await router.pauseSending(app: route.app, bundleID: route.bundleID, merchantID: order.merchantID,
                                      because: failure?.description ?? reason,
                                      what: action == .credentialsError ? "credentials" : "broadcast configuration")
            outcome.unfinished = true
            return (.retry, status, reason)
        case .payloadRejected:
            return (.rejected, status, reason)
        case .backOffToken(let retryAfter):
            await router.noteThrottled(merchantID: order.merchantID)
            outcome.channel.failures += 1
            let delay = max(retryAfter.map(\.inSeconds) ?? 0, configuration.backoff(afterFailures: outcome.channel.failures))
            outcome.channel.nextAttemptAt = WorkerClock.now() + delay
            outcome.revisitAt = outcome.channel.nextAttemptAt
            return (.retry, status, reason)
        case .tokenDead, .retryWithBackoff, .refreshProviderToken:
            outcome.channel.failures += 1
            if outcome.channel.failures >= configuration.maximumAttempts, outcome.channel.state == .pending {
                outcome.channel.state = .failed
                logger.error("a broadcast order's channel could not be created; its updates are not sent", metadata: [
                    "orderflow.order": "\(order.orderID)", "orderflow.error": "\(reason)"])
                return (.dead, status, reason)
            }
            let failures = min(outcome.channel.failures, configuration.maximumAttempts)
            outcome.channel.nextAttemptAt = WorkerClock.now() + configuration.backoff(afterFailures: failures)
            outcome.revisitAt = outcome.channel.nextAttemptAt
            return (.retry, status, reason)
        }
    }

    /// A broadcast's `deliveries` row: device `channel`, token kind `channel`, the channel id's end.
    private func channelDelivery(_ order: OutboxOrder, _ push: PlannedPush, outcome: DeliveryOutcome, status: Int?,
                                 reason: String?, apnsID: UUID?, at time: Double? = nil) -> DeliveryRow
    {
        let time = time ?? WorkerClock.now()
        return DeliveryRow(
            merchantID: order.merchantID, orderID: order.orderID, deviceID: "channel", seq: push.seq, merged: push.merged,
            event: push.event.rawValue, tokenKind: "channel", tokenSuffix: APNSTokenRedaction.visibleSuffix(push.token),
            priority: push.priority, apsTimestamp: push.apsTimestamp, alertTitle: push.alertTitle,
            apnsId: apnsID?.uuidString.lowercased(), status: status, reason: reason.map { String($0.prefix(200)) },
            outcome: outcome, attemptedAt: time, latencyMs: max(0, (time - push.occurredAt) * 1000))
    }
}
