import HTTPTypes
import Hummingbird

/// The counter board's session cookie, and the rule that keeps other sites from using it.
///
/// The cookie is `HttpOnly` (the page's script never reads it), `SameSite=Strict` and
/// `Path=/`; it holds the session secret, whose hash alone is stored. A call authenticated by
/// it that changes something (any method but GET and HEAD) must also carry
/// ``csrfHeader``, which the board's script sends: a form on another site cannot set a custom
/// header, and a script there cannot without this server's CORS consent (it gives none).
struct BoardCookie: Sendable {
    /// Whether the board is reached over https (`serve --public-url https://…`): the cookie is
    /// then `Secure` and named `__Host-…`, which a browser takes only from a secure origin,
    /// for the whole host, without a `Domain` (no other site or plain-http page can plant one).
    var secure = false

    static let csrfHeader = HTTPField.Name("X-OrderFlow-Board")!

    static let expired = "the board's session has expired or was ended; open a new sign-in link (`orderflow board-link --merchant ID` prints one)"

    var name: String { secure ? "__Host-orderflow_board" : "orderflow_board" }

    /// The session secret the request's cookies carry under this board's cookie name, if any.
    func session(in headers: HTTPFields) -> String? {
        for field in headers[values: .cookie] {
            for pair in field.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                    let value = parts[1].trimmingCharacters(in: .whitespaces)
                    if !value.isEmpty { return value }
                }
            }
        }
        return nil
    }

    /// The `Set-Cookie` value that starts a session for `seconds`.
    func setting(_ secret: String, seconds: Int) -> String {
        "\(name)=\(secret); Max-Age=\(seconds); Path=/; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The `Set-Cookie` value that ends it in the browser.
    var clearing: String {
        "\(name)=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// 403 for a cookie-authenticated change without the board's header; nil when allowed.
    static func refuseCrossSite(_ request: Request, requestID: String) -> Response? {
        guard request.method != .get, request.method != .head, request.headers[csrfHeader] == nil else { return nil }
        var response = ProblemResponse.response(for: AccessDenied(detail:
            "a change made with the board's session cookie must come from the board's page (it sends the X-OrderFlow-Board header); other programs use an API key"),
            requestID: requestID)
        response.headers[.xRequestID] = requestID
        return response
    }
}
