import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Prometheus
import ServiceLifecycle
import Testing
@testable import OrderFlowHTTP

/// The metrics on a listener of their own (`orderflow worker run --metrics-port`, and `serve`'s
/// without a metrics token): the registry's text on `GET /metrics`, nothing else, on loopback.
@Suite("MetricsListener", .serialized)
struct MetricsListenerTests {
    static let logger = Logger(label: "metrics-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    static func registry() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(
            descriptor: .init(namespace: "orderflow", metricName: "pushes", unitName: "total", helpText: "Pushes."),
            labels: [("merchant", "default"), ("outcome", "sent")]
        ).increment()
        return registry
    }

    @Test("GET and HEAD /metrics answer the registry's text; 404 elsewhere, 405 with Allow for other methods")
    func answers() async throws {
        let registry = Self.registry()
        let application = Application(responder: CallbackResponder<BasicRequestContext> { request, _ in
            MetricsListener.answer(request, registry: registry)
        })
        try await application.test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
                let body = String(buffer: response.body)
                #expect(body.contains("orderflow_pushes_total{merchant=\"default\",outcome=\"sent\"} 1"), "\(body)")
            }
            try await client.execute(uri: "/metrics?name[]=x", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/metrics", method: .head) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes == 0)
            }
            try await client.execute(uri: "/", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(String(buffer: response.body) == "metrics are at GET /metrics\n")
            }
            try await client.execute(uri: "/metrics", method: .post) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "GET, HEAD")
            }
        }
    }

    @Test("serves on the port it bound, refuses a port in use naming the address, closes at shutdown",
          .timeLimit(.minutes(3)))
    func listensAndCloses() async throws {
        let listener = MetricsListener(configuration: .init(port: 0), registry: Self.registry(), logger: Self.logger)
        let group = ServiceGroup(configuration: .init(services: [listener], logger: Self.logger))
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        var port = 0
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            port = try #require(await listener.listening())
            #expect(port > 0)
            let response = try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics"), timeout: .seconds(10))
            #expect(response.status.code == 200)
            let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
            #expect(body.contains("orderflow_pushes_total"), "\(body)")

            // A second listener on the same port fails, in words an operator acts on.
            let taken = MetricsListener(configuration: .init(host: "127.0.0.1", port: port), registry: .init(), logger: Self.logger)
            do {
                try await taken.run()
                Issue.record("a second listener ran on a port in use")
            } catch let error as MetricsListenError {
                #expect(error.description.contains("127.0.0.1:\(port)"), "\(error)")
                #expect(error.description.contains("in use"), "\(error)")
            }
            #expect(await taken.listening() == nil)

            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        try await client.shutdown()
        // A new connection is refused at once: the listening socket is closed.
        #expect(Self.connectionRefused(port: port), "the metrics port still accepts connections after shutdown")
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
}
