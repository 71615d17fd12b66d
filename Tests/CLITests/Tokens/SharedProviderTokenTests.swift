import Crypto
import Foundation
import LocalAPNS
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// Replicas share one provider token per (team, key): three `orderflow worker run` processes
/// with one key, against a stand-in that answers 429 TooManyProviderTokenUpdates to a second
/// token within 20 minutes, as APNs does.
@Suite("One provider token across worker processes")
struct SharedProviderTokenTests {
    @Test("three workers started together sign one token and all send with it", .timeLimit(.minutes(3)))
    func threeWorkersOneToken() async throws {
        let database = try await TestDatabase.fresh(prefix: "sharedtoken")
        _ = try await Schema.migrate(database)
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 4))
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: "SHAREDKEY1", teamID: "SHAREDTEAM", publicKey: key.publicKey)],
            acceptedBundleIDs: ["com.example.orders"], minimumProviderTokenInterval: .seconds(20 * 60)))
        try await apns.start()
        let keyFile = try Fixtures.file("AuthKey_SHAREDKEY1.p8", key.pemRepresentation)
        chmod(keyFile, 0o600)
        let caFile = try Fixtures.file("ca.pem", apns.trustRootPEM)
        let cli = try CLI(databaseURL: database.connectionString)
        let arguments = [
            "worker", "run", "--apns-key", keyFile, "--apns-key-id", "SHAREDKEY1", "--apns-team-id", "SHAREDTEAM",
            "--apns-topic", "com.example.orders", "--apns-url", apns.baseURL, "--apns-ca", caFile, "--connections", "3",
            "--batch-size", "2",
        ]
        // Orders waiting before the workers start: all three claim at once.
        let orders = (0..<30).map { "T\($0)" }
        for (index, order) in orders.enumerated() {
            _ = try await engine.createOrder(NewOrder(orderID: order, workflow: "food-order",
                attributes: ["merchantName": "Token Kitchen", "orderNumber": .string(order), "itemCount": 1]))
            try await engine.registerActivityToken(orderID: order, deviceID: "phone-\(index)", token: EngineFixture.token(600 + index))
            _ = try await engine.advance(order, to: "accept")
        }
        let workers = try (0..<3).map { index in try cli.start(arguments + ["--worker-id", "replica-\(index)"]) }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let pending: Int = try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM activity_commands")).single().decode("n")
            if pending == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        var results: [CLI.Result] = []
        for worker in workers {
            worker.interrupt()
            results.append(try await worker.finish())
        }
        for result in results { #expect(result.status == 0, "\(result)") }

        let pushes = apns.pushes()
        #expect(pushes.count >= orders.count, "\(pushes.count) pushes for \(orders.count) orders")
        let tokens = Set(pushes.compactMap { $0.headers["authorization"] })
        #expect(tokens.count == 1, "\(tokens.count) provider tokens in use; one was expected")
        #expect(!apns.rejections().contains { $0.reason == "TooManyProviderTokenUpdates" }, "\(apns.rejections())")
        let owners = try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM apns_provider_tokens")).single().decode("n", as: Int.self)
        #expect(owners == 1)
        var scan = SecretScan(tokens: [], key: key, pushes: pushes)
        for result in results { scan.check(result.stdout + result.stderr, "worker") }
        try await apns.stop()
        await engine.shutdown()
    }
}
