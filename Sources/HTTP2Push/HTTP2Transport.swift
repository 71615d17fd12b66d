import Logging
import NIOCore
import NIOHPACK
import NIOSSL
import Synchronization

// Why this transport rather than AsyncHTTPClient (which the clients keep for their few and rare
// other requests: APNs broadcasts and channels, FCM's token exchanges).
//
// Pushes are many small POSTs to one host (a small JSON body, a short answer). Under
// AsyncHTTPClient each one costs an HTTP/2 stream child channel with its own pipeline and an
// HTTP/1-style codec, a `Transaction`, and three writes each with its flush (head, body, end),
// so three TLS records and write syscalls per push: in a profile of the delivery benchmark the
// stream setup and the body path dominate. No library offers a lighter HTTP/2 client, so the
// transport is written here on swift-nio-http2's frames, as the stand-ins (Sources/LocalAPNS,
// Sources/LocalFCM) already are: one frame-level handler per connection, a request's HEADERS
// and DATA(end-stream) written together, one flush for all the streams made ready in one
// event-loop tick, HPACK by NIOHPACK, answers matched by stream id (`orderflow-bench delivery`
// measures it).
//
// What it keeps from AsyncHTTPClient: a connect timeout (TCP and TLS), a deadline per request
// (waiting for a stream included), TLS 1.2+ with ALPN h2 and custom trust roots, the server's
// SETTINGS_MAX_CONCURRENT_STREAMS (requests beyond it wait), GOAWAY (no new streams there, a
// new connection for the rest), reconnecting when a connection drops (its streams fail with a
// transport error for the caller to retry), cancellation (RST_STREAM), an idle timeout, and a
// clean shutdown. It knows no push service: it returns each answer's status, headers and body,
// and each client (APNS, FCM) interprets them. One addition: a new connection carries one stream
// at a time until a request has succeeded on it (APNs, with token auth, allows one stream until
// a request with a valid token succeeded; for other servers it costs the first round trip).

/// HTTP/2 POSTs to one endpoint over several connections, each on one event loop, requests
/// going to them in turn.
package final class HTTP2Transport: Sendable {
    private let slots: [HTTP2ConnectionSlot]
    private let turn = Atomic<Int>(0)
    private let authority: String
    private let scheme = "https"

    /// Makes the transport; it connects when the first request comes.
    ///
    /// - Parameters:
    ///   - endpoint: the host and port to connect to (its path is the caller's to use).
    ///   - tlsConfiguration: the client's TLS (version, trust roots); ALPN is set to `h2` here.
    ///   - connections: how many connections (at least one), spread over the group's loops.
    ///   - eventLoopGroup: where the connections run.
    ///   - connectTimeout: how long TCP and TLS together may take.
    ///   - idleTimeout: how long a connection without streams stays open.
    ///   - logger: receives debug-level records of failed connections and GOAWAY.
    /// - Throws: NIOSSL's error when the TLS configuration cannot make a context.
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
        let settings = HTTP2ConnectionSlot.Settings(
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
            HTTP2ConnectionSlot(
                eventLoop: loops.isEmpty ? eventLoopGroup.next() : loops[index % loops.count],
                settings: settings
            )
        }
    }

    /// The request's pseudo-headers; the caller adds its own headers after them. `path` is
    /// not indexed by HPACK (it differs per request, as device tokens do).
    ///
    /// - Parameters:
    ///   - method: the `:method`.
    ///   - path: the `:path`, the endpoint's path prefix included.
    ///   - capacity: how many headers to reserve room for, the caller's included.
    /// - Returns: `:method`, `:scheme`, `:authority` and `:path`.
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
    /// - Parameters:
    ///   - headers: from ``makeHeaders(method:path:capacity:)``, with the caller's own.
    ///   - body: the request's body; nil ends the stream with the headers.
    ///   - deadline: when to give up, waiting for a connection or a stream included.
    /// - Returns: the answer, whatever its status.
    /// - Throws: ``HTTP2TransportError`` (or `CancellationError` when the task is cancelled).
    package func execute(headers: HPACKHeaders, body: ByteBuffer?, deadline: NIODeadline) async throws -> HTTP2Response {
        let turn = self.turn.wrappingAdd(1, ordering: .relaxed).oldValue
        let slot = self.slots[Int(UInt(bitPattern: turn) % UInt(self.slots.count))]
        let request = HTTP2PendingRequest(headers: headers, body: body, deadline: deadline)
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
