import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import Metrics
import NIOPosix
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import ServiceLifecycle
import Synchronization
import Testing
import WorkflowKit

/// A migrated database with the shipped workflows (plus `ticker`, eleven steps for merge tests),
/// an engine, a local APNs stand-in and a client pointed at it. The stand-in and the client run
/// on an event loop of their own, so that parallel tests cannot hold up each other's connections.
struct WorkerHarness: Sendable {
    let fixture: EngineFixture
    let apns: LocalAPNSServer
    let client: APNSClient
    let eventLoopGroup: MultiThreadedEventLoopGroup
    let logs: LogRecorder
    /// The provider key the stand-in trusts, for scenarios that build a client of their own.
    let signingKeyPEM: String

    static let bundleID = "com.example.orderflow"
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    var engine: OrderFlowEngine { fixture.engine }
    var pool: PostgresPool { fixture.engine.pool }

    static func make() async throws -> WorkerHarness {
        let fixture = try await EngineFixture.make()
        _ = try await fixture.engine.applyWorkflow(yaml: tickerWorkflow, file: "ticker.yaml")
        let key = P256.Signing.PrivateKey()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let apns = try LocalAPNSServer(
            configuration: .init(signingKeys: [.init(keyID: keyID, teamID: teamID, publicKey: key.publicKey)]),
            eventLoopGroup: group)
        try await apns.start()
        let client = try APNSClient(
            configuration: APNSClientConfiguration(
                environment: .custom(baseURL: apns.baseURL, trustRootsPEM: apns.trustRootPEM),
                credentials: .init(key: .pem(key.pemRepresentation), keyID: keyID, teamID: teamID)),
            logger: Logger(label: "apns", factory: { _ in SwiftLogNoOpLogHandler() }),
            eventLoopGroup: group)
        return WorkerHarness(fixture: fixture, apns: apns, client: client, eventLoopGroup: group, logs: LogRecorder(),
                             signingKeyPEM: key.pemRepresentation)
    }

    func shutdown() async {
        try? await client.shutdown()
        try? await apns.stop()
        try? await eventLoopGroup.shutdownGracefully()
        await fixture.shutdown()
    }

    /// Test defaults: short intervals so that tests run in milliseconds.
    func configuration(_ id: String = "w1", _ adjust: (inout WorkerConfiguration) -> Void = { _ in }) -> WorkerConfiguration {
        var configuration = WorkerConfiguration(
            bundleID: Self.bundleID, workerID: id, lease: .seconds(30),
            minimumPushInterval: .milliseconds(20), maximumAttempts: 4,
            backoffBase: .milliseconds(20), backoffCap: .milliseconds(100),
            pausedRetryInterval: .seconds(30), shutdownGracePeriod: .seconds(5),
            queueDepthSampleInterval: nil)
        adjust(&configuration)
        return configuration
    }

    /// A worker on the engine's pool, woken by the engine's in-process signal.
    func worker(_ configuration: WorkerConfiguration, pool: PostgresPool? = nil, inProcessWake: Bool = true,
                listener: PostgresListener? = nil, sender: APNSClient? = nil) -> OrderFlowWorker
    {
        OrderFlowWorker(
            configuration: configuration, pool: pool ?? self.pool, sender: sender ?? client,
            wakeSignal: inProcessWake ? engine.wakeSignal : nil, listener: listener,
            logger: logs.logger(label: "worker.\(configuration.workerID)"), metricsFactory: NOOPMetricsHandler.instance)
    }

    func start(_ configuration: WorkerConfiguration, pool: PostgresPool? = nil, inProcessWake: Bool = true,
               listener: PostgresListener? = nil, sender: APNSClient? = nil) -> RunningWorker
    {
        RunningWorker(worker(configuration, pool: pool, inProcessWake: inProcessWake, listener: listener, sender: sender),
                      listener: listener)
    }

    // MARK: Scenario helpers

    @discardableResult
    func createFoodOrder(_ orderID: String) async throws -> OrderSnapshot {
        try await fixture.createFoodOrder(orderID)
    }

    @discardableResult
    func createTicker(_ orderID: String) async throws -> OrderSnapshot {
        try await engine.createOrder(NewOrder(orderID: orderID, workflow: "ticker", attributes: ["label": .string(orderID)]))
    }

    /// A ticker whose app started its activity on "phone" and reported the activity's token.
    func createTicker(_ orderID: String, activityToken: String) async throws {
        try await createTicker(orderID)
        try await engine.registerActivityToken(orderID: orderID, deviceID: "phone", token: activityToken)
    }

