import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OrderFlow

/// The counter board (`GET /board`): a page for staff, served with its assets from this
/// module's resources (no CDN, no build step). The page itself calls the `/v1` API with the
/// session cookie and follows `GET /v1/events`; nothing here reads orders.
///
/// `GET /board?token=…` (the one-time link `orderflow board-link` prints) only shows a page
/// with a button; the button's form posts the token to `POST /board/sign-in`, which consumes it,
/// sets the session cookie and sends the browser to the board. So a link previewer or a mail
/// scanner that fetches the link does not use it up, and the token leaves the address bar.
/// Without a session the page says how to get a link. `POST /board/sign-out` (from the page's
/// script, with the board's header) ends the session: its row is deleted and the cookie cleared.
struct BoardRoutes: Sendable {
    let engine: OrderFlowEngine
    var cookie = BoardCookie()

    /// The board's page and assets, and the sign-in form's target, which answer without an API key.
    static let publicPaths: Set<String> = Set(["/board", "/board/sign-in"] + assets.keys.map { "/board/\($0)" })

    /// The files of `Resources/board` served under `/board/`, with their types.
    static let assets: [String: String] = [
        "board.css": "text/css; charset=utf-8",
        "board.js": "text/javascript; charset=utf-8",
        "preview.js": "text/javascript; charset=utf-8",
    ]

    func register(on router: Router<BasicRequestContext>) {
        router.get("/board") { request, _ in
            try await page(request)
        }
        router.post("/board/sign-out") { request, _ in
            try await signOut(request)
        }
        router.post("/board/sign-in") { request, _ in
            try await signIn(request)
        }
        for (file, type) in Self.assets {
            router.get("/board/\(file)") { _, _ in
                Self.file(file, type: type, status: .ok)
            }
        }
    }

    private func page(_ request: Request) async throws -> Response {
        if try await hasSession(request) {
            return Self.file("board.html", type: "text/html; charset=utf-8", status: .ok)
        }
        if let token = request.uri.queryParameters["token"].map(String.init) {
            // Shown, not used: only the form's POST (a person's click) consumes the token.
            guard try await engine.boardSignInTokenIsLive(token) else {
                return signedOut(notice: "This sign-in link was used already or has expired: each link works once.")
            }
            return Self.signInPage(token: token)
        }
        if request.uri.queryParameters["signed-out"] != nil {
            return signedOut(notice: "You signed out: this browser's session has ended.", kind: "info")
        }
        return signedOut(notice: nil)
    }

    /// The sign-in form's POST: consumes the token, sets the cookie, and sends the browser to
    /// the board (303). A form posted from another site's page is refused (signing a browser in
    /// to someone else's board): browsers say where a request comes from in `Sec-Fetch-Site`,
    /// and older ones in `Origin` (`null` under this page's no-referrer policy: refused unless
    /// `Sec-Fetch-Site` says same-origin). A client that sends neither is no browser.
    private func signIn(_ request: Request) async throws -> Response {
        if Self.isCrossSite(request) {
            return signedOut(notice: "The sign-in came from another site's page and was refused; open the sign-in link itself.")
        }
        var request = request
        let body = try await request.collectBody(upTo: 4096)
        let form = String(buffer: body)
        let token = form.split(separator: "&").compactMap { pair -> String? in
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0] == "token" else { return nil }
            return String(parts[1]).removingPercentEncoding
        }.first
        guard let token, let session = try await engine.redeemBoardSignInToken(token) else {
            return signedOut(notice: "This sign-in link was used already or has expired: each link works once.")
        }
        var headers: HTTPFields = [.location: "/board", .cacheControl: "no-store"]
        headers[.setCookie] = cookie.setting(session.secret, seconds: OrderFlowEngine.boardSessionLifetime)
        return Response(status: .seeOther, headers: headers)
    }

    static func isCrossSite(_ request: Request) -> Bool {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!] {
            return site != "same-origin" && site != "none"
        }
        if let origin = request.headers[.origin] {
            // Without Sec-Fetch-Site, an opaque origin cannot be told from another site's.
            guard origin != "null", let host = request.head.authority else { return true }
            return origin != "http://\(host)" && origin != "https://\(host)"
        }
        return false
    }

    /// The page a sign-in link opens: one button, whose form posts the token. The token was
    /// checked to be a live one (43 URL-safe base64 characters after its scheme), so it is
    /// placed in the page as it is.
    static func signInPage(token: String) -> Response {
        let text = String(decoding: contents["sign-in.html"] ?? [], as: UTF8.self)
            .replacingOccurrences(of: "{{token}}", with: token)
        return respond(Array(text.utf8), type: "text/html; charset=utf-8", status: .ok)
    }

    /// Deletes the session's row and clears the cookie: the old cookie opens nothing after this,
    /// in this browser or any other. ``MerchantAuthentication`` let the request through, as for
    /// the board's `/v1` calls: a live session, and the board's header (a form on another site
    /// cannot sign a board out); without them it answered 401 or 403.
    private func signOut(_ request: Request) async throws -> Response {
        if let secret = cookie.session(in: request.headers) {
            try await engine.endBoardSession(secret)
        }
        var headers: HTTPFields = [.cacheControl: "no-store"]
        headers[.setCookie] = cookie.clearing
        return Response(status: .noContent, headers: headers)
    }

    private func hasSession(_ request: Request) async throws -> Bool {
        guard let secret = cookie.session(in: request.headers) else { return false }
        return try await engine.resolveBoardSession(secret) != nil
    }

    /// The page that says how to get a sign-in link (401: the board needs one).
    func signedOut(notice: String?, kind: String = "problem") -> Response {
        let text = String(decoding: Self.contents["signed-out.html"] ?? [], as: UTF8.self)
            .replacingOccurrences(of: "<!-- notice -->", with: notice.map { "<p class=\"notice \(kind)\" role=\"alert\">\($0)</p>" } ?? "")
        var response = Self.respond(Array(text.utf8), type: "text/html; charset=utf-8", status: .unauthorized)
        response.headers[.setCookie] = cookie.clearing
        return response
    }

    static func file(_ name: String, type: String, status: HTTPResponse.Status) -> Response {
        guard let bytes = contents[name] else {
            return respond(Array("the board's file \(name) is missing from this build; rebuild OrderFlow".utf8),
                           type: "text/plain; charset=utf-8", status: .internalServerError)
        }
        return respond(bytes, type: type, status: status)
    }

    static func respond(_ bytes: [UInt8], type: String, status: HTTPResponse.Status) -> Response {
        var headers: HTTPFields = [.contentType: type, .cacheControl: "no-store"]
        // Only this server's own files run or load: no inline script, no other origin.
        headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The board's files, read once from the module's resources.
    static let contents: [String: [UInt8]] = {
        guard let folder = Bundle.module.url(forResource: "board", withExtension: nil) else { return [:] }
        var files: [String: [UInt8]] = [:]
        for name in Array(assets.keys) + ["board.html", "signed-out.html", "sign-in.html"] {
            if let data = try? Data(contentsOf: folder.appendingPathComponent(name)) { files[name] = Array(data) }
        }
        return files
    }()
}
