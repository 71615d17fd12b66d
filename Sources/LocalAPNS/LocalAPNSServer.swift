import Crypto
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// A local stand-in for APNs: HTTP/2 over TLS on 127.0.0.1, verifying requests as APNs does
/// and recording what it accepts. For integration tests, the demo and throughput benchmarks.
///
/// It checks the method and path (`POST /3/device/<hex token>`), the ES256 provider token
/// against the configured public keys (by `kid`, with `iss` = the key's team, `iat` under an hour
/// old), `apns-topic` (with `.push-type.liveactivity` for Live Activities), `apns-priority`
/// (5 or 10), the payload (at most 4096 bytes of JSON with `aps`; for a Live Activity an integer
/// `timestamp`, a known `event`, and for `start` a non-empty alert and the attributes). Refusals
/// carry APNs' JSON bodies (`{"reason": …}`, plus `timestamp` on 410). Faults can be injected at
/// run time with ``injectFault(_:deviceToken:count:duration:)`` and ``setResponseDelay(_:)``.
///
/// The TLS certificate comes from a CA made at creation; pass ``trustRootPEM`` to the client.
public final class LocalAPNSServer: Sendable {
    /// A public key the stand-in accepts provider tokens from.
    public struct SigningKey: Sendable {
        public var keyID: String
        public var teamID: String
        public var publicKey: P256.Signing.PublicKey

