import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
@testable import OrderFlowHTTP

extension HTTPAPITests {
    @Test("the board's sign-in: a one-time link becomes an HttpOnly, SameSite=Strict session cookie that stands for the merchant's key")
    func boardSignIn() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        let engine = harness.fixture.engine
        try await harness.application.test(.router) { client in
            let signedOut = try await call(client, .get, "/board", headers: [:])
            #expect(signedOut.status == .unauthorized && signedOut.body.contains("orderflow board-link --merchant ID"), "\(signedOut.body)")
            #expect(signedOut.headers[.contentType]?.hasPrefix("text/html") == true)

            let link = try await engine.createBoardSignInToken(merchantID: "default")
            #expect(link.token.hasPrefix("of_signin_") && link.expiresAt > Date().addingTimeInterval(23 * 3600))
            let stored: Int = try await engine.pool.query(PostgresQuery(
                "SELECT count(*) AS n FROM board_sign_in_tokens WHERE token_hash = sha256(convert_to($1, 'UTF8'))",
                link.token)).single().decode("n")
            #expect(stored == 1, "the token is stored as its SHA-256")

            // Opening the link (as a link previewer or a mail scanner does) shows a button and uses nothing.
            for _ in 0..<3 {
                let opened = try await call(client, .get, "/board?token=\(link.token)", headers: [:])
                #expect(opened.status == .ok && opened.body.contains("action=\"/board/sign-in\"") && opened.body.contains(link.token),
                        "\(opened.body)")
                #expect(opened.headers[.setCookie] == nil && opened.headers[.contentSecurityPolicy]?.contains("default-src 'self'") == true)
            }
            #expect(try await engine.boardSignInTokenIsLive(link.token))
            // A form posted from another site's page is refused, and the token stays unused.
            let crossSite = try await call(client, .post, "/board/sign-in",
                                           headers: [.contentType: "application/x-www-form-urlencoded", .origin: "https://evil.example"],
                                           body: "token=\(link.token)")
            #expect(crossSite.status == .unauthorized && crossSite.headers[.setCookie]?.contains("of_board_") != true, "\(crossSite.body)")
            let fetchedCrossSite = try await call(client, .post, "/board/sign-in",
                                                  headers: [.contentType: "application/x-www-form-urlencoded", .origin: "null",
                                                            HTTPField.Name("Sec-Fetch-Site")!: "cross-site"],
                                                  body: "token=\(link.token)")
            #expect(fetchedCrossSite.status == .unauthorized, "\(fetchedCrossSite.body)")
            #expect(try await engine.boardSignInTokenIsLive(link.token))
            // The person's click posts it: the session cookie, and on to the board.
            let signedIn = try await call(client, .post, "/board/sign-in",
                                          headers: [.contentType: "application/x-www-form-urlencoded"], body: "token=\(link.token)")
            #expect(signedIn.status == .seeOther && signedIn.headers[.location] == "/board", "\(signedIn.status) \(signedIn.body)")
            let cookie = try #require(signedIn.headers[.setCookie], "\(signedIn.headers)")
            #expect(cookie.hasPrefix("orderflow_board=of_board_") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict")
                    && cookie.contains("Path=/") && !cookie.contains("Secure"), "\(cookie)")
            let session = String(cookie.prefix { $0 != ";" })

            let reused = try await call(client, .get, "/board?token=\(link.token)", headers: [:])
            #expect(reused.status == .unauthorized && reused.body.contains("used already"), "the token works once: \(reused.body)")
            #expect(reused.headers[.setCookie]?.contains("of_board_") != true)
            let reposted = try await call(client, .post, "/board/sign-in",
                                          headers: [.contentType: "application/x-www-form-urlencoded"], body: "token=\(link.token)")
            #expect(reposted.status == .unauthorized && reposted.headers[.setCookie]?.contains("of_board_") != true)

            // The cookie is the merchant's credential for the board's own calls.
            let withCookie: HTTPFields = [.cookie: "other=1; \(session)", .contentType: "application/json"]
            #expect(try await call(client, .get, "/board", headers: withCookie).status == .ok)
            let created = try await call(client, .post, "/v1/orders", headers: harness.headers(),
                body: #"{"id": "B1", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "B1", "itemCount": 1}}"#)
            #expect(created.status == .created, "\(created.body)")
            let listed = try await call(client, .get, "/v1/orders", headers: withCookie)
            #expect(listed.status == .ok && listed.body.contains("\"B1\""), "\(listed.body)")

            // A change with the cookie alone (a form on another site) is refused, and changes nothing.
            let forged = try await call(client, .post, "/v1/orders/B1/advance", headers: withCookie, body: #"{"event": "accept"}"#)
            expectProblem(forged, .forbidden, code: "forbidden", containing: "X-OrderFlow-Board")
            #expect(try await engine.order("B1").order.state == "received")
            var fromBoard = withCookie
            fromBoard[BoardCookie.csrfHeader] = "1"
            let advanced = try await call(client, .post, "/v1/orders/B1/advance", headers: fromBoard, body: #"{"event": "accept", "expected_state": "received"}"#)
            #expect(advanced.status == .ok, "\(advanced.body)")
            let conflict = try await call(client, .post, "/v1/orders/B1/advance", headers: fromBoard, body: #"{"event": "accept", "expected_state": "received"}"#)
            expectProblem(conflict, .conflict, code: "conflict")

            let unknown = try await call(client, .get, "/v1/orders", headers: [.cookie: "orderflow_board=of_board_" + String(repeating: "A", count: 43)])
            expectProblem(unknown, .unauthorized, code: "unauthorized", containing: "orderflow board-link")

            try await engine.endBoardSession(String(session.dropFirst("orderflow_board=".count)))
            expectProblem(try await call(client, .get, "/v1/orders", headers: withCookie), .unauthorized, code: "unauthorized")

            for (asset, type) in [("board.js", "text/javascript"), ("preview.js", "text/javascript"), ("board.css", "text/css")] {
                let served = try await call(client, .get, "/board/\(asset)", headers: [:])
                #expect(served.status == .ok && served.headers[.contentType]?.hasPrefix(type) == true && !served.body.isEmpty, "\(asset)")
            }
        }
    }

    @Test("board sign-in tokens: expired ones and unknown merchants are refused")
    func boardSignInRefusals() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        let engine = harness.fixture.engine
        await #expect(throws: OrderFlowError.self) { _ = try await engine.createBoardSignInToken(merchantID: "nobody-here") }
        let link = try await engine.createBoardSignInToken(merchantID: "default")
        _ = try await engine.pool.query(PostgresQuery("UPDATE board_sign_in_tokens SET expires_at = now() - interval '1 second'"))
        #expect(try await engine.redeemBoardSignInToken(link.token) == nil)
        #expect(try await engine.redeemBoardSignInToken("of_signin_short") == nil)
        let fresh = try await engine.createBoardSignInToken(merchantID: "default")
        let session = try #require(try await engine.redeemBoardSignInToken(fresh.token))
        #expect(session.merchantID == "default" && session.expiresAt > Date().addingTimeInterval(11 * 3600))
        #expect(try await engine.resolveBoardSession(session.secret) == "default")
        #expect(try await engine.redeemBoardSignInToken(fresh.token) == nil, "used once")
    }

    @Test("signing out of the board deletes the session's row and clears the cookie; only the board's page can do it")
    func boardSignOut() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        let engine = harness.fixture.engine
        let session = try #require(try await engine.redeemBoardSignInToken(try await engine.createBoardSignInToken(merchantID: "default").token))
        let cookie: HTTPFields = [.cookie: "orderflow_board=\(session.secret)"]
        let sessions = { @Sendable () async throws -> Int in
            try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM board_sessions")).single().decode("n")
        }
        try await harness.application.test(.router) { client in
            // A form on another site cannot send the board's header: refused, the session lives on.
            let forged = try await call(client, .post, "/board/sign-out", headers: cookie)
            expectProblem(forged, .forbidden, code: "forbidden", containing: "X-OrderFlow-Board")
            #expect(try await sessions() == 1)
            #expect(try await call(client, .get, "/v1/orders", headers: cookie).status == .ok)

            var fromBoard = cookie
            fromBoard[BoardCookie.csrfHeader] = "1"
            let signedOut = try await call(client, .post, "/board/sign-out", headers: fromBoard)
            #expect(signedOut.status == .noContent, "\(signedOut.body)")
            #expect(signedOut.headers[.setCookie] == BoardCookie().clearing, "\(signedOut.headers)")
            #expect(try await sessions() == 0, "the session's row is deleted")
            #expect(try await engine.resolveBoardSession(session.secret) == nil)
            // The old cookie opens nothing: not the API, not the page.
            expectProblem(try await call(client, .get, "/v1/orders", headers: cookie), .unauthorized, code: "unauthorized")
            #expect(try await call(client, .get, "/board", headers: cookie).status == .unauthorized)
            // Signing out again (another tab): the session is gone; the page says how to sign in.
            expectProblem(try await call(client, .post, "/board/sign-out", headers: fromBoard), .unauthorized, code: "unauthorized")
            let page = try await call(client, .get, "/board?signed-out", headers: [:])
            #expect(page.status == .unauthorized && page.body.contains("You signed out") && page.body.contains("orderflow board-link"), "\(page.body)")
        }
    }

    @Test("a workflow's details list its transitions with their input, for the board's buttons and forms")
    func workflowTransitions() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let reply = try await call(client, .get, "/v1/workflows/food-order", headers: harness.headers())
            #expect(reply.status == .ok, "\(reply.body)")
            #expect(reply.json["final_states"] as? [String] == ["delivered", "picked_up", "cancelled"], "\(reply.json["final_states"] ?? "")")
            let transitions = try #require(reply.json["transitions"] as? [[String: Any]])
            let dispatch = try #require(transitions.first { $0["event"] as? String == "dispatch" })
            #expect(dispatch["from"] as? String == "ready" && dispatch["to"] as? String == "out_for_delivery")
            let inputs = try #require(dispatch["inputs"] as? [[String: Any]])
            #expect(inputs.map { "\($0["name"] as? String ?? "") \($0["type"] as? String ?? "") \($0["required"] as? Bool ?? false)" }
                    == ["eta date true", "driver string(40)? false", "window daterange? false"], "\(inputs)")
            let ready = try #require(transitions.first { $0["to"] as? String == "ready" })
            #expect(ready["event"] == nil && (ready["inputs"] as? [Any])?.isEmpty == true)
            #expect(transitions.filter { $0["event"] as? String == "cancel" }.map { $0["from"] as? String } == ["received", "in_progress", "ready", "out_for_delivery"])
        }
    }
}
