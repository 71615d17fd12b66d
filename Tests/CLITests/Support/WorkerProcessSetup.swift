import Crypto
import Foundation
import LocalAPNS
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing
import WorkflowKit

/// A migrated database with `food-order`, an engine, the APNs stand-in and a key file for
/// `orderflow worker run` processes (the reliability and kill tests).
struct WorkerProcessSetup: Sendable {
    static let bundleID = "com.example.orders"

    let engine: OrderFlowEngine
    let apns: LocalAPNSServer
    let cli: CLI
    let workerArguments: [String]
    let tokens = LockedValue<[String]>([])

    static let steps: [(String, JSONValue)] = [
        ("accept", [:]), ("ready", [:]), ("dispatch", ["eta": "+10m", "driver": "Kim"]), ("deliver", [:]),
    ]

    static func make(prefix: String) async throws -> WorkerProcessSetup {
        let database = try await TestDatabase.fresh(prefix: prefix)
        _ = try await Schema.migrate(database)
        return try await make(database: database, cli: try CLI(databaseURL: database.connectionString), applyWorkflow: true)
    }

    /// `lease`: short (2 s) where workers are killed, so that the others take over quickly.
    static func make(database: PostgresConfiguration, cli: CLI, applyWorkflow: Bool, lease: Int = 2) async throws -> WorkerProcessSetup {
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 6))
        if applyWorkflow {
            _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        }
        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: key.publicKey)],
            acceptedBundleIDs: [Self.bundleID]))
        try await apns.start()
        let keyFile = try Fixtures.file("AuthKey.p8", key.pemRepresentation)
        chmod(keyFile, 0o600)
        let caFile = try Fixtures.file("ca.pem", apns.trustRootPEM)
        return WorkerProcessSetup(engine: engine, apns: apns, cli: cli, workerArguments: [
            "worker", "run", "--apns-key", keyFile, "--apns-key-id", "KEY1234567", "--apns-team-id", "TEAM123456",
            "--apns-topic", Self.bundleID, "--apns-url", apns.baseURL, "--apns-ca", caFile,
            "--lease", "\(lease)", "--connections", "3",
        ])
    }

    /// A food order whose app registered its activity's token.
    func createOrder(_ orderID: String, token: String) async throws {
        _ = try await engine.createOrder(NewOrder(orderID: orderID, workflow: "food-order",
            attributes: ["merchantName": "Fault Kitchen", "orderNumber": .string(orderID), "itemCount": 1]))
        try await engine.registerActivityToken(orderID: orderID, deviceID: "phone-\(orderID)", token: token)
        tokens.withLock { $0.append(token) }
    }

    func leasedOrders() async throws -> Int {
        try await engine.pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM orders WHERE dispatch_lease_until > now()")).single().decode("n")
    }

    func deadLetters() async throws -> Int {
        try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM deliveries WHERE outcome = 'dead'")).single().decode("n")
    }

    func waitUntilDrained(timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let pending: Int = try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM activity_commands"))
                .single().decode("n")
            if pending == 0 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("commands were left unsent after \(timeout)")
    }

    func shutdown() async throws {
        try await apns.stop()
        await engine.shutdown()
    }
}
