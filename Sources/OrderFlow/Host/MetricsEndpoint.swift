import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization

/// Serves a Prometheus registry as text on `GET /metrics`.
///
/// SwiftNIO's HTTP/1.1 server pipeline does the protocol (parsing, keep-alive, pipelining, bad
/// requests); the handler here only answers the one route. The port is bound when the endpoint
/// is made, so a port in use fails at start; it closes at graceful shutdown.
public final class MetricsEndpoint: Service, Sendable {
    public struct Configuration: Sendable {
        /// The address to listen on. Default `127.0.0.1`: the metrics name every merchant and
        /// its traffic, so only this machine reads them unless the operator opens them wider
        /// (a scraper's network, behind a firewall).
        public var host: String
        /// The port; 0 picks a free one (see ``MetricsEndpoint/port``).
        public var port: Int

        public init(host: String = "127.0.0.1", port: Int) {
            self.host = host
            self.port = port
        }
    }

    /// The bound port (the chosen one when the configuration asked for 0).
    public let port: Int
    public let host: String
    private let channel: any Channel
    /// Accepted connections, closed with the endpoint (closing the listening socket leaves them open).
    private let connections: Connections
    private let logger: Logger

    private final class Connections: Sendable {
        private let open = Mutex<[ObjectIdentifier: any Channel]>([:])

        func add(_ channel: any Channel) {
            let id = ObjectIdentifier(channel)
            open.withLock { $0[id] = channel }
            channel.closeFuture.whenComplete { [weak self] _ in _ = self?.open.withLock { $0.removeValue(forKey: id) } }
        }

        func closeAll() async {
            for channel in open.withLock({ Array($0.values) }) { try? await channel.close() }
        }
    }

    /// Binds the port.
    /// - Throws: ``MetricsEndpointError`` naming the address when it cannot be bound.
    public init(
        configuration: Configuration, registry: PrometheusCollectorRegistry, logger: Logger,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws {
        let connections = Connections()
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                connections.add(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(MetricsRequestHandler(registry: registry))
                }
            }
        do {
            channel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        } catch {
            throw MetricsEndpointError(
                message: "cannot serve metrics on \(configuration.host):\(configuration.port): \(Self.reason(error)); choose another port")
        }
        self.port = channel.localAddress?.port ?? configuration.port
        self.host = configuration.host
        self.connections = connections
        self.logger = logger
    }

    public func run() async throws {
        logger.info("serving metrics", metadata: ["orderflow.metrics_url": "http://\(host):\(port)/metrics"])
        try? await gracefulShutdown()
        try? await channel.close()
        await connections.closeAll()
    }

    /// "Address already in use" rather than NIO's `bind(descriptor:ptr:bytes:): Address already in use (errno: 98)`.
    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError {
            return String(cString: strerror(error.errnoCode))
        }
        return "\(error)"
    }
}

/// The metrics endpoint could not start.
public struct MetricsEndpointError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Answers `GET /metrics` (and `HEAD`) with the registry's text; 404 elsewhere, 405 for other methods.
private final class MetricsRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private var request: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            break  // a scrape has no body; anything sent is ignored
        case .end:
            guard let head = request else { return }
            request = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let status: HTTPResponseStatus
        let type: String
        var body: [UInt8]
        var headers = HTTPHeaders()
        switch (path, head.method) {
        case ("/metrics", .GET), ("/metrics", .HEAD):
            (status, type, body) = (.ok, "text/plain; version=0.0.4; charset=utf-8", registry.emitToBuffer())
        case ("/metrics", _):
            (status, type, body) = (.methodNotAllowed, "text/plain; charset=utf-8", Array("use GET /metrics\n".utf8))
            headers.add(name: "Allow", value: "GET, HEAD")
        default:
            (status, type, body) = (.notFound, "text/plain; charset=utf-8", Array("metrics are at GET /metrics\n".utf8))
        }
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: "\(body.count)")
        if head.method == .HEAD { body = [] }
        let keepAlive = head.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        if !keepAlive {
            written.futureResult.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
        }
    }
}
