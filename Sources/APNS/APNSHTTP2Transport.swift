import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

// Why this file exists rather than AsyncHTTPClient (which the broadcast and channel requests,
// few and rare, still use: APNSClient+Broadcast.swift).
//
// Pushes are many small POSTs (a ~180-byte JSON body, a 200 with no body in return). Under
// AsyncHTTPClient each one cost an HTTP/2 stream child channel with its own pipeline and an
// HTTP/1-style codec, a `Transaction`, and three writes each with its flush (head, body, end),
// so three TLS records and write syscalls per push. The 2026-11-25 profile (BENCHMARKS.md,
// "Sender pass for #17") put that stream setup at 29 % of the benchmark and the body path at
// another 14 %; our client sent 7–12k pushes/s, 2.8–3.6× aioapns, short of #17's 5×. No library
// offers a lighter HTTP/2 client, so the transport is written here on swift-nio-http2's frames,
// as the stand-in (Sources/LocalAPNS) already is: one frame-level handler per connection, a
// request's HEADERS and DATA(end-stream) written together, one flush for all the streams made
// ready in one event-loop tick, HPACK by NIOHPACK, answers matched by stream id. Measured
// 2026-11-26 (BENCHMARKS.md, "Delivery"): 32k pushes/s against aioapns' 3.7k/s in the same run,
// 8.7×, where AsyncHTTPClient gave 7–12k/s.
//
// What it keeps from AsyncHTTPClient: a connect timeout (TCP and TLS), a deadline per request
// (waiting for a stream included), TLS 1.2+ with ALPN h2 and custom trust roots, the server's
// SETTINGS_MAX_CONCURRENT_STREAMS (requests beyond it wait), GOAWAY (no new streams there, a
// new connection for the rest), reconnecting when a connection drops (its streams fail with a
// transport error for the caller to retry), cancellation (RST_STREAM), an idle timeout, and a
// clean shutdown. Added for APNs: a new connection carries one stream at a time until a request
// has succeeded on it (apns-live-activities.md: with token auth APNs allows one stream until a
// request with a valid token succeeded).

/// What an ``APNSHTTP2Transport`` request ended with, as a transport fault (not an APNs answer).
struct APNSHTTP2TransportError: Error, CustomStringConvertible, Sendable {
    enum Kind: Sendable, Equatable {
        case connectTimeout
        case deadlineExceeded
        case connectionClosed
        case streamReset(HTTP2ErrorCode)
        case noHTTP2(negotiated: String?)
        case invalidResponse
        case shutDown
    }

    var kind: Kind
    /// The error the connection failed with, when there was one (TLS, connect, HTTP/2), as text.
    var underlying: String?

    init(_ kind: Kind, underlying: (any Error)? = nil) {
        self.kind = kind
        self.underlying = underlying.map { "\($0)" }
    }

    var description: String {
        let text: String
        switch self.kind {
        case .connectTimeout: text = "no connection (TCP and TLS) within the connect timeout"
        case .deadlineExceeded: text = "no answer within the request timeout"
        case .connectionClosed: text = "the connection closed before the answer came"
        case .streamReset(let code): text = "the server reset the stream (\(code))"
        case .noHTTP2(let negotiated):
            text = "the server did not agree to HTTP/2 by ALPN (negotiated: \(negotiated ?? "nothing"))"
        case .invalidResponse: text = "the answer had no valid :status"
        case .shutDown: text = "the client was shut down"
        }
        guard let underlying else { return text }
        return text + ": \(underlying)"
    }
}

/// An answer: the status, the headers (pseudo-headers included) and the body.
struct APNSHTTP2Response: Sendable {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer?
}

/// HTTP/2 POSTs to one endpoint over ``connections`` connections, each on one event loop.
/// Knows nothing of APNs' payloads or answers beyond HTTP/2 (see the comment at the top of the file).
final class APNSHTTP2Transport: Sendable {
    private let slots: [APNSHTTP2ConnectionSlot]
    private let turn = Atomic<Int>(0)
    private let authority: String
    private let scheme = "https"

    struct Endpoint {
        var host: String
        var port: Int
        /// The URL's path, without a trailing slash ("" for none).
        var pathPrefix: String
    }

