import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// Serves a Prometheus registry as text on `GET /metrics`, on a listener of its own: the one
/// `orderflow worker run --metrics-port` opens, and `orderflow serve`'s unless the API's port
/// shows the metrics to a token (``OrderFlowHTTPConfiguration/metricsToken``). A `Service`:
/// it closes at graceful shutdown.
public final class MetricsListener: Service, Sendable {
    public struct Configuration: Sendable {
        /// The address to listen on. Default `127.0.0.1`: the metrics name every merchant and
        /// its traffic, so only this machine reads them unless the operator opens them wider
        /// (a scraper's network, behind a firewall).
        public var host: String
        /// The port; 0 picks a free one (see ``MetricsListener/boundPort``).
        public var port: Int

        public init(host: String = "127.0.0.1", port: Int) {
            self.host = host
            self.port = port
        }
    }

    public let configuration: Configuration
    private let registry: PrometheusCollectorRegistry
    private let logger: Logger
    private let listener = Listening()

    public init(configuration: Configuration, registry: PrometheusCollectorRegistry, logger: Logger) {
        self.configuration = configuration
        self.registry = registry
        self.logger = logger
    }

    /// The bound port (the chosen one when the configuration asked for 0), once it listens.
    public var boundPort: Int? { listener.boundPort }

    /// Waits until the listener is bound; its port, or nil when it failed to start.
    public func listening() async -> Int? {
        await listener.wait()
    }

    /// Serves until graceful shutdown.
    /// - Throws: ``MetricsListenError`` naming the address when it cannot be bound.
    public func run() async throws {
        let application = Application(
            responder: CallbackResponder<BasicRequestContext> { [registry] request, _ in Self.answer(request, registry: registry) },
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "OrderFlow"),
            onServerRunning: { [listener, logger, configuration] channel in
                listener.bound(channel)
                let port = listener.boundPort ?? configuration.port
                logger.info("serving metrics", metadata: ["orderflow.metrics_url": "http://\(configuration.host):\(port)/metrics"])
            },
            logger: logger)
        defer { listener.ended() }
        do {
            try await application.run()
        } catch let error as IOError where boundPort == nil {
            throw MetricsListenError(host: configuration.host, port: configuration.port, errno: error.errnoCode)
        }
    }

    /// `GET /metrics` (and `HEAD`) with the registry's text; 404 elsewhere, 405 for other methods.
    static func answer(_ request: Request, registry: PrometheusCollectorRegistry) -> Response {
        guard request.uri.path == "/metrics" else {
            return text(.notFound, "metrics are at GET /metrics\n")
        }
        switch request.method {
        case .get:
            return MetricsText.response(registry)
        case .head:
            var response = MetricsText.response(registry)
            response.body = .init()
            return response
        default:
            var response = text(.methodNotAllowed, "use GET /metrics\n")
            response.headers[.allow] = "GET, HEAD"
            return response
        }
    }

    private static func text(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                 body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// A registry's text in Prometheus' exposition format, as both listeners answer it.
enum MetricsText {
    static func response(_ registry: PrometheusCollectorRegistry) -> Response {
        Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                 body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
}

/// The metrics listener could not start.
public struct MetricsListenError: Error, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// The system's reason (`EADDRINUSE`, `EADDRNOTAVAIL`, `EACCES`, …).
    public var errno: Int32

    /// "Address already in use" rather than NIO's `bind(descriptor:ptr:bytes:): Address already in use (errno: 98)`.
    public var description: String {
        "cannot serve metrics on \(host):\(port): \(String(cString: strerror(errno))); choose another port"
    }
}
