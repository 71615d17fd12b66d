import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
@testable import OrderFlowHTTP

/// The HTTP API in process (Hummingbird's test client), against a fresh database.
@Suite("HTTP API")
struct HTTPAPITests {
    /// A fresh database, the `default` merchant's API key, and the router.
    struct Harness {
        let fixture: EngineFixture
        let key: String
        let application: Application<RouterResponder<BasicRequestContext>>

        static func make() async throws -> Harness {
            let fixture = try await EngineFixture.make()
            if try await !fixture.engine.merchants().contains(where: { $0.id == "default" }) {
                _ = try await fixture.engine.addMerchant("default")
            }
            let key = try await fixture.engine.createAPIKey(merchantID: "default", name: "tests").secret
            let router = try OrderFlowHTTPServer.router(engine: fixture.engine, runsWorker: false, logger: Logger(label: "test"))
            return Harness(fixture: fixture, key: key, application: Application(router: router))
        }

        func headers(_ extra: HTTPFields = [:], key: String? = nil) -> HTTPFields {
            var fields: HTTPFields = [.authorization: "Bearer \(key ?? self.key)", .contentType: "application/json"]
            fields.append(contentsOf: extra)
            return fields
        }
    }

    struct Reply {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: String
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
    }

    func call(_ client: some TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, headers: HTTPFields,
              body: String? = nil) async throws -> Reply {
        try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { response in
            Reply(status: response.status, headers: response.headers, body: String(buffer: response.body))
        }
    }

