import Foundation
import HTTPTypes
import Hummingbird
import OrderFlow
import WorkflowKit

/// Errors as problem details (RFC 9457, `application/problem+json`): the HTTP status that fits
/// the engine's error code, the code itself, the engine's sentence with its remedy worded as
/// a route (`httpSentence`), and its facts (current state, candidates). Nothing else of an error (types, stacks, SQL) reaches the body.
enum ProblemResponse {
    struct Body: Encodable {
        var type = "about:blank"
        var title: String
        var status: Int
        var detail: String
        var code: String
        var requestID: String?
        /// States or names the caller may have meant (an invalid transition's allowed targets).
        var candidates: [String]?
        var currentState: String?
        var diagnostics: [Diagnostic]?

        struct Diagnostic: Encodable {
            var line: Int
            var column: Int
            var message: String
        }

        enum CodingKeys: String, CodingKey {
            case type, title, status, detail, code, candidates, diagnostics
            case requestID = "request_id"
            case currentState = "current_state"
        }
    }

    /// Seconds a client waits before retrying a 503 when nothing better is known.
    static let retryAfterSeconds = 2

    /// `Retry-After` for an error: a busy engine's own estimate of when its queue clears
    /// (1 to 10 s), 2 s for an unreachable database, nil for everything else.
    static func retryAfter(for error: any Error) -> Int? {
        if error is TooManyStreams { return TooManyStreams.retryAfterSeconds }
        guard let error = OrderFlowError.translating(error) else { return nil }
        switch error.code {
        case .busy:
            let seconds = error.retryAfter?.inSeconds ?? 1
            return min(10, max(1, Int(seconds.rounded(.up))))
        case .databaseUnavailable:
            return retryAfterSeconds
        default:
            return nil
        }
    }

    /// The status and body for any error a handler meets.
    static func problem(for error: any Error, requestID: String?) -> (status: HTTPResponse.Status, body: Body) {
        if let error = error as? WorkflowValidationError {
            let count = error.diagnostics.count
            var body = Body(
                title: HTTPResponse.Status.unprocessableContent.reasonPhrase, status: 422,
                detail: "the workflow file does not load: \(count == 1 ? "1 problem" : "\(count) problems"), listed in `diagnostics` (line and column in the file sent)",
                code: "invalidWorkflow", requestID: requestID)
            body.diagnostics = error.diagnostics.map { .init(line: $0.line, column: $0.column, message: $0.message) }
            return (.unprocessableContent, body)
        }
        if let error = error as? TooManyStreams {
            return (.tooManyRequests, Body(title: HTTPResponse.Status.tooManyRequests.reasonPhrase, status: 429, detail: error.detail,
                                           code: "tooManyStreams", requestID: requestID))
        }
        if let error = error as? CursorTooOld {
            return (.gone, Body(title: HTTPResponse.Status.gone.reasonPhrase, status: 410, detail: error.detail,
                                code: "cursorTooOld", requestID: requestID))
        }
        if let error = error as? AccessDenied {
            return (.forbidden, Body(title: HTTPResponse.Status.forbidden.reasonPhrase, status: 403, detail: error.detail,
                                     code: "forbidden", requestID: requestID))
        }
        guard let error = OrderFlowError.translating(error) else {
            return (.internalServerError, Body(
                title: "Internal Server Error", status: 500,
                detail: "the server met an error it does not know; the request may not have been applied, retry with the same Idempotency-Key, and report it with the request id if it persists",
                code: "unexpected", requestID: requestID))
        }
        let status = status(for: error.code)
        return (status, Body(
            title: status.reasonPhrase, status: status.code, detail: error.httpSentence, code: error.code.rawValue,
            requestID: requestID, candidates: error.candidates.isEmpty ? nil : error.candidates,
            currentState: error.currentState))
    }

    static func status(for code: OrderFlowError.Code) -> HTTPResponse.Status {
        switch code {
        case .notFound: .notFound
        case .alreadyExists, .conflict: .conflict
        case .invalidTransition: .unprocessableContent
        case .invalidInput: .badRequest
        case .forbidden: .forbidden
        case .databaseUnavailable, .busy: .serviceUnavailable
        case .invalidConfiguration, .unexpected: .internalServerError
        }
    }

    /// A whole response, for middleware that answers before any handler runs.
    static func response(for error: any Error, requestID: String?) -> Response {
        let (status, body) = problem(for: error, requestID: requestID)
        var made = response(status: status, body: body)
        if let seconds = retryAfter(for: error) { made.headers[.retryAfter] = String(seconds) }
        return made
    }

    static func response(status: HTTPResponse.Status, code: String, detail: String, requestID: String?) -> Response {
        response(status: status, body: Body(title: status.reasonPhrase, status: status.code, detail: detail, code: code, requestID: requestID))
    }

    static func response(status: HTTPResponse.Status, body: Body) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(body)) ?? Data(#"{"title":"error"}"#.utf8)
        var headers: HTTPFields = [.contentType: "application/problem+json; charset=utf-8"]
        if status == .serviceUnavailable { headers[.retryAfter] = String(retryAfterSeconds) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// A credential that is valid but does not reach this call (403).
struct AccessDenied: Error {
    var detail: String

    static let boardOnly = "the board's session may read orders, workflows and the feed, and advance or cancel orders; this call needs the merchant's API key"
    static let appOnly = "a client secret lets the customer's app read its order and report its tokens and activity; this call needs the merchant's API key"
}

/// Sets `Preference-Applied: return=minimal` (RFC 7240) on the 204 answers of an advance or a
/// cancellation that honoured `Prefer: return=minimal`. Set here rather than by the generated
/// code, which percent-encodes header values (`return%3Dminimal`).
struct MinimalReturn<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        if response.status == .noContent, response.headers[.orderFlowState] != nil,
           OrderFlowAPI.prefersMinimal(request.headers[.prefer]) {
            response.headers[.preferenceApplied] = "return=minimal"
        }
        return response
    }
}

extension HTTPField.Name {
    static let prefer = HTTPField.Name("Prefer")!
    static let preferenceApplied = HTTPField.Name("Preference-Applied")!
    static let orderFlowState = HTTPField.Name("OrderFlow-State")!
}
