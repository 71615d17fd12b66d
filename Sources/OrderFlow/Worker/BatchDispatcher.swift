import APNS
import Foundation
import Logging
import PGKit

/// One claimed batch from its read to its record: the broadcast orders' channels first
/// (``BroadcastChannelDriver``), then the merge of each activity's unseen transitions into its
/// pushes (``ActivityMerge``), their sending (``ActivitySender``), and one statement recording
/// what APNs answered, which commands are handled and when deferred ones fall due.
final class BatchDispatcher: Sendable {
    private let configuration: WorkerConfiguration
    private let store: OutboxStore
    private let workflows: WorkflowCache
    private let channels: BroadcastChannelDriver
    private let sender: ActivitySender
    private let metrics: WorkerMetrics
    private let logger: Logger

    init(configuration: WorkerConfiguration, store: OutboxStore, workflows: WorkflowCache, channels: BroadcastChannelDriver,
         sender: ActivitySender, metrics: WorkerMetrics, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.workflows = workflows
        self.channels = channels
        self.sender = sender
        self.metrics = metrics
        self.logger = logger
    }

    /// Merges, sends and records one claimed batch, and gives back the leases of `released` (not
    /// read) with it. Errors are logged; leases of orders that could not be finished expire.
    /// Returns the earliest time a deferral written for the batch falls due (infinity for none).
    /// `planning`: how the record is planned (`.eachRun` for a full batch: the queue is long).
    func dispatch(_ orders: [OutboxOrder], releasing released: [OutboxStore.OrderKey], lease: BatchLease,
                  planning: PostgresQuery.Planning = .cached) async -> Double {
        // Broadcast orders first: their channel must exist before their followers are started
        // (the push-to-start carries its id), and each merged update is one broadcast.
        let channelOutcomes = await channels.advance(orders, lease: lease)
        if Task.isCancelled { return .infinity }
        if !channelOutcomes.isEmpty {
            guard await channels.record(channelOutcomes, of: orders) else { return .infinity }
        }

        // Merge: what each activity is sent.
        let sendStarted = ContinuousClock.now
        let merge = ActivityMerge(configuration: configuration, now: WorkerClock.now())
        var plans: [ActivityPlan] = []
        var planned: [(order: OutboxOrder, plans: Range<Int>, channel: ChannelOutcome?)] = []
        var stuck: [OutboxStore.OrderKey] = []
        for (index, order) in orders.enumerated() {
            guard let workflow = await workflows.workflow(for: order) else {
                // Keep the lease: the order is looked at again when it expires, not in a hot loop.
                stuck.append(.init(merchantID: order.merchantID, orderID: order.orderID))
                continue
            }
            let channel = channelOutcomes[index]
            let first = plans.count
            for activity in order.activities {
                plans.append(merge.plan(order: order, workflow: workflow, activity: activity,
                                        broadcast: channel.map {
                                            .init(channelID: $0.channel.channelID, acceptsFollowers: $0.channel.state == .open)
                                        }))
            }
            planned.append((order, first..<plans.count, channel))
        }
        let attempts = await sender.send(plans, lease: lease)
        if Task.isCancelled { return .infinity }  // as after a crash: the leases expire, the orders are sent again

        var completion = OutboxStore.Completion()
        var earliestDeferral = Double.infinity
        for (order, range, channel) in planned {
            var unfinished = false
            var deferrals: [OutboxStore.Deferral] = []
            if let channel {
                completion.deliveries += channel.deliveries
                unfinished = channel.unfinished
                if let revisit = channel.revisitAt {
                    deferrals.append(.init(merchantID: order.merchantID, orderID: order.orderID, deviceID: nil,
                                           seq: order.seq, availableAt: revisit))
                    earliestDeferral = min(earliestDeferral, revisit)
                }
            }
            for index in range {
                let outcome = ActivityOutcome(plan: plans[index], attempts: attempts.apns[index], android: attempts.android[index],
                                              configuration: configuration)
                record(outcome, into: &completion)
                unfinished = unfinished || outcome.unfinished
                if let revisit = outcome.revisitAt {
                    deferrals.append(.init(merchantID: order.merchantID, orderID: order.orderID,
                                           deviceID: outcome.plan.device, seq: order.seq, availableAt: revisit))
                    earliestDeferral = min(earliestDeferral, revisit)
                }
            }
            if !unfinished {
                // Every command read is handled; deferred activities get a wake-up of their own.
                completion.handledCommands += order.commands.map {
                    .init(merchantID: order.merchantID, orderID: order.orderID, id: $0.id)
                }
                completion.deferrals += deferrals
            }
            completion.released.append(.init(merchantID: order.merchantID, orderID: order.orderID))
        }
        completion.released += released.map { .init(merchantID: $0.merchantID, orderID: $0.orderID) }

        let recordStarted = ContinuousClock.now
        metrics.record(.send, recordStarted - sendStarted)
        do {
            try await recordWithRetries(completion, planning: planning)
            metrics.record(.record, ContinuousClock.now - recordStarted)
        } catch {
            // The pushes went out but are not recorded: they may be sent again after the lease.
            logger.error("cannot record a batch; its orders are retried when their leases expire", metadata: [
                "orderflow.error": "\(error)", "orderflow.orders": "\(orders.count)",
            ])
            return .infinity
        }
        if lease.ranOut {
            logger.warning("a batch took longer than half its lease; pushes not yet started are left to the next claim (is the worker overloaded, or its lease too short?)", metadata: [
                "orderflow.orders": "\(orders.count)", "orderflow.lease_s": "\(configuration.lease.inSeconds)",
            ])
        }
        for delivery in completion.deliveries { metrics.record(delivery) }
        if !stuck.isEmpty {
            logger.debug("orders left leased until their workflow can be read", metadata: ["orderflow.orders": "\(stuck.count)"])
        }
        return earliestDeferral
    }

