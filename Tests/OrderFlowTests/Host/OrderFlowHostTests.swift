import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import OrderFlow
import OrderFlowTesting
import PGKit
import Prometheus
import ServiceLifecycle
import Testing

/// The host as operators and embedding backends run it: one `Service` that brings up the
/// pool, the APNs client, LISTEN, timers and the worker (its metrics to the factory given), and
/// takes them down. Serving the metrics is OrderFlowHTTP's `MetricsListener` (its own tests).
@Suite("OrderFlowHost", .serialized)
struct OrderFlowHostTests {
    static let bundleID = "com.example.orderflow"
    static let keyID = "HOSTKEY001"
    static let teamID = "TEAM123456"

    @Test("runs the system: a new order's start reaches APNs, timers fire, the worker counts, shutdown closes everything",
          .timeLimit(.minutes(2)))
    func runsTheSystem() async throws {
        let fixture = try await EngineFixture.make()
        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: Self.keyID, teamID: Self.teamID, publicKey: key.publicKey)],
            acceptedBundleIDs: [Self.bundleID]))
        try await apns.start()
        var configuration = Self.configuration(database: fixture.database, apns: apns, key: key)
        configuration.timerInterval = .milliseconds(50)
        let registry = PrometheusCollectorRegistry()
        let host = try OrderFlowHost(configuration: configuration, logger: Self.quietLogger,
                                     metricsFactory: PrometheusMetricsFactory(registry: registry))
        let group = ServiceGroup(configuration: .init(services: [host], logger: Self.quietLogger))

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }

            // A push-to-start for a new order, sent by the host's worker through its client.
            let token = EngineFixture.token(7)
            try await host.engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttributes", token: token)
            try await fixture.createFoodOrder("H1")
            try await host.engine.follow(orderID: "H1", deviceID: "phone")
            try await eventually("the start reaches the stand-in") { apns.pushes(forToken: token).contains { $0.event == "start" } }
            #expect(apns.pushes(forToken: token).first?.topic == "\(Self.bundleID).push-type.liveactivity")

            // A timer that fell due while nothing ran fires on the host's next scan.
            try await fixture.createFoodOrder("H2")
            _ = try await host.engine.advance("H2", to: "in_progress")
            _ = try await host.engine.advance("H2", to: "ready")
            try await fixture.engine.pool.query(PostgresQuery(
                "UPDATE orders SET state_entered_at = now() - interval '46 minutes' WHERE order_id = 'H2'"))
            try await eventually("the ready timer cancels H2") { try await host.engine.order("H2").order.state == "cancelled" }

            // The worker's counters reach the factory the host was given.
            let metrics = String(decoding: registry.emitToBuffer(), as: UTF8.self)
            #expect(metrics.contains("orderflow_pushes_total{merchant=\"default\",platform=\"ios\",outcome=\"sent\"}"), "\(metrics)")

            // Graceful shutdown: the run returns, the pool and the port are closed.
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await #expect(throws: OrderFlowError.self) { _ = try await host.engine.order("H1") }
        try await apns.stop()
        await fixture.shutdown()
    }

    @Test("an unusable key or endpoint fails when the host is made, before anything connects")
    func refusesBadSettings() async throws {
        let database = try DatabaseConfiguration("postgresql://nobody@127.0.0.1:1/none")
        var configuration = OrderFlowHostConfiguration(
            engine: OrderFlowConfiguration(database: database),
            apns: APNSClientConfiguration(
                environment: .custom(baseURL: "https://127.0.0.1:1", trustRootsPEM: nil),
                credentials: .init(key: .pem("not a key"), keyID: Self.keyID, teamID: Self.teamID)),
            worker: WorkerConfiguration(bundleID: Self.bundleID))
        #expect(throws: APNSCredentialsError.self) { _ = try OrderFlowHost(configuration: configuration, logger: Self.quietLogger) }
        configuration.apns = APNSClientConfiguration(
            environment: .custom(baseURL: "http://127.0.0.1:1", trustRootsPEM: nil),
            credentials: .init(key: .pem(P256.Signing.PrivateKey().pemRepresentation), keyID: Self.keyID, teamID: Self.teamID))
        #expect(throws: APNSConfigurationError.self) { _ = try OrderFlowHost(configuration: configuration, logger: Self.quietLogger) }
        configuration.engine.merchantID = "bad\u{7}merchant"
        #expect(throws: OrderFlowError.self) { _ = try OrderFlowHost(configuration: configuration, logger: Self.quietLogger) }
    }

    // MARK: Helpers

    static var quietLogger: Logger { Logger(label: "host-tests", factory: { _ in SwiftLogNoOpLogHandler() }) }

    static func configuration(database: DatabaseConfiguration, apns: LocalAPNSServer, key: P256.Signing.PrivateKey)
        -> OrderFlowHostConfiguration
    {
        var worker = WorkerConfiguration(bundleID: bundleID, workerID: "host-test", queueDepthSampleInterval: nil)
        worker.minimumPushInterval = .milliseconds(20)
        worker.shutdownGracePeriod = .seconds(5)
        return OrderFlowHostConfiguration(
            engine: OrderFlowConfiguration(database: database),
            apns: APNSClientConfiguration(
                environment: .custom(baseURL: apns.baseURL, trustRootsPEM: apns.trustRootPEM),
                credentials: .init(key: .pem(key.pemRepresentation), keyID: keyID, teamID: teamID)),
            worker: worker)
    }
}
