import HTTPTypes
import Hummingbird

/// The contract's paths and the methods each takes, for the answer the router cannot give: a
/// path that exists asked with a method it does not take is 405 with `Allow` (RFC 9110), not
/// 404. Kept beside the contract by a test that reads both (`ContractRoutesTests`).
enum ContractRoutes {
    static let table: [(path: String, methods: [HTTPRequest.Method])] = [
        ("/v1/workflows", [.get, .post]),
        ("/v1/workflows/{name}", [.get]),
        ("/v1/workflows/{name}/swift", [.get]),
        ("/v1/orders", [.get, .post]),
        ("/v1/orders/{id}", [.get]),
        ("/v1/orders/{id}/history", [.get]),
        ("/v1/orders/{id}/advance", [.post]),
        ("/v1/orders/{id}/cancel", [.post]),
        ("/v1/orders/{id}/redact", [.post]),
        ("/v1/orders/{id}/followers/{device}", [.put, .delete]),
        ("/v1/orders/{id}/activities/{device}/token", [.put]),
        ("/v1/orders/{id}/activities/{device}/state", [.put]),
        ("/v1/devices", [.post]),
        ("/v1/devices/{device}", [.delete]),
        ("/v1/devices/{device}/push-to-start-tokens/{attributesType}", [.put]),
        ("/v1/devices/{device}/alert-token", [.put]),
        ("/v1/devices/{device}/fcm-token", [.put]),
        ("/v1/deliveries", [.get]),
        ("/v1/deliveries/{deliveryID}/retry", [.post]),
        ("/v1/events", [.get]),
        ("/healthz", [.get]),
    ]

    /// The table's paths split once (this runs for every request): each segment, nil for a
    /// parameter.
    private static let templates: [(segments: [Substring?], methods: [HTTPRequest.Method])] = table.map { route in
        (route.path.split(separator: "/", omittingEmptySubsequences: false).map { $0.first == "{" ? nil : $0 }, route.methods)
    }

    /// The methods a request path takes, when it is one of the contract's; nil otherwise.
    static func methods(for path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !segments.dropFirst().contains(where: \.isEmpty) else { return nil }
        return templates.first { template in
            template.segments.count == segments.count
                && zip(template.segments, segments).allSatisfy { $0 == nil || $0 == $1 }
        }?.methods
    }
}

/// 405 with `Allow` for a contract path asked with a method it does not take (HEAD is answered
/// where GET is).
struct MethodNotAllowed<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let methods = ContractRoutes.methods(for: request.uri.path),
              !methods.contains(request.method), !(request.method == .head && methods.contains(.get))
        else { return try await next(request, context) }
        let allowed = methods.map(\.rawValue).joined(separator: ", ")
        var response = ProblemResponse.response(
            status: .methodNotAllowed, code: "methodNotAllowed",
            detail: "\(request.uri.path) takes \(allowed), not \(request.method.rawValue)", requestID: RequestScope.current?.requestID)
        response.headers[.allow] = allowed
        return response
    }
}

/// An empty body where the contract's body is optional and every member of it is optional
/// (registering a device, cancelling): read as `{}`. The generated server would try to decode
/// the empty bytes as JSON and answer 400, where a client that sends no body means "no options".
struct EmptyOptionalBody<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == .post, Self.takesNoBody(request.uri.path) else { return try await next(request, context) }
        var request = request
        let body = try await request.collectBody(upTo: OrderFlowAPI.maximumBodyBytes)
        guard body.readableBytes == 0 else { return try await next(request, context) }
        var head = request.head
        head.headerFields[.contentType] = "application/json"
        head.headerFields[.contentLength] = "2"
        return try await next(Request(head: head, body: .init(buffer: ByteBuffer(string: "{}"))), context)
    }

    static func takesNoBody(_ path: String) -> Bool {
        if path == "/v1/devices" { return true }
        // Every POST passes here: most (advances, creations) are told apart without splitting.
        guard path.hasSuffix("/cancel") else { return false }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return segments.count == 5 && segments[2] == "orders" && segments[4] == "cancel"
    }
}
