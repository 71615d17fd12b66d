import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import OrderFlow
import OrderFlowTesting
import Testing
import WorkflowKit

@testable import OrderFlowHTTP

/// `GET /v1/orders/{id}` answers ordinary reads by hand (`HandRoutes`); these tests hold its
/// answers to the generated server's, for every kind of caller and every refusal.
extension HTTPAPITests {
    @Test("an order read by hand answers as the generated server: the merchant, each app's own device, and every refusal")
    func orderReadAnswersAsTheGeneratedServer() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        let engine = harness.fixture.engine
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("f1-race"), file: "f1-race.yaml")
        _ = try await engine.addMerchant("other")
        let otherKey = try await engine.createAPIKey(merchantID: "other").secret
        let byHand = Application(router: try OrderFlowHTTPServer.router(engine: engine, runsWorker: false, logger: Logger(label: "test")))
        let generated = Application(router: try OrderFlowHTTPServer.router(
            engine: engine, runsWorker: false, logger: Logger(label: "test"), hotRoutesByHand: false))
        try await byHand.test(.router) { hand in
            try await generated.test(.router) { machine in
                let secret = try await createOrder("1042", client: hand, harness: harness)
                let otherSecret = try await createOrder("2001", client: hand, harness: harness)
                let race = #"{"id": "monza", "workflow": "f1-race", "attributes": {"raceName": "Italian Grand Prix", "track": "Monza", "totalLaps": 53}}"#
                #expect(try await call(hand, .post, "/v1/orders", headers: harness.headers(), body: race).status == .created)
                // Two devices follow 1042; one reports what it shows.
                var apps: [String: HTTPFields] = [:]
                for (index, device) in ["phone", "tablet"].enumerated() {
                    let made = try await call(hand, .post, "/v1/devices", headers: harness.headers(key: secret), body: #"{"device": "\#(device)"}"#)
                    apps[device] = harness.headers([.deviceCredential: try #require(made.json["device_credential"] as? String)], key: secret)
                    let token = try await call(hand, .put, "/v1/orders/1042/activities/\(device)/token", headers: apps[device]!,
                                               body: #"{"token": "\#(EngineFixture.token(index + 1))"}"#)
                    #expect(token.status == .ok, "\(token.body)")
                }
                let report = try await call(hand, .put, "/v1/orders/1042/activities/phone/state", headers: apps["phone"]!,
                                            body: #"{"state": "stale", "applied_at": "2026-11-25T10:00:00.250Z"}"#)
                #expect(report.status == .ok, "\(report.body)")
                let advanced = try await call(hand, .post, "/v1/orders/1042/advance", headers: harness.headers(), body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
                #expect(advanced.status == .ok, "\(advanced.body)")

                let same: HTTPFields = [HTTPField.Name("X-Request-ID")!: "same"]
                var altered = harness.headers(same, key: String(secret.dropLast(2)) + "AA")
                altered[.deviceCredential] = apps["phone"]![.deviceCredential]
                var noCredential = harness.headers(same)
                noCredential[.authorization] = nil
                let reads: [(what: String, uri: String, headers: HTTPFields, status: HTTPResponse.Status)] = [
                    ("the merchant", "/v1/orders/1042", harness.headers(same), .ok),
                    ("the phone's app", "/v1/orders/1042", apps["phone"]!, .ok),
                    ("the tablet's app", "/v1/orders/1042", apps["tablet"]!, .ok),
                    ("the order's secret without a device", "/v1/orders/1042", harness.headers(same, key: secret), .ok),
                    ("a broadcast order", "/v1/orders/monza", harness.headers(same), .ok),
                    ("an order nobody follows", "/v1/orders/2001", harness.headers(same, key: otherSecret), .ok),
                    ("another order's app", "/v1/orders/2001", apps["phone"]!, .forbidden),
                    ("another merchant", "/v1/orders/1042", harness.headers(same, key: otherKey), .notFound),
                    ("no such order", "/v1/orders/nope", harness.headers(same), .notFound),
                    ("an altered secret", "/v1/orders/1042", altered, .unauthorized),
                    ("no credential", "/v1/orders/1042", noCredential, .unauthorized),
                    ("an Accept without JSON (the generated server answers it)", "/v1/orders/1042",
                     harness.headers([.accept: "text/html", HTTPField.Name("X-Request-ID")!: "same"]), .badRequest),
                    ("a percent-encoded id (the generated server answers it)", "/v1/orders/10%342", harness.headers(same), .ok),
                ]
                for read in reads {
                    var headers = read.headers
                    headers[HTTPField.Name("X-Request-ID")!] = "same"
                    let mine = try await call(hand, .get, read.uri, headers: headers)
                    let theirs = try await call(machine, .get, read.uri, headers: headers)
                    #expect(mine.status == read.status && theirs.status == read.status, "\(read.what): \(mine.status) \(mine.body) / \(theirs.status)")
                    #expect(mine.headers[.contentType] == theirs.headers[.contentType], "\(read.what)")
                    #expect(try JSONValue(parsing: Array(mine.body.utf8)) == JSONValue(parsing: Array(theirs.body.utf8)),
                            "\(read.what):\n\(mine.body)\n\(theirs.body)")
                }

                // What each caller sees: the merchant every device, an app its own only.
                func devices(_ headers: HTTPFields) async throws -> [String] {
                    let read = try await call(hand, .get, "/v1/orders/1042", headers: headers)
                    return (try JSONValue(parsing: Array(read.body.utf8))["activities"]?.arrayValue ?? []).compactMap { $0["device"]?.stringValue }.sorted()
                }
                #expect(try await devices(harness.headers()) == ["phone", "tablet"])
                #expect(try await devices(apps["phone"]!) == ["phone"])
                #expect(try await devices(apps["tablet"]!) == ["tablet"])
                #expect(try await devices(harness.headers(key: secret)) == [])
                let phone = try JSONValue(parsing: Array(try await call(hand, .get, "/v1/orders/1042", headers: apps["phone"]!).body.utf8))
                #expect(phone["activities"]?[0]?["app_state"] == "stale" && phone["activities"]?[0]?["app_applied_at"] != nil, "\(phone)")
                #expect(phone["order"]?["state"] == "in_progress" && phone["order"]?["seq"] == 2 && phone["pending_updates"]?.intValue != nil, "\(phone)")
                let monza = try JSONValue(parsing: Array(try await call(hand, .get, "/v1/orders/monza", headers: harness.headers()).body.utf8))
                #expect(monza["order"]?["channel"]?["state"] != nil, "the broadcast order's channel is read: \(monza)")
            }
        }
    }
}

/// `POST /v1/orders` reads ordinary requests and writes their answers by hand (`HandRoutes`).
extension HTTPAPITests {
    @Test("an order created by hand answers as the generated server: made, replayed through the other, and every refusal")
    func createAnswersAsTheGeneratedServer() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        let engine = harness.fixture.engine
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("f1-race"), file: "f1-race.yaml")
        let byHand = Application(router: try OrderFlowHTTPServer.router(engine: engine, runsWorker: false, logger: Logger(label: "test")))
        let generated = Application(router: try OrderFlowHTTPServer.router(
            engine: engine, runsWorker: false, logger: Logger(label: "test"), hotRoutesByHand: false))
        let key = HTTPField.Name("Idempotency-Key")!, requestID = HTTPField.Name("X-Request-ID")!
        try await byHand.test(.router) { hand in
            try await generated.test(.router) { machine in
                // Each order is made through one server and replayed (same key, same body)
                // through the other, which answers with the order as made: equal bodies.
                let bodies = [
                    #"{"id": "c1", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "c1", "itemCount": 3}}"#,
                    #"{"workflow": "food-order", "workflow_version": 1, "id": "c2", "attributes": {"merchantName": "Ana", "orderNumber": "7", "itemCount": 1}, "input": {}}"#,
                    #"{"id": "monza", "workflow": "f1-race", "attributes": {"raceName": "Italian Grand Prix", "track": "Monza", "totalLaps": 53}}"#,
                ]
                for (index, body) in bodies.enumerated() {
                    let (first, second): (any TestClientProtocol, any TestClientProtocol) = index % 2 == 0 ? (hand, machine) : (machine, hand)
                    let headers = harness.headers([key: "create-\(index)"])
                    let made = try await call(first, .post, "/v1/orders", headers: headers, body: body)
                    let replayed = try await call(second, .post, "/v1/orders", headers: headers, body: body)
                    #expect(made.status == .created && replayed.status == .created, "\(index): \(made.body) / \(replayed.body)")
                    #expect(made.headers[.contentType] == replayed.headers[.contentType])
                    #expect(try JSONValue(parsing: Array(made.body.utf8)) == JSONValue(parsing: Array(replayed.body.utf8)), "\(index):\n\(made.body)\n\(replayed.body)")
                }
                let made = try JSONValue(parsing: Array(try await call(hand, .post, "/v1/orders", headers: harness.headers([key: "create-0"]), body: bodies[0]).body.utf8))
                #expect(made["client_secret"]?.stringValue == (try await engine.clientSecret(forOrder: "c1")))
                #expect(made["state"] == "received" && made["seq"] == 1 && made["attributes"]?["itemCount"] == 3, "\(made)")
                #expect(try await engine.order("monza").order.channel != nil, "the broadcast order made by hand has its channel")

                // Refusals: the same status and problem from both, and nothing made.
                var app = harness.headers([requestID: "same"], key: made["client_secret"]?.stringValue)
                app[key] = nil
                let refusals: [(String, HTTPFields, HTTPResponse.Status)] = [
                    (#"{"id": "r1", "workflow": "nope", "attributes": {}}"#, harness.headers([requestID: "same"]), .notFound),
                    (#"{"id": "r1", "workflow": "food-order", "attributes": {"merchantName": "x"}}"#, harness.headers([requestID: "same"]), .badRequest),
                    (#"{"id": "r1", "workflow": "food-order", "workflow_version": 99, "attributes": {}}"#, harness.headers([requestID: "same"]), .notFound),
                    (#"{"id": "has space", "workflow": "food-order", "attributes": {}}"#, harness.headers([requestID: "same"]), .badRequest),
                    (bodies[0], harness.headers([requestID: "same"]), .conflict),
                    (bodies[1], harness.headers([requestID: "same", key: "create-0"]), .conflict),
                    (#"{"id": "r1", "workflow": "food-order", "attributes": {"merchantName": "x", "orderNumber": "1", "itemCount": 1.5}}"#,
                     harness.headers([requestID: "same"]), .badRequest),
                    (#"{"id": "r1", "workflow": "food-order", "note": "x"}"#, harness.headers([requestID: "same"]), .badRequest),
                    (#"{"id": "r1", "workflow": "food-order", "attributes": {"merchantName": "x", "orderNumber": "1", "itemCount": 1}}"#, app, .forbidden),
                ]
                for (body, headers, status) in refusals {
                    let mine = try await call(hand, .post, "/v1/orders", headers: headers, body: body)
                    let theirs = try await call(machine, .post, "/v1/orders", headers: headers, body: body)
                    #expect(mine.status == status && theirs.status == status, "\(body): \(mine.status) \(mine.body) / \(theirs.status) \(theirs.body)")
                    #expect(try JSONValue(parsing: Array(mine.body.utf8)) == JSONValue(parsing: Array(theirs.body.utf8)), "\(mine.body)\n\(theirs.body)")
                }
                await #expect { try await engine.order("r1") } throws: { ($0 as? OrderFlowError)?.code == .notFound }
            }
        }
    }
}
