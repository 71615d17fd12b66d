import APNSCore
import HTTPTypes
import Hummingbird
import NIOCore
import OrderFlow

/// A create request both readings (this one and the generated server's) read the same way.
struct OrdinaryCreate: Sendable {
    var order: NewOrder

    /// Nil for a request that is not ordinary (see ``HandRoutes``): a JSON object body without
    /// escapes, members only of the contract's `NewOrder` with the right kinds (`id` and
    /// `workflow` given), numbers in `attributes` and `input` only whole ones, a plain-token
    /// key, JSON content type and an `Accept` that takes JSON.
    init?(request: inout Request) async throws {
        guard let (members, key) = try await HandRoutes.jsonObjectBody(of: &request) else { return nil }
        var orderID: String?, workflow: String?, version: Int?
        var attributes: JSONValue = [:], input: JSONValue = [:]
        for (name, value) in members {
            switch (name, value) {
            case ("id", .string(let id)): orderID = id
            case ("workflow", .string(let name)): workflow = name
            case ("workflow_version", .int(let number)): version = number
            case ("attributes", .object) where HandRoutes.hasOnlyWholeNumbers(value): attributes = value
            case ("input", .object) where HandRoutes.hasOnlyWholeNumbers(value): input = value
            default: return nil
            }
        }
        guard let orderID, let workflow else { return nil }
        order = NewOrder(orderID: orderID, workflow: workflow, workflowVersion: version, attributes: attributes, input: input,
                         idempotencyKey: key)
    }
}

extension OrderFlowAPI {
    /// An ordinary create: the library calls ``createOrder(_:)`` makes, the same answers.
    func create(_ request: OrdinaryCreate) async -> Response {
        let requestID = RequestScope.current?.requestID
        do {
            let engine = try scopedEngine(access: .merchant)
            var order = request.order
            order.actor = Self.actor
            let created = try await engine.createOrder(order)
            let secret = try await engine.clientSecret(forOrder: created.orderID)
            let json = try Self.createdOrderBytes(created.readable(in: try await engine.workflow(of: created)), clientSecret: secret)
            return Response(status: .created, headers: [.contentType: "application/json; charset=utf-8"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
        } catch {
            return ProblemResponse.response(for: error, requestID: requestID)
        }
    }
}
