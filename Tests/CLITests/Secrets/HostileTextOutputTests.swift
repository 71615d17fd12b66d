import Foundation
import OrderFlowTesting
import PGKit
import Testing

/// What the database holds reaches a terminal as text: values the text policy still lets in
/// (closed direction isolates and overrides) and values it refuses, written straight into the
/// tables as old data might hold them, through every command that prints stored values.
@Suite("Stored text reaches the terminal as text")
struct HostileTextOutputTests {
    @Test("show, list, watch, deliveries list, advance and errors escape what they print; --json stays exact")
    func storedValuesAreEscaped() async throws {
        let cli = try await CLI.withFreshDatabase()
        try await expectSuccess(cli.run("workflow", "apply", Fixtures.foodOrder))
        // Allowed by the policy: direction controls closed within the value.
        let merchant = "\u{2067}שלום\u{2069} Pizza"
        try await expectSuccess(cli.run("order", "create", "1042", "--workflow", "food-order", "--attr", "merchantName=\(merchant)",
                                        "--attr", "orderNumber=1042", "--attr", "itemCount=3"))
        try await expectSuccess(cli.run("advance", "1042", "accept"))
        try await expectSuccess(cli.run("follow", "1042", "alice-iphone"))
        // Refused by the policy, as old data may hold it.
        let database = try PostgresConfiguration(try #require(cli.databaseURL))
        try await HostileText.inject(into: database, merchantID: "default", orderID: "1042")

        var outputs: [(String, CLI.Result)] = []
        // At trace, whatever the logs quote is checked too.
        func run(_ arguments: String...) async throws -> CLI.Result {
            let result = try await cli.run(arguments, environment: ["ORDERFLOW_LOG_LEVEL": "trace"])
            outputs.append((arguments.joined(separator: " "), result))
            return result
        }
        // The alert title renders the injected order number: "Order <escapes> is ready".
        let ready = try await run("advance", "1042", "ready")
        #expect(ready.status == 0, "\(ready)")
        let dispatched = try await run("advance", "1042", "dispatch", "--eta", "15m", "--driver", "\u{202E}Sam\u{202C}")
        #expect(dispatched.status == 0, "\(dispatched)")
        let show = try await run("show", "1042")
        #expect(show.status == 0, "\(show)")
        for shown in ["\\u{1B}[2J", "\\u{202E}fdp.exe", "ctl\\u{1}\\u{8}\\u{7F}\\u{9B}31m", "two\\u{A}lines\\u{D}back\\u{9}tab\\u{2028}sep",
                      "\\u{2067}שלום\\u{2069} Pizza"] {
            #expect(show.stdout.contains(shown), "show lacks \(shown):\n\(show)")
        }
        let list = try await run("list")
        #expect(list.status == 0 && list.stdout.contains("0\\u{1B}[2J\\u{202E}order"), "\(list)")
        let firstPage = try await run("list", "--limit", "1")
        #expect(firstPage.stdout.contains("more: orderflow list --after '0\\u{1B}[2J\\u{202E}order'"), "\(firstPage)")
        let deliveries = try await run("deliveries", "list")
        #expect(deliveries.status == 0 && deliveries.stdout.contains("dead 410 esc\\u{1B}[2J"), "\(deliveries)")
        _ = try await run("deliveries", "list", "--failed")
        let refused = try await run("show", HostileText.orderID)
        #expect(refused.status == 65 && refused.stderr.contains("0\\u{1B}[2J\\u{202E}order"), "\(refused)")

        // watch redraws until interrupted.
        let watch = try await cli.watchBriefly(["--interval", "200ms"], environment: ["ORDERFLOW_LOG_LEVEL": "trace"])
        #expect(watch.status == 0 && watch.stdout.contains("0\\u{1B}[2J\\u{202E}order"), "\(watch)")
        outputs.append(("watch", watch))

        for (command, result) in outputs {
            let found = HostileText.terminalControls(in: result.stdout + result.stderr)
            #expect(found.isEmpty, "`orderflow \(command)` printed \(found.joined(separator: ", ")) raw:\n\(result)")
        }

        // JSON is for programs: the exact stored text, written with JSON's own `\uXXXX` escapes
        // for what a terminal would act on (the encoder escapes only what is below U+0020).
        let json = try await cli.run("show", "1042", "--json")
        #expect(json.status == 0)
        let found = HostileText.terminalControls(in: json.stdout)
        #expect(found.isEmpty, "show --json printed \(found) raw")
        #expect(json.stdout.lowercased().contains(#"\u202e"#) && json.stdout.lowercased().contains(#"\u001b"#), "\(json)")
        let document = try #require(try json.json() as? [String: Any])
        let order = try #require(document["order"] as? [String: Any])
        let attributes = try #require(order["attributes"] as? [String: Any])
        #expect(attributes["orderNumber"] as? String == HostileText.shortEscape)
        #expect(attributes["merchantName"] as? String == merchant)
        let content = try #require(order["content"] as? [String: Any])
        #expect(content["driverName"] as? String == "\u{202E}Sam\u{202C}")
    }

    private func expectSuccess(_ result: CLI.Result, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 0, "\(result)", sourceLocation: sourceLocation)
    }
}
