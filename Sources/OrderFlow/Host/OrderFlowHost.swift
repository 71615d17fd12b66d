import APNS
import Logging
import Metrics
import PGKit
import ServiceLifecycle
import Synchronization

/// What an ``OrderFlowHost`` runs and how. Fill it in at the edge of the program (flags, the
/// environment); the host reads nothing else.
public struct OrderFlowHostConfiguration: Sendable {
    /// The engine: database, merchant, pool size. The worker and the timers share its pool.
    public var engine: OrderFlowConfiguration
    /// The default APNs app: endpoint and signing key. Merchants without an app of their own
    /// send through it.
    public var apns: APNSClientConfiguration
    /// Opens the merchants' own APNs keys (sealed in the database); nil leaves merchants with an
    /// app of their own paused, said so in the log, while the others send. Default nil.
    public var masterKey: MasterKey?
    /// Keep each app's provider token in PostgreSQL, shared by every worker, so that one token
    /// per (team, key) is in use at a time across replicas. Default true.
    public var sharesProviderTokens: Bool
    /// How the worker claims and paces pushes; its `bundleID` is the default app's topic, its
    /// `merchants` the merchants this host serves, for pushes and timers alike (every merchant
    /// by default).
    public var worker: WorkerConfiguration
    /// How often due timers are looked for; nil runs no timers in this process. Default 1 s.
    public var timerInterval: Duration?
    /// LISTEN for commits made by engines in other processes (one more connection). Without
    /// it the worker still wakes for this process's commits at once, for others' by polling.
    /// Default true.
    public var listensForOtherProcesses: Bool
    /// Connections of a pool of the worker's own, so that callers of the engine in this
    /// process and the worker never wait for each other's connections; nil shares the engine's
    /// pool. Default nil.
    public var workerConnections: Int?

    public init(
        engine: OrderFlowConfiguration,
        apns: APNSClientConfiguration,
        worker: WorkerConfiguration,
        timerInterval: Duration? = .seconds(1),
        listensForOtherProcesses: Bool = true,
        workerConnections: Int? = nil,
        masterKey: MasterKey? = nil,
        sharesProviderTokens: Bool = true
    ) {
        self.masterKey = masterKey
        self.sharesProviderTokens = sharesProviderTokens
        self.engine = engine
        self.apns = apns
        self.worker = worker
        self.timerInterval = timerInterval
        self.listensForOtherProcesses = listensForOtherProcesses
        self.workerConnections = workerConnections
    }
}

/// The running system in one `Service`: the engine's pool, the APNs client, the LISTEN
/// connection, the timers and the worker, started in that order and shut down in the reverse
/// one — the worker finishes its pushes while the client and the pool are still there. Its
/// metrics go to the `metricsFactory` it is given; serving them is a door's business
/// (OrderFlowHTTP's `MetricsListener`).
///
/// ```swift
/// let host = try OrderFlowHost(configuration: configuration, logger: logger)
/// let group = ServiceGroup(services: [host], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()   // until SIGTERM: then in-flight pushes finish, leases are given back
/// ```
///
/// The host's ``engine`` takes orders and advances in the same process; its commits wake the
/// worker at once. Run the host (or call ``shutdown()`` if it never runs): it owns connections.
public final class OrderFlowHost: Service, Sendable {
    public let configuration: OrderFlowHostConfiguration
    /// The engine whose pool the worker and the timers share.
    public let engine: OrderFlowEngine
    private let sender: any PushSender
    /// Set when this host made the sender and so must close it.
    private let client: APNSClient?
    /// The merchants' own apps, each with its client.
    private let apps: MerchantApps
    /// The worker's own connections (`workerConnections`), or nil when it shares the engine's.
    private let workerPool: PostgresPool?
    private let metricsFactory: any MetricsFactory
    private let logger: Logger