    func expectProblem(_ reply: Reply, _ status: HTTPResponse.Status, code: String, containing fragment: String? = nil,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply.status == status, "\(reply.body)", sourceLocation: sourceLocation)
        #expect(reply.headers[.contentType]?.hasPrefix("application/problem+json") == true, "\(reply.headers)", sourceLocation: sourceLocation)
        let problem = reply.json
        #expect(problem["code"] as? String == code, "\(reply.body)", sourceLocation: sourceLocation)
        #expect(problem["status"] as? Int == Int(status.code), sourceLocation: sourceLocation)
        #expect((problem["detail"] as? String)?.isEmpty == false, sourceLocation: sourceLocation)
        if let fragment {
            #expect((problem["detail"] as? String)?.contains(fragment) == true, "\(reply.body)", sourceLocation: sourceLocation)
        }
    }

    @Test("the bearer credential: the scheme in any case, spaces and tabs around it dropped, nothing else taken")
    func bearerCredential() {
        let read = MerchantAuthentication<BasicRequestContext>.bearerCredential
        #expect(read("Bearer of_live_abc") == "of_live_abc")
        #expect(read("bEaReR \t of_live_abc \t") == "of_live_abc")
        #expect(read("Bearer  ") == nil && read("Bearer") == nil && read("Basic b2Y6eA==") == nil)
        #expect(read("Bearer\u{0}of_live_abc") == nil && read("Bearer\tof_live_abc") == nil && read("Bearerx of_live_abc") == nil)
        #expect(read("Bearer a b") == "a b", "inner spaces stay: such a key is not known and is refused as one")
    }

    @Test("without a valid API key every route but health and the contract is 401")
    func authentication() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let none = try await call(client, .get, "/v1/orders", headers: [:])
            expectProblem(none, .unauthorized, code: "unauthorized", containing: "Authorization: Bearer")
            #expect(none.headers[.wwwAuthenticate] != nil)
            // Each request gets a fresh random (version 4) UUID as its id.
            var ids = [none.headers[HTTPField.Name("X-Request-ID")!]]
            for _ in 0..<3 {
                ids.append(try await call(client, .get, "/v1/orders", headers: [:]).headers[HTTPField.Name("X-Request-ID")!])
            }
            #expect(Set(ids).count == 4 && ids.allSatisfy { id in
                guard let id, let uuid = UUID(uuidString: id), id == uuid.uuidString.lowercased() else { return false }
                return id.utf8[id.utf8.index(id.utf8.startIndex, offsetBy: 14)] == UInt8(ascii: "4")
                    && "89ab".utf8.contains(id.utf8[id.utf8.index(id.utf8.startIndex, offsetBy: 19)])
            }, "\(ids)")
            let wrong = try await call(client, .get, "/v1/orders", headers: harness.headers(key: "of_live_nope_0000"))
            expectProblem(wrong, .unauthorized, code: "unauthorized", containing: "not known or was revoked")
            #expect(!wrong.body.contains("of_live_nope_0000"), "a presented key is never echoed")

            let health = try await call(client, .get, "/healthz", headers: [:])
            #expect(health.status == .ok && health.json["database"] as? String == "reachable", "\(health.body)")
            let contract = try await call(client, .get, "/openapi.yaml", headers: [:])
            let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../openapi/orderflow.yaml")
            let document = try String(contentsOf: file, encoding: .utf8)
            #expect(contract.status == .ok && contract.body == document)
        }
    }

    @Test("an order's life over HTTP: create, replay, advance by event and by state, history, list, cancel")
    func orderLifecycle() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let body = #"{"id": "1042", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 3}}"#
            let created = try await call(client, .post, "/v1/orders", headers: harness.headers([HTTPField.Name("Idempotency-Key")!: "create-1"]), body: body)
            #expect(created.status == .created, "\(created.body)")
            #expect(created.json["state"] as? String == "received" && created.json["id"] as? String == "1042")
            let replay = try await call(client, .post, "/v1/orders", headers: harness.headers([HTTPField.Name("Idempotency-Key")!: "create-1"]), body: body)
            #expect(replay.status == .created && replay.json["seq"] as? Int == 1, "same key, same answer: \(replay.body)")
            let twice = try await call(client, .post, "/v1/orders", headers: harness.headers(), body: body)
            expectProblem(twice, .conflict, code: "alreadyExists")

            let accepted = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(),
                                          body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
            #expect(accepted.status == .ok, "\(accepted.body)")
            let transition = accepted.json["transition"] as? [String: Any] ?? [:]
            #expect(transition["to"] as? String == "in_progress")
            let eta = (transition["content"] as? [String: Any])?["eta"] as? String
            #expect(eta?.hasSuffix("Z") == true, "content dates are ISO-8601: \(accepted.body)")
            #expect(((transition["aps"] as? [String: Any])?["content-state"] as? [String: Any])?["eta"] is Double)

            let invalid = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(), body: #"{"to": "delivered"}"#)
            expectProblem(invalid, .unprocessableContent, code: "invalidTransition")
            #expect((invalid.json["candidates"] as? [String])?.contains("ready") == true, "\(invalid.body)")
            let stale = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(),
                                       body: #"{"to": "ready", "expected_state": "received"}"#)
            expectProblem(stale, .conflict, code: "conflict")
            let ready = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(), body: #"{"to": "ready"}"#)
            #expect(ready.status == .ok && (ready.json["order"] as? [String: Any])?["state"] as? String == "ready", "\(ready.body)")

            let order = try await call(client, .get, "/v1/orders/1042", headers: harness.headers())
            #expect((order.json["order"] as? [String: Any])?["state"] as? String == "ready", "\(order.body)")
            let history = try await call(client, .get, "/v1/orders/1042/history", headers: harness.headers())
            #expect((history.json["transitions"] as? [[String: Any]])?.map { $0["to"] as? String } == ["received", "in_progress", "ready"])
            // No Android phone follows the order: its transitions carry no Android data message.
            #expect((history.json["transitions"] as? [[String: Any]])?.allSatisfy { $0["android"] == nil } == true, "\(history.body)")
            // Once one does, each transition carries the one it renders, as the engine's history has it.
            _ = try await harness.fixture.engine.registerFCMToken(deviceID: "pixel-1042", token: "fTqa1:APA91b" + String(repeating: "Xy_9-", count: 30))
            try await harness.fixture.engine.follow(orderID: "1042", deviceID: "pixel-1042")
            let followed = try await call(client, .get, "/v1/orders/1042/history", headers: harness.headers())
            let engineHistory = try await harness.fixture.engine.history("1042")
            let android = (followed.json["transitions"] as? [[String: Any]])?.map { $0["android"] as? [String: String] }
            #expect(android?.count == 3 && android?.allSatisfy { $0 != nil } == true, "\(followed.body)")
            #expect(android == engineHistory.transitions.map(\.android) && android?.last??["chip"] == "Ready", "\(followed.body)")
            let list = try await call(client, .get, "/v1/orders?state=ready&limit=10", headers: harness.headers())
            #expect((list.json["orders"] as? [[String: Any]])?.count == 1, "\(list.body)")

            let cancelled = try await call(client, .post, "/v1/orders/1042/cancel", headers: harness.headers(), body: #"{"reason": "closed"}"#)
            #expect(cancelled.status == .ok && (cancelled.json["order"] as? [String: Any])?["is_final"] as? Bool == true, "\(cancelled.body)")
            let missing = try await call(client, .get, "/v1/orders/9999", headers: harness.headers())
            expectProblem(missing, .notFound, code: "notFound", containing: "9999")
            // The engine's remedy in the HTTP door's words: a route, not a CLI command.
            let detail = missing.json["detail"] as? String ?? ""
            #expect(detail == "order 9999 does not exist; create it first (POST /v1/orders), or check the id with GET /v1/orders", "\(detail)")
        }
    }

    @Test("a cancellation sent without a body means no options; an advance without one is refused, nothing moved")
    func cancellationWithoutABody() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            _ = try await createOrder("8", client: client, harness: harness)
            let advance = try await call(client, .post, "/v1/orders/8/advance", headers: harness.headers())
            #expect(advance.status == .badRequest, "\(advance.status) \(advance.body)")
            #expect(try await harness.fixture.engine.order("8").order.state == "received", "a refused advance moved the order")
            let cancelled = try await call(client, .post, "/v1/orders/8/cancel", headers: harness.headers())
            #expect(cancelled.status == .ok && (cancelled.json["order"] as? [String: Any])?["state"] as? String == "cancelled", "\(cancelled.body)")
        }
        for (path, empty) in [("/v1/orders/8/cancel", true), ("/v1/devices", true), ("/v1/orders/8/advance", false),
                              ("/v1/orders/cancel", false), ("/v1/orders/8/x/cancel", false), ("/v1/merchants/8/cancel", false)] {
            #expect(EmptyOptionalBody<BasicRequestContext>.takesNoBody(path) == empty, "\(path)")
        }
    }

    @Test("Prefer: return=minimal answers 204 with the state and step in headers; the move is made once, a replay says so")
    func minimalAdvance() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let body = #"{"id": "7", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "7", "itemCount": 1}}"#
            #expect(try await call(client, .post, "/v1/orders", headers: harness.headers(), body: body).status == .created)
            let prefer = HTTPField.Name("Prefer")!, key = HTTPField.Name("Idempotency-Key")!
            let minimal = try await call(client, .post, "/v1/orders/7/advance",
                                         headers: harness.headers([prefer: "respond-async, return = minimal", key: "m-1"]),
                                         body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
            #expect(minimal.status == .noContent && minimal.body.isEmpty, "\(minimal.status) \(minimal.body)")
            #expect(minimal.headers[HTTPField.Name("Preference-Applied")!] == "return=minimal")
            #expect(minimal.headers[HTTPField.Name("OrderFlow-State")!] == "in_progress")
            #expect(minimal.headers[HTTPField.Name("OrderFlow-Seq")!] == "2")
            #expect(minimal.headers[HTTPField.Name("OrderFlow-Replayed")!] == "false")
            let replay = try await call(client, .post, "/v1/orders/7/advance", headers: harness.headers([prefer: "return=minimal", key: "m-1"]),
                                        body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
            #expect(replay.status == .noContent && replay.headers[HTTPField.Name("OrderFlow-Replayed")!] == "true")
            #expect(replay.headers[HTTPField.Name("OrderFlow-Seq")!] == "2", "the replay applied nothing new")
            // Another preference (or none): the full result, as before.
            let full = try await call(client, .post, "/v1/orders/7/advance", headers: harness.headers([prefer: "return=representation"]),
                                      body: #"{"to": "ready"}"#)
            #expect(full.status == .ok && (full.json["order"] as? [String: Any])?["seq"] as? Int == 3, "\(full.body)")
            let refused = try await call(client, .post, "/v1/orders/7/advance", headers: harness.headers([prefer: "return=minimal"]),
                                         body: #"{"to": "received"}"#)
            expectProblem(refused, .unprocessableContent, code: "invalidTransition")
            let cancelled = try await call(client, .post, "/v1/orders/7/cancel", headers: harness.headers([prefer: "return=minimal"]),
                                          body: #"{"reason": "closed"}"#)
            #expect(cancelled.status == .noContent && cancelled.headers[HTTPField.Name("OrderFlow-State")!] == "cancelled", "\(cancelled)")
            let history = try await call(client, .get, "/v1/orders/7/history", headers: harness.headers())
            #expect((history.json["transitions"] as? [[String: Any]])?.map { $0["to"] as? String } == ["received", "in_progress", "ready", "cancelled"])
        }
        #expect(OrderFlowAPI.prefersMinimal("return=minimal") && OrderFlowAPI.prefersMinimal("wait=5, RETURN=\"minimal\"; x=1"))
        #expect(!OrderFlowAPI.prefersMinimal(nil) && !OrderFlowAPI.prefersMinimal("return=representation") && !OrderFlowAPI.prefersMinimal("minimal"))
    }

    @Test("a broadcast order carries its channel: pending at creation, then the id the worker stored")
    func broadcastOrderCarriesItsChannel() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("f1-race"), file: "f1-race.yaml")
        try await harness.application.test(.router) { client in
            let body = #"{"id": "monza-2026", "workflow": "f1-race", "attributes": {"raceName": "Italian Grand Prix", "track": "Monza", "totalLaps": 53}}"#
            let created = try await call(client, .post, "/v1/orders", headers: harness.headers(), body: body)
            #expect(created.status == .created, "\(created.body)")
            let pending = created.json["channel"] as? [String: Any]
            #expect(pending?["state"] as? String == "pending" && pending?["storage"] as? String == "latest", "\(created.body)")
            #expect(pending?["id"] == nil)

            // What the worker records once APNs created the channel.
            let channelID = "dHN0Q2hhbm5lbElEMTIzNA=="
            try await harness.fixture.engine.pool.query(PostgresQuery(
                "UPDATE order_channels SET channel_id = $1, state = 'open', generation = 1 WHERE order_id = 'monza-2026'", channelID))
            let order = try await call(client, .get, "/v1/orders/monza-2026", headers: harness.headers())
            let channel = (order.json["order"] as? [String: Any])?["channel"] as? [String: Any]
            #expect(channel?["id"] as? String == channelID && channel?["state"] as? String == "open", "\(order.body)")

            // A per-device order has none.
            let food = #"{"id": "1042", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 3}}"#
            let plain = try await call(client, .post, "/v1/orders", headers: harness.headers(), body: food)
            #expect(plain.status == .created && plain.json["channel"] == nil, "\(plain.body)")
        }
    }

    @Test("bad requests are 4xx problems and change nothing")
    func badRequests() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            for (body, fragment) in [
                (#"{"id": "1", "workflow": "food-order""#, "JSON"),
                (#"{"id": 1, "workflow": "food-order"}"#, "`id`"),
                (#"{"workflow": "food-order"}"#, "`id`"),
                (#"{"id": "1", "workflow": "food-order", "colour": "red"}"#, "colour"),
            ] {
                let reply = try await call(client, .post, "/v1/orders", headers: harness.headers(), body: body)
                expectProblem(reply, .badRequest, code: "invalidInput", containing: fragment)
            }
            let hostile = try await call(client, .post, "/v1/orders", headers: harness.headers(),
                                         body: #"{"id": "'); DROP TABLE orders; --", "workflow": "food-order", "attributes": {"merchantName": "x", "orderNumber": "1", "itemCount": 1}}"#)
            #expect(hostile.status == .badRequest, "\(hostile.body)")
            let both = try await call(client, .post, "/v1/orders/1/advance", headers: harness.headers(), body: #"{"to": "ready", "event": "ready"}"#)
            expectProblem(both, .badRequest, code: "invalidInput", containing: "not both")
            var huge = harness.headers()
            huge[.contentLength] = String(2 << 20)
            let tooLarge = try await call(client, .post, "/v1/orders", headers: huge, body: String(repeating: " ", count: 2 << 20))
            expectProblem(tooLarge, .contentTooLarge, code: "invalidInput")
            let streamed = try await call(client, .post, "/v1/orders", headers: harness.headers(), body: String(repeating: " ", count: 2 << 20))
            expectProblem(streamed, .contentTooLarge, code: "invalidInput")
            var yaml = harness.headers()
            yaml[.contentType] = "application/yaml"
            let hugeWorkflow = try await call(client, .post, "/v1/workflows", headers: yaml, body: "name: x\n" + String(repeating: "#", count: 3 << 20))
            expectProblem(hugeWorkflow, .contentTooLarge, code: "invalidInput")
            let wrongType = try await call(client, .post, "/v1/orders/1/advance", headers: harness.headers(), body: #"{"to": 5}"#)
            expectProblem(wrongType, .badRequest, code: "invalidInput", containing: "`to`")
            var textPlain = harness.headers()
            textPlain[.contentType] = "text/plain"
            let wrongMedia = try await call(client, .post, "/v1/orders", headers: textPlain, body: "id=1")
            #expect(wrongMedia.status.code >= 400 && wrongMedia.status.code < 500, "\(wrongMedia.body)")
            let orders = try await call(client, .get, "/v1/orders", headers: harness.headers())
            #expect((orders.json["orders"] as? [Any])?.isEmpty == true, "nothing was stored: \(orders.body)")
        }
    }

    @Test("a merchant's key sees only that merchant's orders")
    func merchantsAreApart() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.engine.addMerchant("other")
        let otherKey = try await harness.fixture.engine.createAPIKey(merchantID: "other").secret
        _ = try await harness.fixture.createFoodOrder("1042")
        try await harness.application.test(.router) { client in
            let mine = try await call(client, .get, "/v1/orders/1042", headers: harness.headers())
            #expect(mine.status == .ok)
            let theirs = try await call(client, .get, "/v1/orders/1042", headers: harness.headers(key: otherKey))
            expectProblem(theirs, .notFound, code: "notFound")
            let advance = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(key: otherKey), body: #"{"event": "accept"}"#)
            #expect(advance.status == .notFound, "\(advance.body)")
        }
    }

    @Test("workflows: apply (201 new, 200 unchanged, 422 with the diagnostics), list, get, Swift source")
    func workflows() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        let yaml = try EngineFixture.shippedWorkflow("ride")
        try await harness.application.test(.router) { client in
            var headers = harness.headers()
            headers[.contentType] = "application/yaml"
            let again = try await call(client, .post, "/v1/workflows", headers: headers, body: yaml)
            #expect(again.status == .ok && again.json["created"] as? Bool == false, "\(again.body)")
            let copy = yaml.replacingOccurrences(of: "name: ride\n", with: "name: ride-copy\n")
            let changed = try await call(client, .post, "/v1/workflows", headers: headers, body: copy)
            #expect(changed.status == .created && changed.json["name"] as? String == "ride-copy", "\(changed.body)")
            let broken = try await call(client, .post, "/v1/workflows", headers: headers, body: "name: [")
            expectProblem(broken, .unprocessableContent, code: "invalidWorkflow")
            let diagnostics = try #require(broken.json["diagnostics"] as? [[String: Any]], "\(broken.body)")
            #expect((diagnostics.first?["line"] as? Int ?? 0) >= 1 && diagnostics.first?["message"] is String, "\(broken.body)")
            let list = try await call(client, .get, "/v1/workflows", headers: harness.headers())
            #expect(Set((list.json["workflows"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []) == ["food-order", "ride", "ride-copy"])
            let one = try await call(client, .get, "/v1/workflows/ride?version=1", headers: harness.headers())
            #expect(one.json["version"] as? Int == 1 && (one.json["source"] as? String) == yaml, "\(one.body)")
            let swift = try await call(client, .get, "/v1/workflows/food-order/swift", headers: harness.headers())
            #expect(swift.status == .ok && swift.body.contains("ActivityAttributes"), "\(swift.body)")
        }
    }

    @Test("the generated server was made from the contract and the generator's settings as they are")
    func generatedCodeMatchesTheContract() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")
        let recorded = try String(contentsOf: root.appendingPathComponent("Sources/OrderFlowHTTP/Generated/contract.sha256"), encoding: .utf8)
        let expected = try ["openapi/orderflow.yaml", "openapi/openapi-generator-config.yaml"].map { path in
            let digest = SHA256.hash(data: try Data(contentsOf: root.appendingPathComponent(path))).map { String(format: "%02x", $0) }.joined()
            return "\(digest)  \(path)"
        }
        #expect(recorded.split(separator: "\n").map(String.init) == expected,
                "openapi/orderflow.yaml or openapi/openapi-generator-config.yaml changed since Sources/OrderFlowHTTP/Generated was made: run scripts/generate-openapi")
    }
}