    /// - Throws: ``APNSConfigurationError`` for a URL that is not `https://host[:port][/path]`.
    static func endpoint(of baseURL: String) throws -> Endpoint {
        guard let components = URLComponents(string: baseURL), components.scheme == "https",
              let host = components.host, !host.isEmpty
        else {
            throw APNSConfigurationError(
                message: "The APNs base URL '\(baseURL)' is not an https:// URL with a host; APNs speaks HTTP/2 over TLS only: use https://host[:port].")
        }
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        return Endpoint(host: host, port: components.port ?? 443, pathPrefix: path)
    }

    init(
        endpoint: Endpoint,
        tlsConfiguration: TLSConfiguration,
        connections: Int,
        eventLoopGroup: any EventLoopGroup,
        connectTimeout: TimeAmount,
        idleTimeout: TimeAmount,
        logger: Logger
    ) throws {
        var tls = tlsConfiguration
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        // SNI and hostname checks take a name; for an IP address NIOSSL checks the peer's address.
        let isAddress = (try? SocketAddress(ipAddress: endpoint.host, port: 0)) != nil
        let settings = APNSHTTP2ConnectionSlot.Settings(
            host: endpoint.host,
            port: endpoint.port,
            serverHostname: isAddress ? nil : endpoint.host,
            sslContext: sslContext,
            connectTimeout: connectTimeout,
            idleTimeout: idleTimeout,
            logger: logger
        )
        self.authority = endpoint.port == 443 ? endpoint.host : "\(endpoint.host):\(endpoint.port)"
        let loops = Array(eventLoopGroup.makeIterator())
        self.slots = (0..<max(1, connections)).map { index in
            APNSHTTP2ConnectionSlot(
                eventLoop: loops.isEmpty ? eventLoopGroup.next() : loops[index % loops.count],
                settings: settings
            )
        }
    }

    /// The request's pseudo-headers; the caller adds its own headers after them. `path` is
    /// not indexed by HPACK (it differs per request, as device tokens do).
    func makeHeaders(method: String = "POST", path: String, capacity: Int = 12) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(capacity)
        headers.add(name: ":method", value: method)
        headers.add(name: ":scheme", value: self.scheme)
        headers.add(name: ":authority", value: self.authority)
        headers.add(name: ":path", value: path, indexing: .nonIndexable)
        return headers
    }

    /// Sends one request and waits for its whole answer.
    ///
    /// - Throws: ``APNSHTTP2TransportError`` (or `CancellationError` when the task is cancelled).
    func execute(headers: HPACKHeaders, body: ByteBuffer?, deadline: NIODeadline) async throws -> APNSHTTP2Response {
        let turn = self.turn.wrappingAdd(1, ordering: .relaxed).oldValue
        let slot = self.slots[Int(UInt(bitPattern: turn) % UInt(self.slots.count))]
        let request = APNSHTTP2PendingRequest(headers: headers, body: body, deadline: deadline)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                request.continuation = continuation
                slot.submit(request)
            }
        } onCancel: {
            slot.cancel(request)
        }
    }

    /// Fails waiting requests, closes every connection and waits until they are closed.
    func shutdown() async {
        for slot in self.slots {
            await slot.shutdown()
        }
    }

    /// How many TCP connections were opened so far (for tests).
    var connectionAttempts: Int {
        self.slots.reduce(0) { $0 + $1.connectionAttempts.load(ordering: .relaxed) }
    }
}

/// One request on its way. Created by the caller, which sets ``continuation`` once before
/// handing it over (through the slot's lock); from then on every field is touched only on the
/// slot's event loop.
final class APNSHTTP2PendingRequest: @unchecked Sendable {
    enum State {
        /// Handed to the slot, not yet taken in by its loop.
        case submitted
        /// Waiting for a connection or a free stream.
        case waiting
        case inFlight(HTTP2StreamID, APNSHTTP2ConnectionHandler)
        case done
    }

    let headers: HPACKHeaders
    let body: ByteBuffer?
    let deadline: NIODeadline
    var continuation: CheckedContinuation<APNSHTTP2Response, any Error>?
    var state = State.submitted
    /// Cancelled before its loop took it in.
    var cancelled = false
    var timeout: Scheduled<Void>?
    var status: Int?
    var responseHeaders = HPACKHeaders()
    var responseBody: ByteBuffer?

