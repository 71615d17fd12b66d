import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import Metrics
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// The running system of the PostgreSQL fault scenarios, in this process: an engine with the
/// `ticker` workflow (eleven steps), the APNs stand-in, and a worker as in production, with a
/// pool and a LISTEN connection of its own, all on one database URL.
struct PostgresFaultRig: Sendable {
    let engine: OrderFlowEngine
    let apns: LocalAPNSServer
    let client: APNSClient
    let workerPool: PostgresPool
    let worker: RunningWorker

    /// `database` must be migrated. The engine's callers wait at most 2 s for a connection.
    static func start(_ database: PostgresConfiguration, workerID: String) async throws -> PostgresFaultRig {
        var engineConfiguration = OrderFlowConfiguration(database: database, maximumConnections: 8)
        engineConfiguration.acquireTimeout = .seconds(2)
        let engine = OrderFlowEngine(configuration: engineConfiguration)
        _ = try await engine.applyWorkflow(yaml: WorkerHarness.tickerWorkflow, file: "ticker.yaml")

        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: WorkerHarness.keyID, teamID: WorkerHarness.teamID, publicKey: key.publicKey)]))
        try await apns.start()
        let client = try APNSClient(
            configuration: APNSClientConfiguration(
                environment: .custom(baseURL: apns.baseURL, trustRootsPEM: apns.trustRootPEM),
                credentials: .init(key: .pem(key.pemRepresentation), keyID: WorkerHarness.keyID, teamID: WorkerHarness.teamID)),
            logger: Logger(label: "apns", factory: { _ in SwiftLogNoOpLogHandler() }))

        let workerPool = PostgresPool(.init(connection: database, maximumConnections: 4, acquireTimeout: .seconds(2)))
        let listener = PostgresListener(
            configuration: database, channels: [OrderFlowEngine.wakeChannel],
            logger: Logger(label: "listen", factory: { _ in SwiftLogNoOpLogHandler() }))
        let worker = RunningWorker(OrderFlowWorker(
            configuration: WorkerConfiguration(
                bundleID: WorkerHarness.bundleID, workerID: workerID, lease: .seconds(5),
                minimumPushInterval: .milliseconds(100), maximumAttempts: 8,
                backoffBase: .milliseconds(50), backoffCap: .milliseconds(500), queueDepthSampleInterval: nil),
            pool: workerPool, sender: client, listener: listener,
            logger: Logger(label: "worker", factory: { _ in SwiftLogNoOpLogHandler() }),
            metricsFactory: NOOPMetricsHandler.instance), listener: listener)
        return PostgresFaultRig(engine: engine, apns: apns, client: client, workerPool: workerPool, worker: worker)
    }

    /// Creates ticker orders whose app registered its activity's token; returns the tokens.
    func createOrders(_ orderIDs: [String], firstToken: Int) async throws -> [String] {
        var tokens: [String] = []
        for (index, orderID) in orderIDs.enumerated() {
            let token = EngineFixture.token(firstToken + index)
            _ = try await engine.createOrder(NewOrder(orderID: orderID, workflow: "ticker", attributes: ["label": .string(orderID)]))
            try await engine.registerActivityToken(orderID: orderID, deviceID: "phone", token: token)
            tokens.append(token)
        }
        return tokens
    }

    func waitUntilDrained(timeout: Duration) async throws {
        try await eventually("the worker drains the queue", timeout: timeout) {
            try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM activity_commands")).single().decode("n", as: Int.self) == 0
        }
    }

    func deadLetters() async throws -> Int {
        try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM deliveries WHERE outcome = 'dead'")).single().decode("n")
    }

    /// The audit of a ticker scenario: every token's final push is the `end` of step 11.
    func audit(scenario: String, load: String, faults: String, tokens: [String], notes: [String]) -> DeliveryAudit {
        DeliveryAudit(
            scenario: scenario, load: load, faults: faults, tokens: tokens, pushes: apns.pushes(), notes: notes,
            isFinal: { $0.event == "end" && $0.content?["step"]?.integerValue == 11 })
    }

    func shutdown() async throws {
        try await worker.stop()
        try? await client.shutdown()
        try? await apns.stop()
        await workerPool.close()
        await engine.shutdown()
    }
}
