import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OpenAPIRuntime
import OrderFlow
import WorkflowKit

/// `POST /v1/orders/{id}/advance`, the call a backend makes for every step of every order:
/// an ordinary request is read and answered here, anything else by the generated server.
///
/// Why by hand: on this route the generated server's Foundation `JSONDecoder` and `JSONEncoder`
/// and the runtime's conversions around them cost the server more CPU than the engine's own
/// work for the advance (`orderflow-bench http` shows it). Here the body is read by
/// the engine's JSON parser and the answer written from `JSONValue`s, the same members the
/// contract's `AdvanceResult` has (a test compares both answers for the same advances).
///
/// "Ordinary" is decided conservatively, so that the two readings can never differ: a JSON
/// object body without escapes, members only of the contract's `Advance` with the right kinds
/// (`to` or `event`, not both), input numbers only whole ones, plain-token id, key and
/// preference (nothing a URI decoding would change), JSON content type and an `Accept` that
/// takes JSON.
/// Every other request (and every malformed one) goes to the generated handler unchanged,
/// which also says what is wrong with it.
struct AdvanceRoute: ServerTransport {
    let router: Router<BasicRequestContext>
    let api: OrderFlowAPI

    static let path = "/v1/orders/{id}/advance"

    func register(
        _ handler: @escaping @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        method: HTTPRequest.Method, path: String
    ) throws {
        guard method == .post, path == Self.path else {
            router.register(handler, method: method, path: path)
            return
        }
        router.on(RouterPath(path), method: .post) { [api] request, context in
            var request = request
            if let advance = try await OrdinaryAdvance(request: &request, orderID: context.parameters.get("id")) {
                return await api.advance(advance)
            }
            return try await Self.generated(handler, request: request, context: context)
        }
    }

    /// The request through the generated handler, converted as swift-openapi-hummingbird's own
    /// registration converts it.
    private static func generated(
        _ handler: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        request: Request, context: BasicRequestContext
    ) async throws -> Response {
        let length = request.headers[.contentLength].flatMap(Int64.init).map(HTTPBody.Length.known) ?? .unknown
        let body = HTTPBody(request.body.map { [UInt8](buffer: $0) }, length: length, iterationBehavior: .single)
        let parameters = [String: Substring](context.parameters.map { (String($0.0), $0.1) }) { first, _ in first }
        let (response, responseBody) = try await handler(request.head, body, ServerRequestMetadata(pathParameters: parameters))
        var bytes = ByteBuffer()
        if let responseBody { bytes = ByteBuffer(bytes: try await [UInt8](collecting: responseBody, upTo: .max)) }
        return Response(status: response.status, headers: response.headerFields, body: ResponseBody(byteBuffer: bytes))
    }
}

/// An advance request both readings (this one and the generated server's) read the same way.
struct OrdinaryAdvance: Sendable {
    var orderID: String
    var target: String
    var input: JSONValue
    var expectedState: String?
    var idempotencyKey: String?
    var minimal: Bool

    /// Nil for a request that is not ordinary (see ``AdvanceRoute``).
    init?(request: inout Request, orderID: String?) async throws {
        let headers = request.headers
        guard let orderID, Self.isToken(orderID),
              let contentType = headers[.contentType], Self.isJSON(contentType),
              headers[.accept].map(Self.acceptsJSON) ?? true
        else { return nil }
        let key = headers[.idempotencyKey]
        if let key, !Self.isToken(key) { return nil }
        let prefer = headers[.prefer]
        if let prefer, prefer.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) { return nil }
        // The body was read whole by `RequestBodyLimit`; this returns it.
        let buffer = try await request.collectBody(upTo: OrderFlowAPI.maximumBodyBytes)
        guard let parsed = buffer.withUnsafeReadableBytes({ bytes -> JSONValue? in
            // An escape is where two JSON readers most often part ways (surrogates, `\u0000`).
            guard !bytes.isEmpty, !bytes.contains(UInt8(ascii: "\\")) else { return nil }
            return try? JSONValue(parsing: bytes)
        }), case .object(let members) = parsed else { return nil }
        var target: String?
        var input: JSONValue = [:]
        var expectedState: String?
        for (name, value) in members {
            switch (name, value) {
            case ("to", .string(let state)) where target == nil: target = state
            case ("event", .string(let event)) where target == nil: target = event
            case ("expected_state", .string(let state)): expectedState = state
            case ("input", .object) where Self.hasOnlyWholeNumbers(value): input = value
            default: return nil
            }
        }
        guard let target else { return nil }
        self.orderID = orderID
        self.target = target
        self.input = input
        self.expectedState = expectedState
        self.idempotencyKey = key
        self.minimal = OrderFlowAPI.prefersMinimal(prefer)
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
    /// An ordinary advance: the library call ``advanceOrder(_:)`` makes, the same answers.
    func advance(_ request: OrdinaryAdvance) async -> Response {
        let requestID = RequestScope.current?.requestID
        do {
            let engine = try scopedEngine(access: .merchant)
            let result = try await engine.advance(
                request.orderID, to: request.target, input: request.input, idempotencyKey: request.idempotencyKey,
                expectedState: request.expectedState, actor: Self.actor)
            if request.minimal {
                return Response(status: .noContent, headers: [
                    .orderFlowState: Self.uriEncoded(result.order.state),
                    .orderFlowSeq: String(Int32(clamping: result.order.seq)),
                    .orderFlowReplayed: result.replayed ? "true" : "false",
                ])
            }
            let json = try Self.advanceResultBytes(result, workflow: try await engine.workflow(of: result.order))
            return Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
        } catch {
            return ProblemResponse.response(for: error, requestID: requestID)
        }
    }

    /// A header value as the generated server writes a string (percent-encoded beyond the
    /// unreserved characters; a state name seldom has any).
    static func uriEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

extension HTTPField.Name {
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
    static let orderFlowSeq = HTTPField.Name("OrderFlow-Seq")!
    static let orderFlowReplayed = HTTPField.Name("OrderFlow-Replayed")!
}
