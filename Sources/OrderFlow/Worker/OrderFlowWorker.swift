import APNS
import Foundation
import Logging
import Metrics
import PGKit
import ServiceLifecycle
import Synchronization
import WorkflowKit

/// Turns activity commands into APNs pushes: claims orders, merges each activity's unseen
/// transitions into one push, sends it and records the outcome.
///
/// Any number of workers (in one process or many) can run against one database: an order is
/// leased to one worker at a time (`orders.dispatch_lease_until`), so no push is sent twice, and
/// a worker that dies leaves its leases to expire for the others.
///
/// Wake-ups come from the engine in the same process (``WakeSignal``), from
/// `LISTEN orderflow_wake` (a `PostgresListener`, for engines elsewhere) and from adaptive
/// polling (5 ms right after work, backing off to 250 ms when idle), so a commit reaches
/// APNs within milliseconds without a NOTIFY inside any transaction.
///
/// Run it in a `ServiceGroup` after the pool (and listener): at graceful shutdown it stops
/// claiming, lets in-flight sends finish (at most ``WorkerConfiguration/shutdownGracePeriod``),
/// gives back the leases of orders it did not finish and returns. Cancelling its task instead
/// behaves like a crash: leases stay until they expire.
public final class OrderFlowWorker: Service, Sendable {
    public let configuration: WorkerConfiguration
    private let pool: PostgresPool
    private let store: OutboxStore
    private let sender: any PushSender
    private let wakeSignal: WakeSignal?
    private let listener: PostgresListener?
    private let logger: Logger
    private let metrics: WorkerMetrics
    private let doorbell = WorkerDoorbell()
    private let stopping = StopLatch()
    /// The merchants' own apps; nil sends every push through ``sender`` (the default app).
    private let apps: MerchantApps?
    private let merchantStore: MerchantStore
    /// Per app (`default`, `merchant:<id>`): paused after APNs refused its credentials or topic.
    private let pauses = Mutex([String: Double]())
    /// Apps whose pause was said at error level; forgotten when one of their pushes goes out.
    private let announcedPauses = Mutex(Set<String>())
    /// Per merchant: the app its pushes went through last, and how throttled it is.
    private let merchantStates = Mutex([String: MerchantSendState]())
    /// The earliest time a deferral this worker wrote falls due: idle polls wake up for it.
    private let nextDeferral = Mutex(Double.infinity)
    private let catalogs = Mutex([String: WorkflowCatalog]())

    private struct MerchantSendState {
        var app = "default"
        /// `429 TooManyRequests` answers since the merchant's last sent push.
        var throttledAnswers = 0
        /// While set and in the future, the merchant's orders are not claimed.
        var heldUntil: Double?
        var holds = 0
        /// The state last written to `merchants` (only changes are written).
        var recorded: MerchantPushState.Status = .ok
    }

    /// - Parameters:
    ///   - configuration: how to claim and pace, and whose orders.
    ///   - pool: connections for claiming and recording (a few per worker suffice).
    ///   - sender: an `APNSClient` (or a stand-in).
    ///   - wakeSignal: the engine's signal when the engine runs in this process
    ///     (`engine.wakeSignal`): commits wake the worker at once.
    ///   - listener: a listener on ``OrderFlowEngine/wakeChannel`` for engines in other
    ///     processes; run it in the same `ServiceGroup`. The worker consumes its events.
    ///   - logger: metadata keys start with `orderflow.`; tokens appear as `…` and their last 8 characters
    ///     (`APNSTokenRedaction`), under `apns.token` as in the APNs client's records.
    ///   - metricsFactory: where metrics go; by default the process's `MetricsSystem`.
    ///   - apps: the merchants' own APNs apps; merchants without one (and every merchant when
    ///     nil) send through `sender` with ``WorkerConfiguration/bundleID``.
    public init(
        configuration: WorkerConfiguration,
        pool: PostgresPool,
        sender: any PushSender,
        wakeSignal: WakeSignal? = nil,
        listener: PostgresListener? = nil,
        logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil,
        apps: MerchantApps? = nil
    ) {
        self.apps = apps
        self.merchantStore = MerchantStore(pool: pool)
        self.configuration = configuration
        self.pool = pool
        self.store = OutboxStore(pool: pool)
        self.sender = sender
        self.wakeSignal = wakeSignal
        self.listener = listener
        var logger = logger
        logger[metadataKey: "orderflow.worker"] = "\(configuration.workerID)"
        self.logger = logger
        self.metrics = WorkerMetrics(factory: metricsFactory ?? MetricsSystem.factory)
    }

