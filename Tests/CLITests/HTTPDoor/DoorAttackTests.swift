import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// The app's door of a real `orderflow serve`, attacked with curl as the issue that found it did:
/// two merchants, two orders of one of them, two customers' devices. Every attempt across a
/// boundary is refused with its status, and the database is the same after as before.
@Suite("The door of orderflow serve, crossed the wrong way", .serialized)
struct DoorAttackTests {
    @Test("another customer's device, another merchant's order, a forged secret: refused, nothing changed", .timeLimit(.minutes(3)))
    func attack() async throws {
        var cli = try await CLI.withFreshDatabase()
        cli.workingDirectory = Fixtures.repository
        let url = try #require(cli.databaseURL)
        _ = try await cli.run("merchant", "add", "luigis")
        _ = try await cli.run("merchant", "add", "marios")
        let luigis = try await cli.run("api-key", "create", "--merchant", "luigis").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let marios = try await cli.run("api-key", "create", "--merchant", "marios").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let serve = try cli.start(["serve", "--port", "0", "--no-worker"])
        let port = try #require(try await HTTPWalkthroughTests.port(of: serve), "serve never said where it listens")
        let api = "http://127.0.0.1:\(port)"

        /// curl with a credential (and a device credential); the status last on stdout.
        func curl(_ method: String, _ path: String, bearer: String, device: String? = nil, body: String? = nil,
                  type: String = "application/json") async throws -> (status: Int, body: String) {
            var line = "curl -s -o - -w '\\n%{http_code}' -X \(method) '\(api)\(path)' -H 'Authorization: Bearer \(bearer)' -H 'Content-Type: \(type)'"
            if let device { line += " -H 'OrderFlow-Device-Credential: \(device)'" }
            if let body { line += " --data-binary '\(body)'" }
            let result = try await cli.shell(line)
            let parts = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (Int(parts.last ?? "") ?? 0, parts.dropLast().joined(separator: "\n"))
        }
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:] }

        let workflow = try String(contentsOf: Fixtures.repository.appendingPathComponent("workflows/food-order.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "'", with: "'\\''")
        for key in [luigis, marios] {
            #expect(try await curl("POST", "/v1/workflows", bearer: key, body: workflow, type: "application/yaml").status == 201)
        }
        func order(_ id: String, key: String) async throws -> String {
            let created = try await curl("POST", "/v1/orders", bearer: key,
                body: #"{"id": "\#(id)", "workflow": "food-order", "attributes": {"merchantName": "Luigi", "orderNumber": "\#(id)", "itemCount": 1}}"#)
            #expect(created.status == 201, "\(created)")
            return try #require(json(created.body)["client_secret"] as? String)
        }
        let anna = try await order("A-1", key: luigis)
        let mallory = try await order("M-1", key: luigis)
        let elsewhere = try await order("E-1", key: marios)

        // Anna's app registers her phone and hands over its push-to-start token.
        let registered = try await curl("POST", "/v1/devices", bearer: anna, body: #"{"device": "anna-iphone"}"#)
        let annaDevice = try #require(json(registered.body)["device_credential"] as? String, "\(registered)")
        let token = String(repeating: "a1", count: 32)
        #expect(try await curl("PUT", "/v1/devices/anna-iphone/push-to-start-tokens/FoodOrderAttributes", bearer: anna, device: annaDevice,
                               body: #"{"token": "\#(token)"}"#).status == 200)
        #expect(try await curl("PUT", "/v1/orders/A-1/followers/anna-iphone", bearer: anna, device: annaDevice).status == 204)

        let before = try await TableContents.read(try PostgresConfiguration(url))
        let attacker = String(repeating: "ab", count: 32)
        // The issue's attack: another order's secret sets Anna's push-to-start token.
        let taken = try await curl("PUT", "/v1/devices/anna-iphone/push-to-start-tokens/FoodOrderAttributes", bearer: mallory,
                                   body: #"{"token": "\#(attacker)"}"#)
        #expect(taken.status == 403 && !taken.body.contains("abababab"), "\(taken)")
        // Her follower list, her activity, her state: not through another order's secret.
        #expect(try await curl("PUT", "/v1/orders/M-1/activities/anna-iphone/token", bearer: mallory, body: #"{"token": "\#(attacker)"}"#).status == 403)
        #expect(try await curl("PUT", "/v1/orders/A-1/activities/anna-iphone/state", bearer: mallory, body: #"{"state": "dismissed"}"#).status == 403)
        let seen = try await curl("GET", "/v1/orders/A-1", bearer: mallory)
        #expect(seen.status == 403 && !seen.body.contains("anna-iphone"), "\(seen)")
        let own = try await curl("GET", "/v1/orders/M-1", bearer: mallory)
        #expect(own.status == 200 && !own.body.contains("anna-iphone"), "\(own)")
        // Another merchant: its key and its order's secret reach nothing of Luigi's.
        #expect(try await curl("GET", "/v1/orders/A-1", bearer: marios).status == 404)
        #expect(try await curl("POST", "/v1/orders/A-1/advance", bearer: marios, body: #"{"event": "accept", "input": {"eta": "+5m"}}"#).status == 404)
        #expect(try await curl("PUT", "/v1/devices/anna-iphone/push-to-start-tokens/FoodOrderAttributes", bearer: elsewhere,
                               body: #"{"token": "\#(attacker)"}"#).status == 403)
        // A forged secret for a merchant that never made a key, and no credential at all.
        let forged = "of_cs_" + Data("ghost".utf8).base64EncodedString() + ".QS0x." + String(repeating: "A", count: 43)
        #expect(try await curl("GET", "/v1/orders/A-1", bearer: forged).status == 401)
        #expect(try await cli.shell("curl -s -o /dev/null -w '%{http_code}' \(api)/v1/orders").stdout == "401")
        for change in TableContents.changes(before, try await TableContents.read(try PostgresConfiguration(url))) {
            Issue.record("an attempt across the door changed \(change)")
        }
        serve.interrupt()
        _ = try await serve.finish()
    }
}
