import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

@testable import OrderFlowHTTP

/// The advance route reads ordinary requests and writes their answers by hand (`HandRoutes`);
/// everything else goes to the generated server. These tests hold the two to the same answers.
extension HTTPAPITests {
    @Test("the advance route's own answers equal the generated server's, member for member, full and minimal")
    func advanceRouteAnswersAsTheGeneratedServer() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("f1-race"), file: "f1-race.yaml")
        let byHand = Application(router: try OrderFlowHTTPServer.router(engine: harness.fixture.engine, runsWorker: false, logger: Logger(label: "test")))
        let generated = Application(router: try OrderFlowHTTPServer.router(
            engine: harness.fixture.engine, runsWorker: false, logger: Logger(label: "test"), hotRoutesByHand: false))
        let key = HTTPField.Name("Idempotency-Key")!, prefer = HTTPField.Name("Prefer")!
        // Every step is made through one server and replayed (same key, same body) through the
        // other: a replay answers with the first result, so the two bodies must be equal but for
        // `replayed`. The servers take turns at going first.
        let steps: [(order: String, body: String)] = [
            ("1042", #"{"event": "accept", "input": {"eta": "+20m"}}"#),
            ("1042", #"{"to": "ready", "expected_state": "in_progress"}"#),
            ("1042", #"{"event": "dispatch", "input": {"eta": "+15m", "driver": "Sam"}}"#),
            ("1042", #"{"event": "deliver"}"#),
            ("monza", #"{"event": "lights_out", "input": {"first": {"name": "Lando Norris", "code": "NOR", "number": 4, "constructor": "McLaren"}, "second": {"name": "Max Verstappen", "code": "VER", "number": 1, "constructor": "Red Bull"}, "third": {"name": "Charles Leclerc", "code": "LEC", "number": 16, "constructor": "Ferrari"}}}"#),
            ("monza", #"{"event": "safety_car"}"#),
        ]
        try await byHand.test(.router) { hand in
            try await generated.test(.router) { machine in
                for (id, body) in [("1042", #"{"id": "1042", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 3}}"#),
                                   ("monza", #"{"id": "monza", "workflow": "f1-race", "attributes": {"raceName": "Italian Grand Prix", "track": "Monza", "totalLaps": 53}}"#)] {
                    let created = try await call(hand, .post, "/v1/orders", headers: harness.headers(), body: body)
                    #expect(created.status == .created, "\(id): \(created.body)")
                }
                for (index, step) in steps.enumerated() {
                    let (first, second): (any TestClientProtocol, any TestClientProtocol) = index % 2 == 0 ? (hand, machine) : (machine, hand)
                    let headers = harness.headers([key: "step-\(index)"])
                    let made = try await call(first, .post, "/v1/orders/\(step.order)/advance", headers: headers, body: step.body)
                    let replayed = try await call(second, .post, "/v1/orders/\(step.order)/advance", headers: headers, body: step.body)
                    #expect(made.status == .ok && replayed.status == .ok, "step \(index): \(made.body) / \(replayed.body)")
                    #expect(made.headers[.contentType] == replayed.headers[.contentType])
                    var madeJSON = try JSONValue(parsing: Array(made.body.utf8)), replayedJSON = try JSONValue(parsing: Array(replayed.body.utf8))
                    #expect(madeJSON["replayed"] == .bool(false) && replayedJSON["replayed"] == .bool(true))
                    madeJSON = Self.withoutReplayed(madeJSON)
                    replayedJSON = Self.withoutReplayed(replayedJSON)
                    #expect(Self.numbersAsDoubles(madeJSON) == Self.numbersAsDoubles(replayedJSON),
                            "step \(index) (\(index % 2 == 0 ? "by hand first" : "generated first")):\n\(made.body)\n\(replayed.body)")
                    #expect(madeJSON["transition"]?["aps"]?["event"] != nil, "the answer carries the pushed payload: \(made.body)")
                }
                // The broadcast order's channel is in the answers too.
                let race = try await call(hand, .post, "/v1/orders/monza/advance", headers: harness.headers(), body: #"{"event": "green_flag"}"#)
                #expect(try JSONValue(parsing: Array(race.body.utf8))["order"]?["channel"]?["state"] == .string("pending"), "\(race.body)")

                // Minimal answers: the same headers from both.
                let body = #"{"id": "7", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "7", "itemCount": 1}}"#
                #expect(try await call(hand, .post, "/v1/orders", headers: harness.headers(), body: body).status == .created)
                let minimal = harness.headers([key: "m-1", prefer: "return=minimal"])
                let made = try await call(hand, .post, "/v1/orders/7/advance", headers: minimal, body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
                let replayed = try await call(machine, .post, "/v1/orders/7/advance", headers: minimal, body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
                #expect(made.status == .noContent && replayed.status == .noContent && made.body.isEmpty)
                for name in ["OrderFlow-State", "OrderFlow-Seq", "Preference-Applied"] {
                    #expect(made.headers[HTTPField.Name(name)!] == replayed.headers[HTTPField.Name(name)!] && made.headers[HTTPField.Name(name)!] != nil, "\(name)")
                }
                #expect(made.headers[HTTPField.Name("OrderFlow-Replayed")!] == "false" && replayed.headers[HTTPField.Name("OrderFlow-Replayed")!] == "true")

                // Refusals: the same status, code and sentence from both.
                let refusals: [(String, String)] = [
                    ("/v1/orders/7/advance", #"{"to": "delivered"}"#),
                    ("/v1/orders/7/advance", #"{"to": "ready", "expected_state": "received"}"#),
                    ("/v1/orders/7/advance", #"{"to": "ready", "expected_state": "nowhere"}"#),
                    ("/v1/orders/nope/advance", #"{"to": "ready"}"#),
                    ("/v1/orders/7/advance", #"{"event": "dispatch", "input": {"eta": 12}}"#),
                ]
                for (path, body) in refusals {
                    let mine = try await call(hand, .post, path, headers: harness.headers([HTTPField.Name("X-Request-ID")!: "same"]), body: body)
                    let theirs = try await call(machine, .post, path, headers: harness.headers([HTTPField.Name("X-Request-ID")!: "same"]), body: body)
                    #expect(mine.status == theirs.status && mine.status.code >= 400, "\(path) \(body): \(mine.status) / \(theirs.status)")
                    #expect(try JSONValue(parsing: Array(mine.body.utf8)) == JSONValue(parsing: Array(theirs.body.utf8)), "\(mine.body)\n\(theirs.body)")
                }
            }
        }
    }

    @Test("only ordinary advance requests are read by hand; the rest go to the generated server, which says what is wrong")
    func ordinaryAdvanceRequests() async throws {
        func ordinary(_ body: String, headers extra: HTTPFields = [:], id: String = "1042") async throws -> OrdinaryAdvance? {
            var fields = extra
            if fields[.contentType] == nil { fields[.contentType] = "application/json" }
            var request = Request(
                head: HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/v1/orders/\(id)/advance", headerFields: fields),
                body: RequestBody(buffer: ByteBuffer(string: body)))
            return try await OrdinaryAdvance(request: &request, orderID: id)
        }
        let plain = try #require(try await ordinary(#"{"event": "accept", "input": {"eta": "+20m", "n": 3, "x": [true, null, {"k": "v"}]}}"#))
        #expect(plain.target == "accept" && plain.input == ["eta": "+20m", "n": 3, "x": [true, nil, ["k": "v"]]] && !plain.minimal)
        let keyed = try #require(try await ordinary(#"{"to":"ready","expected_state":"in_progress"}"#, headers: [
            HTTPField.Name("Idempotency-Key")!: "0b9c-42:a_b.c~d", HTTPField.Name("Prefer")!: "return=minimal", .accept: "application/json",
        ]))
        #expect(keyed.target == "ready" && keyed.expectedState == "in_progress" && keyed.idempotencyKey == "0b9c-42:a_b.c~d" && keyed.minimal)
        #expect(try await ordinary(#"{"to": "ready"}"#, headers: [.contentType: "Application/JSON; charset=UTF-8"]) != nil)
        #expect(try await ordinary(#"{"to": "ready"}"#, headers: [.accept: "application/json, text/plain, */*"]) != nil)
        #expect(try await ordinary(#"{"to": "ready"}"#, headers: [.accept: "text/html, application/*;q=0.5"]) != nil)

        // Each of these goes to the generated server.
        let others: [(String, HTTPFields, String)] = [
            (#"{"to": "re\u0061dy"}"#, [:], "an escape"),
            (#"{"to": "ready", "event": "accept"}"#, [:], "both"),
            (#"{"input": {}}"#, [:], "neither"),
            (#"{"to": null}"#, [:], "a null"),
            (#"{"to": 3}"#, [:], "a wrong kind"),
            (#"{"to": "ready", "note": "x"}"#, [:], "an unknown member"),
            (#"{"to": "ready", "input": {"eta": 1.5}}"#, [:], "a fraction"),
            (#"{"to": "ready", "input": {"n": 1e2}}"#, [:], "an exponent"),
            (#"{"to": "ready", "input": []}"#, [:], "input not an object"),
            (#"{"to": "ready", "to": "in_progress"}"#, [:], "a name twice"),
            (#"{"to": "ready", "input": {"eta": "+5m", "eta": "+6m"}}"#, [:], "an input's name twice"),
            (#"["ready"]"#, [:], "not an object"),
            (#"{"to": "ready""#, [:], "malformed"),
            ("", [:], "empty"),
            (#"{"to": "ready"}"#, [.contentType: "text/plain"], "another content type"),
            (#"{"to": "ready"}"#, [.accept: "text/html"], "another answer type"),
            (#"{"to": "ready"}"#, [.accept: ";q=1, application/json"], "a malformed media range first"),
            (#"{"to": "ready"}"#, [HTTPField.Name("Idempotency-Key")!: "a%20b"], "a percent-encoded key"),
            (#"{"to": "ready"}"#, [HTTPField.Name("Idempotency-Key")!: "a b"], "a key with a space"),
            (#"{"to": "ready"}"#, [HTTPField.Name("Prefer")!: "return=minimal%2C"], "a percent-encoded preference"),
        ]
        for (body, headers, what) in others {
            #expect(try await ordinary(body, headers: headers) == nil, "\(what): \(body)")
        }
        #expect(try await ordinary(#"{"to": "ready"}"#, id: "a%2Fb") == nil, "a percent-encoded id")
        // Creates likewise: a name given twice is read by the generated server (its decoder
        // keeps the first value, the engine's parser would keep the last).
        func ordinaryCreate(_ body: String) async throws -> OrdinaryCreate? {
            var request = Request(
                head: HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/v1/orders",
                                  headerFields: [.contentType: "application/json"]),
                body: RequestBody(buffer: ByteBuffer(string: body)))
            return try await OrdinaryCreate(request: &request)
        }
        let create = try #require(try await ordinaryCreate(#"{"id": "d1", "workflow": "food-order", "attributes": {"itemCount": 2}}"#))
        #expect(create.order.orderID == "d1" && create.order.workflow == "food-order" && create.order.attributes == ["itemCount": 2])
        #expect(try await ordinaryCreate(#"{"id": "d1", "id": "d2", "workflow": "food-order"}"#) == nil)
        #expect(try await ordinaryCreate(#"{"id": "d1", "workflow": "food-order", "attributes": {"n": 1, "n": 2}}"#) == nil)
        #expect(try await ordinaryCreate(#"{"workflow": "food-order"}"#) == nil, "no id")

        // And the generated server answers them as before.
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let body = #"{"id": "1042", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 3}}"#
            #expect(try await call(client, .post, "/v1/orders", headers: harness.headers(), body: body).status == .created)
            let escaped = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(), body: #"{"event": "\u0061ccept", "input": {"eta": "+20m"}}"#)
            #expect(escaped.status == .ok && (escaped.json["order"] as? [String: Any])?["state"] as? String == "in_progress", "\(escaped.body)")
            let both = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(), body: #"{"to": "ready", "event": "accept"}"#)
            expectProblem(both, .badRequest, code: "invalidInput", containing: "not both")
            let unknown = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(), body: #"{"to": "ready", "note": "x"}"#)
            expectProblem(unknown, .badRequest, code: "invalidInput")
            var textPlain = harness.headers()
            textPlain[.contentType] = "text/plain"
            let wrongType = try await call(client, .post, "/v1/orders/1042/advance", headers: textPlain, body: #"{"to": "ready"}"#)
            #expect(wrongType.status.code >= 400 && wrongType.status.code < 500, "\(wrongType.status) \(wrongType.body)")
            // The contract's objects are refused in any other shape, naming the member.
            for input in [#""eta=+5m""#, "[1]", "3", "true"] {
                let notObject = try await call(client, .post, "/v1/orders/1042/advance", headers: harness.headers(), body: #"{"to": "ready", "input": \#(input)}"#)
                expectProblem(notObject, .badRequest, code: "invalidInput", containing: "`input` must be a JSON object")
            }
            for attributes in [#""Luigi's""#, #"["merchantName", "x"]"#] {
                let created = try await call(client, .post, "/v1/orders", headers: harness.headers(),
                                             body: #"{"id": "1043", "workflow": "food-order", "attributes": \#(attributes)}"#)
                expectProblem(created, .badRequest, code: "invalidInput", containing: "`attributes` must be a JSON object")
            }
            let list = try await call(client, .get, "/v1/orders/1043", headers: harness.headers(), body: nil)
            #expect(list.status == .notFound, "no order was made of a refused one: \(list.status) \(list.body)")
            #expect(try await harness.fixture.engine.order("1042").order.state == "in_progress", "nothing refused moved the order")
        }
    }

    @Test("a client that accepts only application/json still gets the real error as a problem, on every route")
    func problemsWhateverTheAccept() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        for byHand in [true, false] {
            let application = Application(router: try OrderFlowHTTPServer.router(
                engine: harness.fixture.engine, runsWorker: false, logger: Logger(label: "test"), hotRoutesByHand: byHand))
            try await application.test(.router) { client in
                let id = byHand ? "a-1" : "a-2"
                let body = #"{"id": "\#(id)", "workflow": "food-order", "attributes": {"merchantName": "Luigi's", "orderNumber": "1", "itemCount": 1}}"#
                var json = harness.headers()
                json[.accept] = "application/json"
                #expect(try await call(client, .post, "/v1/orders", headers: json, body: body).status == .created)
                expectProblem(try await call(client, .post, "/v1/orders/\(id)/advance", headers: json, body: #"{"to": "delivered"}"#),
                              .unprocessableContent, code: "invalidTransition")
                expectProblem(try await call(client, .get, "/v1/orders/nope", headers: json), .notFound, code: "notFound")
                json[.accept] = "application/json;q=0.9, text/plain"
                expectProblem(try await call(client, .get, "/v1/orders/nope", headers: json), .notFound, code: "notFound")
                let moved = try await call(client, .post, "/v1/orders/\(id)/advance", headers: json, body: #"{"event": "accept", "input": {"eta": "+20m"}}"#)
                #expect(moved.status == .ok && moved.headers[.contentType]?.hasPrefix("application/json") == true, "\(moved.body)")
            }
        }
        #expect(ProblemsAcceptable<BasicRequestContext>.acceptsProblems("text/html, */*;q=0.1"))
        #expect(!ProblemsAcceptable<BasicRequestContext>.acceptsProblems("application/json"))
    }

    static func withoutReplayed(_ value: JSONValue) -> JSONValue {
        guard case .object(var members) = value else { return value }
        members["replayed"] = nil
        return .object(members)
    }

    /// Numbers compared by value: Foundation writes a whole double as `5`, the route as `5.0`.
    static func numbersAsDoubles(_ value: JSONValue) -> JSONValue {
        switch value {
        case .int(let int): .double(Double(int))
        case .array(let values): .array(values.map(numbersAsDoubles))
        case .object(let members): .object(members.mapValues(numbersAsDoubles))
        case .null, .bool, .double, .string: value
        }
    }
}
