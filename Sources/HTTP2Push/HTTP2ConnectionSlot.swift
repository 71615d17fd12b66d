import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// One request on its way. Created by the caller, which sets ``continuation`` once before
/// handing it over (through the slot's lock); from then on every field is touched only on the
/// slot's event loop.
final class HTTP2PendingRequest: @unchecked Sendable {
    enum State {
        /// Handed to the slot, not yet taken in by its loop.
        case submitted
        /// Waiting for a connection or a free stream.
        case waiting
        case inFlight(HTTP2StreamID, HTTP2ConnectionHandler)
        case done
    }

    let headers: HPACKHeaders
    let body: ByteBuffer?
    let deadline: NIODeadline
    var continuation: CheckedContinuation<HTTP2Response, any Error>?
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
    func finish(_ result: Result<HTTP2Response, any Error>) {
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
final class HTTP2ConnectionSlot: @unchecked Sendable {
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
        var requests: [HTTP2PendingRequest] = []
        var wakeScheduled = false
        var isShutdown = false
    }

    private let inbox = Mutex(Inbox())

    // Loop-confined state.
    private var waiting = CircularBuffer<HTTP2PendingRequest>()
    /// The connection new streams go to, once TLS and ALPN are done.
    private var current: HTTP2ConnectionHandler?
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

    func submit(_ request: HTTP2PendingRequest) {
        let (wake, shutDown) = self.inbox.withLock { inbox -> (Bool, Bool) in
            if inbox.isShutdown { return (false, true) }
            inbox.requests.append(request)
            defer { inbox.wakeScheduled = true }
            return (!inbox.wakeScheduled, false)
        }
        if shutDown {
            // It never reached the loop: nobody else holds it.
            request.state = .done
            request.continuation?.resume(throwing: HTTP2TransportError(.shutDown))
            request.continuation = nil
        } else if wake {
            self.eventLoop.execute { self.takeInbox() }
        }
    }

    func cancel(_ request: HTTP2PendingRequest) {
        self.eventLoop.execute { self.cancelOnLoop(request) }
    }

    func shutdown() async {
        self.inbox.withLock { $0.isShutdown = true }
        let closed: EventLoopFuture<Void> = self.eventLoop.flatSubmit {
            self.takeInbox()
            self.isShutdown = true
            self.connectTimeoutTask?.cancel()
            let error = HTTP2TransportError(.shutDown)
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
                request.finish(.failure(HTTP2TransportError(.shutDown)))
                continue
            }
            guard request.deadline > now else {
                request.finish(.failure(HTTP2TransportError(.deadlineExceeded)))
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

    private func cancelOnLoop(_ request: HTTP2PendingRequest) {
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

    private func expire(_ request: HTTP2PendingRequest) {
        request.timeout = nil
        if case .inFlight(let streamID, let connection) = request.state {
            connection.reset(streamID, code: .cancel)
        }
        request.finish(.failure(HTTP2TransportError(.deadlineExceeded)))
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
                    try sync.addHandler(HTTP2ConnectionHandler(slot: self, attempt: attempt))
                }
            }
        // The bootstrap's timeout covers TCP; this one covers TCP, TLS and ALPN.
        self.connectTimeoutTask = self.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: settings.connectTimeout) {
            self.connectTimeoutTask = nil
            self.connectFailed(attempt: attempt, HTTP2TransportError(.connectTimeout))
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
                let kind: HTTP2TransportError.Kind
                if case .connectTimeout? = error as? ChannelError { kind = .connectTimeout } else { kind = .connectionClosed }
                self.connectFailed(attempt: attempt, HTTP2TransportError(kind, underlying: error))
            }
        }
    }

    /// The connection could not be made: the requests waiting for it fail, and the caller
    /// retries with its backoff rather than this loop hammering the endpoint.
    private func connectFailed(attempt: Int, _ error: HTTP2TransportError) {
        guard self.isConnecting, self.attempt == attempt else { return }
        self.isConnecting = false
        self.attempt += 1  // a channel of this attempt that still shows up is closed
        self.connectTimeoutTask?.cancel()
        self.connectTimeoutTask = nil
        self.connectingChannel?.close(promise: nil)
        self.connectingChannel = nil
        self.settings.logger.debug("HTTP/2 connection failed", metadata: ["http2.error": "\(error)"])
        while let request = self.waiting.popFirst() { request.finish(.failure(error)) }
    }

    // MARK: Called by the connection handler (on the loop)

    func connectionReady(_ connection: HTTP2ConnectionHandler, attempt: Int, channel: any Channel) {
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
    func retire(_ connection: HTTP2ConnectionHandler) {
        if self.current === connection {
            self.current = nil
            self.pump()
        }
    }

    /// The channel closed; `error` is what it failed with if it never became ready.
    func connectionClosed(_ connection: HTTP2ConnectionHandler, attempt: Int, error: (any Error)?) {
        if let error {
            let failure = (error as? HTTP2TransportError) ?? HTTP2TransportError(.connectionClosed, underlying: error)
            self.connectFailed(attempt: attempt, failure)
            return
        }
        if self.current === connection {
            self.current = nil
        }
        self.pump()
    }
}
