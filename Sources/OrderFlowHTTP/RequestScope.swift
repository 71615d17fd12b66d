import Foundation
import HTTPTypes
import Hummingbird
import Logging
import OrderFlow

/// Who a request speaks for, decided once per request by ``MerchantAuthentication`` and read by
/// the handlers (which the generated server calls without Hummingbird's request context).
struct RequestScope: Sendable {
    /// The merchant the request's API key belongs to.
    var merchantID: String
    /// The id in the `X-Request-ID` response header and in every log line of the request.
    var requestID: String

    @TaskLocal static var current: RequestScope?
}

/// Resolves `Authorization: Bearer <api key>` to its merchant for every route but the public
/// ones (`/healthz`, `/openapi.yaml`), and answers 401 with a problem body otherwise.
struct MerchantAuthentication<Context: RequestContext>: RouterMiddleware {
    let engine: OrderFlowEngine
    let publicPaths: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let requestID = request.headers[.xRequestID].flatMap(Self.acceptedRequestID) ?? Self.newRequestID()
        var response: Response
        if publicPaths.contains(request.uri.path) {
            response = try await next(request, context)
        } else {
            guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
                  case let key = header.dropFirst(7).trimmingCharacters(in: .whitespaces), !key.isEmpty
            else {
                return Self.unauthorized(
                    "this request has no API key; send `Authorization: Bearer <key>` with a key from `orderflow api-key create`",
                    challenge: "Bearer", requestID: requestID)
            }
            let merchant: String?
            do {
                merchant = try await engine.resolveAPIKey(key)
            } catch {
                response = ProblemResponse.response(for: error, requestID: requestID)
                response.headers[.xRequestID] = requestID
                return response
            }
            guard let merchant else {
                return Self.unauthorized(
                    "the API key is not known or was revoked; create one with `orderflow api-key create --merchant ID`",
                    challenge: "Bearer error=\"invalid_token\"", requestID: requestID)
            }
            response = try await RequestScope.$current.withValue(RequestScope(merchantID: merchant, requestID: requestID)) {
                try await next(request, context)
            }
        }
        response.headers[.xRequestID] = requestID
        return response
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

    static func newRequestID() -> String {
        UUID().uuidString.lowercased()
    }
}

extension HTTPField.Name {
    static let xRequestID = HTTPField.Name("X-Request-ID")!
}