        public init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKey = publicKey
        }
    }

    public struct Configuration: Sendable {
        /// The keys whose provider tokens are accepted.
        public var signingKeys: [SigningKey]
        /// Default `127.0.0.1`.
        public var host: String
        /// Default 0: the system picks a free port; read it from ``LocalAPNSServer/port``.
        public var port: Int
        /// SETTINGS_MAX_CONCURRENT_STREAMS announced to clients. Default 1000.
        public var maxConcurrentStreams: Int
        /// When set, only these bundle ids are accepted as topics (others get `DeviceTokenNotForTopic`).
        public var acceptedBundleIDs: Set<String>?
        /// Provider tokens older than this get `ExpiredProviderToken`. Default one hour, as APNs.
        public var maximumProviderTokenAge: Duration
        /// When set, a new provider token for a key less than this after the previous one gets
        /// `429 TooManyProviderTokenUpdates`, as APNs answers to regeneration faster than every
        /// 20 minutes. Default `nil` (off), since tests often run several clients with one key.
        public var minimumProviderTokenInterval: Duration?
        /// Whether accepted pushes are kept (``pushes()``); turn off for long benchmarks, counts stay.
        public var recordsPushes: Bool

        public init(
            signingKeys: [SigningKey],
            host: String = "127.0.0.1",
            port: Int = 0,
            maxConcurrentStreams: Int = 1000,
            acceptedBundleIDs: Set<String>? = nil,
            maximumProviderTokenAge: Duration = .seconds(3600),
            minimumProviderTokenInterval: Duration? = nil,
            recordsPushes: Bool = true
        ) {
            self.signingKeys = signingKeys
            self.host = host
            self.port = port
            self.maxConcurrentStreams = maxConcurrentStreams
            self.acceptedBundleIDs = acceptedBundleIDs
            self.maximumProviderTokenAge = maximumProviderTokenAge
            self.minimumProviderTokenInterval = minimumProviderTokenInterval
            self.recordsPushes = recordsPushes
        }
    }

    public let configuration: Configuration
    /// The PEM of the CA that signed the server certificate: the client's trust root.
    public let trustRootPEM: String

    let core: LocalAPNSCore
    private let certificates: LocalAPNSCertificates
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let state = Mutex(RunState())

    private struct RunState {
        var serverChannel: (any Channel)?
        var port = 0
        var connections: [ObjectIdentifier: any Channel] = [:]
        var acceptedConnectionCount = 0
    }

    /// Creates the stand-in and its certificates; ``start()`` opens the port.
    public init(
        configuration: Configuration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "orderflow.local-apns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws {
        self.configuration = configuration
        self.certificates = try LocalAPNSCertificates()
        self.trustRootPEM = self.certificates.trustRootPEM
        self.core = LocalAPNSCore(configuration: configuration)
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    /// The port listened on (0 before ``start()``).
    public var port: Int { self.state.withLock { $0.port } }

    /// How many TCP connections were accepted since ``start()`` (APNs expects few, long-lived ones).
    public var acceptedConnectionCount: Int { self.state.withLock { $0.acceptedConnectionCount } }

    /// `https://127.0.0.1:<port>`, the client's base URL.
    public var baseURL: String { "https://\(self.configuration.host):\(self.port)" }

    /// Starts listening. A server stopped with ``stop()`` starts again on the port it had, so
    /// that clients pointed at ``baseURL`` find it back (an endpoint that was down for a while).
    public func start() async throws {
        let previousPort = self.state.withLock { $0.port }
        let sslContext = try self.certificates.makeServerContext(applicationProtocols: ["h2"])
        let core = self.core
        let connectionConfiguration = {
            var connection = NIOHTTP2Handler.ConnectionConfiguration()
            connection.initialSettings = [
                HTTP2Setting(parameter: .maxConcurrentStreams, value: self.configuration.maxConcurrentStreams),
                HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
            ]
            // A connection-level receive window far above the 64 KiB default, renewed as data
            // arrives: with hundreds of small requests in flight, a client that does not wait for
            // WINDOW_UPDATE (aioapns raises FlowControlError and gives up after 5 tries) would
            // otherwise stall on the stand-in rather than on its own speed.
            connection.targetWindowSize = 16 * 1024 * 1024
            return connection
        }()
        let streamConfiguration = NIOHTTP2Handler.StreamConfiguration()

        let channel = try await ServerBootstrap(group: self.eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [weak self] channel in
                self?.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    // Streams are served at the frame level by one handler per connection, not
                    // by a child channel per stream: the stand-in costs both senders less.
                    try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(
                        mode: .server,
                        connectionConfiguration: connectionConfiguration,
                        streamConfiguration: streamConfiguration
                    ))
                    try channel.pipeline.syncOperations.addHandler(LocalAPNSStreamsHandler(
                        core: core, connectionWindowSize: connectionConfiguration.targetWindowSize))
                    try channel.pipeline.syncOperations.addHandler(LocalAPNSConnectionErrorHandler())
                }
            }
            .bind(host: self.configuration.host, port: previousPort != 0 ? previousPort : self.configuration.port)
            .get()
        let port = channel.localAddress?.port ?? 0
        self.state.withLock { state in
            state.serverChannel = channel
            state.port = port
        }
        self.logger.debug("Local APNs listening", metadata: ["apns.local.port": "\(port)"])
    }

    /// Stops listening and closes every open connection.
    public func stop() async throws {
        let (serverChannel, connections) = self.state.withLock { state in
            defer {
                state.serverChannel = nil
                state.connections = [:]
            }
            return (state.serverChannel, Array(state.connections.values))
        }
        try? await serverChannel?.close()
        for connection in connections {
            try? await connection.close()
        }
    }

    /// Sends GOAWAY on every open connection, as APNs does before it closes one (maintenance,
    /// a server going down): streams already open are still answered, the client must open a new
    /// connection for more. Connections stay open until the client closes them.
    public func goAway() async {
        let connections = self.state.withLock { Array($0.connections.values) }
        for connection in connections {
            let frame = HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: nil)
            )
            try? await connection.writeAndFlush(frame)
        }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        self.state.withLock { state in
            state.connections[id] = channel
            state.acceptedConnectionCount += 1
        }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.state.withLock { $0.connections.removeValue(forKey: id) }
        }
    }

    // MARK: Records

    /// Every accepted push since the last ``reset()``, in arrival order.
    public func pushes() -> [LocalAPNSPush] { self.core.pushes }

    /// The accepted pushes for one device token.
    public func pushes(forToken deviceToken: String) -> [LocalAPNSPush] {
        self.core.pushes.filter { $0.deviceToken == deviceToken }
    }

    /// How many requests were accepted since the last ``reset()`` (counted even when not recording).
    public var acceptedCount: Int { self.core.acceptedCount }

    /// How many requests were refused (by verification or an injected fault) since the last ``reset()``.
    public var rejectedCount: Int { self.core.rejectedCount }

    /// The refused requests since the last ``reset()``.
    public func rejections() -> [LocalAPNSRejection] { self.core.rejections }

    /// Waits until at least `count` pushes were accepted since the last ``reset()``, then returns
    /// the recorded pushes.
    ///
    /// - Throws: ``LocalAPNSServerError`` when `timeout` passes first.
    @discardableResult
    public func waitForPushes(count: Int, timeout: Duration = .seconds(10)) async throws -> [LocalAPNSPush] {
        let core = self.core
        return try await withThrowingTaskGroup(of: [LocalAPNSPush]?.self) { group in
            group.addTask { try await core.waitForAccepted(count: count) }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let pushes = try await group.next() ?? nil else {
                throw LocalAPNSServerError(
                    message: "The local APNs accepted \(core.acceptedCount) pushes, not \(count), within \(timeout)."
                )
            }
            return pushes
        }
    }

    /// Forgets recorded pushes and refusals, resets the counters, removes faults and the delay.
    public func reset() {
        self.core.resetRecords()
        self.core.clearFaults()
    }

    // MARK: Fault injection

    /// Answers requests that would be accepted with `fault` instead.
    ///
    /// - Parameters:
    ///   - deviceToken: only requests for this token; `nil` for every token. Rules for a token
    ///     take precedence over rules for every token; among those, the first added wins.
    ///   - count: for the next `count` matching requests; `nil` for as many as come.
    ///   - duration: for this long from now; `nil` for no time limit.
    ///   - fraction: only this fraction of the matching requests (0.05: one in twenty), chosen
    ///     at random; `nil` for every one.
    ///
    /// Examples: `injectFault(.unregistered(), deviceToken: token)`,
    /// `injectFault(.tooManyRequests, count: 3)`, `injectFault(.internalServerError, duration: .seconds(2))`,
    /// `injectFault(.internalServerError, fraction: 0.05)`.
    public func injectFault(
        _ fault: LocalAPNSFault,
        deviceToken: String? = nil,
        count: Int? = nil,
        duration: Duration? = nil,
        fraction: Double? = nil
    ) {
        self.core.addFault(fault, deviceToken: deviceToken, count: count, duration: duration, fraction: fraction)
    }

    /// Delays every response by `delay` (`nil` for none).
    public func setResponseDelay(_ delay: Duration?) {
        self.core.setDelay(delay)
    }

    /// Removes every injected fault and the response delay.
    public func clearFaults() {
        self.core.clearFaults()
    }
}

