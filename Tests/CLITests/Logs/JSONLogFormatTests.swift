import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// `--log-format json` and `ORDERFLOW_LOG_FORMAT=json` as a log shipper meets them: every line
/// the running binary writes on stderr is one JSON object with the fixed fields, tokens and
/// keys never whole in it, and a format it does not know is refused before anything runs.
@Suite("JSON log lines from the binary", .serialized)
struct JSONLogFormatTests {
    @Test("serve with its worker at trace level: every stderr line a JSON object, no secret whole", .timeLimit(.minutes(3)))
    func serveWithWorker() async throws {
        let database = try await TestDatabase.fresh(prefix: "jsonlog")
        _ = try await Schema.migrate(database)
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 4))
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        let fixture = try await WorkerFixture.start(keyMode: 0o600)
        let good = EngineFixture.token(301)
        let bad = EngineFixture.token(302)
        fixture.apns.injectFault(.badDeviceToken, deviceToken: bad)
        for (order, token) in [("J1", good), ("J2", bad)] {
            _ = try await engine.createOrder(NewOrder(orderID: order, workflow: "food-order",
                attributes: ["merchantName": "Log \"Kitchen\" \\ Ünïcode", "orderNumber": .string(order), "itemCount": 1]))
            try await engine.registerActivityToken(orderID: order, deviceID: "phone-\(order)", token: token)
        }

        let cli = try CLI(databaseURL: database.connectionString)
        let serve = try cli.start(["serve", "--port", "0", "--log-format", "json"] + fixture.arguments.dropFirst(2),
                                  environment: ["ORDERFLOW_LOG_LEVEL": "trace"])
        #expect(try await HTTPWalkthroughTests.port(of: serve) != nil, "serve never said where it listens")
        for order in ["J1", "J2"] { _ = try await engine.advance(order, to: "accept") }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let pending = try await engine.order("J1").pendingCommands + engine.order("J2").pendingCommands
            if pending == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        serve.interrupt()
        let stopped = try await serve.finish()
        #expect(stopped.status == 0, "\(stopped)")

        let records = Self.records(stopped.stderr)
        #expect(records.count > 20, "a trace-level run writes many records: \(records.count)")
        let messages = records.compactMap { $0["message"] as? String }
        #expect(messages.contains { $0.hasPrefix("serving the API on http://127.0.0.1:") }, "the start line is a record too")
        #expect(messages.contains("worker started"))
        #expect(records.contains { ($0["apns.token"] as? String) == APNSTokenShape.redacted(bad) },
                "the refused token is named in its shown form, as a field")
        #expect(!stopped.stderr.contains("/board?token="), "no sign-in link in the files a shipper keeps")
        var scan = SecretScan(tokens: [good, bad], key: fixture.key, pushes: fixture.apns.pushes())
        scan.check(stopped.stderr, "serve stderr (json, trace)")
        scan.check(stopped.stdout, "serve stdout")
        scan.report("json logs")
        try await fixture.stop()
        await engine.shutdown()
    }

    @Test("a failing command's report is a JSON record too, at level error; the environment variable chooses the format")
    func failureAsRecord() async throws {
        let cli = try CLI(databaseURL: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
        let result = try await cli.run(["list"], environment: ["ORDERFLOW_LOG_FORMAT": "json"])
        #expect(result.status == 69, "\(result)")
        let records = Self.records(result.stderr)
        #expect(records.count == 1 && records.first?["level"] as? String == "error", "\(result)")
        #expect((records.first?["message"] as? String)?.contains("the database is unavailable") == true, "\(result)")
    }

    @Test("an unknown format, from the flag or the environment, is refused with the choices before anything runs",
          arguments: [
              (["--log-format", "xml", "list"], [String: String](), "--log-format must be text or json, not 'xml'"),
              (["list", "--log-format=YAML"], [:], "--log-format must be text or json, not 'YAML'"),
              (["list"], ["ORDERFLOW_LOG_FORMAT": "logfmt"], "ORDERFLOW_LOG_FORMAT must be text or json, not 'logfmt'"),
              (["serve", "--log-format"], [:], "--log-format needs a value: text or json"),
          ])
    func refused(arguments: [String], environment: [String: String], says: String) async throws {
        // A database that does not exist: a command that ran would fail differently.
        let cli = try CLI(databaseURL: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
        let result = try await cli.run(arguments, environment: environment)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderrLines.count == 1 && result.stderrLines.first?.hasPrefix("orderflow: \(says)") == true, "\(result)")
        #expect(result.stdout.isEmpty)
    }

    /// Every line of `stderr`, each required to be a JSON object with the fixed fields.
    static func records(_ stderr: String, sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        let levels: Set = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
        var records: [[String: Any]] = []
        for line in stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else {
                Issue.record("not a JSON object: \(line.prefix(300))", sourceLocation: sourceLocation)
                continue
            }
            let timestamp = object["timestamp"] as? String ?? ""
            #expect(timestamp.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil, "\(line)", sourceLocation: sourceLocation)
            #expect(levels.contains(object["level"] as? String ?? ""), "\(line)", sourceLocation: sourceLocation)
            #expect(!(object["logger"] as? String ?? "").isEmpty && object["message"] is String && object["source"] is String,
                    "\(line)", sourceLocation: sourceLocation)
            records.append(object)
        }
        #expect(stderr.isEmpty || stderr.hasSuffix("\n"), "the last line is whole", sourceLocation: sourceLocation)
        return records
    }
}
