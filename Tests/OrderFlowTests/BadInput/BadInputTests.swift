import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// Bad input through the public engine API: every case must be refused with a specific error
/// a person can act on (what is wrong, what to do), and leave every stored row as it was.
/// Hostile text that is legitimate (quotes, emoji, SQL fragments in a driver's name) must be
/// stored and rendered back exactly. Prints one summary line for RELIABILITY.md.
@Suite("Bad input: refused clearly, stored data unchanged")
struct BadInputTests {
    @Test func everyBadInputIsRefusedAndChangesNothing() async throws {
        let fixture = try await EngineFixture.make()
        _ = try await fixture.engine.applyWorkflow(yaml: BadInput.probeWorkflow, file: "probe.yaml")
        let check = BadInputChecker(engine: fixture.engine)
        try await BadInput.unknownNames(check, fixture)
        try await BadInput.hostileIdentifiers(check, fixture)
        try await BadInput.hostileTextIsStoredExactly(check, fixture)
        try await BadInput.attributeAndInputValues(check, fixture)
        try await BadInput.etas(check, fixture)
        try await BadInput.pushTokens(check, fixture)
        try await BadInput.payloadSize(check, fixture)
        try await BadInput.stillWorks(check, fixture)
        print(check.summary)
        #expect(check.failures == 0, "\(check.failures) bad-input cases misbehaved; see the issues above")
        await fixture.shutdown()
    }
}

// MARK: - The cases

enum BadInput {
    /// Text that is hostile to naive code but legitimate: it must be stored and shown exactly.
    static let hostile: [String] = [
        #"O'Brien "Bob""#,
        #"back\slash \\ \n \u0000 \"#,
        "'); DROP TABLE orders; --",
        "$1 $2 %s %n %x {{attributes.orderNumber}}",
        "🍕👨‍👩‍👧‍👦🇮🇹 Pizza",
        "e\u{301}\u{302} Zoë Ångström",
        "مرحبا \u{202E}abc\u{202C} שלום",
        "zero\u{200B}width\u{FEFF}",
        "\u{2067}שלום 42\u{2069} and \u{202B}\u{202D}nested\u{202C}\u{202C}",
    ]

    /// Ids, names and keys at the edges of the id policy (ASCII letters, digits, `-_.:@#/+=~`,
    /// 1 to 200 characters): accepted and stored exactly.
    static let legitimateIdentifiers: [String] = [
        "1042",
        "iphone-anna",
        "pos:1042",
        "shop/1042#2",
        "anna@shop.example",
        "a+b=c~d_e.f",
        "9B2F6C1E-5D7A-4E2B-8F0C-3A1D2E4F5A6B",
        "dGhpcyBpcyBiYXNlNjQ+Lw==",
        String(repeating: "z", count: 200),
    ]

    /// One grapheme: `e` with 300 combining marks (301 code points, 601 bytes).
    static let zalgoCharacter = "e" + String(repeating: "\u{301}", count: 300)