    init(headers: HPACKHeaders, body: ByteBuffer?, deadline: NIODeadline) {
        self.headers = headers
        self.body = body
        self.deadline = deadline
    }

    var isDone: Bool {
        if case .done = self.state { return true }
        return false
    }

    /// Resumes the caller once (on the slot's loop).
    func finish(_ result: Result<APNSHTTP2Response, any Error>) {
        guard !self.isDone else { return }
        self.state = .done
        self.timeout?.cancel()
        self.timeout = nil
        let continuation = self.continuation
        self.continuation = nil
        continuation?.resume(with: result)
    }
}

/// One of the transport's connections, kept on one event loop: the requests waiting for it, the
/// current connection (replaced after GOAWAY or a drop), the ones still finishing after GOAWAY.
/// Requests come in from any thread through ``submit(_:)``, which wakes the loop once per batch;
/// everything else runs on the loop.
final class APNSHTTP2ConnectionSlot: @unchecked Sendable {
    struct Settings: Sendable {
        var host: String
        var port: Int
        var serverHostname: String?
        var sslContext: NIOSSLContext
        var connectTimeout: TimeAmount
        var idleTimeout: TimeAmount
        var logger: Logger
    }

    let eventLoop: any EventLoop
    let settings: Settings
    let connectionAttempts = Atomic<Int>(0)

    private struct Inbox {
        var requests: [APNSHTTP2PendingRequest] = []
        var wakeScheduled = false
        var isShutdown = false
    }

    private let inbox = Mutex(Inbox())

    // Loop-confined state.
    private var waiting = CircularBuffer<APNSHTTP2PendingRequest>()
    /// The connection new streams go to, once TLS and ALPN are done.
    private var current: APNSHTTP2ConnectionHandler?
    /// Whether a connection is being made (TCP, TLS, ALPN), and which attempt it is.
    private var isConnecting = false
    private var attempt = 0
    /// The channel of the attempt, once TCP is up (closed if the attempt fails).
    private var connectingChannel: (any Channel)?
    private var connectTimeoutTask: Scheduled<Void>?
    /// Every open channel (the current one, one being made, ones finishing after GOAWAY).
    private var channels: [ObjectIdentifier: any Channel] = [:]
    private var isShutdown = false

    init(eventLoop: any EventLoop, settings: Settings) {
        self.eventLoop = eventLoop
        self.settings = settings
    }

    // MARK: From any thread

    func submit(_ request: APNSHTTP2PendingRequest) {
        let (wake, shutDown) = self.inbox.withLock { inbox -> (Bool, Bool) in
            if inbox.isShutdown { return (false, true) }
            inbox.requests.append(request)
            defer { inbox.wakeScheduled = true }
            return (!inbox.wakeScheduled, false)
        }
        if shutDown {
            // It never reached the loop: nobody else holds it.
            request.state = .done
            request.continuation?.resume(throwing: APNSHTTP2TransportError(.shutDown))
            request.continuation = nil
        } else if wake {
            self.eventLoop.execute { self.takeInbox() }
        }
    }

    func cancel(_ request: APNSHTTP2PendingRequest) {
        self.eventLoop.execute { self.cancelOnLoop(request) }
    }

    func shutdown() async {
        self.inbox.withLock { $0.isShutdown = true }
        let closed: EventLoopFuture<Void> = self.eventLoop.flatSubmit {
            self.takeInbox()
            self.isShutdown = true
            self.connectTimeoutTask?.cancel()
            let error = APNSHTTP2TransportError(.shutDown)
            while let request = self.waiting.popFirst() { request.finish(.failure(error)) }
            let closes = self.channels.values.map { channel -> EventLoopFuture<Void> in
                channel.close(promise: nil)
                return channel.closeFuture
            }
            return EventLoopFuture.andAllComplete(closes, on: self.eventLoop)
        }
        try? await closed.get()
    }

    // MARK: On the loop