    func activity(_ orderID: String, _ deviceID: String) async throws -> ActivityRow {
        let row = try await pool.query(PostgresQuery("""
            SELECT status, update_token, last_seq, last_alert_seq, last_timestamp, failures, started_at
            FROM activities WHERE order_id = $1 AND device_id = $2
            """, orderID, deviceID)).single()
        return ActivityRow(
            status: try row.decode("status"), updateToken: try row.decode("update_token", as: String?.self),
            lastSeq: try row.decode("last_seq"), lastAlertSeq: try row.decode("last_alert_seq"),
            lastTimestamp: try row.decode("last_timestamp"), failures: try row.decode("failures"),
            startedAt: try row.decode("started_at", as: Date?.self))
    }

    func outcomes(_ orderID: String) async throws -> [String] {
        try await pool.query(PostgresQuery("SELECT outcome FROM deliveries WHERE order_id = $1 ORDER BY id", orderID))
            .map { try $0.decode("outcome", as: String.self) }
    }

    func pendingCommands(_ orderID: String? = nil) async throws -> Int {
        try await pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM activity_commands WHERE $1::text IS NULL OR order_id = $1", orderID)).single().decode("n")
    }

    func ordersWithPendingCommands() async throws -> Int {
        try await pool.query(PostgresQuery("SELECT count(DISTINCT order_id) AS n FROM activity_commands")).single().decode("n")
    }

    func leaseOwners() async throws -> [String] {
        try await pool.query(PostgresQuery(
            "SELECT dispatch_owner FROM orders WHERE dispatch_owner IS NOT NULL ORDER BY order_id")
        ).map { try $0.decode("dispatch_owner", as: String.self) }
    }

    /// Pushes for `token`, in arrival order.
    func pushes(_ token: String) -> [LocalAPNSPush] { apns.pushes(forToken: token) }

    static let tickerWorkflow = """
        name: ticker
        description: Eleven steps in a row, for merge tests.
        activity:
          attributes-type: TickerAttributes
          attributes:
            label: string(20)
          content-state:
            step: int
            message: string(40)
        lifecycle:
          start: app
          on-time-limit: end
        states:
          s0: {initial: true, content: {step: 0, message: "step 0"}}
          s1: {content: {step: 1, message: "step 1"}}
          s2: {content: {step: 2, message: "step 2"}}
          s3: {content: {step: 3, message: "step 3"}}
          s4: {content: {step: 4, message: "step 4"}, alert: {title: "Step 4", body: "four"}}
          s5: {content: {step: 5, message: "step 5"}}
          s6: {content: {step: 6, message: "step 6"}}
          s7: {content: {step: 7, message: "step 7"}}
          s8: {content: {step: 8, message: "step 8"}, alert: {title: "Step 8", body: "eight"}}
          s9: {content: {step: 9, message: "step 9"}}
          s10: {content: {step: 10, message: "step 10"}}
          done: {final: true, content: {step: 11, message: "done"}}
        transitions:
          - {from: s0, to: s1}
          - {from: s1, to: s2}
          - {from: s2, to: s3}
          - {from: s3, to: s4}
          - {from: s4, to: s5}
          - {from: s5, to: s6}
          - {from: s6, to: s7}
          - {from: s7, to: s8}
          - {from: s8, to: s9}
          - {from: s9, to: s10}
          - {from: s10, to: done}
        """
}

struct ActivityRow: Sendable {
    var status: String
    var updateToken: String?
    var lastSeq: Int
    var lastAlertSeq: Int
    var lastTimestamp: Int
    var failures: Int
    var startedAt: Date?
}

/// A worker running in a `ServiceGroup` of its own, as `orderflow worker run` runs it.
final class RunningWorker: Sendable {
    let worker: OrderFlowWorker
    let group: ServiceGroup
    let task: Task<Void, any Error>

    init(_ worker: OrderFlowWorker, listener: PostgresListener?) {
        self.worker = worker
        var services: [any Service] = []
        if let listener { services.append(listener) }
        services.append(worker)
        let group = ServiceGroup(configuration: .init(
            services: services, logger: Logger(label: "group", factory: { _ in SwiftLogNoOpLogHandler() })))
        self.group = group
        self.task = Task { try await group.run() }
    }

    /// Graceful shutdown, as on SIGTERM.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }

    /// Cancels the worker's task: like a SIGKILL, nothing is cleaned up.
    func crash() async {
        task.cancel()
        _ = try? await task.value
    }
}

/// Polls `condition` every 10 ms until it holds; fails the test after `timeout`.
func eventually(
    _ what: String, timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("timed out waiting until \(what)", sourceLocation: sourceLocation)
    throw CancellationError()
}

extension LocalAPNSPush {
    var event: String? { aps?["event"]?.stringValue }
    var apsTimestamp: Int64? { aps?["timestamp"]?.integerValue.map(Int64.init) }
    var alertTitle: String? { aps?["alert"]?["title"]?.stringValue }
    var content: JSONValue? { aps?["content-state"] }
}
