import Foundation
import LocalFCM
import OrderFlow
import PGKit
import PostgresTesting
import TestTags
import Testing

/// The demo run as `scripts/demo` runs it: the built `orderflow-demo`, on a fresh database of the
/// throw-away server. Timed (the demo ends within 30 s), so it runs with the timing group, alone;
/// serialized: each test runs the whole demo and the machine is small.
@Suite("Timing: orderflow-demo", .serialized, .tags(.timing))
struct TimingDemoCommandTests {
    @Test("runs end to end on a fresh database: starts, updates, ends, alerts, a merged burst, a cancellation")
    func runsEndToEnd() async throws {
        let database = try await TestDatabase.fresh(prefix: "demo")
        let cli = try CLI(databaseURL: database.connectionString)

        // Not migrated and not in the repository folder: the demo migrates and finds the workflows.
        let first = try await cli.runDemo()
        #expect(first.status == 0, "\(first)")
        #expect(first.stderr.isEmpty, "nothing on stderr:\n\(first)")
        let output = first.stdout
        for fragment in [
            "Live Activity", "Order A", "Order B", "Order C", "Order R",
            "→ start", "→ update", "→ end", "→ alert",           // the pushes the stand-in received
            "received → cancelled",                              // order C's cancellation
            "3 transitions in 1 update",                         // order B's burst, at the push
            "order B's 3 quick steps arrived as 1 update",       // and in the summary
            "ordinary alerts",                                   // ben-iphone's fallback
            "driver_assigned", "Maria", "7ABC123",               // the ride's details
            "· arriving ",                                       // order A's delivery window (a daterange)
            "separate notifications",                            // the point of it all
            "3 push-to-starts joined 3 fans to it",              // the race: one channel,
            "4 updates → 4 broadcast requests → 12 deliveries",  // one request per update, fanned out
            "anna-pixel: Android, one notification replaced in place",    // order A on Android too,
            "kept one Android notification that changed in place: 5 FCM data messages, the last one the end",
        ] {
            #expect(output.contains(fragment), "expected \"\(fragment)\" in:\n\(output)")
        }
        // Piped output is plain: no colour escapes.
        #expect(!output.contains("\u{1B}["), "escape sequences in piped output:\n\(output)")
        // Tokens are random hex (64 or 160 characters) and only ever shown as their last 8: no
        // long hex run anywhere but in the machine's own folder names.
        #expect(KnownPaths.removed(from: output).firstMatch(of: /[0-9a-fA-F]{32,}/) == nil, "a whole push token is shown:\n\(output)")
        #expect(!output.contains(Fixtures.repository.path), "the demo names paths relative to where it runs:\n\(output)")
        #expect(output.contains("…"), "masked tokens are shown:\n\(output)")
        let summary = try #require(output.split(separator: "\n").first { $0.contains(" transitions → ") })
        // 19: order B's burst of three shown by one update. On a busy machine the worker may
        // reach one more order's quick steps together, and one push shows both (18).
        #expect(summary.firstMatch(of: #/^18 transitions → 1[89] pushes /#) != nil, "\(summary)")
        #expect(first.seconds < 30, "the demo took \(first.seconds) s")
        // The Android phone's messages, as the FCM stand-in received them: updates, then the end.
        let android = output.split(separator: "\n").drop { !$0.contains("each FCM data message") }.dropFirst()
            .prefix { $0.hasPrefix("      → ") }.map { $0.split(separator: " ", omittingEmptySubsequences: true)[2] }
        #expect(android.count == 5 && android.last == "end" && android.dropLast().allSatisfy { $0 == "update" }, "\(android) in:\n\(output)")

        // The closing hint works exactly as printed.
        let hint = try #require(output.firstMatch(of: /Look again: (.+)\)/)?.1, "no closing hint in:\n\(output)")
        let again = try await cli.shell(String(hint))
        #expect(again.status == 0 && again.stdout.contains("1042") && again.stdout.contains("delivered"), "`\(hint)`: \(again)")

        // A second run on the same database uses a merchant of its own and succeeds again.
        let second = try await cli.runDemo()
        #expect(second.status == 0, "\(second)")
        #expect(second.stdout.contains("order B's 3 quick steps arrived as 1 update"), "\(second)")
        // Each run's Firebase project was sealed under a key it forgot: none is left behind to
        // block the next run or the owner's own master key.
        let projects = try await PostgresConnection.withConnection(database) { connection in
            try await connection.query(PostgresQuery("SELECT count(*) AS n FROM merchant_fcm_apps")).single().decode("n", as: Int.self)
        }
        #expect(projects == 0, "the demo left \(projects) Firebase projects behind")
    }