    static let foodAttributes: JSONValue = ["merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 3]

    static func foodOrder(_ id: String, attributes: JSONValue = foodAttributes, input: JSONValue = [:], key: String? = nil,
                          actor: String? = nil, workflow: String = "food-order") -> NewOrder
    {
        NewOrder(orderID: id, workflow: workflow, attributes: attributes, input: input, idempotencyKey: key, actor: actor)
    }

    static func attributes(merchant: String) -> JSONValue {
        ["merchantName": .string(merchant), "orderNumber": "77", "itemCount": 2]
    }

    /// A small workflow with number, date and free-length text fields, started by push.
    static let probeWorkflow = """
        name: probe
        activity:
          attributes-type: ProbeAttributes
          attributes:
            label: string(40)
            weight: double
            since: date?
          content-state:
            status: enum(open, done)
            note: string?
            score: double?
        lifecycle:
          start: push-to-start
          start-alert:
            title: "{{attributes.label}}"
            body: "Opened"
        states:
          open:
            initial: true
            content: {status: open}
          done:
            final: true
            content:
              status: done
              note: "{{input.note}}"
              score: "{{input.score}}"
        transitions:
          - from: open
            to: done
            input: {note: string?, score: double?}
        """

    // MARK: Unknown orders, workflows, states, events

    static func unknownNames(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        let category = "unknown order/workflow/state/event"
        _ = try await engine.createOrder(foodOrder("u1"))
        try await check.refuses("advance an unknown order", category: category, .notFound, mentioning: ["order nope does not exist"]) {
            _ = try await engine.advance("nope", to: "ready")
        }
        try await check.refuses("unknown state or event", category: category, .notFound,
                                mentioning: ["no state or event \"teleport\"", "in_progress", "dispatch"]) {
            _ = try await engine.advance("u1", to: "teleport")
        }
        // Refused by the id policy before the workflow is asked (it was `notFound` before the policy).
        try await check.refuses("SQL as the state name", category: "ids, names and keys", .invalidInput,
                                mentioning: ["the state or event name", "has `'` (U+0027)", "ASCII letters, digits"]) {
            _ = try await engine.advance("u1", to: "'); DROP TABLE orders; --")
        }
        try await check.refuses("a state not allowed from here", category: category, .invalidTransition, mentioning: ["in_progress"]) {
            _ = try await engine.advance("u1", to: "delivered")
        }
        try await check.refuses("no target at all", category: category, .invalidTransition, mentioning: ["no target given", "in_progress"]) {
            _ = try await engine.advance("u1", to: "  ")
        }
        try await check.refuses("unknown workflow", category: category, .notFound, mentioning: ["workflow \"pizza\" does not exist", "food-order", "ride"]) {
            _ = try await engine.createOrder(foodOrder("u2", workflow: "pizza"))
        }
        try await check.refuses("unknown workflow version", category: category, .notFound, mentioning: ["version 99", "food-order"]) {
            _ = try await engine.createOrder(NewOrder(orderID: "u2", workflow: "food-order", workflowVersion: 99, attributes: foodAttributes))
        }
        try await check.refuses("workflow version 0", category: category, .invalidInput, mentioning: ["version 0", "from 1"]) {
            _ = try await engine.createOrder(NewOrder(orderID: "u2", workflow: "food-order", workflowVersion: 0, attributes: foodAttributes))
        }
        try await check.refuses("expected state that does not exist", category: category, .invalidInput,
                                mentioning: ["\"reddy\" is not a state", "ready", "received"]) {
            _ = try await engine.advance("u1", to: "accept", expectedState: "reddy")
        }
        try await check.refuses("follow an unknown order", category: category, .notFound, mentioning: ["order ghost does not exist"]) {
            try await engine.follow(orderID: "ghost", deviceID: "phone")
        }
        try await check.refuses("activity token for an unknown order", category: category, .notFound, mentioning: ["order ghost does not exist"]) {
            try await engine.registerActivityToken(orderID: "ghost", deviceID: "phone", token: EngineFixture.token(1))
        }
        try await check.refuses("unfollow by a device that never followed", category: category, .notFound, mentioning: ["does not follow order u1"]) {
            try await engine.unfollow(orderID: "u1", deviceID: "stranger")
        }
        try await check.refuses("unknown attributes type", category: category, .notFound,
                                mentioning: ["FoodOrderAttribute\"", "known types: FoodOrderAttributes, ProbeAttributes, RideAttributes"]) {
            try await engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttribute", token: EngineFixture.token(2))
        }
        try await check.refuses("attributes type in the wrong case", category: category, .notFound, mentioning: ["did you mean FoodOrderAttributes"]) {
            try await engine.registerPushToStartToken(deviceID: "phone", attributesType: "foodorderattributes", token: EngineFixture.token(2))
        }
        try await check.refuses("misspelt attribute", category: category, .invalidInput, mentioning: ["merchantNam", "did you mean `merchantName`"]) {
            _ = try await engine.createOrder(foodOrder("u3", attributes: ["merchantNam": "x", "orderNumber": "1", "itemCount": 1]))
        }
        try await check.refuses("misspelt input", category: category, .invalidInput, mentioning: ["etaa", "did you mean `eta`"]) {
            _ = try await engine.advance("u1", to: "accept", input: ["etaa": "+5m"])
        }
        try await check.refuses("read an unknown order", category: category, .notFound, mentioning: ["order missing does not exist"]) {
            _ = try await engine.history("missing")
        }
        // An idempotency key names one change: used for another, it is refused, not replayed.
        _ = try await engine.createOrder(foodOrder("k1", key: "create-k1"))
        try await check.refuses("the creation's key for an advance", category: "idempotency key reused", .conflict,
                                mentioning: ["create-k1", "already used", "its creation", "use a new key"]) {
            _ = try await engine.advance("k1", to: "accept", idempotencyKey: "create-k1")
        }
        _ = try await engine.advance("k1", to: "accept", idempotencyKey: "k1-accept")
        try await check.refuses("an advance's key for another target", category: "idempotency key reused", .conflict,
                                mentioning: ["k1-accept", "received -> in_progress", "not for a move to ready"]) {
            _ = try await engine.advance("k1", to: "ready", idempotencyKey: "k1-accept")
        }
        await check.accepts("a retry with the key of the same change, after the order moved on") {
            _ = try await engine.advance("k1", to: "ready")
            let retried = try await engine.advance("k1", to: "ACC", idempotencyKey: "k1-accept")
            try require("replayed", retried.replayed, equals: true)
            try require("replayed step", retried.transition.to, equals: "in_progress")
        }
        _ = try await engine.cancel("u1")
        try await check.refuses("advance a finished order", category: category, .invalidTransition, mentioning: ["final state", "nothing can follow"]) {
            _ = try await engine.advance("u1", to: "ready")
        }
        try await check.refuses("cancel a finished order", category: category, .invalidTransition, mentioning: ["final state"]) {
            _ = try await engine.cancel("u1", reason: "again")
        }
    }

    // MARK: Ids, names and keys

    static func hostileIdentifiers(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        let category = "ids, names and keys"
        _ = try await engine.createOrder(foodOrder("h1"))
        try await engine.follow(orderID: "h1", deviceID: "phone")
        let bad: [(label: String, value: String, fragments: [String])] = [
            ("NUL", "ab\u{0}cd", ["NUL", "remove it"]),
            ("only NUL", "\u{0}", ["NUL"]),
            ("line break", "ab\ncd", ["control character U+000A"]),
            ("escape sequence", "\u{1B}[31mred", ["control character U+001B"]),
            ("201 characters", String(repeating: "x", count: 201), ["201 characters", "at most 200"]),
            ("1 MB", String(repeating: "y", count: 1_000_000), ["1000000 characters", "at most 200"]),
            ("one character of 301 code points", zalgoCharacter, ["301 characters", "at most 200"]),
            ("a control character", "ab\u{1}cd", ["control character U+0001", "ab\\u{1}cd"]),
        ]
        // Printable, but outside the id policy (ASCII letters, digits and `-_.:@#/+=~`).
        let outsidePolicy: [(label: String, value: String, fragments: [String])] = [
            ("SQL", "'); DROP TABLE orders; --", ["\"'); DROP TABLE orders; --\"", "has `'` (U+0027) at position 1", "ASCII letters, digits"]),
            ("emoji", "🍕🍕🍕", ["U+1F355 at position 1", "ASCII letters"]),
            ("right-to-left override", "ab\u{202E}cd", ["ab\\u{202E}cd", "U+202E at position 3"]),
            ("a space", "a b", ["` ` (U+0020) at position 2"]),
            ("a letter outside ASCII", "Zoë", ["U+00EB at position 3"]),
        ]
        let empty = (label: "empty", value: "", fragments: ["is empty"])
        // Each field that takes an id, a name or a key.
        typealias Field = (name: String, what: String, call: (String) async throws -> Void)
        let fields: [Field] = [
            ("order id (create)", "order id", { _ = try await engine.createOrder(foodOrder($0)) }),
            ("order id (advance)", "order id", { _ = try await engine.advance($0, to: "accept") }),
            ("order id (read)", "order id", { _ = try await engine.order($0) }),
            ("order id (follow)", "order id", { try await engine.follow(orderID: $0, deviceID: "phone") }),
            ("order id (unfollow)", "order id", { try await engine.unfollow(orderID: $0, deviceID: "phone") }),
            ("workflow name", "workflow name", { _ = try await engine.createOrder(foodOrder("h2", workflow: $0)) }),
            ("state or event name", "state or event name", { _ = try await engine.advance("h1", to: $0) }),
            ("idempotency key (create)", "idempotency key", { _ = try await engine.createOrder(foodOrder("h3", key: $0)) }),
            ("idempotency key (advance)", "idempotency key", { _ = try await engine.advance("h1", to: "accept", idempotencyKey: $0) }),
            ("expected state", "expected state", { _ = try await engine.advance("h1", to: "accept", expectedState: $0) }),
            ("actor (create)", "actor", { _ = try await engine.createOrder(foodOrder("h4", actor: $0)) }),
            ("actor (advance)", "actor", { _ = try await engine.advance("h1", to: "accept", actor: $0) }),
            ("device id (follow)", "device id", { try await engine.follow(orderID: "h1", deviceID: $0) }),
            ("device id (activity token)", "device id", {
                try await engine.registerActivityToken(orderID: "h1", deviceID: $0, token: EngineFixture.token(3))
            }),
            ("device id (push-to-start)", "device id", {
                try await engine.registerPushToStartToken(deviceID: $0, attributesType: "FoodOrderAttributes", token: EngineFixture.token(4))
            }),
            ("device id (device token)", "device id", { try await engine.registerDeviceToken(deviceID: $0, token: EngineFixture.token(5, length: 64)) }),
            ("device id (unfollow)", "device id", { try await engine.unfollow(orderID: "h1", deviceID: $0) }),
            ("attributes type", "attributes type", {
                try await engine.registerPushToStartToken(deviceID: "phone", attributesType: $0, token: EngineFixture.token(6))
            }),
            ("list filter: state", "state name", { _ = try await engine.orders(OrderQuery(state: $0)) }),
            ("list filter: workflow", "workflow name", { _ = try await engine.orders(OrderQuery(workflow: $0)) }),
            ("list cursor", "page cursor", { _ = try await engine.orders(OrderQuery(after: $0)) }),
        ]
        for field in fields {
            var cases = bad
            // An empty state or event name lists the choices instead (see unknownNames).
            if field.what != "state or event name" { cases.append(empty) }
            // A cursor is an order id the engine handed out, maybe one stored before the policy:
            // only what the database could not hold is refused there.
            if field.what != "page cursor" { cases += outsidePolicy }
            for value in cases {
                try await check.refuses("\(field.name): \(value.label)", category: category, .invalidInput,
                                        mentioning: ["the \(field.what)"] + value.fragments) {
                    try await field.call(value.value)
                }
            }
        }
    }

    // MARK: Hostile but legitimate text

    static func hostileTextIsStoredExactly(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        for (index, text) in legitimateIdentifiers.enumerated() {
            await check.accepts("order id, idempotency key, actor, device id \(index): \(text.prefix(40))") {
                let created = try await engine.createOrder(foodOrder(text, attributes: attributes(merchant: "M\(index)"), key: text, actor: text))
                try require("order id", created.orderID, equals: text)
                let again = try await engine.createOrder(foodOrder(text, attributes: attributes(merchant: "M\(index)"), key: text, actor: text))
                try require("creation retried with the same key", again, equals: created)
                let stored = try await engine.pool.query(PostgresQuery(
                    "SELECT order_id, creation_key FROM orders WHERE order_id = $1", text)).single()
                try require("stored order id", try stored.decode("order_id", as: String.self), equals: text)
                try require("stored creation key", try stored.decode("creation_key", as: String.self), equals: text)
                let key = "accept:" + text.prefix(190)
                let advanced = try await engine.advance(text, to: "accept", idempotencyKey: key, actor: text)
                let replayed = try await engine.advance(text, to: "accept", idempotencyKey: key, actor: text)
                try require("replayed with the same key", replayed.replayed, equals: true)
                try require("replay's seq", replayed.transition.seq, equals: advanced.transition.seq)
                try await engine.follow(orderID: text, deviceID: text)
                try await engine.registerActivityToken(orderID: text, deviceID: text, token: EngineFixture.token(100 + index))
                let details = try await engine.order(text)
                try require("device ids", details.activities.map(\.deviceID), equals: [text])
                let history = try await engine.history(text)
                try require("actors", history.transitions.map(\.actor), equals: [text, text])
                try require("idempotency keys", history.transitions.map(\.idempotencyKey), equals: [text, key])
                try await engine.unfollow(orderID: text, deviceID: text)
            }
        }
        for (index, text) in hostile.enumerated() {
            await check.accepts("attribute, input and reason \(index): \(text)") {
                let id = "text-\(index)"
                let merchant = String(text.prefix(40))
                let created = try await engine.createOrder(foodOrder(id, attributes: attributes(merchant: merchant)))
                try require("attribute", created.attributes["merchantName"], equals: .string(merchant))
                try require("rendered message", created.content["message"], equals: .string("\(merchant) received your order."))
                let raw = try await engine.pool.query(PostgresQuery(
                    "SELECT attributes->>'merchantName' AS merchant, content->>'message' AS message FROM orders WHERE order_id = $1", id)).single()
                try require("stored attribute", try raw.decode("merchant", as: String.self), equals: merchant)
                try require("stored message", try raw.decode("message", as: String.self), equals: "\(merchant) received your order.")
                _ = try await engine.advance(id, to: "accept")
                _ = try await engine.advance(id, to: "ready")
                let driver = String(text.prefix(40))
                let dispatched = try await engine.advance(id, to: "dispatch", input: ["eta": "+15m", "driver": .string(driver)])
                try require("driver name", dispatched.order.content["driverName"], equals: .string(driver))
                try require("message", dispatched.order.content["message"], equals: .string("\(driver) is on the way."))
                try require("alert body", dispatched.transition.rendered.alert?.body, equals: .plain("\(driver) is bringing your order."))
                try require("stored input", dispatched.transition.input["driver"], equals: .string(driver))
                let history = try await engine.history(id)
                try require("history's rendering", history.transitions.last?.rendered.content["driverName"], equals: .string(driver))
                let reason = String(text.prefix(70))
                let cancelled = try await engine.cancel(id, reason: reason)
                try require("reason shown", cancelled.order.content["message"], equals: .string("Cancelled: \(reason)"))
            }
        }
        // The SQL fragments were data: every table is still there and holds the rows.
        let tables = try await engine.pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('orders', 'order_transitions', 'activity_commands')"
        )).single().decode("n", as: Int.self)
        #expect(tables == 3)
        let order = try await engine.order("text-2")
        #expect(order.order.attributes["merchantName"] == "'); DROP TABLE orders; --")
    }

    // MARK: Attribute and input values

    static func attributeAndInputValues(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        let category = "attribute and input values"
        _ = try await engine.createOrder(foodOrder("v1"))
        _ = try await engine.advance("v1", to: "accept")
        _ = try await engine.advance("v1", to: "ready")
        _ = try await engine.createOrder(NewOrder(orderID: "v3", workflow: "probe", attributes: ["label": "p", "weight": 1]))
        let bigGraphemes = String(repeating: "a" + String(repeating: "\u{301}", count: 120), count: 40)  // 40 characters, 9,640 bytes
        let cases: [(String, [String], () async throws -> Void)] = [
            ("NUL in an attribute", ["merchantName", "NUL", "remove it"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: attributes(merchant: "Lu\u{0}igi")))
            }),
            ("NUL in the driver's name", ["driver", "NUL"], {
                _ = try await engine.advance("v1", to: "dispatch", input: ["eta": "+5m", "driver": "Sa\u{0}m"])
            }),
            ("NUL in a cancel reason", ["reason", "NUL"], { _ = try await engine.cancel("v1", reason: "closed\u{0}") }),
            ("NUL in the key of an attribute", ["unknown field", "\\u{0}"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: ["merchantName": "x", "orderNumber": "1", "itemCount": 1, "a\u{0}b": "x"]))
            }),
            ("41 characters for string(40)", ["merchantName", "at most 40 characters", "got 41"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: attributes(merchant: String(repeating: "m", count: 41))))
            }),
            ("40 characters of 9,640 bytes", ["merchantName", "9640 bytes", "shorten it"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: attributes(merchant: bigGraphemes)))
            }),
            ("a 1 MB driver name", ["driver", "1000000 bytes"], {
                _ = try await engine.advance("v1", to: "dispatch", input: ["eta": "+5m", "driver": .string(String(repeating: "d", count: 1_000_000))])
            }),
            ("itemCount as text", ["itemCount", "whole number"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: ["merchantName": "x", "orderNumber": "1", "itemCount": "three"]))
            }),
            ("itemCount 1.5", ["itemCount", "whole number"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: ["merchantName": "x", "orderNumber": "1", "itemCount": 1.5]))
            }),
            ("itemCount 1e30", ["itemCount", "whole number"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: ["merchantName": "x", "orderNumber": "1", "itemCount": 1e30]))
            }),
            ("a required attribute missing", ["orderNumber", "required"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: ["merchantName": "x", "itemCount": 1]))
            }),
            ("attributes as an array", ["expected a JSON object"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: ["merchantName", "x"]))
            }),
            ("10,000 unknown attributes", ["unknown field", "and 9995 more"], {
                var object: [String: JSONValue] = ["merchantName": "x", "orderNumber": "1", "itemCount": 1]
                for index in 0..<10_000 { object["extra\(index)"] = .string(String(repeating: "z", count: 100)) }
                _ = try await engine.createOrder(foodOrder("v2", attributes: .object(object)))
            }),
            ("driver as a number", ["driver", "expected a string"], {
                _ = try await engine.advance("v1", to: "dispatch", input: ["eta": "+5m", "driver": 42])
            }),
            ("driver as a huge array", ["driver", "expected a string", "…"], {
                _ = try await engine.advance("v1", to: "dispatch", input: ["eta": "+5m", "driver": .array(Array(repeating: "x", count: 50_000))])
            }),
            ("input as a string", ["expected a JSON object"], { _ = try await engine.advance("v1", to: "dispatch", input: "eta=5m") }),
            ("NaN weight", ["weight", "finite"], {
                _ = try await engine.createOrder(NewOrder(orderID: "v2", workflow: "probe", attributes: ["label": "p", "weight": .double(.nan)]))
            }),
            ("infinite weight", ["weight", "finite"], {
                _ = try await engine.createOrder(NewOrder(orderID: "v2", workflow: "probe", attributes: ["label": "p", "weight": .double(-.infinity)]))
            }),
            ("weight as text", ["weight", "expected a number"], {
                _ = try await engine.createOrder(NewOrder(orderID: "v2", workflow: "probe", attributes: ["label": "p", "weight": "NaN"]))
            }),
            ("attribute date in year 9999", ["since", "9999", "out of range", "10 years from now"], {
                _ = try await engine.createOrder(NewOrder(orderID: "v2", workflow: "probe",
                                                          attributes: ["label": "p", "weight": 1, "since": "9999-12-31T23:59:59Z"]))
            }),
            ("attribute date in 1900", ["since", "1900", "between 1970"], {
                _ = try await engine.createOrder(NewOrder(orderID: "v2", workflow: "probe",
                                                          attributes: ["label": "p", "weight": 1, "since": "1900-01-01T00:00:00Z"]))
            }),
            ("attribute date as an offset", ["since", "is not a date"], {
                _ = try await engine.createOrder(NewOrder(orderID: "v2", workflow: "probe", attributes: ["label": "p", "weight": 1, "since": "+5m"]))
            }),
            ("5,000-byte note (no max length)", ["note", "5000 bytes", "4096"], {
                _ = try await engine.advance("v3", to: "done", input: ["note": .string(String(repeating: "n", count: 5000))])
            }),
        ]
        // The content policy: one line of printable text, direction overrides closed.
        let driver = { (name: String) in { () async throws -> Void in
            _ = try await engine.advance("v1", to: "dispatch", input: ["eta": "+5m", "driver": .string(name)])
        } }
        let policy: [(String, [String], () async throws -> Void)] = [
            ("a terminal escape in an attribute", ["attribute merchantName", "Lu\\u{1B}[31migi", "control character U+001B", "one line of printable text"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: attributes(merchant: "Lu\u{1B}[31migi")))
            }),
            ("U+0001 in the driver's name", ["input driver", "control character U+0001"], driver("Sa\u{1}m")),
            ("a tab in the driver's name", ["input driver", "control character U+0009"], driver("Sam\tLee")),
            ("DEL in the driver's name", ["control character U+007F"], driver("Sam\u{7F}")),
            ("a C1 control (CSI) in the driver's name", ["control character U+009B"], driver("Sam\u{9B}31m")),
            ("a newline in a cancel reason", ["input reason", "line break (U+000A)", "one line"], {
                _ = try await engine.cancel("v1", reason: "closed\nfor today")
            }),
            ("a carriage return in the driver's name", ["line break (U+000D)"], driver("Sam\r")),
            ("U+2028 in an attribute", ["attribute merchantName", "line break (U+2028)"], {
                _ = try await engine.createOrder(foodOrder("v2", attributes: attributes(merchant: "Luigi\u{2028}s")))
            }),
            ("a right-to-left override left open", ["input driver", "ab\\u{202E}cd", "U+202E", "does not close", "U+202C"], driver("ab\u{202E}cd")),
            ("an isolate left open", ["U+2067", "U+2069"], driver("\u{2067}abc")),
            ("a closer that closes nothing", ["U+202C", "closes no direction override"], driver("abc\u{202C}")),
            ("an override closed by an isolate's closer", ["U+2069", "closes no direction override"], driver("\u{202E}abc\u{2069}")),
            ("a right-to-left override in a probe note", ["input note", "U+202E"], {
                _ = try await engine.advance("v3", to: "done", input: ["note": "\u{202E}gnp.exe"])
            }),
        ]
        for (label, fragments, body) in policy {
            try await check.refuses(label, category: "content values", .invalidInput, mentioning: fragments, body)
        }
        for (label, fragments, body) in cases {
            try await check.refuses(label, category: category, .invalidInput, mentioning: fragments, body)
        }
    }
}
