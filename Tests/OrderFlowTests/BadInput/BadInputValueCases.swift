import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// The cases on values: ETAs, push tokens, the payload size limit, and a last check that the
/// engine still works after them all.
extension BadInput {
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
