import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OpenAPIRuntime
import OrderFlow
import WorkflowKit

/// An advance request both readings (this one and the generated server's) read the same way.
struct OrdinaryAdvance: Sendable {
    var orderID: String
    var target: String
    var input: JSONValue
    var expectedState: String?
    var idempotencyKey: String?
    var minimal: Bool

    /// Nil for a request that is not ordinary (see ``HandRoutes``): a JSON object body without
    /// escapes, members only of the contract's `Advance` with the right kinds (`to` or `event`, not
    /// both), input numbers only whole ones, plain-token id, key and preference (nothing a URI
    /// decoding would change), JSON content type and an `Accept` that takes JSON.
    init?(request: inout Request, orderID: String?) async throws {
        guard let orderID, Self.isToken(orderID) else { return nil }
        let prefer = request.headers[.prefer]
        if let prefer, prefer.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) { return nil }
        guard let (members, key) = try await Self.jsonObjectBody(of: &request) else { return nil }
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
