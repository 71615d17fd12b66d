import Foundation
import Logging
import PGKit
import Synchronization

/// The worker's claim loops (``WorkerConfiguration/concurrentBatches`` of them, the lanes):
/// each leases a batch of orders with due commands, hands it to the ``BatchDispatcher`` and
/// claims again; when a claim comes back empty it waits for the doorbell, the next poll or the
/// earliest deferral it knows of.
final class ClaimLoop: Sendable {
    private let configuration: WorkerConfiguration
    private let store: OutboxStore
    private let router: MerchantRouter
    private let dispatcher: BatchDispatcher
    private let doorbell: WorkerDoorbell
    private let metrics: WorkerMetrics
    /// The engine's in this process, when it admits advances by the worker's lag.
    private let pushLag: PushLag?
    private let stopping: StopLatch
    private let logger: Logger
    /// The earliest time a deferral this worker wrote falls due: idle polls wake up for it.
    private let nextDeferral = Mutex(Double.infinity)

    init(configuration: WorkerConfiguration, store: OutboxStore, router: MerchantRouter, dispatcher: BatchDispatcher,
         doorbell: WorkerDoorbell, metrics: WorkerMetrics, pushLag: PushLag?, stopping: StopLatch, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.router = router
        self.dispatcher = dispatcher
        self.doorbell = doorbell
        self.metrics = metrics
        self.pushLag = pushLag
        self.stopping = stopping
        self.logger = logger
    }

    /// One claim loop: claim a batch, send it, record it; when a claim comes back empty, wait
    /// for a wake-up (a ring that came while every loop was busy is answered at once) or the
    /// next poll.
    func run(lane: Int) async {
        var idle = configuration.idlePollMinimum
        var failures = 0
        while !stopping.isSet && !Task.isCancelled {
            let claimed: OutboxStore.ClaimedBatch
            // The leases end `lease` after the claim's now(), which is after this instant.
            let claimIssued = ContinuousClock.now
            do {
                // The orders of paused or held-back merchants wait in the queue; the others flow.
                claimed = try await store.claim(
                    workerID: configuration.workerID, limit: configuration.batchSize, lease: configuration.lease,
                    merchants: configuration.merchants, excluding: await router.heldMerchants(),
                    maximumTransitions: configuration.maximumTransitionsMerged)
                failures = 0
            } catch {
                if Task.isCancelled { return }
                failures += 1
                let delay = min(5.0, 0.05 * pow(2, Double(min(failures, 10))))
                logger.warning("cannot claim orders; retrying", metadata: [
                    "orderflow.error": "\(error)", "orderflow.retry_in_s": "\(delay)", "orderflow.lane": "\(lane)",
                ])
                await stopping.wait(timeout: .seconds(delay))
                continue
            }
            let claimTook = ContinuousClock.now - claimIssued
            let full = claimed.count >= configuration.batchSize
            pushLag?.claimed(commands: claimed.orders.lazy.map(\.commands.count).reduce(0, +), full: full)
            if claimed.count == 0 {
                // Nothing due: sleep until a wake-up, the next poll or a deferral falls due.
                var timeout = idle.inSeconds
                let due = nextDeferral.withLock { $0 }
                if due.isFinite {
                    let untilDue = due - WorkerClock.now()
                    if untilDue <= 0 {
                        nextDeferral.withLock { if $0 == due { $0 = .infinity } }
                    } else {
                        timeout = min(timeout, untilDue + 0.001)
                    }
                }
                // Woken for work: poll soon after it. A poll that found nothing, while other
                // loops take the rings, backs off (idle loops polling every 5 ms took as many
                // claims as the work did).
                let rung = await doorbell.waitForWork(timeout: .seconds(timeout))
                idle = rung ? configuration.idlePollMinimum : min(idle * 2, configuration.idlePollMaximum)
                continue
            }
            idle = configuration.idlePollMinimum
            metrics.record(.claim, claimTook)
            metrics.recordBatch(orders: claimed.count)
            // A full batch: more may be waiting; another loop claims them meanwhile. (Orders that
            // changed after the claim's snapshot are released with this batch; this loop claims
            // again at once after it.)
            if full { doorbell.ring() }
            for (orderID, error) in claimed.unreadable {
                logger.error("cannot read a claimed order; it is looked at again when its lease expires", metadata: [
                    "orderflow.order": "\(orderID)", "orderflow.error": "\(error)"])
            }
            let earliestDeferral = await dispatcher.dispatch(
                claimed.orders, releasing: claimed.changed, lease: BatchLease(claimedBefore: claimIssued, lease: configuration.lease),
                planning: full ? .eachRun : .cached)
            if earliestDeferral.isFinite {
                nextDeferral.withLock { $0 = min($0, earliestDeferral) }
            }
        }
    }
}