    /// Records a batch; a statement that lost a race (a deadlock with an engine's group of
    /// advances on the same orders, which PostgreSQL breaks by failing one side) changed nothing
    /// and runs again. Unrecorded, the batch's pushes would go out again once its leases ran out.
    private func recordWithRetries(_ completion: OutboxStore.Completion, planning: PostgresQuery.Planning) async throws {
        var attempt = 1
        while true {
            do {
                try await store.complete(workerID: configuration.workerID, completion, planning: planning)
                return
            } catch let error as PostgresError where error.isSerializationFailure && attempt < Self.recordingAttempts {
                logger.notice("recording a batch lost a race with another transaction; recording it again", metadata: [
                    "orderflow.error": "\(error.message)", "orderflow.attempt": "\(attempt)",
                ])
                attempt += 1
            }
        }
    }

    /// Tries to record a batch (`recordWithRetries`).
    static let recordingAttempts = 5

    private func record(_ outcome: ActivityOutcome, into completion: inout OutboxStore.Completion) {
        let plan = outcome.plan
        completion.deliveries += outcome.deliveries
        if outcome.state != plan.original || !plan.exists {
            completion.activities.append(.init(
                merchantID: plan.merchantID, orderID: plan.orderID, deviceID: plan.device, rowExists: plan.exists,
                state: outcome.state))
        }
        if let token = outcome.deadPushToStartToken {
            completion.deadPushToStartTokens.append(.init(
                merchantID: plan.merchantID, deviceID: plan.device, attributesType: plan.attributesType, token: token))
        }
        if let token = outcome.deadAlertToken {
            completion.deadAlertTokens.append(.init(merchantID: plan.merchantID, deviceID: plan.device, token: token))
        }
        if let token = outcome.deadFCMToken {
            completion.deadFCMTokens.append(.init(merchantID: plan.merchantID, deviceID: plan.device, token: token))
        }
        for delivery in outcome.deliveries {
            // Built only when a record is logged (the metadata argument is an autoclosure): a
            // sent push at the default level costs nothing here.
            func metadata() -> Logger.Metadata {
                [
                    "orderflow.order": "\(plan.orderID)", "orderflow.device": "\(plan.device)",
                    "orderflow.event": "\(delivery.event)", "orderflow.seq": "\(delivery.seq)",
                    "orderflow.merged": "\(delivery.merged)", "orderflow.outcome": "\(delivery.outcome.rawValue)",
                    "orderflow.platform": "\(delivery.platform.rawValue)",
                    "apns.token": "\(APNSTokenRedaction.redacted(suffix: delivery.tokenSuffix))",
                    "apns.status": "\(delivery.status.map(String.init) ?? "none")", "apns.reason": "\(delivery.reason ?? "")",
                ]
            }
            switch delivery.outcome {
            case .sent: logger.debug("push sent", metadata: metadata())
            case .dead: logger.warning("push failed \(configuration.maximumAttempts) times; dead letter kept in deliveries", metadata: metadata())
            case .tokenDead:
                logger.info("\(delivery.platform == .android ? "FCM" : "APNs") declared a token dead; nothing more is sent to it", metadata: metadata())
            case .rejected: logger.warning("APNs rejected a payload; not retried", metadata: metadata())
            case .retry: logger.debug("push will be retried", metadata: metadata())
            }
        }
    }
}
