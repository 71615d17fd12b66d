import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// The streams of one connection, at the frame level, on its event loop.
final class HTTP2ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// HTTP/2's initial connection receive window, which this side never raises by SETTINGS.
    private static let connectionWindow = 65_535
    /// Before the server's SETTINGS say otherwise (RFC 9113 sets no limit; servers send one).
    private static let defaultStreamLimit = 100
    private static let lastClientStreamID = Int32.max

    private let slot: HTTP2ConnectionSlot
    private let attempt: Int
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: HTTP2PendingRequest] = [:]
    private var nextStreamID: Int32 = 1
    private var serverStreamLimit: Int?
    /// Whether a request succeeded on this connection: until then it carries one stream
    /// (HTTP2Transport.swift says why).
    private var hadSuccess = false
    private var ready = false
    private var goingAway = false
    private var needsFlush = false
    private var needsPump = false
    private var failure: (any Error)?
    private var idleSince: NIODeadline?
    private var idleCheck: Scheduled<Void>?

    init(slot: HTTP2ConnectionSlot, attempt: Int) {
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

    func start(_ request: HTTP2PendingRequest) {
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
                    request.finish(.failure(HTTP2TransportError(.invalidResponse)))
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
            self.slot.settings.logger.debug("the server sent GOAWAY", metadata: ["http2.goaway": "\(code)", "http2.last_stream": "\(lastStreamID)"])
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
            request.finish(.failure(HTTP2TransportError(.invalidResponse)))
            self.streamEnded()
            return
        }
        if status == 200 { self.hadSuccess = true }
        request.finish(.success(HTTP2Response(status: status, headers: request.responseHeaders, body: request.responseBody)))
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
                request.finish(.failure(HTTP2TransportError(.streamReset(event.reason ?? .cancel))))
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
                self.failure = HTTP2TransportError(.noHTTP2(negotiated: negotiated))
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            // NIO reset that stream; only its request fails.
            if let request = self.streams.removeValue(forKey: streamError.streamID) {
                request.finish(.failure(HTTP2TransportError(.streamReset(.protocolError), underlying: streamError)))
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
        let error = HTTP2TransportError(.connectionClosed, underlying: self.failure)
        let requests = self.streams.values
        self.streams = [:]
        for request in requests { request.finish(.failure(error)) }
        self.slot.connectionClosed(self, attempt: self.attempt, error: self.ready ? nil : (self.failure ?? error))
        context.fireChannelInactive()
    }

    /// Closes the connection after ``HTTP2ConnectionSlot/Settings/idleTimeout`` without streams.
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