    private func takeInbox() {
        let requests = self.inbox.withLock { inbox in
            inbox.wakeScheduled = false
            defer { inbox.requests.removeAll(keepingCapacity: true) }
            return inbox.requests
        }
        let now = NIODeadline.now()
        for request in requests {
            guard !request.cancelled else {
                request.finish(.failure(CancellationError()))
                continue
            }
            guard !self.isShutdown else {
                request.finish(.failure(APNSHTTP2TransportError(.shutDown)))
                continue
            }
            guard request.deadline > now else {
                request.finish(.failure(APNSHTTP2TransportError(.deadlineExceeded)))
                continue
            }
            request.state = .waiting
            request.timeout = self.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: request.deadline) {
                self.expire(request)
            }
            self.waiting.append(request)
        }
        self.pump()
    }

    /// Starts as many waiting requests as the current connection takes and flushes them
    /// together; opens a connection when there is none.
    func pump() {
        guard !self.isShutdown else { return }
        if let connection = self.current {
            var started = false
            while connection.hasFreeStream, let request = self.waiting.popFirst() {
                guard case .waiting = request.state else { continue }  // timed out or cancelled meanwhile
                connection.start(request)
                started = true
            }
            if started { connection.flush() }
        }
        // Drop finished requests from the front, so that an idle slot holds none.
        while let first = self.waiting.first, first.isDone { self.waiting.removeFirst() }
        if self.current == nil, !self.isConnecting, !self.waiting.isEmpty {
            self.connect()
        }
    }

    private func cancelOnLoop(_ request: APNSHTTP2PendingRequest) {
        switch request.state {
        case .submitted:
            request.cancelled = true
        case .waiting:
            request.finish(.failure(CancellationError()))
        case .inFlight(let streamID, let connection):
            connection.reset(streamID, code: .cancel)
            request.finish(.failure(CancellationError()))
        case .done:
            break
        }
    }

    private func expire(_ request: APNSHTTP2PendingRequest) {
        request.timeout = nil
        if case .inFlight(let streamID, let connection) = request.state {
            connection.reset(streamID, code: .cancel)
        }
        request.finish(.failure(APNSHTTP2TransportError(.deadlineExceeded)))
    }

    private func connect() {
        self.connectionAttempts.add(1, ordering: .relaxed)
        self.isConnecting = true
        self.attempt += 1
        let attempt = self.attempt
        let settings = self.settings
        let bootstrap = ClientBootstrap(group: self.eventLoop)
            .connectTimeout(settings.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: settings.sslContext, serverHostname: settings.serverHostname))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client))
                    try sync.addHandler(APNSHTTP2ConnectionHandler(slot: self, attempt: attempt))
                }
            }
        // The bootstrap's timeout covers TCP; this one covers TCP, TLS and ALPN.
        self.connectTimeoutTask = self.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: settings.connectTimeout) {
            self.connectTimeoutTask = nil
            self.connectFailed(attempt: attempt, APNSHTTP2TransportError(.connectTimeout))
        }
        bootstrap.connect(host: settings.host, port: settings.port).assumeIsolatedUnsafeUnchecked().whenComplete { result in
            switch result {
            case .success(let channel):
                guard self.isConnecting, self.attempt == attempt, !self.isShutdown else {
                    channel.close(promise: nil)  // timed out or shut down meanwhile
                    return
                }
                let id = ObjectIdentifier(channel)
                self.connectingChannel = channel
                self.channels[id] = channel
                channel.closeFuture.assumeIsolatedUnsafeUnchecked().whenComplete { _ in self.channels[id] = nil }
            case .failure(let error):
                let kind: APNSHTTP2TransportError.Kind
                if case .connectTimeout? = error as? ChannelError { kind = .connectTimeout } else { kind = .connectionClosed }
                self.connectFailed(attempt: attempt, APNSHTTP2TransportError(kind, underlying: error))
            }
        }
    }

    /// The connection could not be made: the requests waiting for it fail, and the caller
    /// retries with its backoff rather than this loop hammering the endpoint.
    private func connectFailed(attempt: Int, _ error: APNSHTTP2TransportError) {
        guard self.isConnecting, self.attempt == attempt else { return }
        self.isConnecting = false
        self.attempt += 1  // a channel of this attempt that still shows up is closed
        self.connectTimeoutTask?.cancel()
        self.connectTimeoutTask = nil
        self.connectingChannel?.close(promise: nil)
        self.connectingChannel = nil
        self.settings.logger.debug("APNs connection failed", metadata: ["apns.error": "\(error)"])
        while let request = self.waiting.popFirst() { request.finish(.failure(error)) }
    }

    // MARK: Called by the connection handler (on the loop)

    func connectionReady(_ connection: APNSHTTP2ConnectionHandler, attempt: Int, channel: any Channel) {
        guard self.isConnecting, self.attempt == attempt, !self.isShutdown else {
            channel.close(promise: nil)
            return
        }
        self.isConnecting = false
        self.connectTimeoutTask?.cancel()
        self.connectTimeoutTask = nil
        self.connectingChannel = nil
        self.current = connection
        self.pump()
    }

    /// The connection takes no new streams (GOAWAY, stream ids spent, idle): the next request
    /// opens another.
    func retire(_ connection: APNSHTTP2ConnectionHandler) {
        if self.current === connection {
            self.current = nil
            self.pump()
        }
    }

    /// The channel closed; `error` is what it failed with if it never became ready.
    func connectionClosed(_ connection: APNSHTTP2ConnectionHandler, attempt: Int, error: (any Error)?) {
        if let error {
            let failure = (error as? APNSHTTP2TransportError) ?? APNSHTTP2TransportError(.connectionClosed, underlying: error)
            self.connectFailed(attempt: attempt, failure)
            return
        }
        if self.current === connection {
            self.current = nil
        }
        self.pump()
    }
}

