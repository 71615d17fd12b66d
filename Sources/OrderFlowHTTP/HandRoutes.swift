import APNSCore
import HTTPTypes
import Hummingbird
import NIOCore
import OpenAPIRuntime
import OrderFlow

/// The hot routes, whose ordinary requests are read and answered here and everything else by
/// the generated server: `POST /v1/orders/{id}/advance`, the call a backend makes for every step
/// of every order, `POST /v1/orders`, the call that begins each, and `GET /v1/orders/{id}`,
/// what a customer's app and a backend read most.
///
/// Why by hand: on these routes the generated server's Foundation `JSONDecoder` and
/// `JSONEncoder` and the runtime's conversions around them cost the server more CPU than the
/// engine's own work for the call (`orderflow-bench http` measures all three). Here a body is read by the engine's JSON parser, and the answers are written from the
/// engine's values, the same members the contract's `AdvanceResult`, `CreatedOrder` and
/// `OrderDetails` have (tests compare both servers' answers, refusals included).
///
/// "Ordinary" is decided conservatively, so that the two readings can never differ
/// (``OrdinaryAdvance`` and ``OrdinaryCreate`` say what; a read: a plain-token id, nothing a URI
/// decoding would change, and an `Accept` that takes JSON). Every other request (and every
/// malformed one) goes to the generated handler unchanged, which also says what is wrong with it.
struct HandRoutes: ServerTransport {
    let router: Router<BasicRequestContext>
    let api: OrderFlowAPI

    static let advancePath = "/v1/orders/{id}/advance"
    static let orderPath = "/v1/orders/{id}"
    static let ordersPath = "/v1/orders"

    func register(
        _ handler: @escaping @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        method: HTTPRequest.Method, path: String
    ) throws {
        switch (method, path) {
        case (.post, Self.advancePath):
            router.on(RouterPath(path), method: .post) { [api] request, context in
                var request = request
                if let advance = try await OrdinaryAdvance(request: &request, orderID: context.parameters.get("id")) {
                    return await api.advance(advance)
                }
                return try await Self.generated(handler, request: request, context: context)
            }
        case (.post, Self.ordersPath):
            router.on(RouterPath(path), method: .post) { [api] request, context in
                var request = request
                if let create = try await OrdinaryCreate(request: &request) {
                    return await api.create(create)
                }
                return try await Self.generated(handler, request: request, context: context)
            }
        case (.get, Self.orderPath):
            router.on(RouterPath(path), method: .get) { [api] request, context in
                if let orderID = context.parameters.get("id"), Self.isToken(orderID),
                   request.headers[.accept].map(Self.acceptsJSON) ?? true {
                    return await api.orderDetails(orderID)
                }
                return try await Self.generated(handler, request: request, context: context)
            }
        default:
            router.on(RouterPath(path), method: method) { request, context in
                try await Self.generated(handler, request: request, context: context)
            }
        }
    }

    /// The request through the generated handler, converted as swift-openapi-hummingbird's own
    /// registration converts it; but an answer of known length is given to the server as one
    /// buffer, which it writes to the socket at once with its head (the library's conversion
    /// writes the head, each chunk and the end apart). One of unknown length (the event feed)
    /// is streamed as it comes.
    private static func generated(
        _ handler: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        request: Request, context: BasicRequestContext
    ) async throws -> Response {
        let length = request.headers[.contentLength].flatMap(Int64.init).map(HTTPBody.Length.known) ?? .unknown
        let body = HTTPBody(request.body.map { [UInt8](buffer: $0) }, length: length, iterationBehavior: .single)
        let parameters = [String: Substring](context.parameters.map { (String($0.0), $0.1) }) { first, _ in first }
        let (response, responseBody) = try await handler(request.head, body, ServerRequestMetadata(pathParameters: parameters))
        var bytes = ByteBuffer()
        if let responseBody {
            guard case .known(let length) = responseBody.length else {
                return Response(status: response.status, headers: response.headerFields,
                                body: ResponseBody(asyncSequence: responseBody.map { ByteBuffer(bytes: $0) }))
            }
            bytes = ByteBuffer(bytes: try await [UInt8](collecting: responseBody, upTo: Int(length)))
        }
        return Response(status: response.status, headers: response.headerFields, body: ResponseBody(byteBuffer: bytes))
    }
}

// What the three routes check before they read a request by hand.
extension HandRoutes {
    /// The members of a JSON request body and its `Idempotency-Key`, when both readings read
    /// them the same way: a JSON content type, an `Accept` that takes JSON, a plain-token key,
    /// and a JSON object without escapes or a name given twice; nil otherwise.
    static func jsonObjectBody(of request: inout Request) async throws -> (members: [String: JSONValue], idempotencyKey: String?)? {
        let headers = request.headers
        guard let contentType = headers[.contentType], isJSON(contentType), headers[.accept].map(acceptsJSON) ?? true else { return nil }
        let key = headers[.idempotencyKey]
        if let key, !isToken(key) { return nil }
        // The body was read whole by `RequestBodyLimit`; this returns it.
        let buffer = try await request.collectBody(upTo: OrderFlowAPI.maximumBodyBytes)
        guard let parsed = buffer.withUnsafeReadableBytes({ bytes -> JSONValue? in
            // An escape and a name given twice are where two JSON readers most often part ways
            // (surrogates, `\u0000`; the generated server's decoder keeps a name's first value).
            guard !bytes.isEmpty, !bytes.contains(UInt8(ascii: "\\")) else { return nil }
            return try? JSONValue(parsing: bytes, refusingDuplicateNames: true)
        }), case .object(let members) = parsed else { return nil }
        return (members, key)
    }

    /// Letters, digits and `-._~:` only: what no URI decoding changes.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: "~") || byte == UInt8(ascii: ":")
        }
    }

    static func isJSON(_ contentType: String) -> Bool {
        let lowered = contentType.lowercased()
        return lowered == "application/json" || lowered == "application/json; charset=utf-8"
    }

    /// Whether one of `accept`'s media ranges (parameters aside, as the generated server reads
    /// it) takes `application/json`: axios, for one, sends `application/json, text/plain, */*`.
    static func acceptsJSON(_ accept: String) -> Bool {
        // In order, as the generated server looks: a malformed range before a match it refuses.
        for range in AcceptHeader.mediaRanges(of: accept) {
            if range == "*/*" || range == "application/*" || range == "application/json" { return true }
            let parts = range.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        }
        return false
    }

    /// Whether every number in `value` is a whole one (`JSONDecoder` and the engine's parser
    /// may tell `1.0` or `1e2` apart differently).
    static func hasOnlyWholeNumbers(_ value: JSONValue) -> Bool {
        switch value {
        case .double: false
        case .array(let values): values.allSatisfy(hasOnlyWholeNumbers)
        case .object(let members): members.values.allSatisfy(hasOnlyWholeNumbers)
        case .null, .bool, .int, .string: true
        }
    }
}

extension OrderFlowAPI {
    /// An ordinary read of an order: what ``getOrder(_:)`` answers, written by hand.
    func orderDetails(_ orderID: String) async -> Response {
        let requestID = RequestScope.current?.requestID
        do {
            let engine = try scopedEngine(access: .order(orderID))
            let details = try await engine.order(orderID)
            let activities = try await visibleActivities(details.activities, engine)
            let order = details.order.readable(in: try await engine.workflow(of: details.order))
            let json = try Self.orderDetailsBytes(order, activities: activities, pendingUpdates: details.pendingCommands)
            return Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
        } catch {
            return ProblemResponse.response(for: error, requestID: requestID)
        }
    }
}