    // MARK: Running

    /// Claims and sends until graceful shutdown (or cancellation).
    public func run() async throws {
        logger.info("worker started", metadata: [
            "orderflow.batch_size": "\(configuration.batchSize)",
            "orderflow.concurrent_batches": "\(configuration.concurrentBatches)",
            "orderflow.wake": "\(wakeSources)",
        ])
        await withGracefulShutdownHandler {
            // The engine's commits in this process ring the doorbell from the committing task.
            let doorbell = self.doorbell
            let subscription = wakeSignal?.subscribe { doorbell.ring() }
            defer { subscription?.cancel() }
            await withTaskGroup(of: Void.self) { helpers in
                if let listener {
                    helpers.addTask { await self.forwardNotifications(from: listener) }
                }
                helpers.addTask { await self.checkTimeLimits() }
                if let interval = configuration.queueDepthSampleInterval {
                    helpers.addTask { await self.sampleQueueDepth(every: interval) }
                }
                await withTaskGroup(of: Void.self) { lanes in
                    for lane in 0..<configuration.concurrentBatches {
                        lanes.addTask { await self.claimLoop(lane: lane) }
                    }
                }
                helpers.cancelAll()
            }
        } onGracefulShutdown: {
            self.stopping.set()
            self.doorbell.ringAll()
        }
        if Task.isCancelled {
            logger.info("worker cancelled; its leases expire on their own")
        } else {
            logger.info("worker stopped")
        }
    }

    private var wakeSources: String {
        var sources: [String] = []
        if wakeSignal != nil { sources.append("in-process") }
        if listener != nil { sources.append("listen") }
        sources.append("poll")
        return sources.joined(separator: "+")
    }

    private func forwardNotifications(from listener: PostgresListener) async {
        for await event in listener.events {
            switch event {
            case .notification(let channel, _) where channel == OrderFlowEngine.wakeChannel:
                doorbell.ring()
            case .connected:
                // Notifications sent while the listener was away are lost: look now.
                doorbell.ring()
            case .notification:
                break
            }
        }
    }

