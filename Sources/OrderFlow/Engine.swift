import Foundation
import Logging
import PGKit
import Synchronization
import WorkflowKit

/// How the engine connects and behaves. The engine never reads the environment: the caller
/// (a merchant backend, the CLI) fills this in.
public struct OrderFlowConfiguration: Sendable {
    public var database: PostgresConfiguration
    /// Whose orders these are; every table is keyed by it: 1 to 200 characters, no control
    /// characters (``validate()`` checks). Default "default".
    public var merchantID: String = "default"
    /// Connections the engine may open. Default 8.
    public var maximumConnections: Int = 8
    /// How long a call waits for a free connection. Default 10 s.
    public var acquireTimeout: Duration = .seconds(10)
    /// Wake workers in other processes with a `pg_notify` after a commit, at most once per
    /// `notifyInterval` (never inside the transition's transaction: NOTIFY serialises commits).
    /// Default true, 20 ms.
    public var notifyWorkers: Bool = true
    public var notifyInterval: Duration = .milliseconds(20)
    /// Orders whose state this process remembers between advances, so that an advance of an
    /// order it created or moved costs one round trip. 0 turns the cache off. Default 10,000.
    public var cachedOrders: Int = 10_000
    /// At most this many groups of advance writes at once. Advances that come while a group is
    /// being written are written together in a later group: one statement, one round trip and
    /// one commit for all of them (group commit; each advance still commits exactly once with
    /// its history and outbox rows, see `PostgresPool.queryCommittingTogether`). A group beside
    /// another in flight starts only once it holds as many advances as the last group started
    /// and its share of the callers lately busy (half of them with 2 groups), so groups stay
    /// large. 0 writes every advance alone; 1 writes one group at a time.
    /// Default 2: with 8 callers a second group beside the first leaves fewer cores idle than
    /// one group at a time, and many callers still gather into large groups
    /// (`orderflow-bench advance` shows both).
    public var commitGroups: Int = 2
    /// How long an advance should wait for its group under overload (the queueing delay's
    /// target, as CoDel bounds it; `PostgresPool.Configuration.queueTarget`). A burst queues
    /// and is served; while more advances come than the groups commit, only those the groups
    /// can take within about this long (beyond those that fill the groups) are admitted, and
    /// the rest are refused at once with ``OrderFlowError/isBusy`` and a
    /// ``OrderFlowError/retryAfter``, before anything of them is rendered or written, instead of
    /// queueing for seconds. nil admits advances until their expected wait nears
    /// `acquireTimeout`. Default 50 ms.
    public var queueTarget: Duration? = .milliseconds(50)
    /// How long the command of an advance may wait for the worker in this process (an
    /// `OrderFlowHost`, `orderflow serve` with its worker), or nil for no such bound. An advance
    /// is admitted while the work ahead of it — the advances admitted and not yet claimed by the
    /// worker — is less than this long of the worker's pace over the last second (and never
    /// fewer than a few commands); otherwise it is refused at once with
    /// ``OrderFlowError/isBusy`` and a ``OrderFlowError/retryAfter``, nothing of it written.
    /// Under overload the worker is kept fed without a backlog, and the pushes of the advances
    /// admitted reach the phones within about this delay plus one claim and send, instead of
    /// every push waiting seconds behind the others (without it, an order's waiting transitions
    /// merge into one push when the worker reaches them). Without a worker in this process
    /// claiming, nothing is refused. Default nil: advances are admitted however much waits.
    public var pushLagTarget: Duration?
    /// Whether the customer's app must register a device before a client secret may change it
    /// (``DeviceCredentialPolicy``). Default `.required`.
    public var deviceCredentials: DeviceCredentialPolicy = .required
    /// The operator's master key: client-secret keys made by this engine are sealed under it,
    /// and sealed ones need it to be read. Without one they are stored unsealed (a warning at
    /// `serve`'s start; `orderflow master-key rotate` seals them). Default nil.
    public var masterKey: MasterKey?