/// Serves the HTTP/2 streams of one connection: collects each request's HEADERS and DATA frames,
/// asks the core for the answer, writes it (after the configured delay). The answers written
/// while reading one batch of frames are flushed together when that batch has been read.
///
/// It speaks HTTP/2 frames directly rather than through NIO's HTTP/1 translation, so that the
/// answers look like APNs' own: a 200 is one HEADERS frame that ends the stream (no empty DATA
/// frame after it), and a request may carry a `host` header beside `:authority`. Without a
/// stream multiplexer it also keeps the receive windows open itself (WINDOW_UPDATE when half
/// is spent), for the connection and for a stream whose body is large.
final class LocalAPNSStreamsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Larger bodies are only counted: anything over 4096 bytes is refused anyway.
    private static let bodyKeepLimit = 8192
    /// The per-stream receive window (HTTP/2's default, which the stand-in announces).
    private static let streamWindowSize = 65_535

    private struct Request {
        var headers: HPACKHeaders?
        var body: ByteBuffer?
        var bodySize = 0
    }

    private let core: LocalAPNSCore
    private let connectionWindowSize: Int
    private var requests: [HTTP2StreamID: Request] = [:]
    private var needsFlush = false

    init(core: LocalAPNSCore, connectionWindowSize: Int) {
        self.core = core
        self.connectionWindowSize = connectionWindowSize
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        let streamID = frame.streamID
        switch frame.payload {
        case .headers(let headers):
            // The first block is the request; a later one would be trailers, which APNs ignores.
            var request = self.requests[streamID] ?? Request()
            if request.headers == nil { request.headers = headers.headers }
            self.requests[streamID] = request
            if headers.endStream { self.answer(streamID, context: context) }
        case .data(let data):
            guard var request = self.requests[streamID] else { return }
            if case .byteBuffer(var part) = data.data {
                request.bodySize += part.readableBytes
                if request.bodySize <= Self.bodyKeepLimit {
                    if request.body == nil {
                        request.body = part
                    } else {
                        request.body!.writeBuffer(&part)
                    }
                }
            }
            self.requests[streamID] = request
            if data.endStream { self.answer(streamID, context: context) }
        case .rstStream:
            self.requests[streamID] = nil
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? NIOHTTP2WindowUpdatedEvent, let window = event.inboundWindowSize {
            let target = event.streamID == .rootStream ? self.connectionWindowSize : Self.streamWindowSize
            // Streams that already answered need no more window; they are about to close.
            if window <= target / 2, event.streamID == .rootStream || self.requests[event.streamID] != nil {
                let update = HTTP2Frame(streamID: event.streamID, payload: .windowUpdate(windowSizeIncrement: target - window))
                context.write(self.wrapOutboundOut(update), promise: nil)
                self.needsFlush = true
            }
        } else if let event = event as? StreamClosedEvent {
            self.requests[event.streamID] = nil
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func answer(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let request = self.requests.removeValue(forKey: streamID) else { return }
        guard let requestHeaders = request.headers else {
            context.close(promise: nil)
            return
        }
        var headers = HTTPHeaders()
        for (name, value, _) in requestHeaders where !name.hasPrefix(":") {
            headers.add(name: name, value: value)
        }
        let reply = self.core.respond(
            method: HTTPMethod(rawValue: requestHeaders.first(name: ":method") ?? "GET"),
            uri: requestHeaders.first(name: ":path") ?? "/",
            headers: headers,
            body: request.body,
            bodySize: request.bodySize
        )
        if let delay = reply.delay, delay > .zero {
            context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) {
                self.write(reply, streamID: streamID, context: context)
                context.flush()
            }
        } else {
            self.write(reply, streamID: streamID, context: context)
            self.needsFlush = true
        }
    }

    private func write(_ reply: LocalAPNSReply, streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: String(reply.status))
        headers.add(name: "apns-id", value: reply.apnsID)
        for (name, value) in reply.headers { headers.add(name: name, value: value) }
        guard let body = reply.body else {
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
            return
        }
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(body.count))
        context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        let buffer = context.channel.allocator.buffer(bytes: body)
        context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))), promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream's error (NIO has reset that stream) ends only that request; anything else
        // ends the connection, as before.
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            self.requests[streamError.streamID] = nil
            return
        }
        context.fireErrorCaught(error)
    }
}

/// Closes a connection whose TLS or HTTP/2 layer failed, instead of leaving it half open.
final class LocalAPNSConnectionErrorHandler: ChannelInboundHandler {
    typealias InboundIn = Any

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
