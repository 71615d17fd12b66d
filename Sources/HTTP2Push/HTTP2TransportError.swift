import NIOHTTP2

/// What an ``HTTP2Transport`` request ended with, as a transport fault: the request got no
/// answer. An answer, whatever its status, is an ``HTTP2Response`` for the client to interpret.
package struct HTTP2TransportError: Error, CustomStringConvertible, Sendable {
    /// The fault.
    package enum Kind: Sendable, Equatable {
        /// No connection (TCP and TLS) within the connect timeout.
        case connectTimeout
        /// No answer within the request's deadline (waiting for a stream included).
        case deadlineExceeded
        /// The connection closed before the answer came.
        case connectionClosed
        /// The server reset the stream, or it was dropped by GOAWAY, with this code.
        case streamReset(HTTP2ErrorCode)
        /// ALPN did not agree on `h2`; `negotiated` is what it agreed on, if anything.
        case noHTTP2(negotiated: String?)
        /// The answer had no valid `:status`.
        case invalidResponse
        /// The transport was shut down.
        case shutDown
    }

    /// The fault.
    package var kind: Kind
    /// The error the connection failed with, when there was one (TLS, connect, HTTP/2), as text.
    package var underlying: String?

    /// - Parameters:
    ///   - kind: the fault.
    ///   - underlying: the error the connection failed with, if any; kept as its text.
    package init(_ kind: Kind, underlying: (any Error)? = nil) {
        self.kind = kind
        self.underlying = underlying.map { "\($0)" }
    }

    package var description: String {
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