    public init(database: PostgresConfiguration, merchantID: String = "default", maximumConnections: Int = 8) {
        self.database = database
        self.merchantID = merchantID
        self.maximumConnections = maximumConnections
    }

    /// Checks the values the engine cannot work with — a merchant id it could not store — so
    /// that a caller can refuse them at start rather than on the first order.
    /// - Throws: `OrderFlowError.invalidInput`, saying what is wrong.
    public func validate() throws {
        try Self.validate(merchantID: merchantID)
    }

    /// Checks a merchant id as ``validate()`` does.
    public static func validate(merchantID: String) throws {
        try OrderFlowEngine.validateIdentifier(merchantID, what: "merchant id")
    }
}

/// The OrderFlow engine: orders, their transitions and the activity commands they imply.
///
/// Every transition is one atomic statement that moves the order, appends to its history and
/// enqueues the activity command; a worker (`OrderFlowWorker`) turns commands into pushes.
///
/// ```swift
/// let engine = OrderFlowEngine(configuration: .init(database: try PostgresConfiguration(url)), logger: logger)
/// try await engine.applyWorkflow(yaml: yaml, file: "food-order.yaml")
/// _ = try await engine.createOrder(NewOrder(orderID: "1042", workflow: "food-order",
///     attributes: ["merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 3]))
/// try await engine.follow(orderID: "1042", deviceID: "alice-iphone")
/// _ = try await engine.advance("1042", to: "ready")
/// await engine.shutdown()
/// ```
public final class OrderFlowEngine: Sendable {
    public let configuration: OrderFlowConfiguration
    /// The engine's connection pool; the worker in the same process shares it.
    public let pool: PostgresPool
    /// Stored workflow versions.
    public let workflows: WorkflowCatalog
    /// Signals workers that commands are waiting.
    public let wakeSignal: WakeSignal
    let orderCache: OrderCache
    let logger: Logger
    /// The SQL of orders, transitions and push records.
    var orderStore: OrderStore { OrderStore(pool: pool, merchantID: configuration.merchantID) }
    /// The SQL of devices, tokens and followers.
    var deviceStore: DeviceStore { DeviceStore(pool: pool, merchantID: configuration.merchantID) }
    /// False for an engine made by ``forMerchant(_:)``: the pool is the original's to close.
    private let ownsPool: Bool
    /// The engines ``forMerchant(_:)`` made, kept so that their workflow caches last.
    private let merchantEngines = Mutex<[String: OrderFlowEngine]>([:])
    /// Each merchant's client-secret key once read, shared with the engines of ``forMerchant(_:)``.
    let clientKeys: SharedMutex<[String: ClientKeyring]>
    /// API keys the database vouched for lately, by prefix (see ``resolveAPIKey(_:)``), shared
    /// with the engines of ``forMerchant(_:)``.
    let apiKeys: SharedMutex<[String: VerifiedAPIKey]>
    /// The highest feed horizon a read of this process saw (see `FeedStore`), shared with the
    /// engines of ``forMerchant(_:)``: no later read stops below it.
    let feedHorizonFloor: SharedMutex<UInt64>

    /// The channel workers LISTEN on.
    public static let wakeChannel = "orderflow_wake"

    /// The executor for tasks that call the engine many times, such as a backend's request
    /// handlers or an import job.
    ///
    /// Every answer from PostgreSQL arrives on one thread. A task without a preference is handed
    /// from there to the concurrency pool after each statement; a task that prefers this
    /// executor carries on where the answer arrived, one thread wake-up less per call:
    ///
    /// ```swift
    /// try await withThrowingTaskGroup(of: Void.self) { group in
    ///     for order in orders {
    ///         group.addTask(executorPreference: engine.preferredExecutor) {
    ///             _ = try await engine.advance(order, to: "ready")
    ///         }
    ///     }
    ///     try await group.waitForAll()
    /// }
    /// ```
    ///
    /// (`withTaskExecutorPreference(engine.preferredExecutor) { … }` does the same for the
    /// current task.) The code of such tasks between two calls runs on that one thread too:
    /// keep long computations out of them. Tasks advancing orders with the preference skip a
    /// hop between threads per call (`orderflow-bench advance` compares both).
    public var preferredExecutor: any TaskExecutor { PostgresConnection.socketExecutor }

