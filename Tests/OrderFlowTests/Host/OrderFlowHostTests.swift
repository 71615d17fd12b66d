import APNS
import AsyncHTTPClient
import Crypto
import Foundation
import LocalAPNS
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import OrderFlow
import OrderFlowTesting
import PGKit
import ServiceLifecycle
import Testing

/// The host as operators and embedding backends run it: one `Service` that brings up the
/// pool, the APNs client, LISTEN, timers, the worker and `/metrics`, and takes them down.
@Suite("OrderFlowHost", .serialized)
struct OrderFlowHostTests {
    static let bundleID = "com.example.orderflow"
    static let keyID = "HOSTKEY001"
    static let teamID = "TEAM123456"

    @Test("runs the system: a new order's start reaches APNs, timers fire, /metrics answers, shutdown closes everything",
          .timeLimit(.minutes(2)))
    func runsTheSystem() async throws {
        let fixture = try await EngineFixture.make()
        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: Self.keyID, teamID: Self.teamID, publicKey: key.publicKey)],
            acceptedBundleIDs: [Self.bundleID]))
        try await apns.start()
        var configuration = Self.configuration(database: fixture.database, apns: apns, key: key)
        configuration.metrics = .init(host: "127.0.0.1", port: 0)
        configuration.timerInterval = .milliseconds(50)
        let host = try OrderFlowHost(configuration: configuration, logger: Self.quietLogger)
        let group = ServiceGroup(configuration: .init(services: [host], logger: Self.quietLogger))
        let client = HTTPClient(eventLoopGroupProvider: .singleton)

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

            // The metrics endpoint: the worker's counters, 404 elsewhere, 405 for other methods.
            let port = try #require(host.boundMetricsPort)
            #expect(port > 0)
            let metrics = try await Self.get("http://127.0.0.1:\(port)/metrics", client: client)
            #expect(metrics.status == 200)
            #expect(metrics.headers.first(name: "content-type")?.hasPrefix("text/plain; version=0.0.4") == true)
            #expect(metrics.body.contains("orderflow_pushes_total{merchant=\"default\",outcome=\"sent\"}"), "\(metrics.body)")
            #expect(try await Self.get("http://127.0.0.1:\(port)/metrics?name[]=x", client: client).status == 200)
            #expect(try await Self.get("http://127.0.0.1:\(port)/", client: client).status == 404)
            #expect(try await Self.get("http://127.0.0.1:\(port)/metrics", method: .POST, client: client).status == 405)

            // Graceful shutdown: the run returns, the pool and the port are closed.
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await #expect(throws: OrderFlowError.self) { _ = try await host.engine.order("H1") }
        try await client.shutdown()
        // A new connection to the port is refused at once: the listening socket is closed.
        let port = try #require(host.boundMetricsPort)
        #expect(Self.connectionRefused(port: port), "the metrics port still accepts connections after shutdown")
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

    @Test("a metrics port in use fails the run, naming the address; the rest is closed again")
    func metricsPortInUse() async throws {
        let fixture = try await EngineFixture.make()
        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: Self.keyID, teamID: Self.teamID, publicKey: key.publicKey)]))
        try await apns.start()
        let taken = try await MetricsEndpoint(configuration: .init(host: "127.0.0.1", port: 0), registry: .init(), logger: Self.quietLogger)
        var configuration = Self.configuration(database: fixture.database, apns: apns, key: key)
        configuration.metrics = .init(host: "127.0.0.1", port: taken.port)
        let host = try OrderFlowHost(configuration: configuration, logger: Self.quietLogger)
        do {
            try await host.run()
            Issue.record("the host ran although its metrics port was taken")
        } catch let error as MetricsEndpointError {
            #expect(error.message.contains("127.0.0.1:\(taken.port)"), "\(error)")
            #expect(error.message.contains("in use"), "\(error)")
        }
        await #expect(throws: OrderFlowError.self) { _ = try await host.engine.order("none") }
        try await apns.stop()
        await fixture.shutdown()
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

    /// Whether a TCP connection to 127.0.0.1:`port` is refused (AsyncHTTPClient would retry it
    /// until its deadline, so the test asks the socket itself).
    static func connectionRefused(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return result != 0 && errno == ECONNREFUSED
    }

    struct Response {
        var status: UInt
        var headers: HTTPHeaders
        var body: String
    }

    static func get(_ url: String, method: HTTPMethod = .GET, client: HTTPClient) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        let response = try await client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        return Response(status: response.status.code, headers: response.headers, body: String(buffer: body))
    }
}