    @Test("a Firebase project a killed demo left is taken away; the owner's own sealed key stops the demo in one line, untouched")
    func leftoverFirebaseProjects() async throws {
        let database = try await TestDatabase.fresh(prefix: "demo")
        _ = try await Schema.migrate(database)
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 2))
        let forgotten = MasterKey(bytes: Data((0..<32).map { UInt8($0 &* 3) }))
        let leftover = try LocalFCMServiceAccountKey.generate(
            projectID: "orderflow-demo", tokenURI: "https://127.0.0.1:1/token", accountName: "orderflow-demo")
        try await engine.addMerchant("demo-20260101-000000-dead")
        try await engine.setFCMServiceAccount(merchantID: "demo-20260101-000000-dead", serviceAccountJSON: leftover.json, masterKey: forgotten)
        let cli = try CLI(databaseURL: database.connectionString)
        let run = try await cli.runDemo()
        #expect(run.status == 0 && run.stdout.contains("kept one Android notification"), "\(run)")
        #expect(try await engine.fcmProject(merchantID: "demo-20260101-000000-dead") == nil)

        // A merchant of the owner's: its key stays, and the demo says what to do.
        let owners = try LocalFCMServiceAccountKey.generate(projectID: "luigis-orders", tokenURI: "https://oauth2.googleapis.com/token")
        try await engine.addMerchant("luigis")
        try await engine.setFCMServiceAccount(merchantID: "luigis", serviceAccountJSON: owners.json, masterKey: forgotten)
        let refused = try await cli.runDemo()
        #expect(refused.status != 0 && refused.stderrLines.count == 1 && refused.stderr.contains("scratch database")
                && refused.stderr.contains("ORDERFLOW_SECRET_KEY"), "\(refused)")
        #expect(try await engine.fcmProject(merchantID: "luigis")?.projectID == "luigis-orders")
        // Given the owner's master key, the demo seals under it, runs, and takes only its own away.
        let keyed = try await cli.runDemo(environment: ["ORDERFLOW_SECRET_KEY": Data((0..<32).map { UInt8($0 &* 3) }).base64EncodedString()])
        #expect(keyed.status == 0 && keyed.stdout.contains("kept one Android notification"), "\(keyed)")
        #expect(try await engine.fcmProject(merchantID: "luigis")?.projectID == "luigis-orders")
        for merchant in try await engine.merchants() where merchant.id.hasPrefix("demo-") {
            #expect(try await engine.fcmProject(merchantID: merchant.id) == nil, "\(merchant.id) kept the demo's project")
        }
        await engine.shutdown()
    }

    @Test("an unreachable database fails with one line and exit 69")
    func unreachableDatabase() async throws {
        let cli = try CLI(databaseURL: "postgresql://nobody@127.0.0.1:1/nothing")
        let result = try await cli.runDemo()
        #expect(result.status == 69, "\(result)")
        #expect(result.stderrLines.count == 1 && result.stderr.hasPrefix("orderflow: "), "\(result)")
    }

    @Test("`orderflow demo` says where the demo is, in one line, and is not in the help")
    func pointer() async throws {
        let cli = try CLI(databaseURL: "postgresql://nobody@127.0.0.1:1/nothing")
        let result = try await cli.run("demo", "--board")
        #expect(result.status == 64 && result.stdout.isEmpty, "\(result)")
        #expect(result.stderrLines.count == 1 && result.stderr.hasPrefix("orderflow: ") && result.stderr.contains("scripts/demo"), "\(result)")
        let help = try await cli.run("--help")
        #expect(help.status == 0 && !help.stdout.contains("demo"), "\(help)")
    }
}