    public init(configuration: OrderFlowConfiguration, logger: Logger = Logger(label: "orderflow")) {
        self.configuration = configuration
        self.logger = logger
        var poolConfiguration = PostgresPool.Configuration(
            connection: configuration.database, maximumConnections: configuration.maximumConnections,
            acquireTimeout: configuration.acquireTimeout)
        poolConfiguration.commitGroups = configuration.commitGroups
        poolConfiguration.queueTarget = configuration.queueTarget
        self.pool = PostgresPool(poolConfiguration, logger: logger)
        self.workflows = WorkflowCatalog(pool: pool, merchantID: configuration.merchantID)
        self.orderCache = OrderCache(capacity: configuration.cachedOrders)
        self.wakeSignal = WakeSignal(
            pool: configuration.notifyWorkers ? pool : nil, channel: Self.wakeChannel,
            interval: configuration.notifyInterval, pushLag: configuration.pushLagTarget.map(PushLag.init(target:)))
        self.clientKeys = SharedMutex([:])
        self.apiKeys = SharedMutex([:])
        self.feedHorizonFloor = SharedMutex(0)
        self.ownsPool = true
    }

    private init(sharing engine: OrderFlowEngine, merchantID: String) {
        var configuration = engine.configuration
        configuration.merchantID = merchantID
        self.configuration = configuration
        self.logger = engine.logger
        self.pool = engine.pool
        self.workflows = WorkflowCatalog(pool: engine.pool, merchantID: merchantID)
        self.orderCache = OrderCache(capacity: configuration.cachedOrders)
        self.wakeSignal = engine.wakeSignal
        self.clientKeys = engine.clientKeys
        self.apiKeys = engine.apiKeys
        self.feedHorizonFloor = engine.feedHorizonFloor
        self.ownsPool = false
    }

    /// The engine for another merchant, on this engine's connections: a process that serves
    /// several merchants (a worker's timers, an API) keeps one pool. Shut down this engine, not
    /// the one returned, to close the connections.
    /// - Throws: `OrderFlowError.invalidInput` for a merchant id the engine cannot store.
    public func forMerchant(_ merchantID: String) throws -> OrderFlowEngine {
        if merchantID == self.merchantID { return self }
        try OrderFlowConfiguration.validate(merchantID: merchantID)
        return merchantEngines.withLock { engines in
            if let known = engines[merchantID] { return known }
            let made = OrderFlowEngine(sharing: self, merchantID: merchantID)
            engines[merchantID] = made
            return made
        }
    }

    /// Closes the engine's connections (for an engine from ``forMerchant(_:)``, nothing: they
    /// are the original engine's).
    public func shutdown() async {
        if ownsPool { await pool.close() }
    }

    var merchantID: String { configuration.merchantID }

    // MARK: Workflows

    /// Validates a workflow file and stores it as a new immutable version if its content changed.
    public func applyWorkflow(yaml: String, file: String) async throws -> AppliedWorkflow {
        try await workflows.apply(yaml: yaml, file: file)
    }

    /// A stored workflow version (the newest when `version` is nil).
    public func storedWorkflow(name: String, version: Int? = nil) async throws -> StoredWorkflow {
        try await workflows.stored(named: name, version: version)
    }

    /// Every stored workflow with its newest version.
    public func workflowVersions() async throws -> [WorkflowVersionSummary] {
        try await workflows.summaries()
    }
}

/// A `Mutex` that several owners share (a `Mutex` itself cannot be copied).
final class SharedMutex<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<Result>(_ body: (inout sending Value) throws -> sending Result) rethrows -> sending Result {
        try mutex.withLock(body)
    }
}
