import Logging
import Metrics
import PGKit
import ServiceLifecycle

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
    private let wakeSignal: WakeSignal?
    private let listener: PostgresListener?
    private let logger: Logger
    private let doorbell: WorkerDoorbell
    private let stopping: StopLatch
    private let claims: ClaimLoop
    private let housekeeping: WorkerHousekeeping
    /// The merchants' Firebase projects' clients, closed when the worker stops.
    private let fcmApps: FCMApps

    /// - Parameters:
    ///   - configuration: how to claim and pace, and whose orders.
    ///   - pool: connections for claiming and recording (a few per worker suffice).
    ///   - sender: an `APNSClient` (or a stand-in); broadcast orders need its
    ///     ``PushSender/broadcaster``.
    ///   - wakeSignal: the engine's signal when the engine runs in this process
    ///     (`engine.wakeSignal`): commits wake the worker at once.
    ///   - listener: a listener on ``OrderFlowEngine/wakeChannel`` for engines in other
    ///     processes; run it in the same `ServiceGroup`. The worker consumes its events.
    ///   - logger: metadata keys start with `orderflow.`; tokens appear as `…` and their last 8 characters
    ///     (`APNSTokenRedaction`), under `apns.token` as in the APNs client's records.
    ///   - metricsFactory: where metrics go; by default the process's `MetricsSystem`.
    ///   - apps: the merchants' own APNs apps; merchants without one (and every merchant when
    ///     nil) send through `sender` with ``WorkerConfiguration/bundleID``. Its master key also
    ///     opens the merchants' Firebase service accounts for their Android followers (sent to
    ///     ``WorkerConfiguration/fcmBaseURL``); without it, merchants with a Firebase project
    ///     are held back, said so.
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
        self.configuration = configuration
        self.wakeSignal = wakeSignal
        self.listener = listener
        var logger = logger
        logger[metadataKey: "orderflow.worker"] = "\(configuration.workerID)"
        self.logger = logger
        let doorbell = WorkerDoorbell()
        let stopping = StopLatch()
        self.doorbell = doorbell
        self.stopping = stopping
        let store = OutboxStore(pool: pool)
        let metrics = WorkerMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        // Android followers: through each merchant's Firebase project, opened with the master
        // key that opens its APNs app.
        let fcmApps = FCMApps(
            settings: .init(masterKey: apps?.configuration.masterKey, baseURL: configuration.fcmBaseURL,
                            trustRootsPEM: configuration.fcmTrustRootsPEM,
                            refreshInterval: apps?.configuration.refreshInterval ?? .seconds(10),
                            sharesAccessTokens: apps?.configuration.sharesProviderTokens ?? true),
            pool: pool, logger: logger)
        self.fcmApps = fcmApps
        let router = MerchantRouter(configuration: configuration, sender: sender, apps: apps,
                                    merchantStore: MerchantStore(pool: pool), logger: logger, metrics: metrics, fcmApps: fcmApps)
        let gate = SendGate(stopping: stopping, router: router)
        let dispatcher = BatchDispatcher(
            configuration: configuration, store: store, workflows: WorkflowCache(pool: pool, logger: logger),
            channels: BroadcastChannelDriver(configuration: configuration, store: store, router: router, gate: gate, logger: logger),
            sender: ActivitySender(configuration: configuration, router: router, gate: gate, stopping: stopping),
            metrics: metrics, logger: logger)
        claims = ClaimLoop(configuration: configuration, store: store, router: router, dispatcher: dispatcher,
                           doorbell: doorbell, metrics: metrics, pushLag: wakeSignal?.pushLag,
                           stopping: stopping, logger: logger)
        housekeeping = WorkerHousekeeping(configuration: configuration, store: store, retentionStore: RetentionStore(pool: pool),
                                          doorbell: doorbell, metrics: metrics, logger: logger)
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
            let housekeeping = self.housekeeping
            await withTaskGroup(of: Void.self) { helpers in
                if let listener {
                    helpers.addTask { await self.forwardNotifications(from: listener) }
                }
                helpers.addTask { await housekeeping.checkTimeLimits() }
                if let interval = configuration.queueDepthSampleInterval {
                    helpers.addTask { await housekeeping.sampleQueueDepth(every: interval) }
                }
                if let interval = configuration.purgeInterval {
                    helpers.addTask { await housekeeping.purge(every: interval) }
                }
                let claims = self.claims
                await withTaskGroup(of: Void.self) { lanes in
                    for lane in 0..<configuration.concurrentBatches {
                        lanes.addTask { await claims.run(lane: lane) }
                    }
                }
                helpers.cancelAll()
            }
        } onGracefulShutdown: {
            self.stopping.set()
            self.doorbell.ringAll()
        }
        await fcmApps.shutdown()
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
}