    /// One claim loop: claim a batch, send it, record it; when a claim comes back empty, wait
    /// for a wake-up (a ring that came while every loop was busy is answered at once) or the
    /// next poll.
    private func claimLoop(lane: Int) async {
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
                    merchants: configuration.merchants, excluding: await heldMerchants(),
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
            if claimed.count == 0 {
                // Nothing due: sleep until a wake-up, the next poll or a deferral falls due.
                var timeout = idle.inSeconds
                let due = nextDeferral.withLock { $0 }
                if due.isFinite {
                    let untilDue = due - now()
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
            // A full batch: more may be waiting; another loop claims them meanwhile. (Orders that
            // changed after the claim's snapshot are released with this batch; this loop claims
            // again at once after it.)
            if claimed.count >= configuration.batchSize { doorbell.ring() }
            for (orderID, error) in claimed.unreadable {
                logger.error("cannot read a claimed order; it is looked at again when its lease expires", metadata: [
                    "orderflow.order": "\(orderID)", "orderflow.error": "\(error)"])
            }
            await dispatch(claimed.orders, releasing: claimed.changed,
                           lease: BatchLease(claimedBefore: claimIssued, lease: configuration.lease))
        }
    }

    // MARK: One batch

    /// Merges, sends and records one claimed batch, and gives back the leases of `released` (not
    /// read) with it. Errors are logged; leases of orders that could not be finished expire.
    private func dispatch(_ orders: [OutboxOrder], releasing released: [OutboxStore.OrderKey], lease: BatchLease) async {
        // Broadcast orders first: their channel must exist before their followers are started
        // (the push-to-start carries its id), and each merged update is one broadcast.
        let channelOutcomes = await advanceChannels(orders, lease: lease)
        if Task.isCancelled { return }
        if !channelOutcomes.isEmpty {
            do {
                try await store.writeChannels(channelOutcomes.sorted { $0.key < $1.key }.map { index, outcome in
                    OutboxStore.ChannelRow(merchantID: orders[index].merchantID, orderID: orders[index].orderID, outcome.channel)
                })
            } catch {
                // The broadcasts went out but are not recorded: they may be sent again after the lease.
                logger.error("cannot record broadcast channels; their orders are retried when their leases expire", metadata: [
                    "orderflow.error": "\(error)"])
                return
            }
        }

        // Merge: what each activity is sent.
        let merge = ActivityMerge(configuration: configuration, now: now())
        var plans: [ActivityPlan] = []
        var planned: [(order: OutboxOrder, plans: Range<Int>, channel: ChannelOutcome?)] = []
        var stuck: [OutboxStore.OrderKey] = []
        for (index, order) in orders.enumerated() {
            guard let workflow = await workflow(for: order) else {
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
        let attempts = await send(plans, lease: lease)
        if Task.isCancelled { return }  // as after a crash: the leases expire, the orders are sent again

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
                let outcome = ActivityOutcome(plan: plans[index], attempts: attempts[index], configuration: configuration)
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

        do {
            try await recordWithRetries(completion)
        } catch {
            // The pushes went out but are not recorded: they may be sent again after the lease.
            logger.error("cannot record a batch; its orders are retried when their leases expire", metadata: [
                "orderflow.error": "\(error)", "orderflow.orders": "\(orders.count)",
            ])
            return
        }
        if lease.ranOut {
            logger.warning("a batch took longer than half its lease; pushes not yet started are left to the next claim (is the worker overloaded, or its lease too short?)", metadata: [
                "orderflow.orders": "\(orders.count)", "orderflow.lease_s": "\(configuration.lease.inSeconds)",
            ])
        }
        if earliestDeferral.isFinite {
            nextDeferral.withLock { $0 = min($0, earliestDeferral) }
        }
        for delivery in completion.deliveries { metrics.record(delivery) }
        if !stuck.isEmpty {
            logger.debug("orders left leased until their workflow can be read", metadata: ["orderflow.orders": "\(stuck.count)"])
        }
    }

    /// Records a batch; a statement that lost a race (a deadlock with an engine's group of
    /// advances on the same orders, which PostgreSQL breaks by failing one side) changed nothing
    /// and runs again. Unrecorded, the batch's pushes would go out again once its leases ran out.
    private func recordWithRetries(_ completion: OutboxStore.Completion) async throws {
        var attempt = 1
        while true {
            do {
                try await store.complete(workerID: configuration.workerID, completion)
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
        for delivery in outcome.deliveries {
            // Built only when a record is logged (the metadata argument is an autoclosure): a
            // sent push at the default level costs nothing here.
            func metadata() -> Logger.Metadata {
                [
                    "orderflow.order": "\(plan.orderID)", "orderflow.device": "\(plan.device)",
                    "orderflow.event": "\(delivery.event)", "orderflow.seq": "\(delivery.seq)",
                    "orderflow.merged": "\(delivery.merged)", "orderflow.outcome": "\(delivery.outcome.rawValue)",
                    "apns.token": "\(APNSTokenRedaction.redacted(suffix: delivery.tokenSuffix))",
                    "apns.status": "\(delivery.status.map(String.init) ?? "none")", "apns.reason": "\(delivery.reason ?? "")",
                ]
            }
            switch delivery.outcome {
            case .sent: logger.debug("push sent", metadata: metadata())
            case .dead: logger.warning("push failed \(configuration.maximumAttempts) times; dead letter kept in deliveries", metadata: metadata())
            case .tokenDead: logger.info("APNs declared a token dead; nothing more is sent to it", metadata: metadata())
            case .rejected: logger.warning("APNs rejected a payload; not retried", metadata: metadata())
            case .retry: logger.debug("push will be retried", metadata: metadata())
            }
        }
    }

    // MARK: Sending

    /// Sends every plan's pushes: activities concurrently (bounded), each activity's pushes in
    /// order, stopping at its first failure. At graceful shutdown, sends not yet started are
    /// skipped and those in flight get the grace period. Returns the attempts per plan.
    private func send(_ plans: [ActivityPlan], lease: BatchLease) async -> [[PushAttempt]] {
        let results = AttemptLog(count: plans.count)
        let indices = plans.indices.filter { !plans[$0].pushes.isEmpty }
        guard !indices.isEmpty else { return results.attempts }
        var found: [String: PushRoute] = [:]
        for merchantID in Set(indices.map { plans[$0].merchantID }) {
            found[merchantID] = await route(for: merchantID)
        }
        let routes = found
        let limit = configuration.concurrentSends
        let grace = configuration.shutdownGracePeriod
        await withTaskGroup(of: Void.self) { watch in
            watch.addTask {
                await withTaskGroup(of: Void.self) { group in
                    var running = 0
                    for index in indices {
                        if running >= limit {
                            await group.next()
                            running -= 1
                        }
                        let pushes = plans[index].pushes
                        let merchantID = plans[index].merchantID
                        let route = routes[merchantID]!
                        group.addTask {
                            for push in pushes {
                                let attempt = await self.attempt(push, merchantID: merchantID, route: route, lease: lease)
                                results.append(attempt, at: index)
                                guard case .sent = attempt else { break }
                            }
                        }
                        running += 1
                    }
                }
            }
            watch.addTask {
                await self.stopping.wait()
                try? await Task.sleep(for: grace)
            }
            await watch.next()
            watch.cancelAll()
        }
        return results.attempts
    }

    /// Whether a request may start now: not while stopping or paused, and not once the batch's
    /// lease may be taken over (another worker could then send the same push).
    private func mayStartSending(route: PushRoute, lease: BatchLease) -> Bool {
        !(stopping.isSet || route.unusable != nil || pausedUntil(app: route.app) != nil || Task.isCancelled || lease.isRunningOut())
    }

    private func attempt(_ push: PlannedPush, merchantID: String, route: PushRoute, lease: BatchLease) async -> PushAttempt {
        guard mayStartSending(route: route, lease: lease) else { return .notAttempted }
        do {
            let request = try push.request(bundleID: route.bundleID)
            let result = try await route.sender.send(request)
            await noteSent(merchantID: merchantID)
            return .sent(apnsID: result.apnsID, status: result.status, answeredAt: now())
        } catch is CancellationError {
            return .notAttempted
        } catch let failure as any APNSSendFailure {
            if Task.isCancelled { return .notAttempted }
            let error = failure as? APNSError
            switch failure.action {
            case .configurationError, .credentialsError:
                await pauseSending(app: route.app, bundleID: route.bundleID, merchantID: merchantID, because: failure.description,
                                   what: failure.action == .credentialsError ? "credentials" : "configuration")
            case .backOffToken:
                await noteThrottled(merchantID: merchantID)
            default: break
            }
            return .failed(status: error?.status, reason: Self.reason(of: failure), action: failure.action,
                           apnsID: error?.apnsID, answeredAt: now())
        } catch {
            if Task.isCancelled { return .notAttempted }
            return .failed(status: nil, reason: String("\(error)".prefix(200)), action: .retryWithBackoff, apnsID: nil,
                           answeredAt: now())
        }
    }

    private static func reason(of failure: any APNSSendFailure) -> String {
        if let error = failure as? APNSError { return error.reason.rawValue }
        if let transport = failure as? APNSTransportError { return String("transport: \(transport.underlying)".prefix(200)) }
        return String(failure.description.prefix(200))
    }

    // MARK: Routing and pausing

    /// The merchant's own app, or the default one; remembered for pausing by app.
    private func route(for merchantID: String) async -> PushRoute {
        let route = await apps?.route(for: merchantID)
            ?? PushRoute(app: "default", sender: sender, bundleID: configuration.bundleID)
        if !route.transient { merchantStates.withLock { $0[merchantID, default: MerchantSendState()].app = route.app } }
        if let why = route.unusable, !route.transient {
            await pauseSending(app: route.app, bundleID: route.bundleID, merchantID: merchantID, because: why, what: "app")
        }
        return route
    }

    /// Stops sending through one app after APNs refused its configuration or credentials (or
    /// the app cannot be used): said once, loudly, and recorded on its merchants for
    /// `orderflow merchant list`. The other apps' merchants send on.
    private func pauseSending(app: String, bundleID: String, merchantID: String, because reason: String, what: String) async {
        let resume = now() + configuration.pausedRetryInterval.inSeconds
        let first = pauses.withLock { pauses -> Bool in
            if let until = pauses[app], until > now() { return false }
            pauses[app] = resume
            return true
        }
        guard first else { return }
        let merchants = merchantStates.withLock { states in
            Set(states.filter { $0.value.app == app }.map(\.key)).union([merchantID]).sorted()
        }
        let whose = app == "default" ? "the default app's merchants (\(merchants.joined(separator: ", ")))" : "merchant \(merchantID)"
        let fix = app == "default"
            ? "fix the default app's settings and restart the worker"
            : "give the merchant a working app with `orderflow merchant set-apns`"
        let message: Logger.Message = "APNs refused the \(what) of \(bundleID): sending is paused for \(whose); other merchants send on. \(reason) Pending pushes stay queued; sending is tried again every \(configuration.pausedRetryInterval) and resumes once APNs accepts it (or \(fix))."
        let metadata: Logger.Metadata = ["orderflow.bundle_id": "\(bundleID)", "orderflow.app": "\(app)", "orderflow.merchant": "\(merchantID)"]
        // Loud once; while the app stays broken, each further try is a quieter record.
        if announcedPauses.withLock({ $0.insert(app).inserted }) {
            logger.error(message, metadata: metadata)
        } else {
            logger.info(message, metadata: metadata)
        }
        await recordPushState(merchants, MerchantPushState(
            status: .paused, reason: String(reason.prefix(300)), until: Date(timeIntervalSince1970: resume)))
    }

    /// When the app is paused, the time sending is tried again; nil when sending.
    private func pausedUntil(app: String) -> Double? {
        pauses.withLock { pauses in
            guard let until = pauses[app] else { return nil }
            if until <= now() {
                pauses[app] = nil
                logger.info("trying to send again after the pause", metadata: ["orderflow.app": "\(app)"])
                return nil
            }
            return until
        }
    }

    /// Merchants whose orders are not claimed now: their app is paused, or APNs throttles them.
    /// A merchant held by its own app's pause is released as soon as its stored app changes
    /// (`set-apns` again), looked up at most every `MerchantApps` refresh interval.
    private func heldMerchants() async -> [String] {
        let pausedApps = Set(pauses.withLock { $0.keys }).filter { pausedUntil(app: $0) != nil }
        let time = now()
        let states = merchantStates.withLock { $0 }
        var held: [String] = []
        for (merchantID, state) in states {
            if (state.heldUntil ?? 0) > time {
                held.append(merchantID)
            } else if pausedApps.contains(state.app) {
                if state.app != "default", let apps {
                    let current = await apps.route(for: merchantID)?.app ?? "default"
                    if current != state.app {
                        merchantStates.withLock { $0[merchantID]?.app = current }
                        if !pausedApps.contains(current) { continue }
                    }
                }
                held.append(merchantID)
            }
        }
        return held.sorted()
    }

    /// A 429 for one of the merchant's devices. Past ``WorkerConfiguration/throttleAfter`` in a
    /// row, the merchant's orders are held back (1 s, doubling up to the backoff cap) so that
    /// its storm does not take the sending slots of the others: said once, and recorded.
    private func noteThrottled(merchantID: String) async {
        let held: Double? = merchantStates.withLock { states in
            var state = states[merchantID, default: MerchantSendState()]
            defer { states[merchantID] = state }
            state.throttledAnswers += 1
            guard state.throttledAnswers >= configuration.throttleAfter, (state.heldUntil ?? 0) <= now() else { return nil }
            let delay = min(configuration.backoffCap.inSeconds, configuration.throttleHold.inSeconds * pow(2, Double(min(state.holds, 20))))
            state.holds += 1
            state.throttledAnswers = 0
            state.heldUntil = now() + delay
            return state.heldUntil
        }
        guard let held else { return }
        let already = merchantStates.withLock { $0[merchantID]?.recorded == .throttled }
        if !already {
            logger.warning("APNs throttles merchant \(merchantID) (429 TooManyRequests): its pushes are sent more slowly; other merchants send on",
                           metadata: ["orderflow.merchant": "\(merchantID)"])
        }
        await recordPushState([merchantID], MerchantPushState(
            status: .throttled, reason: "APNs answers 429 TooManyRequests; pushes are held back and retried",
            until: Date(timeIntervalSince1970: held)))
    }

    /// A push went out: the merchant's pushes flow again.
    private func noteSent(merchantID: String) async {
        let (wasHeld, app) = merchantStates.withLock { states -> (Bool, String?) in
            guard var state = states[merchantID] else { return (false, nil) }
            defer { states[merchantID] = state }
            state.throttledAnswers = 0
            state.holds = 0
            state.heldUntil = nil
            return (state.recorded != .ok, state.app)
        }
        if let app { announcedPauses.withLock { if !$0.isEmpty { _ = $0.remove(app) } } }
        if wasHeld {
            logger.info("merchant's pushes flow again", metadata: ["orderflow.merchant": "\(merchantID)"])
            await recordPushState([merchantID], .ok)
        }
    }

    /// Writes a push state to `merchants` (rows of merchants that were never added are none).
    private func recordPushState(_ merchants: [String], _ state: MerchantPushState) async {
        merchantStates.withLock { states in
            for merchant in merchants { states[merchant, default: MerchantSendState()].recorded = state.status }
        }
        do {
            _ = try await merchantStore.setPushState(merchants, state)
        } catch {
            logger.warning("cannot record merchants' push state", metadata: ["orderflow.error": "\(error)"])
        }
    }

    // MARK: Housekeeping

    /// Periodically queues a check of activities near the 8-hour limit.
    private func checkTimeLimits() async {
        while !Task.isCancelled {
            do {
                let queued = try await store.queueTimeLimitChecks(
                    age: configuration.timeLimitAge, maximumAttempts: configuration.maximumAttempts,
                    merchants: configuration.merchants)
                if queued > 0 {
                    logger.debug("activities near the time limit queued", metadata: ["orderflow.activities": "\(queued)"])
                    doorbell.ring()
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning("cannot look for activities near the time limit", metadata: ["orderflow.error": "\(error)"])
            }
            do { try await Task.sleep(for: configuration.timeLimitCheckInterval) } catch { return }
        }
    }

    private func sampleQueueDepth(every interval: Duration) async {
        while !Task.isCancelled {
            if let depth = try? await store.queueDepth(merchants: configuration.merchants) { metrics.recordQueueDepth(depth) }
            do { try await Task.sleep(for: interval) } catch { return }
        }
    }

    // MARK: Workflows

    /// The order's pinned workflow version (cached per merchant; versions never change).
    private func workflow(for order: OutboxOrder) async -> Workflow? {
        let catalog = catalogs.withLock { catalogs in
            if let catalog = catalogs[order.merchantID] { return catalog }
            let catalog = WorkflowCatalog(pool: pool, merchantID: order.merchantID)
            catalogs[order.merchantID] = catalog
            return catalog
        }
        do {
            return try await catalog.workflow(named: order.workflowName, version: order.workflowVersion)
        } catch {
            logger.error("cannot read the workflow of an order; its pushes wait", metadata: [
                "orderflow.order": "\(order.orderID)", "orderflow.workflow": "\(order.workflowName)@\(order.workflowVersion)",
                "orderflow.error": "\(error)",
            ])
            return nil
        }
    }

    private func now() -> Double { Date().timeIntervalSince1970 }
}

/// The attempts of one batch, per plan; filled by concurrent sends, read when they are done
/// (or abandoned at shutdown).
private final class AttemptLog: Sendable {
    private let storage: Mutex<[[PushAttempt]]>

    init(count: Int) {
        storage = Mutex(Array(repeating: [], count: count))
    }

    func append(_ attempt: PushAttempt, at index: Int) {
        storage.withLock { $0[index].append(attempt) }
    }

    var attempts: [[PushAttempt]] { storage.withLock { $0 } }
}

/// The lease on one claimed batch, by this process's clock. The database ends the leases `lease`
/// after the claim's `now()`, which comes after `claimedBefore`, so this deadline is never later
/// than the database's. Requests start only in the lease's first half: the second is for their
/// answers, so that no request is still in flight when another worker may claim the orders and
/// send the same pushes (see `WorkerConfiguration.lease`).
private final class BatchLease: Sendable {
    private let sendBefore: ContinuousClock.Instant
    private let tooLate = Atomic<Bool>(false)

    init(claimedBefore: ContinuousClock.Instant, lease: Duration) {
        sendBefore = claimedBefore + lease / 2
    }

    /// Whether it is too late to start a request (and notes that it was).
    func isRunningOut() -> Bool {
        guard ContinuousClock.now >= sendBefore else { return false }
        tooLate.store(true, ordering: .relaxed)
        return true
    }

    /// Whether a request was not started because the lease was running out.
    var ranOut: Bool { tooLate.load(ordering: .relaxed) }
}

// MARK: - Broadcast channels

extension OrderFlowWorker {
    /// Moves a broadcast order's channel on: creates it, broadcasts the unseen transitions as one
    /// request, deletes it after the end. Up to three steps in one pass (create, then broadcast).
    fileprivate func advanceChannel(_ order: OutboxOrder, _ start: OutboxChannel, route: PushRoute, lease: BatchLease) async -> ChannelOutcome {
        var outcome = ChannelOutcome(channel: start)
        guard let sender = route.sender as? any BroadcastSender else {
            outcome.channel.state = .failed
            outcome.channel.reason = "the worker's sender cannot broadcast (it is not an APNSClient); broadcast orders need APNs' broadcast and channel management APIs"
            logger.error("a broadcast order's channel cannot be created: the sender cannot broadcast",
                         metadata: ["orderflow.order": "\(order.orderID)"])
            return outcome
        }
        for _ in 0..<3 {
            let step = ChannelStep(configuration: configuration, now: now())
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
            if !mayStartSending(route: route, lease: lease) {
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
                        outcome.revisitAt = now() + configuration.backoff(afterFailures: 1)
                        return outcome
                    }
                    await noteSent(merchantID: order.merchantID)
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
                    await noteSent(merchantID: order.merchantID)
                    let time = now()
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
                    outcome.channel.deletedAt = now()
                    outcome.channel.nextAttemptAt = nil
                    outcome.channel.failures = 0
                    logger.debug("broadcast channel deleted after the end", metadata: [
                        "orderflow.order": "\(order.orderID)", "orderflow.channel": "\(id)"])
                } catch let error as APNSError where error.reason == .channelNotRegistered {
                    // Already gone (expired, or deleted by someone else): nothing left to do.
                    outcome.channel.state = .deleted
                    outcome.channel.deletedAt = now()
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
            outcome.channel.deletedAt = now()
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
        let reason = failure.map(Self.reason(of:)) ?? String("\(error)".prefix(200))
        let status = (error as? APNSError)?.status
        outcome.channel.reason = "APNs refused to \(what) the order: \(failure?.description ?? reason)"
        switch action {
        case .configurationError, .credentialsError:
            await pauseSending(app: route.app, bundleID: route.bundleID, merchantID: order.merchantID,
                               because: failure?.description ?? reason,
                               what: action == .credentialsError ? "credentials" : "broadcast configuration")
            outcome.unfinished = true
            return (.retry, status, reason)
        case .payloadRejected:
            return (.rejected, status, reason)
        case .backOffToken(let retryAfter):
            await noteThrottled(merchantID: order.merchantID)
            outcome.channel.failures += 1
            let delay = max(retryAfter.map(\.inSeconds) ?? 0, configuration.backoff(afterFailures: outcome.channel.failures))
            outcome.channel.nextAttemptAt = now() + delay
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
            outcome.channel.nextAttemptAt = now() + configuration.backoff(afterFailures: failures)
            outcome.revisitAt = outcome.channel.nextAttemptAt
            return (.retry, status, reason)
        }
    }

    /// A broadcast's `deliveries` row: device `channel`, token kind `channel`, the channel id's end.
    private func channelDelivery(_ order: OutboxOrder, _ push: PlannedPush, outcome: DeliveryOutcome, status: Int?,
                                 reason: String?, apnsID: UUID?, at time: Double? = nil) -> DeliveryRow
    {
        let time = time ?? now()
        return DeliveryRow(
            merchantID: order.merchantID, orderID: order.orderID, deviceID: "channel", seq: push.seq, merged: push.merged,
            event: push.event.rawValue, tokenKind: "channel", tokenSuffix: APNSTokenRedaction.visibleSuffix(push.token),
            priority: push.priority, apsTimestamp: push.apsTimestamp, alertTitle: push.alertTitle,
            apnsId: apnsID?.uuidString.lowercased(), status: status, reason: reason.map { String($0.prefix(200)) },
            outcome: outcome, attemptedAt: time, latencyMs: max(0, (time - push.occurredAt) * 1000))
    }

    /// Runs the channel steps of the batch's broadcast orders, concurrently (bounded).
    fileprivate func advanceChannels(_ orders: [OutboxOrder], lease: BatchLease) async -> [Int: ChannelOutcome] {
        let broadcast = orders.indices.filter { orders[$0].channel != nil }
        guard !broadcast.isEmpty else { return [:] }
        var routes: [String: PushRoute] = [:]
        for merchantID in Set(broadcast.map { orders[$0].merchantID }) {
            routes[merchantID] = await route(for: merchantID)
        }
        let found = routes
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
                group.addTask { (index, await self.advanceChannel(order, order.channel!, route: route, lease: lease)) }
                running += 1
            }
            for await (done, outcome) in group { results[done] = outcome }
            return results
        }
    }
}
