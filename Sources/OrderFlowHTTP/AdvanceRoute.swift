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
        guard let orderID, HandRoutes.isToken(orderID) else { return nil }
        let prefer = request.headers[.prefer]
        if let prefer, prefer.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) { return nil }
        guard let (members, key) = try await HandRoutes.jsonObjectBody(of: &request) else { return nil }
        var target: String?
        var input: JSONValue = [:]
        var expectedState: String?
        for (name, value) in members {
            switch (name, value) {
            case ("to", .string(let state)) where target == nil: target = state
            case ("event", .string(let event)) where target == nil: target = event
            case ("expected_state", .string(let state)): expectedState = state
            case ("input", .object) where HandRoutes.hasOnlyWholeNumbers(value): input = value
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