    /// Checks the configuration and loads the APNs signing key; opens no connection yet.
    ///
    /// - Parameters:
    ///   - configuration: what to run and how.
    ///   - logger: the host's records; parts add their own metadata (`orderflow.worker`, …).
    ///   - sender: sends the pushes instead of an `APNSClient` made from
    ///     ``OrderFlowHostConfiguration/apns`` (a stand-in for tests and benchmarks).
    ///   - metricsFactory: where the worker's metrics go; by default the process's `MetricsSystem`.
    /// - Throws: `OrderFlowError.invalidInput` for an unusable merchant id; the APNs client's
    ///   `APNSCredentialsError` or `APNSConfigurationError` for an unusable key or endpoint.
    public init(
        configuration: OrderFlowHostConfiguration, logger: Logger, sender: (any PushSender)? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) throws {
        try configuration.engine.validate()
        self.configuration = configuration
        self.logger = logger
        self.metricsFactory = metricsFactory ?? MetricsSystem.factory
        // The engine opens no connection until used.
        let engine = OrderFlowEngine(configuration: configuration.engine, logger: logger)
        self.engine = engine
        // What only the worker reads (its merchants' apps, the shared provider tokens) goes
        // through the worker's own connections when it has them: callers of the engine that fill
        // the engine's pool must not hold the pushes back (under overload they did).
        let workerPool = configuration.workerConnections.map { connections in
            PostgresPool(
                .init(connection: configuration.engine.database, maximumConnections: connections,
                      acquireTimeout: configuration.engine.acquireTimeout),
                logger: logger)
        }
        self.workerPool = workerPool
        let workerSide = workerPool ?? engine.pool
        apps = MerchantApps(
            configuration: .init(masterKey: configuration.masterKey, sharesProviderTokens: configuration.sharesProviderTokens),
            pool: workerSide, logger: logger.scoped("apns"))
        if let sender {
            self.sender = sender
            client = nil
        } else {
            // Last, so that nothing is left open when it throws.
            let store = MerchantStore(pool: workerSide)
            let client = try APNSClient(
                configuration: configuration.apns, logger: logger.scoped("apns"),
                providerTokens: configuration.sharesProviderTokens
                    ? { key in SharedProviderTokens(store: store, signingKey: key, refreshInterval: configuration.apns.providerTokenRefreshInterval) }
                    : nil)
            self.sender = client
            self.client = client
        }
    }

    /// Where the host is: `starting` until ``run()`` starts its services, `running`, then
    /// `stopped` (or `failed` when a service failed). For health checks.
    public var status: String { runState.withLock { $0 } }
    private let runState = Mutex("starting")

    /// Runs everything until graceful shutdown (or cancellation, which behaves like a crash for
    /// the worker: its leases expire instead of being given back). Closes what it opened, also
    /// when a part fails to start.
    public func run() async throws {
        var services: [any Service] = [engine.pool]
        if let client { services.append(client) }
        var listener: PostgresListener?
        if configuration.listensForOtherProcesses {
            let made = PostgresListener(
                configuration: configuration.engine.database, channels: [OrderFlowEngine.wakeChannel],
                logger: logger.scoped("listen"))
            services.append(made)
            listener = made
        }
        if let interval = configuration.timerInterval {
            services.append(TimerService(
                engine: engine, merchants: configuration.worker.merchants, interval: interval, logger: logger.scoped("timers")))
        }
        if let workerPool { services.append(workerPool) }
        services.append(OrderFlowWorker(
            configuration: configuration.worker, pool: workerPool ?? engine.pool, sender: sender, wakeSignal: engine.wakeSignal,
            listener: listener, logger: logger, metricsFactory: metricsFactory, apps: apps))
        // A group inside a service follows the outer group's graceful shutdown by itself.
        runState.withLock { $0 = "running" }
        do {
            try await ServiceGroup(configuration: .init(services: services, logger: logger)).run()
        } catch {
            runState.withLock { $0 = "failed" }
            await apps.shutdown()
            throw error
        }
        runState.withLock { $0 = "stopped" }
        await apps.shutdown()
    }

    /// Closes the connections and the APNs clients of a host that was never run.
    public func shutdown() async {
        await apps.shutdown()
        try? await client?.shutdown()
        await engine.shutdown()
    }
}

extension Logger {
    /// The same logger under `<label>.<part>`, at the same level and with the same metadata.
    func scoped(_ part: String) -> Logger {
        var scoped = Logger(label: "\(label).\(part)")
        scoped.handler.metadata = handler.metadata
        scoped.logLevel = logLevel
        return scoped
    }
}
