import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Prometheus
import Testing
@testable import OrderFlowHTTP

/// The door crossed the wrong way: another customer's device, a forged secret, a reused key.
/// Each attempt is refused with its status and the database is compared before and after.
extension HTTPAPITests {
    static func databaseContents(_ database: PostgresConfiguration) async throws -> [String: String] {
        try await TableContents.read(database)
    }

    static func expectUnchanged(_ before: [String: String], _ after: [String: String], _ what: String,
                                sourceLocation: SourceLocation = #_sourceLocation) {
        for change in TableContents.changes(before, after) {
            Issue.record("\(what) changed \(change)", sourceLocation: sourceLocation)
        }
    }

    /// Creates a food order through the API; its client secret.
    func createOrder(_ id: String, client: some TestClientProtocol, harness: Harness) async throws -> String {
        let body = #"{"id": "\#(id)", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "\#(id)", "itemCount": 1}}"#
        let created = try await call(client, .post, "/v1/orders", headers: harness.headers(), body: body)
        #expect(created.status == .created, "\(created.body)")
        return try #require(created.json["client_secret"] as? String)
    }

    @Test("another customer's device: a client secret changes only the device that presents its own credential")
    func anotherCustomersDevice() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let anna = try await createOrder("ANNA-1", client: client, harness: harness)
            let mallory = try await createOrder("MAL-1", client: client, harness: harness)

