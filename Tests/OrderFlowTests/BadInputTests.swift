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

// MARK: - Checking one case

/// Every table the engine writes, as JSON text.
struct StoredData: Equatable {
    var tables: [String: String] = [:]

    static func read(_ engine: OrderFlowEngine) async throws -> StoredData {
        var data = StoredData()
        func add(_ name: String, _ query: PostgresQuery) async throws {
            data.tables[name] = try await engine.pool.query(query).single().decode("rows", as: String.self)
        }
        try await add("orders", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id), '[]')::text AS rows FROM orders t"))
        try await add("order_transitions", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id, t.seq), '[]')::text AS rows FROM order_transitions t"))
        try await add("activity_commands", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.id), '[]')::text AS rows FROM activity_commands t"))
        try await add("order_followers", PostgresQuery("""
            SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id, t.device_id), '[]')::text AS rows
            FROM order_followers t
            """))
        try await add("activities", PostgresQuery("""
            SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id, t.device_id), '[]')::text AS rows
            FROM activities t
            """))
        try await add("devices", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.device_id), '[]')::text AS rows FROM devices t"))
        try await add("push_to_start_tokens", PostgresQuery("""
            SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.device_id, t.attributes_type), '[]')::text AS rows
            FROM push_to_start_tokens t
            """))
        try await add("deliveries", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.id), '[]')::text AS rows FROM deliveries t"))
        try await add("workflow_versions", PostgresQuery("""
            SELECT coalesce(jsonb_agg(jsonb_build_object('name', t.name, 'version', t.version) ORDER BY t.name, t.version), '[]')::text
                   AS rows
            FROM workflow_versions t
            """))
        return data
    }

    func differences(from other: StoredData) -> [String] {
        tables.keys.sorted().filter { tables[$0] != other.tables[$0] }
    }
}

/// Runs the cases and keeps the tally. Used by one test task only.
final class BadInputChecker {
    let engine: OrderFlowEngine
    private(set) var refused: [(category: String, count: Int)] = []
    private(set) var accepted = 0
    private(set) var failures = 0

    init(engine: OrderFlowEngine) {
        self.engine = engine
    }

    private func count(_ category: String) {
        if let index = refused.firstIndex(where: { $0.category == category }) {
            refused[index].count += 1
        } else {
            refused.append((category, 1))
        }
    }

    var summary: String {
        let total = refused.map(\.count).reduce(0, +)
        let breakdown = refused.map { "\($0.category) \($0.count)" }.joined(separator: ", ")
        return "bad input: \(total) cases, all rejected with a clear error, stored data unchanged (\(breakdown)); "
            + "\(accepted) hostile-but-legitimate values stored and rendered back exactly"
    }

    /// Expects `body` to throw an `OrderFlowError` with `code` whose message contains every
    /// fragment (case-insensitive), reads as a sentence for people, and that nothing changed.
    func refuses(
        _ label: String, category: String, _ code: OrderFlowError.Code, mentioning fragments: [String] = [],
        notMentioning secrets: [String] = [], sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async throws {
        let before = try await StoredData.read(engine)
        var problems: [String] = []
        do {
            try await body()
            problems.append("was accepted")
        } catch let error as OrderFlowError {
            if error.code != code { problems.append("code \(error.code), expected \(code)") }
            let message = error.message
            for fragment in fragments where !message.lowercased().contains(fragment.lowercased()) {
                problems.append("message lacks \"\(fragment)\"")
            }
            for secret in secrets where message.contains(secret) {
                problems.append("message quotes \"\(secret.prefix(20))…\"")
            }
            problems += Self.humanProblems(message)
            if !problems.isEmpty { problems.append("message: \(message)") }
        } catch {
            problems.append("threw \(type(of: error)), not OrderFlowError: \(String(describing: error).prefix(300))")
        }
        let after = try await StoredData.read(engine)
        let changed = after.differences(from: before)
        if !changed.isEmpty { problems.append("changed stored data: \(changed.joined(separator: ", "))") }
        if problems.isEmpty {
            count(category)
        } else {
            failures += 1
            Issue.record("\(category) / \(label): \(problems.joined(separator: "; "))", sourceLocation: sourceLocation)
        }
    }

    /// A hostile value that is legitimate: `body` must succeed and check the round trip itself.
    func accepts(_ label: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        do {
            try await body()
            accepted += 1
        } catch {
            failures += 1
            Issue.record("accepting \(label) failed: \(String(describing: error).prefix(400))", sourceLocation: sourceLocation)
        }
    }

    /// What makes a message unfit for people: internals, control characters, pages of text.
    static func humanProblems(_ message: String) -> [String] {
        var problems: [String] = []
        if message.isEmpty { problems.append("empty message") }
        if message.unicodeScalars.count > 700 { problems.append("message is \(message.unicodeScalars.count) characters long") }
        if message.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            problems.append("message contains control characters")
        }
        for marker in ["SQLSTATE", "PostgresError", "Optional(", "Swift.", "DecodingError", "unexpected error", "libpq", "parameter $"]
        where message.contains(marker) {
            problems.append("message shows internals (\(marker))")
        }
        return problems
    }
}

