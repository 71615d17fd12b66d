import Foundation
import HTTPTypes
import Hummingbird
import Logging
import OrderFlow

/// Who a request speaks for, decided once per request by ``MerchantAuthentication`` and read by
/// the handlers (which the generated server calls without Hummingbird's request context).
struct RequestScope: Sendable {
    /// The merchant the request's API key (or client secret) belongs to.
    var merchantID: String
    /// The id in the `X-Request-ID` response header and in every log line of the request.
    var requestID: String
    /// For a request with an order's client secret (the customer's app): that order. The
    /// handlers allow such a request only the calls the app makes, for this order.
    var grantedOrder: String? = nil
    /// The device credential the app sent beside its client secret
    /// (`OrderFlow-Device-Credential`), checked by the handlers against the device a call names.
    var deviceCredential: String? = nil
    /// Who the history records as having made a change: the API key's public prefix, the board
    /// session (a digest of it) or the order's app; never anything the caller chose.
    var actor: String = "api"
    /// The merchant's credential the request bears, for long requests (event streams) that ask
    /// again as they go whether it still stands; nil for an order's client secret.
    var credential: Credential? = nil

    enum Credential: Sendable {
        case apiKey(String)
        case boardSession(String)

        /// Whether the key is not revoked, the session not ended. An unreachable database ends
        /// nothing: the stream says so itself and resumes.
        func stillStands(in engine: OrderFlowEngine) async -> Bool {
            do {
                switch self {
                case .apiKey(let key): return try await engine.resolveAPIKey(key) != nil
                case .boardSession(let secret): return try await engine.resolveBoardSession(secret) != nil
                }
            } catch {
                return true
            }
        }
    }

    @TaskLocal static var current: RequestScope?
}