            // Anna's app registers its device, keeping the id it used before, and gets its credential.
            let registered = try await call(client, .post, "/v1/devices", headers: harness.headers(key: anna), body: #"{"device": "anna-iphone"}"#)
            #expect(registered.status == .created, "\(registered.body)")
            let annaCredential = try #require(registered.json["device_credential"] as? String)
            #expect(annaCredential.hasPrefix("of_dev_") && registered.json["device"] as? String == "anna-iphone")
            let anna2 = harness.headers([.deviceCredential: annaCredential], key: anna)
            let annaToken = EngineFixture.token(1)
            #expect(try await call(client, .put, "/v1/devices/anna-iphone/push-to-start-tokens/FoodOrderAttributes", headers: anna2,
                                   body: #"{"token": "\#(annaToken)"}"#).status == .ok)
            #expect(try await call(client, .put, "/v1/orders/ANNA-1/followers/anna-iphone", headers: anna2).status == .noContent)
            #expect(try await call(client, .put, "/v1/orders/ANNA-1/activities/anna-iphone/token", headers: anna2,
                                   body: #"{"token": "\#(EngineFixture.token(2))"}"#).status == .ok)

            // Mallory, with her own order's secret (and her own registered device), tries Anna's device.
            let malloryDevice = try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory), body: "{}")
            #expect(malloryDevice.status == .created, "\(malloryDevice.body)")
            let malloryCredential = try #require(malloryDevice.json["device_credential"] as? String)
            let malloryID = try #require(malloryDevice.json["device"] as? String)
            #expect(malloryID.hasPrefix("dev_") && malloryID.count >= 20, "an id nobody can guess: \(malloryID)")
            let before = try await Self.databaseContents(harness.fixture.database)
            let attacker = EngineFixture.token(9)
            for headers in [harness.headers(key: mallory), harness.headers([.deviceCredential: malloryCredential], key: mallory),
                            harness.headers([.deviceCredential: "of_dev_" + String(repeating: "A", count: 43)], key: mallory),
                            harness.headers([.deviceCredential: "of_dev_short"], key: mallory)] {
                for (method, uri, body) in [
                    (HTTPRequest.Method.put, "/v1/devices/anna-iphone/push-to-start-tokens/FoodOrderAttributes", #"{"token": "\#(attacker)"}"#),
                    (.put, "/v1/orders/MAL-1/followers/anna-iphone", nil as String?),
                    (.delete, "/v1/orders/MAL-1/followers/anna-iphone", nil),
                    (.put, "/v1/orders/MAL-1/activities/anna-iphone/token", #"{"token": "\#(attacker)"}"#),
                    (.put, "/v1/orders/MAL-1/activities/anna-iphone/state", #"{"state": "dismissed"}"#),
                ] {
                    let refused = try await call(client, method, uri, headers: headers, body: body)
                    expectProblem(refused, .forbidden, code: "forbidden")
                    #expect(!refused.body.contains(malloryCredential) && !refused.body.contains(annaCredential))
                }
                // Anna's own order stays Anna's: another order's secret is refused before the device is looked at.
                expectProblem(try await call(client, .put, "/v1/orders/ANNA-1/activities/anna-iphone/token", headers: headers,
                                             body: #"{"token": "\#(attacker)"}"#), .forbidden, code: "forbidden")
            }
            // Claiming Anna's id again, or replacing its credential with a client secret, is refused too.
            expectProblem(try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory), body: #"{"device": "anna-iphone"}"#),
                          .conflict, code: "conflict")
            expectProblem(try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory),
                                         body: #"{"device": "anna-iphone", "replace_credential": true}"#), .forbidden, code: "forbidden")
            // A device nobody registered cannot be changed on a client secret alone (the default policy).
            expectProblem(try await call(client, .put, "/v1/devices/bob-iphone/push-to-start-tokens/FoodOrderAttributes",
                                         headers: harness.headers(key: mallory), body: #"{"token": "\#(attacker)"}"#),
                          .forbidden, code: "forbidden", containing: "not registered")
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "an attempt on another customer's device")
            // A device id the merchant's own calls made known cannot be claimed by a customer's app.
            #expect(try await call(client, .put, "/v1/orders/ANNA-1/followers/bob-iphone", headers: harness.headers()).status == .noContent)
            let knownBefore = try await Self.databaseContents(harness.fixture.database)
            expectProblem(try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory), body: #"{"device": "bob-iphone"}"#),
                          .conflict, code: "conflict")
            Self.expectUnchanged(knownBefore, try await Self.databaseContents(harness.fixture.database), "claiming a known device")
            // One order's secret registers a household's devices, not rows without end.
            var registeredByMallory = 1
            while registeredByMallory < OrderFlowEngine.devicesPerOrder {
                #expect(try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory), body: "{}").status == .created)
                registeredByMallory += 1
            }
            let capBefore = try await Self.databaseContents(harness.fixture.database)
            expectProblem(try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory), body: "{}"),
                          .badRequest, code: "invalidInput", containing: "the most one order may")
            Self.expectUnchanged(capBefore, try await Self.databaseContents(harness.fixture.database), "an order past its devices")

            // Mallory's own device works with its credential; the order shows her only her own device.
            let own = harness.headers([.deviceCredential: malloryCredential], key: mallory)
            #expect(try await call(client, .put, "/v1/orders/MAL-1/followers/\(malloryID)", headers: own).status == .noContent)
            #expect(try await call(client, .put, "/v1/orders/MAL-1/followers/anna-iphone", headers: harness.headers()).status == .noContent,
                    "the merchant's key may make any device follow any order")
            let seen = try await call(client, .get, "/v1/orders/MAL-1", headers: own)
            let devices = (seen.json["activities"] as? [[String: Any]])?.compactMap { $0["device"] as? String }
            #expect(devices == [malloryID], "\(seen.body)")
            let anonymous = try await call(client, .get, "/v1/orders/MAL-1", headers: harness.headers(key: mallory))
            #expect((anonymous.json["activities"] as? [Any])?.isEmpty == true, "\(anonymous.body)")
            let merchantView = try await call(client, .get, "/v1/orders/MAL-1", headers: harness.headers())
            #expect((merchantView.json["activities"] as? [Any])?.count == 2, "\(merchantView.body)")

            // The merchant replaces a lost credential: the old one stops working, the new one works.
            let replaced = try await call(client, .post, "/v1/devices", headers: harness.headers(),
                                          body: #"{"device": "anna-iphone", "replace_credential": true}"#)
            #expect(replaced.status == .created, "\(replaced.body)")
            let newCredential = try #require(replaced.json["device_credential"] as? String)
            expectProblem(try await call(client, .put, "/v1/orders/ANNA-1/followers/anna-iphone", headers: anna2), .forbidden, code: "forbidden")
            #expect(try await call(client, .put, "/v1/orders/ANNA-1/followers/anna-iphone",
                                   headers: harness.headers([.deviceCredential: newCredential], key: anna)).status == .noContent)
            // Anna's push-to-start token is still hers.
            let stored = try await harness.fixture.engine.pool.query(PostgresQuery(
                "SELECT token FROM push_to_start_tokens WHERE device_id = 'anna-iphone'")).map { try $0.decode("token", as: String.self) }
            #expect(stored == [annaToken])
        }
    }

    @Test("apps released before device credentials keep working under the compatible policy, for devices never registered")
    func compatiblePolicy() async throws {
        let fixture = try await EngineFixture.make()
        defer { Task { await fixture.shutdown() } }
        var configuration = OrderFlowConfiguration(database: fixture.database)
        configuration.deviceCredentials = .compatible
        let engine = OrderFlowEngine(configuration: configuration)
        defer { Task { await engine.shutdown() } }
        _ = try await engine.addMerchant("default")
        _ = try await engine.createOrder(NewOrder(orderID: "OLD-1", workflow: "food-order",
                                                  attributes: ["merchantName": "Luigi's", "orderNumber": "OLD-1", "itemCount": 1]))
        let secret = try await engine.clientSecret(forOrder: "OLD-1")
        let application = Application(router: try OrderFlowHTTPServer.router(engine: engine, runsWorker: false, logger: Logger(label: "test")))
        try await application.test(.router) { client in
            let app: HTTPFields = [.authorization: "Bearer \(secret)", .contentType: "application/json"]
            #expect(try await call(client, .put, "/v1/devices/old-phone/push-to-start-tokens/FoodOrderAttributes", headers: app,
                                   body: #"{"token": "\#(EngineFixture.token(3))"}"#).status == .ok)
            #expect(try await call(client, .put, "/v1/orders/OLD-1/followers/old-phone", headers: app).status == .noContent)
            // Android apps came after device credentials: their FCM token always needs one.
            expectProblem(try await call(client, .put, "/v1/devices/old-pixel/fcm-token", headers: app,
                                         body: #"{"token": "\#(Self.fcmToken("old"))"}"#), .forbidden, code: "forbidden", containing: "device's credential")
            #expect(try await engine.pool.query(PostgresQuery("SELECT 1 AS one FROM devices WHERE device_id = 'old-pixel'")).isEmpty)
            // Once registered, the device needs its credential even here.
            let registered = try await call(client, .post, "/v1/devices", headers: app, body: #"{"device": "old-phone"}"#)
            #expect(registered.status == .created, "\(registered.body)")
            expectProblem(try await call(client, .put, "/v1/orders/OLD-1/followers/old-phone", headers: app), .forbidden, code: "forbidden",
                          containing: "registered to an app installation")
        }
    }

    @Test("a forged client secret writes nothing and is remembered nowhere")
    func forgedClientSecret() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let before = try await Self.databaseContents(harness.fixture.database)
            for merchant in ["nobody", "default", "x\(UUID().uuidString)"] {
                let forged = "of_cs_" + Base64URLForTests.encode(merchant) + "." + Base64URLForTests.encode("1042") + "."
                    + Base64URLForTests.encode(String(repeating: "k", count: 32))
                expectProblem(try await call(client, .get, "/v1/orders/1042", headers: harness.headers(key: forged)),
                              .unauthorized, code: "unauthorized")
            }
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "forged client secrets")
            #expect(harness.fixture.engine.clientKeys.withLock { $0.isEmpty }, "no key remembered for a merchant that never made one")
        }
    }

    @Test("an idempotency key names one creation: reused for another order id it is 409 and creates nothing")
    func creationKeyReusedForAnotherOrder() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            func create(_ id: String) async throws -> Reply {
                let body = #"{"id": "\#(id)", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "\#(id)", "itemCount": 1}}"#
                return try await call(client, .post, "/v1/orders", headers: harness.headers([HTTPField.Name("Idempotency-Key")!: "create-once"]), body: body)
            }
            #expect(try await create("K-1").status == .created)
            #expect(try await create("K-1").status == .created, "the same creation again is a replay")
            let before = try await Self.databaseContents(harness.fixture.database)
            expectProblem(try await create("K-2"), .conflict, code: "conflict", containing: "already created order K-1")
            let otherInput = #"{"id": "K-1", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "K-1", "itemCount": 1}, "input": {"eta": "+45m"}}"#
            expectProblem(try await call(client, .post, "/v1/orders", headers: harness.headers([HTTPField.Name("Idempotency-Key")!: "create-once"]),
                                         body: otherInput), .conflict, code: "conflict", containing: "other start input")
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "a reused creation key")
        }
    }

    @Test("the same Idempotency-Key with another body is 409 on every POST, and changes nothing")
    func idempotencyKeyWithAnotherBody() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.createFoodOrder("IK-1")
        try await harness.application.test(.router) { client in
            func post(_ uri: String, _ body: String, key: String, type: String = "application/json") async throws -> Reply {
                try await call(client, .post, uri, headers: harness.headers([HTTPField.Name("Idempotency-Key")!: key, .contentType: type]), body: body)
            }
            // An advance: the same target with other input is another request.
            let first = try await post("/v1/orders/IK-1/advance", #"{"event": "accept", "input": {"eta": "+20m"}}"#, key: "adv-1")
            #expect(first.status == .ok, "\(first.body)")
            let retried = try await post("/v1/orders/IK-1/advance", #"{"event": "accept", "input": {"eta": "+20m"}}"#, key: "adv-1")
            #expect(retried.status == .ok && retried.json["replayed"] as? Bool == true, "a retry, later, of a relative date: \(retried.body)")
            var before = try await Self.databaseContents(harness.fixture.database)
            expectProblem(try await post("/v1/orders/IK-1/advance", #"{"event": "accept", "input": {"eta": "+45m"}}"#, key: "adv-1"),
                          .conflict, code: "conflict", containing: "other input")
            expectProblem(try await post("/v1/orders/IK-1/advance", #"{"to": "ready"}"#, key: "adv-1"), .conflict, code: "conflict")
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "an advance's key reused")

            // A workflow: the same key for another file is refused; for the same file, the first answer again.
            let yaml = try EngineFixture.shippedWorkflow("food-order")
            let changed = yaml.replacingOccurrences(of: "name: food-order", with: "name: food-order-2", options: [], range: yaml.range(of: "name: food-order"))
            let applied = try await post("/v1/workflows", changed, key: "wf-1", type: "application/yaml")
            #expect(applied.status == .created, "\(applied.body)")
            let again = try await post("/v1/workflows", changed, key: "wf-1", type: "application/yaml")
            #expect(again.status == .created && again.body == applied.body, "the same answer: \(again.body)")
            before = try await Self.databaseContents(harness.fixture.database)
            let other = yaml.replacingOccurrences(of: "name: food-order", with: "name: food-order-3", options: [], range: yaml.range(of: "name: food-order"))
            expectProblem(try await post("/v1/workflows", other, key: "wf-1", type: "application/yaml"), .conflict, code: "conflict")
            // A dead letter's retry: the key names that retry, not another delivery's.
            expectProblem(try await post("/v1/deliveries/7/retry", "", key: "wf-1"), .conflict, code: "conflict")
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "a workflow's key reused")
        }
    }

    @Test("the history names who made a change: the API key's prefix or the board session, never the caller's request id")
    func historyActor() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.createFoodOrder("ACT-1")
        try await harness.application.test(.router) { client in
            let moved = try await call(client, .post, "/v1/orders/ACT-1/advance",
                                       headers: harness.headers([.xRequestID: "i-am-the-ceo"]), body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
            #expect(moved.status == .ok, "\(moved.body)")
            let prefix = try #require(OrderFlowEngine.apiKeyPrefix(of: harness.key))
            let history = try await harness.fixture.engine.history("ACT-1")
            #expect(history.transitions.last?.actor == "api-key:\(prefix)", "\(history.transitions.map(\.actor))")
        }
    }

    @Test("the public health check names no database host, port or reason; the metrics are not on the public port without a token")
    func operatorsDataStaysPrivate() async throws {
        let fixture = try await EngineFixture.make()
        defer { Task { await fixture.shutdown() } }
        // An engine whose database is a closed port on this machine.
        var configuration = OrderFlowConfiguration(database: try PostgresConfiguration("postgresql://nobody:secret-pw@127.0.0.1:9/orderflow?connect_timeout=2"))
        configuration.acquireTimeout = .seconds(3)
        let engine = OrderFlowEngine(configuration: configuration)
        defer { Task { await engine.shutdown() } }
        let application = Application(router: try OrderFlowHTTPServer.router(engine: engine, runsWorker: false, logger: Logger(label: "test")))
        try await application.test(.router) { client in
            let health = try await call(client, .get, "/healthz", headers: [:])
            #expect(health.status == .serviceUnavailable)
            #expect(health.json["database"] as? String == "unreachable", "\(health.body)")
            for secretive in ["127.0.0.1", ":9", "secret-pw", "nobody", "refused", "connect"] {
                #expect(!health.body.contains(secretive), "\(secretive) in \(health.body)")
            }
            let metrics = try await call(client, .get, "/metrics", headers: [:])
            #expect(metrics.status != .ok, "no metrics on the public port without a token")
        }
        let registry = PrometheusCollectorRegistry()
        let withToken = Application(router: try OrderFlowHTTPServer.router(
            engine: fixture.engine, runsWorker: false, metrics: (registry: registry, token: "operators-only-token-123"), logger: Logger(label: "test")))
        try await withToken.test(.router) { client in
            let none = try await call(client, .get, "/metrics", headers: [:])
            let wrong = try await call(client, .get, "/metrics", headers: [.authorization: "Bearer operators-only-token-12"])
            let right = try await call(client, .get, "/metrics", headers: [.authorization: "Bearer operators-only-token-123"])
            #expect(none.status == .unauthorized && wrong.status == .unauthorized, "\(none.body) \(wrong.body)")
            #expect(right.status == .ok, "\(right.body)")
        }
    }
}

extension HTTPAPITests {
    @Test("a board session calls only what the board uses: no workflows applied, no devices, no deliveries retried")
    func boardSessionIsNarrow() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        let engine = harness.fixture.engine
        _ = try await harness.fixture.createFoodOrder("B-1")
        let session = try #require(try await engine.redeemBoardSignInToken(try await engine.createBoardSignInToken(merchantID: "default").token))
        let board: HTTPFields = [.cookie: "orderflow_board=\(session.secret)", BoardCookie.csrfHeader: "1", .contentType: "application/json"]
        try await harness.application.test(.router) { client in
            #expect(try await call(client, .get, "/v1/orders/B-1", headers: board).status == .ok)
            let advanced = try await call(client, .post, "/v1/orders/B-1/advance", headers: board, body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
            #expect(advanced.status == .ok, "\(advanced.body)")
            #expect(try await engine.history("B-1").transitions.last?.actor == OrderFlowEngine.boardSessionActor(session.secret))
            let before = try await Self.databaseContents(harness.fixture.database)
            for (method, uri, body) in [
                (HTTPRequest.Method.post, "/v1/workflows", "name: x" as String?),
                (.post, "/v1/devices", nil),
                (.put, "/v1/devices/phone/push-to-start-tokens/FoodOrderAttributes", #"{"token": "\#(EngineFixture.token(1))"}"#),
                (.put, "/v1/devices/phone/alert-token", #"{"token": "\#(EngineFixture.token(1))"}"#),
                (.put, "/v1/orders/B-1/followers/phone", nil),
                (.post, "/v1/deliveries/1/retry", nil),
                (.post, "/v1/orders", #"{"id": "B-2", "workflow": "food-order"}"#),
            ] {
                expectProblem(try await call(client, method, uri, headers: board, body: body), .forbidden, code: "forbidden")
            }
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "a board session beyond the board")
        }
    }
}

extension HTTPAPITests {
    @Test("behind https the board's cookie is Secure and __Host-, and a cookie under the plain name opens nothing")
    func secureBoardCookie() async throws {
        let fixture = try await EngineFixture.make()
        defer { Task { await fixture.shutdown() } }
        if try await !fixture.engine.merchants().contains(where: { $0.id == "default" }) {
            _ = try await fixture.engine.addMerchant("default")
        }
        let application = Application(router: try OrderFlowHTTPServer.router(
            engine: fixture.engine, runsWorker: false, boardCookie: BoardCookie(secure: true), logger: Logger(label: "test")))
        let link = try await fixture.engine.createBoardSignInToken(merchantID: "default", lifetime: 60)
        try await application.test(.router) { client in
            let signedIn = try await call(client, .post, "/board/sign-in",
                                          headers: [.contentType: "application/x-www-form-urlencoded"], body: "token=\(link.token)")
            let cookie = try #require(signedIn.headers[.setCookie], "\(signedIn.status) \(signedIn.body)")
            #expect(cookie.hasPrefix("__Host-orderflow_board=of_board_") && cookie.contains("; Secure") && cookie.contains("Path=/")
                    && !cookie.contains("Domain"), "\(cookie)")
            let secret = String(cookie.prefix { $0 != ";" }.drop { $0 != "=" }.dropFirst())
            #expect(try await call(client, .get, "/v1/orders", headers: [.cookie: "__Host-orderflow_board=\(secret)"]).status == .ok)
            let planted = try await call(client, .get, "/v1/orders", headers: [.cookie: "orderflow_board=\(secret)"])
            #expect(planted.status == .unauthorized, "a cookie an http page could plant is not the board's: \(planted.status)")
        }
    }
}

/// URL-safe base64 without padding, for making secrets by hand.
enum Base64URLForTests {
    static func encode(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension HTTPAPITests {
    @Test("every path and method of the contract is in the 405 table, and nothing else; a wrong method is 405 with Allow")
    func contractRoutes() async throws {
        let contract = try String(contentsOf: EngineFixture.repositoryRoot.appendingPathComponent("openapi/orderflow.yaml"), encoding: .utf8)
        var fromContract: [String: Set<String>] = [:]
        var path: String?
        for line in contract.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if !line.hasPrefix(" ") {
                path = nil
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     "),
                      let method = ["get", "post", "put", "delete", "patch"].first(where: { line == "    \($0):" }) {
                fromContract[path, default: []].insert(method.uppercased())
            }
        }
        let table = Dictionary(uniqueKeysWithValues: ContractRoutes.table.map { ($0.path, Set($0.methods.map(\.rawValue))) })
        #expect(!fromContract.isEmpty && fromContract == table, "contract \(fromContract)\ntable \(table)")

        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let trace = try await call(client, HTTPRequest.Method("TRACE")!, "/healthz", headers: [:])
            #expect(trace.status == .methodNotAllowed && trace.headers[.allow] == "GET", "\(trace.status) \(trace.headers)")
            let delete = try await call(client, .delete, "/v1/devices", headers: harness.headers())
            #expect(delete.status == .methodNotAllowed && delete.headers[.allow] == "POST")
            let unknown = try await call(client, .get, "/v1/nothing-here", headers: harness.headers())
            #expect(unknown.status == .notFound)
            // No body at all where every member of the body is optional: as `{}`.
            let device = try await call(client, .post, "/v1/devices", headers: [.authorization: "Bearer \(harness.key)"])
            #expect(device.status == .created, "\(device.body)")
        }
    }
}