/// The streams of one connection, at the frame level, on its event loop.
final class APNSHTTP2ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// HTTP/2's initial connection receive window, which this side never raises by SETTINGS.
    private static let connectionWindow = 65_535
    /// Before the server's SETTINGS say otherwise (RFC 9113 sets no limit; APNs sends one).
    private static let defaultStreamLimit = 100
    private static let lastClientStreamID = Int32.max

    private let slot: APNSHTTP2ConnectionSlot
    private let attempt: Int
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: APNSHTTP2PendingRequest] = [:]
    private var nextStreamID: Int32 = 1
    private var serverStreamLimit: Int?
    /// Whether a request succeeded on this connection: until then APNs allows one stream.
    private var hadSuccess = false
    private var ready = false
    private var goingAway = false
    private var needsFlush = false
    private var needsPump = false
    private var failure: (any Error)?
    private var idleSince: NIODeadline?
    private var idleCheck: Scheduled<Void>?

    init(slot: APNSHTTP2ConnectionSlot, attempt: Int) {
        self.slot = slot
        self.attempt = attempt
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    var hasFreeStream: Bool {
        guard self.ready, !self.goingAway, self.nextStreamID < Self.lastClientStreamID - 1 else { return false }
        let limit = self.hadSuccess ? (self.serverStreamLimit ?? Self.defaultStreamLimit) : 1
        return self.streams.count < limit
    }

    func start(_ request: APNSHTTP2PendingRequest) {
        guard let context = self.context else { return }
        let streamID = HTTP2StreamID(self.nextStreamID)
        self.nextStreamID += 2
        self.streams[streamID] = request
        request.state = .inFlight(streamID, self)
        self.idleSince = nil
        if let body = request.body {
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: request.headers)))), promise: nil)
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        } else {
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: request.headers, endStream: true)))), promise: nil)
        }
        if self.nextStreamID >= Self.lastClientStreamID - 1 {
            self.slot.retire(self)
        }
    }

    func flush() {
        self.needsFlush = false
        self.context?.flush()
    }

    /// Gives up on a stream (deadline, cancellation): RST_STREAM, flushed at once.
    func reset(_ streamID: HTTP2StreamID, code: HTTP2ErrorCode) {
        guard self.streams.removeValue(forKey: streamID) != nil, let context = self.context else { return }
        context.writeAndFlush(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(code))), promise: nil)
        self.streamEnded()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let payload):
            guard let request = self.streams[frame.streamID] else { return }
            if request.status == nil {
                guard let text = payload.headers.first(name: ":status"), let status = Int(text) else {
                    self.reset(frame.streamID, code: .protocolError)
                    request.finish(.failure(APNSHTTP2TransportError(.invalidResponse)))
                    return
                }
                if (100..<200).contains(status) { return }  // informational: the answer follows
                request.status = status
                request.responseHeaders = payload.headers
            }
            if payload.endStream { self.complete(frame.streamID) }
        case .data(let payload):
            guard let request = self.streams[frame.streamID] else { return }
            if case .byteBuffer(var part) = payload.data, part.readableBytes > 0 {
                if request.responseBody == nil {
                    request.responseBody = part
                } else {
                    request.responseBody!.writeBuffer(&part)
                }
            }
            if payload.endStream { self.complete(frame.streamID) }
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                self.serverStreamLimit = setting.value
            }
            self.needsPump = true
        case .goAway(let lastStreamID, let code, _):
            // Streams above lastStreamID are closed by NIO (StreamClosedEvent, failed below);
            // the ones at or below it still get their answers.
            self.slot.settings.logger.debug("APNs sent GOAWAY", metadata: ["apns.goaway": "\(code)", "apns.last_stream": "\(lastStreamID)"])
            self.goingAway = true
            self.slot.retire(self)
            if self.streams.isEmpty { context.close(promise: nil) }
        default:
            break
        }
    }

    private func complete(_ streamID: HTTP2StreamID) {
        guard let request = self.streams.removeValue(forKey: streamID) else { return }
        guard let status = request.status else {
            request.finish(.failure(APNSHTTP2TransportError(.invalidResponse)))
            self.streamEnded()
            return
        }
        if status == 200 { self.hadSuccess = true }
        request.finish(.success(APNSHTTP2Response(status: status, headers: request.responseHeaders, body: request.responseBody)))
        self.streamEnded()
    }

    /// After a stream left ``streams``: more may start (at the end of this read), and a
    /// connection going away closes with its last stream.
    private func streamEnded() {
        self.needsPump = true
        if self.streams.isEmpty {
            if self.goingAway {
                self.context?.close(promise: nil)
            } else {
                self.becameIdle()
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.needsPump {
            self.needsPump = false
            self.slot.pump()  // writes new streams and flushes them with the rest
        }
        if self.needsFlush {
            self.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? StreamClosedEvent {
            // A stream closed before its answer ended: reset by the server, or dropped by GOAWAY.
            if let request = self.streams.removeValue(forKey: event.streamID) {
                request.finish(.failure(APNSHTTP2TransportError(.streamReset(event.reason ?? .cancel))))
                self.streamEnded()
            }
        } else if let event = event as? NIOHTTP2WindowUpdatedEvent, event.streamID == .rootStream,
                  let window = event.inboundWindowSize, window <= Self.connectionWindow / 2
        {
            // Without a stream multiplexer nobody else renews the connection's receive window.
            let update = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: Self.connectionWindow - window))
            context.write(self.wrapOutboundOut(update), promise: nil)
            self.needsFlush = true
        } else if case .handshakeCompleted(let negotiated)? = event as? TLSUserEvent {
            if negotiated == "h2" {
                self.ready = true
                self.becameIdle()
                self.slot.connectionReady(self, attempt: self.attempt, channel: context.channel)
            } else {
                self.failure = APNSHTTP2TransportError(.noHTTP2(negotiated: negotiated))
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            // NIO reset that stream; only its request fails.
            if let request = self.streams.removeValue(forKey: streamError.streamID) {
                request.finish(.failure(APNSHTTP2TransportError(.streamReset(.protocolError), underlying: streamError)))
                self.streamEnded()
            }
            return
        }
        self.failure = self.failure ?? error
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.idleCheck?.cancel()
        self.idleCheck = nil
        let error = APNSHTTP2TransportError(.connectionClosed, underlying: self.failure)
        let requests = self.streams.values
        self.streams = [:]
        for request in requests { request.finish(.failure(error)) }
        self.slot.connectionClosed(self, attempt: self.attempt, error: self.ready ? nil : (self.failure ?? error))
        context.fireChannelInactive()
    }

    /// Closes the connection after ``APNSHTTP2ConnectionSlot/Settings/idleTimeout`` without streams.
    private func becameIdle() {
        guard let context = self.context else { return }
        let now = NIODeadline.now()
        self.idleSince = now
        guard self.idleCheck == nil else { return }
        self.scheduleIdleCheck(at: now + self.slot.settings.idleTimeout, context: context)
    }

    private func scheduleIdleCheck(at deadline: NIODeadline, context: ChannelHandlerContext) {
        self.idleCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) {
            self.idleCheck = nil
            guard let idleSince = self.idleSince, self.streams.isEmpty else { return }
            let due = idleSince + self.slot.settings.idleTimeout
            if due <= .now() {
                self.goingAway = true
                self.slot.retire(self)
                context.close(promise: nil)
            } else {
                self.scheduleIdleCheck(at: due, context: context)
            }
        }
    }
}
