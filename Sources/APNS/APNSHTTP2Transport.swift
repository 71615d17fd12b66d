import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

// Why this transport rather than AsyncHTTPClient (which the broadcast and channel requests,
// few and rare, still use: APNSClient+Broadcast.swift).
//
// Pushes are many small POSTs (a small JSON body, a 200 with no body in return). Under
// AsyncHTTPClient each one costs an HTTP/2 stream child channel with its own pipeline and an
// HTTP/1-style codec, a `Transaction`, and three writes each with its flush (head, body, end),
// so three TLS records and write syscalls per push: in a profile of the delivery benchmark the
// stream setup and the body path dominate. No library offers a lighter HTTP/2 client, so the
// transport is written here on swift-nio-http2's frames, as the stand-in (Sources/LocalAPNS)
// already is: one frame-level handler per connection, a request's HEADERS and DATA(end-stream)
// written together, one flush for all the streams made ready in one event-loop tick, HPACK by
// NIOHPACK, answers matched by stream id (`orderflow-bench delivery` compares it with aioapns).
//
// What it keeps from AsyncHTTPClient: a connect timeout (TCP and TLS), a deadline per request
// (waiting for a stream included), TLS 1.2+ with ALPN h2 and custom trust roots, the server's
// SETTINGS_MAX_CONCURRENT_STREAMS (requests beyond it wait), GOAWAY (no new streams there, a
// new connection for the rest), reconnecting when a connection drops (its streams fail with a
// transport error for the caller to retry), cancellation (RST_STREAM), an idle timeout, and a
// clean shutdown. FCMClient sends its messages with it too (package-visible; it knows nothing of
// APNs' payloads or answers). Added for APNs: a new connection carries one stream at a time until a request
// has succeeded on it (with token auth APNs allows one stream until a request with a valid
// token succeeded).

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
package struct APNSHTTP2Response: Sendable {
    package var status: Int
    package var headers: HPACKHeaders
    package var body: ByteBuffer?
}

/// HTTP/2 POSTs to one endpoint over ``connections`` connections, each on one event loop.
/// Knows nothing of APNs' payloads or answers beyond HTTP/2 (see the comment at the top of the file).
package final class APNSHTTP2Transport: Sendable {
    private let slots: [APNSHTTP2ConnectionSlot]
    private let turn = Atomic<Int>(0)
    private let authority: String
    private let scheme = "https"

    package struct Endpoint {
        package var host: String
        package var port: Int
        /// The URL's path, without a trailing slash ("" for none).
        package var pathPrefix: String
    }

    /// - Throws: ``APNSConfigurationError`` for a URL that is not `https://host[:port][/path]`.
    package static func endpoint(of baseURL: String) throws -> Endpoint {
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

    package init(
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
    package func makeHeaders(method: String = "POST", path: String, capacity: Int = 12) -> HPACKHeaders {
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
    package func execute(headers: HPACKHeaders, body: ByteBuffer?, deadline: NIODeadline) async throws -> APNSHTTP2Response {
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
    package func shutdown() async {
        for slot in self.slots {
            await slot.shutdown()
        }
    }

    /// How many TCP connections were opened so far (for tests).
    var connectionAttempts: Int {
        self.slots.reduce(0) { $0 + $1.connectionAttempts.load(ordering: .relaxed) }
    }
}