/// A thrown error's message, for round-trip checks.
struct RoundTripMismatch: Error, CustomStringConvertible {
    var description: String
    init(_ what: String, expected: Any, got: Any) {
        description = "\(what): expected \(String(reflecting: expected)), got \(String(reflecting: got))"
    }
}

func require<T: Equatable>(_ what: String, _ got: T, equals expected: T) throws {
    if got != expected { throw RoundTripMismatch(what, expected: expected, got: got) }
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

    // MARK: ETAs

    static func etas(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        let category = "ETAs"
        _ = try await engine.createOrder(foodOrder("e1"))
        _ = try await engine.advance("e1", to: "accept")
        _ = try await engine.advance("e1", to: "ready")
        let past = ["in the past", "now or later"]
        let cases: [(JSONValue, [String])] = [
            ("-5m", ["-5m", "lies in the past", "+15m"]),
            ("-1d", ["lies in the past"]),
            ("-0h1m", ["lies in the past"]),
            ("+99999d", ["99999 days ahead", "at most a year"]),
            ("+367d", ["367 days ahead"]),
            ("+9223372036854775807s", ["ahead", "at most a year"]),
            ("9999-12-31T23:59:59Z", ["9999-12-31T23:59:59Z", "ahead"]),
            ("2020-01-01T00:00:00Z", past),
            ("1970-01-01T00:00:00Z", past),
            ("NaN", ["`NaN` is not a date"]),
            ("Infinity", ["is not a date"]),
            ("1e309", ["is not a date"]),
            ("+NaNm", ["is not a date"]),
            ("+0m", ["is not a date"]),
            ("+", ["is not a date"]),
            ("", ["is not a date"]),
            ("15 minutes", ["is not a date", "+15m"]),
            ("tomorrow", ["is not a date"]),
            ("2025-02-30T10:00:00Z", ["is not a date"]),
            ("2025-13-01T00:00:00Z", ["is not a date"]),
            ("2025-05-01", ["is not a date"]),
            ("+15m\u{0}", ["NUL"]),
            (.double(1e12), ["expected a date as ISO-8601 text"]),
            (.double(.nan), ["expected a date"]),
            (.null, ["eta", "required"]),
        ]
        for (eta, fragments) in cases {
            try await check.refuses("dispatch with eta \(eta.jsonString.prefix(30))", category: category, .invalidInput,
                                    mentioning: ["eta"] + fragments) {
                _ = try await engine.advance("e1", to: "dispatch", input: ["eta": eta, "driver": "Sam"])
            }
        }
        for eta in ["-5m", "+99999d", "9999-01-01T00:00:00Z"] {
            try await check.refuses("start input eta \(eta)", category: category, .invalidInput, mentioning: ["eta"]) {
                _ = try await engine.createOrder(foodOrder("e2", input: ["eta": .string(eta)]))
            }
        }
        // Sensible ETAs still pass.
        await check.accepts("ETAs now, +15m and ISO in two hours") {
            _ = try await engine.createOrder(foodOrder("e3", input: ["eta": "now"]))
            _ = try await engine.advance("e3", to: "accept", input: ["eta": "+15m"])
            _ = try await engine.advance("e3", to: "ready")
            let inTwoHours = ISO8601DateFormatter().string(from: Date().addingTimeInterval(7200))
            let dispatched = try await engine.advance("e3", to: "dispatch", input: ["eta": .string(inTwoHours), "driver": "Sam"])
            try require("eta is a date", dispatched.order.content["eta"]?.doubleValue != nil, equals: true)
        }
    }

    // MARK: Push tokens

    static func pushTokens(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        let category = "push tokens"
        _ = try await engine.createOrder(foodOrder("t1"))
        let good = EngineFixture.token(42)
        let fullwidth = String(repeating: "\u{FF10}\u{FF41}", count: 32)  // "０ａ" x 32: isHexDigit says yes, APNs says no
        let tokens: [(String, String, [String])] = [
            ("not hex", "not-a-token!" + String(repeating: "0", count: 60), ["not a hexadecimal digit", "position 1"]),
            ("hex with a 0x prefix", "0x" + good, ["position 2"]),
            ("fullwidth digits", fullwidth, ["not a hexadecimal digit"]),
            ("odd length", String(good.prefix(65)), ["odd number", "65"]),
            ("too short", String(good.prefix(62)), ["62 hexadecimal digits", "64 to 1024"]),
            ("too long", good + good + good + good + good + good + good, ["1120 hexadecimal digits"]),
            ("empty", "", ["empty"]),
            ("only whitespace", " \n\t ", ["empty"]),
            ("a space inside", String(good.prefix(80)) + " " + String(good.dropFirst(80)), ["whitespace at position 81"]),
            ("a line break inside", String(good.prefix(80)) + "\n" + String(good.dropFirst(80)), ["position 81"]),
            ("NUL inside", String(good.prefix(80)) + "\u{0}" + String(good.dropFirst(80)), ["position 81"]),
            ("SQL", "'); DELETE FROM push_to_start_tokens; --", ["not a hexadecimal digit"]),
            ("emoji", String(repeating: "🍕", count: 64), ["not a hexadecimal digit"]),
        ]
        typealias Call = (name: String, call: (String) async throws -> Void)
        let calls: [Call] = [
            ("push-to-start", { try await engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttributes", token: $0) }),
            ("activity", { try await engine.registerActivityToken(orderID: "t1", deviceID: "phone", token: $0) }),
            ("device", { try await engine.registerDeviceToken(deviceID: "phone", token: $0) }),
        ]
        for call in calls {
            for (label, token, fragments) in tokens {
                // The token is a device's credential: messages never quote it.
                let secrets = token.count >= 16 ? [String(token.prefix(16)), String(token.suffix(16))] : []
                try await check.refuses("\(call.name) token: \(label)", category: category, .invalidInput,
                                        mentioning: ["push token", "hexadecimal"] + fragments, notMentioning: secrets) {
                    try await call.call(token)
                }
            }
        }
        await check.accepts("a token with surrounding whitespace and capitals is stored trimmed, lower-case") {
            try await engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttributes",
                                                      token: "  \(good.uppercased())\n")
            let stored = try await engine.pool.query(PostgresQuery(
                "SELECT token FROM push_to_start_tokens WHERE device_id = $1", "phone")).single().decode("token", as: String.self)
            try require("stored token", stored, equals: good)
        }
    }

    // MARK: The 4 KB payload

    static func payloadSize(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        let category = "4 KB APNs payload"
        // 40 characters of 41 bytes each (a letter and 20 combining accents): within string(40),
        // within the per-text limit, but three of them in one payload are over 4096 bytes.
        let heavy = String(repeating: "a" + String(repeating: "\u{301}", count: 20), count: 40)
        try await check.refuses("a push-to-start over 4 KB at creation", category: category, .invalidInput,
                                mentioning: ["push-to-start", "4096", "shorten"]) {
            _ = try await engine.createOrder(foodOrder("p1", attributes: attributes(merchant: heavy)))
        }
        _ = try await engine.createOrder(foodOrder("p2"))
        _ = try await engine.advance("p2", to: "accept")
        _ = try await engine.advance("p2", to: "ready")
        try await check.refuses("an update over 4 KB", category: category, .invalidInput, mentioning: ["APNs payload would be", "4096", "shorten"]) {
            _ = try await engine.advance("p2", to: "dispatch", input: ["eta": "+10m", "driver": .string(heavy)])
        }
        // The update fits, but a device that follows later would get a push-to-start with the
        // attributes and the start alert as well: that one is over the limit.
        let medium = String(repeating: "a" + String(repeating: "\u{301}", count: 12), count: 40)  // 1,000 bytes
        _ = try await engine.createOrder(foodOrder("p3", attributes: attributes(merchant: medium)))
        _ = try await engine.advance("p3", to: "accept")
        _ = try await engine.advance("p3", to: "ready")
        let workflow = try await engine.storedWorkflow(name: "food-order").workflow
        let dispatch = try #require(workflow.transitions.first { $0.event == "dispatch" })
        let stored = try await engine.order("p3").order
        let now = Date()
        let update = try workflow.render(transition: dispatch, attributes: stored.attributes,
                                         input: ["eta": "+10m", "driver": .string(medium)], previous: stored.content, at: now)
        #expect(update.apnsPayload().encodedSize <= 4096, "the case needs an update that fits")
        #expect(throws: RenderError.self, "the case needs a push-to-start that does not fit") {
            try workflow.renderStart(in: "out_for_delivery", attributes: stored.attributes, previous: update.contentState, at: now)
        }
        try await check.refuses("a later push-to-start over 4 KB", category: category, .invalidInput,
                                mentioning: ["push-to-start", "4096", "shorten"]) {
            _ = try await engine.advance("p3", to: "dispatch", input: ["eta": "+10m", "driver": .string(medium)])
        }
    }

    // MARK: After all that

    /// The refusals left no trace in the engine either: its cache and its orders work on.
    static func stillWorks(_ check: BadInputChecker, _ fixture: EngineFixture) async throws {
        let engine = fixture.engine
        await check.accepts("ordinary use after the refusals") {
            for id in ["h1", "v1", "e1", "p2", "p3"] {
                let details = try await engine.order(id)
                let result: AdvanceResult
                switch details.order.state {
                case "received": result = try await engine.advance(id, to: "accept")
                case "ready": result = try await engine.advance(id, to: "dispatch", input: ["eta": "+10m", "driver": "Sam"])
                default: continue
                }
                try require("seq of \(id)", result.transition.seq, equals: details.order.seq + 1)
            }
        }
    }
}
