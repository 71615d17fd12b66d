import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OrderFlow

/// The counter board (`GET /board`): a page for staff, served with its assets from this
/// module's resources (no CDN, no build step). The page itself calls the `/v1` API with the
/// session cookie and follows `GET /v1/events`; nothing here reads orders.
///
/// `GET /board?token=…` consumes a one-time sign-in token (`orderflow board-link`), sets the
/// session cookie and serves the board; its script then drops the token from the address bar.
/// Without a session the page says how to get a link. `POST /board/sign-out` (from the page's
/// script, with the board's header) ends the session: its row is deleted and the cookie cleared.
struct BoardRoutes: Sendable {
    let engine: OrderFlowEngine

    /// The board's page and assets, which answer without an API key.
    static let publicPaths: Set<String> = Set(["/board"] + assets.keys.map { "/board/\($0)" })

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
        for (file, type) in Self.assets {
            router.get("/board/\(file)") { _, _ in
                Self.file(file, type: type, status: .ok)
            }
        }
    }

    private func page(_ request: Request) async throws -> Response {
        if let token = request.uri.queryParameters["token"].map(String.init) {
            if let session = try await engine.redeemBoardSignInToken(token) {
                var response = Self.file("board.html", type: "text/html; charset=utf-8", status: .ok)
                response.headers[.setCookie] = BoardCookie.setting(session.secret, seconds: OrderFlowEngine.boardSessionLifetime)
                return response
            }
            // A used or expired link, but a live session in this browser: the board it is.
            if try await hasSession(request) { return Self.file("board.html", type: "text/html; charset=utf-8", status: .ok) }
            return Self.signedOut(notice: "This sign-in link was used already or has expired: each link works once.")
        }
        if try await hasSession(request) {
            return Self.file("board.html", type: "text/html; charset=utf-8", status: .ok)
        }
        if request.uri.queryParameters["signed-out"] != nil {
            return Self.signedOut(notice: "You signed out: this browser's session has ended.", kind: "info")
        }
        return Self.signedOut(notice: nil)
    }

    /// Deletes the session's row and clears the cookie: the old cookie opens nothing after this,
    /// in this browser or any other. ``MerchantAuthentication`` let the request through, as for
    /// the board's `/v1` calls: a live session, and the board's header (a form on another site
    /// cannot sign a board out); without them it answered 401 or 403.
    private func signOut(_ request: Request) async throws -> Response {
        if let secret = BoardCookie.session(in: request.headers) {
            try await engine.endBoardSession(secret)
        }
        var headers: HTTPFields = [.cacheControl: "no-store"]
        headers[.setCookie] = BoardCookie.clearing
        return Response(status: .noContent, headers: headers)
    }

    private func hasSession(_ request: Request) async throws -> Bool {
        guard let secret = BoardCookie.session(in: request.headers) else { return false }
        return try await engine.resolveBoardSession(secret) != nil
    }

    /// The page that says how to get a sign-in link (401: the board needs one).
    static func signedOut(notice: String?, kind: String = "problem") -> Response {
        let text = String(decoding: contents["signed-out.html"] ?? [], as: UTF8.self)
            .replacingOccurrences(of: "<!-- notice -->", with: notice.map { "<p class=\"notice \(kind)\" role=\"alert\">\($0)</p>" } ?? "")
        var response = respond(Array(text.utf8), type: "text/html; charset=utf-8", status: .unauthorized)
        response.headers[.setCookie] = BoardCookie.clearing
        return response
    }

    static func file(_ name: String, type: String, status: HTTPResponse.Status) -> Response {
        guard let bytes = contents[name] else {
            return respond(Array("the board's file \(name) is missing from this build; rebuild OrderFlow".utf8),
                           type: "text/plain; charset=utf-8", status: .internalServerError)
        }
        return respond(bytes, type: type, status: status)
    }

    private static func respond(_ bytes: [UInt8], type: String, status: HTTPResponse.Status) -> Response {
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
        for name in Array(assets.keys) + ["board.html", "signed-out.html"] {
            if let data = try? Data(contentsOf: folder.appendingPathComponent(name)) { files[name] = Array(data) }
        }
        return files
    }()
}