/// Resolves `Authorization: Bearer <api key>` to its merchant for every route but the public
/// ones (`/healthz`, `/openapi.yaml`, the board's page), and answers 401 with a problem body
/// otherwise. Without that header, the board's session cookie (``BoardCookie``) is accepted.
///
/// Logs every request once, when it is answered: method, path, status, milliseconds, the
/// merchant and the request id (never a credential).
struct MerchantAuthentication<Context: RequestContext>: RouterMiddleware {
    let engine: OrderFlowEngine
    /// The board's cookie as this server sets it (its name differs behind https).
    let cookie: BoardCookie
    let publicPaths: Set<String>
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let requestID = request.headers[.xRequestID].flatMap(Self.acceptedRequestID) ?? Self.newRequestID()
        let started = ContinuousClock.now
        var merchant: String?
        var status: HTTPResponse.Status?
        defer {
            let elapsed = ContinuousClock.now - started
            let milliseconds = Double(elapsed.components.seconds) * 1_000 + Double(elapsed.components.attoseconds) / 1e15
            logger.info("request", metadata: [
                "request_id": "\(requestID)", "method": "\(request.method.rawValue)", "path": "\(request.uri.path)",
                "status": "\(status.map { String($0.code) } ?? "failed")",
                "ms": "\((milliseconds * 10).rounded() / 10)", "merchant": "\(merchant ?? "-")",
            ])
        }
        let response = try await authenticate(request, context: context, requestID: requestID, next: next) { merchant = $0 }
        status = response.status
        return response
    }

    private func authenticate(_ request: Request, context: Context, requestID: String,
                              next: (Request, Context) async throws -> Response,
                              resolved: (String) -> Void) async throws -> Response {
        var response: Response
        if publicPaths.contains(request.uri.path) {
            response = try await next(request, context)
        } else if request.headers[.authorization] == nil, let session = cookie.session(in: request.headers) {
            // The counter board's calls: its session cookie stands for the merchant's key.
            let merchantID: String?
            do {
                merchantID = try await engine.resolveBoardSession(session)
            } catch {
                response = ProblemResponse.response(for: error, requestID: requestID)
                response.headers[.xRequestID] = requestID
                return response
            }
            guard let merchantID else {
                return Self.unauthorized(BoardCookie.expired, challenge: "Bearer", requestID: requestID)
            }
            if let refused = BoardCookie.refuseCrossSite(request, requestID: requestID) { return refused }
            guard Self.isBoardCall(request.method, request.uri.path) else {
                var refused = ProblemResponse.response(for: AccessDenied(detail: AccessDenied.boardOnly), requestID: requestID)
                refused.headers[.xRequestID] = requestID
                return refused
            }
            resolved(merchantID)
            let scope = RequestScope(merchantID: merchantID, requestID: requestID, actor: OrderFlowEngine.boardSessionActor(session),
                                     credential: .boardSession(session))
            response = try await RequestScope.$current.withValue(scope) {
                try await next(request, context)
            }
        } else {
            guard let key = request.headers[.authorization].flatMap(Self.bearerCredential) else {
                return Self.unauthorized(
                    "this request has no API key; send `Authorization: Bearer <key>` with a key from `orderflow api-key create`",
                    challenge: "Bearer", requestID: requestID)
            }
            let scope: RequestScope?
            do {
                if key.hasPrefix(OrderFlowEngine.clientSecretScheme) {
                    let device = request.headers[.deviceCredential]
                    scope = try await engine.resolveClientSecret(key).map {
                        RequestScope(merchantID: $0.merchantID, requestID: requestID, grantedOrder: $0.orderID,
                                     deviceCredential: device, actor: "app:\($0.orderID)")
                    }
                } else {
                    scope = try await engine.resolveAPIKey(key).map {
                        RequestScope(merchantID: $0, requestID: requestID,
                                     actor: "api-key:" + (OrderFlowEngine.apiKeyPrefix(of: key) ?? "?"), credential: .apiKey(key))
                    }
                }
            } catch {
                response = ProblemResponse.response(for: error, requestID: requestID)
                response.headers[.xRequestID] = requestID
                return response
            }
            if let scope, scope.grantedOrder != nil, !Self.isAppCall(request.method, request.uri.path) {
                // Refused before the body is read: what the app may do is decided by the route.
                var refused = ProblemResponse.response(for: AccessDenied(detail: AccessDenied.appOnly), requestID: requestID)
                refused.headers[.xRequestID] = requestID
                return refused
            }
            guard let scope else {
                let what = key.hasPrefix(OrderFlowEngine.clientSecretScheme)
                    ? "the client secret is not valid (it may have been cut or altered); use the one returned when the order was created"
                    : "the API key is not known or was revoked; create one with `orderflow api-key create --merchant ID`"
                return Self.unauthorized(what, challenge: "Bearer error=\"invalid_token\"", requestID: requestID)
            }
            resolved(scope.merchantID)
            response = try await RequestScope.$current.withValue(scope) {
                try await next(request, context)
            }
        }
        response.headers[.xRequestID] = requestID
        return response
    }

    /// The credential of an `Authorization: Bearer <credential>` value (the scheme in any case,
    /// spaces and tabs around the credential dropped, as HTTP's optional whitespace); nil for
    /// another scheme or an empty credential. On the bytes: Foundation's lowercasing and
    /// trimming show in a profile of every request, refused ones most.
    static func bearerCredential(_ header: String) -> String? {
        let bytes = header.utf8
        let scheme = "bearer ".utf8
        guard bytes.count > scheme.count,
              zip(bytes, scheme).allSatisfy({ $1 == UInt8(ascii: " ") ? $0 == $1 : $0 == $1 || $0 == $1 - 0x20 })
        else { return nil }
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let rest = bytes.dropFirst(scheme.count)
        guard let first = rest.firstIndex(where: { !isSpace($0) }), let last = rest.lastIndex(where: { !isSpace($0) }) else { return nil }
        return String(Substring(rest[first...last]))
    }

    /// The calls the customer's app makes with a client secret (the handlers also check that
    /// the order is the secret's own).
    static func isAppCall(_ method: HTTPRequest.Method, _ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let segments = Array(parts)
        guard segments.count >= 2, segments[0] == "v1", segments.allSatisfy({ !$0.isEmpty }) else { return false }
        switch (method, segments.count, segments[1]) {
        case (.post, 2, "devices"), (.delete, 3, "devices"):
            return true
        case (.put, 4, "devices"):
            return segments[3] == "fcm-token"
        case (.get, 3, "orders"):
            return true
        case (.put, 5, "orders"), (.delete, 5, "orders"):
            return segments[3] == "followers"
        case (.put, 6, "orders"):
            return segments[3] == "activities" && (segments[5] == "token" || segments[5] == "state")
        case (.put, 5, "devices"):
            return segments[3] == "push-to-start-tokens"
        default:
            return false
        }
    }

    /// The calls the counter board's page makes with its session cookie: reading orders, their
    /// history, workflows and the feed; advancing and cancelling; signing out. A stolen or
    /// left-open board session can do no more than staff at the counter (no workflows applied,
    /// no devices, no deliveries retried).
    static func isBoardCall(_ method: HTTPRequest.Method, _ path: String) -> Bool {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let parts = Array(segments)
        guard parts.allSatisfy({ !$0.isEmpty }) else { return false }
        switch (method, parts.count) {
        case (.post, 2):
            return parts == ["board", "sign-out"]
        case (.get, 2):
            return parts[0] == "v1" && (parts[1] == "orders" || parts[1] == "workflows" || parts[1] == "events")
        case (.get, 3):
            return parts[0] == "v1" && (parts[1] == "orders" || parts[1] == "workflows")
        case (.get, 4):
            return parts[0] == "v1" && parts[1] == "orders" && parts[3] == "history"
        case (.post, 4):
            return parts[0] == "v1" && parts[1] == "orders" && (parts[3] == "advance" || parts[3] == "cancel")
        default:
            return false
        }
    }

    /// 401 with the problem body, the challenge and the request id.
    static func unauthorized(_ detail: String, challenge: String, requestID: String) -> Response {
        var response = ProblemResponse.response(status: .unauthorized, code: "unauthorized", detail: detail, requestID: requestID)
        response.headers[.wwwAuthenticate] = challenge
        response.headers[.xRequestID] = requestID
        return response
    }

    /// A caller's own request id, when it is a plain token (ASCII letters, digits, `-_.:`, at
    /// most 100): anything else is replaced, so that logs and headers never carry hostile text.
    static func acceptedRequestID(_ text: String) -> String? {
        guard (1...100).contains(text.utf8.count),
              text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                  || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: ":") })
        else { return nil }
        return text
    }

    /// A random (version 4) UUID in lowercase, from the system generator, written digit by
    /// digit: Foundation's `UUID()` opens and reads `/dev/urandom` on every call on Linux, and
    /// its `uuidString` then `lowercased()` build two strings where one is needed, on every
    /// request.
    static func newRequestID() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (generator.next() as UInt64, generator.next() as UInt64)
        return withUnsafeMutableBytes(of: &bytes) { buffer in
            buffer[6] = buffer[6] & 0x0F | 0x40  // version 4
            buffer[8] = buffer[8] & 0x3F | 0x80  // RFC 9562 variant
            return String(unsafeUninitializedCapacity: 36) { text in
                func digit(_ value: UInt8) -> UInt8 { value < 10 ? 0x30 + value : 0x57 + value }
                var count = 0
                for (index, byte) in buffer.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[count] = UInt8(ascii: "-")
                        count += 1
                    }
                    text[count] = digit(byte >> 4)
                    text[count + 1] = digit(byte & 0x0F)
                    count += 2
                }
                return count
            }
        }
    }
}

extension HTTPField.Name {
    static let xRequestID = HTTPField.Name("X-Request-ID")!
    static let deviceCredential = HTTPField.Name("OrderFlow-Device-Credential")!
}
