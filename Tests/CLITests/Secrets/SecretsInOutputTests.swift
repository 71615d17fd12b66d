import Crypto
import Foundation
import LocalAPNS
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing
import WorkflowKit

/// Push tokens and the APNs key never appear whole in what OrderFlow prints: the full demo and
/// a worker, both at the most verbose log level, and every command that shows devices,
/// deliveries and timelines, in text and JSON. Tokens may appear only as `…` and their last 8
/// characters (`APNSTokenRedaction`); of the key, its PEM, raw bytes and signed provider
/// tokens, nothing at all.
@Suite("Secrets never appear in output", .serialized)
struct SecretsInOutputTests {
    @Test("the demo at trace level, and the commands that read its orders back", .timeLimit(.minutes(3)))
    func demo() async throws {
        let database = try await TestDatabase.fresh(prefix: "secrets")
        let cli = try CLI(databaseURL: database.connectionString)
        let run = try await cli.runDemo(environment: ["ORDERFLOW_LOG_LEVEL": "trace"])
        #expect(run.status == 0, "\(run)")
        #expect(!run.stderr.contains("chmod"), "the demo's own key is in memory, not a file to warn about:\n\(run.stderr)")

        // The demo's tokens are random; the database it used keeps every one of them.
        let (merchant, tokens) = try await PostgresConnection.withConnection(database) { connection in
            let merchant = try await connection.query(PostgresQuery("SELECT DISTINCT merchant_id FROM orders")).single()
                .decode("merchant_id", as: String.self)
            let tokens = try await connection.query(PostgresQuery("""
                SELECT token AS t FROM push_to_start_tokens
                UNION SELECT update_token FROM activities WHERE update_token IS NOT NULL
                UNION SELECT alert_token FROM devices WHERE alert_token IS NOT NULL
                UNION SELECT fcm_token FROM devices WHERE fcm_token IS NOT NULL
                """)).map { try $0.decode("t", as: String.self) }
            return (merchant, tokens)
        }
        #expect(tokens.count == 12, "the demo registers 12 tokens (8 iPhone, 1 Android, and the race's 3 fans): \(tokens.count)")
        var scan = SecretScan(tokens: tokens)
        scan.check(run.stdout, "demo stdout")
        scan.check(run.stderr, "demo stderr (trace)")
        // The trace log did record the pushes, with the tokens in their shown form.
        #expect(run.stderr.contains("apns.token=…"), "the trace log names tokens in their redacted form")

        let reader = try CLI(databaseURL: database.connectionString, extraEnvironment: ["ORDERFLOW_MERCHANT": merchant])
        for arguments in SecretScan.readingCommands(orders: ["1042", "1043", "1044", "R-2087", "monza-2026"]) {
            let result = try await reader.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            scan.check(result.stdout + result.stderr, "orderflow " + arguments.joined(separator: " "))
        }
        scan.report("demo")
    }

    @Test("a worker at trace level with refusals and a retry, and every command that shows its deliveries",
          .timeLimit(.minutes(3)))
    func worker() async throws {
        let database = try await TestDatabase.fresh(prefix: "secrets")
        _ = try await Schema.migrate(database)
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 4))
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        let fixture = try await WorkerFixture.start(keyMode: 0o600)

        // The tokens, and what the stand-in answers for each.
        let pushToStart = EngineFixture.token(101)
        let activity = EngineFixture.token(102)
        let alerts = EngineFixture.token(103, length: 64)
        let bad = EngineFixture.token(104)
        let unregistered = EngineFixture.token(105)
        let flaky = EngineFixture.token(106)
        let tooLarge = EngineFixture.token(107)
        let tokens = [pushToStart, activity, alerts, bad, unregistered, flaky, tooLarge]
        fixture.apns.injectFault(.badDeviceToken, deviceToken: bad)
        fixture.apns.injectFault(.unregistered(), deviceToken: unregistered)
        fixture.apns.injectFault(.internalServerError, deviceToken: flaky, count: 1)
        fixture.apns.injectFault(.payloadTooLarge, deviceToken: tooLarge)

        // S1: started by push-to-start, then the activity's own token; a second device gets alerts.
        for order in ["S1", "S2", "S3", "S4", "S5"] {
            _ = try await engine.createOrder(NewOrder(orderID: order, workflow: "food-order",
                attributes: ["merchantName": "Secret Kitchen", "orderNumber": .string(order), "itemCount": 2]))
        }
        try await engine.registerPushToStartToken(deviceID: "p-start", attributesType: "FoodOrderAttributes", token: pushToStart)
        try await engine.follow(orderID: "S1", deviceID: "p-start")
        try await engine.registerDeviceToken(deviceID: "p-alerts", token: alerts)
        try await engine.follow(orderID: "S1", deviceID: "p-alerts")
        for (order, device, token) in [("S2", "p-bad", bad), ("S3", "p-gone", unregistered), ("S4", "p-flaky", flaky), ("S5", "p-big", tooLarge)] {
            try await engine.registerActivityToken(orderID: order, deviceID: device, token: token)
        }

        let cli = try CLI(databaseURL: database.connectionString)
        let worker = try cli.start(fixture.arguments, environment: ["ORDERFLOW_LOG_LEVEL": "trace"])
        try await waitUntilSent(engine, orders: ["S1"])
        try await engine.registerActivityToken(orderID: "S1", deviceID: "p-start", token: activity)
        for order in ["S1", "S2", "S3", "S4", "S5"] {
            _ = try await engine.advance(order, to: "accept")
            _ = try await engine.advance(order, to: "ready")
        }
        try await waitUntilSent(engine, orders: ["S1", "S2", "S3", "S4", "S5"])
        worker.interrupt()
        let stopped = try await worker.finish()
        #expect(stopped.status == 0, "\(stopped)")

        // Every kind of answer happened, so its log records and stored reasons are covered.
        let outcomes = Set(try await engine.deliveries(limit: 500).map(\.outcome))
        #expect(outcomes.isSuperset(of: [.sent, .retry, .tokenDead, .rejected]), "outcomes: \(outcomes.map(\.rawValue).sorted())")
        #expect(!fixture.apns.pushes(forToken: activity).isEmpty && !fixture.apns.pushes(forToken: alerts).isEmpty)

        var scan = SecretScan(tokens: tokens, key: fixture.key, pushes: fixture.apns.pushes())
        scan.check(stopped.stdout, "worker stdout")
        scan.check(stopped.stderr, "worker stderr (trace)")
        #expect(stopped.stderr.contains("apns.token=\(APNSTokenShape.redacted(bad))"), "the dead token is named as …last8")
        #expect(stopped.stderr.contains("BadDeviceToken"))
        #expect(!stopped.stderr.contains("chmod"), "a 0600 key gets no warning")

        for arguments in SecretScan.readingCommands(orders: ["S1", "S2", "S3", "S4", "S5"]) {
            let result = try await cli.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result)")
            scan.check(result.stdout + result.stderr, "orderflow " + arguments.joined(separator: " "))
        }
        // Registering tokens by hand: the confirmation and a refusal of a malformed token.
        let registered = try await cli.run("token", "register", "--device", "p-cli", "--activity", flaky, "--order", "S4")
        #expect(registered.status == 0, "\(registered)")
        scan.check(registered.stdout + registered.stderr, "orderflow token register")
        let oddLength = String(activity.dropLast())
        let refused = try await cli.run("token", "register", "--device", "p-cli", "--device-token", oddLength)
        #expect(refused.status == 65, "\(refused)")
        // `activity` minus its last character: any 9 characters of it shown are found.
        scan.check(refused.stdout + refused.stderr, "orderflow token register (malformed)")
        // A token given where no argument belongs: the parser's usage error quotes it.
        let stray = try await cli.run("token", "register", "--device", "p-cli", "--device-token", alerts, pushToStart)
        #expect(stray.status == 64 && stray.stderr.contains("unexpected argument"), "\(stray)")
        scan.check(stray.stdout + stray.stderr, "orderflow token register (stray argument)")
        scan.report("worker")

        try await fixture.stop()
        await engine.shutdown()
    }

    private func waitUntilSent(_ engine: OrderFlowEngine, orders: [String]) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            var pending = 0
            for order in orders { pending += try await engine.order(order).pendingCommands }
            if pending == 0 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("orders \(orders) still have commands after 60 s")
    }
}

/// `orderflow worker run` warns, once and on stderr, when its `.p8` key is readable by others.
@Suite("The worker's key permission warning", .serialized)
struct KeyPermissionTests {
    @Test("one warning naming the file and `chmod 600` for a key others can read; none for a private key",
          .timeLimit(.minutes(2)))
    func warnsOnceForAnExposedKey() async throws {
        let database = try await TestDatabase.fresh(prefix: "keymode")
        _ = try await Schema.migrate(database)
        let fixture = try await WorkerFixture.start(keyMode: 0o600)
        let cli = try CLI(databaseURL: database.connectionString)
        let cases: [(mode: mode_t, says: String?)] = [
            (0o644, "readable by every user"), (0o640, "readable by its group"), (0o620, "changed by users other than its owner"),
            (0o600, nil), (0o400, nil),
        ]
        for (mode, says) in cases {
            #expect(chmod(fixture.keyFile, mode) == 0)
            let worker = try cli.start(fixture.arguments)
            // Running: the worker logs its start at info level.
            try await waitFor("worker started", in: worker)
            worker.interrupt()
            let result = try await worker.finish()
            #expect(result.status == 0, "\(result)")
            let warnings = result.stderrLines.filter { $0.contains("chmod") }
            let octal = String(mode, radix: 8)
            if let says {
                #expect(warnings.count == 1, "mode \(octal): one warning, not \(warnings.count):\n\(result.stderr)")
                let warning = warnings.first ?? ""
                #expect(warning.hasPrefix("orderflow: warning: "), "\(warning)")
                #expect(warning.contains("chmod 600 \(fixture.keyFile)"), "\(warning)")
                #expect(warning.contains(says) && warning.contains("mode 0\(octal)"), "\(warning)")
            } else {
                #expect(warnings.isEmpty, "mode \(octal): no warning:\n\(result.stderr)")
            }
        }
        try await fixture.stop()
    }

    private func waitFor(_ text: String, in process: RunningCLI) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, process.process.isRunning {
            if let written = try? String(contentsOf: process.stderrURL, encoding: .utf8), written.contains(text) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the worker never wrote \"\(text)\"")
    }
}

// MARK: - Support

/// A local APNs stand-in and the `.p8` key file a worker process signs with.
struct WorkerFixture {
    static let bundleID = "com.example.orders"
    static let keyID = "SECRETKEY1"
    static let teamID = "SECRETTEAM"

    let apns: LocalAPNSServer
    let key: P256.Signing.PrivateKey
    let keyFile: String
    let arguments: [String]

    static func start(keyMode: mode_t) async throws -> WorkerFixture {
        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: keyID, teamID: teamID, publicKey: key.publicKey)], acceptedBundleIDs: [bundleID]))
        try await apns.start()
        let keyFile = try Fixtures.file("AuthKey_\(keyID).p8", key.pemRepresentation)
        chmod(keyFile, keyMode)
        let caFile = try Fixtures.file("ca.pem", apns.trustRootPEM)
        let arguments = [
            "worker", "run", "--apns-key", keyFile, "--apns-key-id", keyID, "--apns-team-id", teamID,
            "--apns-topic", bundleID, "--apns-url", apns.baseURL, "--apns-ca", caFile, "--connections", "3",
        ]
        return WorkerFixture(apns: apns, key: key, keyFile: keyFile, arguments: arguments)
    }

    func stop() async throws {
        try await apns.stop()
    }
}

/// The one rule for showing a token, restated here so that the test does not trust the code
/// it checks: `…` and the last 8 characters.
enum APNSTokenShape {
    static func redacted(_ token: String) -> String { "…" + token.suffix(8) }
}

/// Looks through captured output for push tokens and APNs key material, and counts what it
/// searched for the record.
struct SecretScan {
    /// Whole tokens, lower-cased.
    let tokens: [String]
    /// Exact pieces of the key and the provider tokens signed with it, by name.
    let keyFragments: [(name: String, text: String)]
    private var outputs = 0
    private var characters = 0

    /// Every 9-character window of every token: output sharing one shows more than the last 8.
    private let windows: [String: Int]

    init(tokens: [String], key: P256.Signing.PrivateKey? = nil, pushes: [LocalAPNSPush] = []) {
        self.tokens = tokens.map { $0.lowercased() }
        var windows: [String: Int] = [:]
        for (index, token) in self.tokens.enumerated() {
            let characters = Array(token)
            guard characters.count >= 9 else { continue }
            for start in 0...(characters.count - 9) { windows[String(characters[start..<start + 9])] = index }
        }
        self.windows = windows
        var fragments: [(String, String)] = []
        if let key {
            let body = key.pemRepresentation.split(separator: "\n").filter { !$0.hasPrefix("-----") }
            for (number, line) in body.enumerated() { fragments.append(("PEM body line \(number + 1)", String(line))) }
            fragments.append(("raw key, base64", key.rawRepresentation.base64EncodedString()))
            fragments.append(("raw key, hex", key.rawRepresentation.map { String(format: "%02x", $0) }.joined()))
            fragments.append(("DER key, base64", key.derRepresentation.base64EncodedString()))
            fragments.append(("x9.63 key, base64", key.x963Representation.base64EncodedString()))
        }
        let jwts = Set(pushes.compactMap { $0.headers["authorization"] }.map { String($0.dropFirst("bearer ".count)) })
        for (number, jwt) in jwts.sorted().enumerated() {
            fragments.append(("provider token \(number + 1)", jwt))
            if let signature = jwt.split(separator: ".").last {
                fragments.append(("provider token \(number + 1) signature", String(signature)))
            }
        }
        keyFragments = fragments
    }

    /// Records an issue for every token or key piece found in `text`.
    mutating func check(_ text: String, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
        outputs += 1
        characters += text.count
        let lowered = text.lowercased()
        var shown = Set<Int>()
        for run in lowered.split(whereSeparator: { !$0.isHexDigit }) where run.count >= 9 {
            let characters = Array(run)
            for start in 0...(characters.count - 9) {
                if let index = windows[String(characters[start..<start + 9])] { shown.insert(index) }
            }
        }
        for index in shown.sorted() {
            Issue.record("\(label) shows more than the last 8 characters of token \(index + 1) (…\(tokens[index].suffix(8)))",
                         sourceLocation: sourceLocation)
        }
        for (index, token) in tokens.enumerated() where token.count > 16 && lowered.contains(token.prefix(8)) {
            Issue.record("\(label) shows the start of token \(index + 1): tokens are shown only as their last 8 characters",
                         sourceLocation: sourceLocation)
        }
        for (name, fragment) in keyFragments {
            // 24 characters of base64 do not occur by chance.
            let pieces = fragment.count > 24 ? [String(fragment.prefix(24)), String(fragment.suffix(24))] : [fragment]
            if pieces.contains(where: { text.contains($0) }) {
                Issue.record("\(label) contains the \(name)", sourceLocation: sourceLocation)
            }
        }
        // Key material of any key, by its shape: PEM armour, a JWT, a long base64 run — in the
        // output without the machine's own folders, whose names may hold a commit hash.
        let text = KnownPaths.removed(from: text)
        for (what, pattern) in Self.shapes {
            let regex = try! NSRegularExpression(pattern: pattern)
            for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let found = String(text[Range(match.range, in: text)!])
                // Hex shorter than a raw key in hex is a certificate serial or a digest (the
                // TLS configuration AsyncHTTPClient logs at trace); tokens are checked above.
                if found.count < 64, found.allSatisfy(\.isHexDigit) { continue }
                Issue.record("\(label) contains \(what): \(found.prefix(80))", sourceLocation: sourceLocation)
            }
        }
    }

    static let shapes: [(String, String)] = [
        ("PEM armour", #"-----BEGIN|PRIVATE KEY"#),
        ("a JWT", #"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."#),
        ("a bearer token", #"(?i)bearer\s+[A-Za-z0-9_-]{20,}"#),
        // PEM body lines are 64 characters, a raw P-256 key is 44 in base64.
        ("a long base64 run", #"[A-Za-z0-9+/]{40,}={0,2}"#),
    ]

    /// Every reading command that shows devices, tokens or deliveries, in text and JSON.
    static func readingCommands(orders: [String]) -> [[String]] {
        var commands: [[String]] = []
        for order in orders {
            commands.append(["show", order])
            commands.append(["show", order, "--json"])
        }
        commands += [
            ["list"], ["list", "--json"],
            ["deliveries", "list"], ["deliveries", "list", "--json"],
            ["deliveries", "list", "--failed"], ["deliveries", "list", "--failed", "--json"],
        ]
        return commands
    }

    /// One line for the test log: what was searched.
    func report(_ what: String) {
        print("secrets scan (\(what)): \(outputs) outputs, \(characters) characters, searched for \(tokens.count) tokens "
            + "(as 9-character windows and 8-character starts) and \(keyFragments.count) key fragments, plus \(Self.shapes.count) key shapes")
    }
}

/// Merchants with their own apps: neither the default app's key nor a merchant's key (sealed
/// in the database, opened by the worker with the master key) nor the master key nor the
/// provider tokens signed with them appear in what `merchant` commands and a trace-level
/// worker print.
@Suite("Merchant keys never appear in output", .serialized)
struct MerchantSecretsInOutputTests {
    @Test("set-apns, merchant list and a worker at trace level sending for two apps", .timeLimit(.minutes(3)))
    func merchantKeys() async throws {
        let database = try await TestDatabase.fresh(prefix: "merchantsecrets")
        _ = try await Schema.migrate(database)
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 4))
        let bravoEngine = try engine.forMerchant("bravo")
        for each in [engine, bravoEngine] {
            _ = try await each.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        }
        let defaultKey = P256.Signing.PrivateKey()
        let bravoKey = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [
                .init(keyID: "DEFAULTKEY", teamID: "DEFAULTTEA", publicKey: defaultKey.publicKey),
                .init(keyID: "BRAVOKEY01", teamID: "BRAVOTEAM1", publicKey: bravoKey.publicKey),
            ],
            acceptedBundleIDs: ["com.example.orders", "com.bravo.orders"]))
        try await apns.start()
        let defaultKeyFile = try Fixtures.file("AuthKey_DEFAULTKEY.p8", defaultKey.pemRepresentation)
        chmod(defaultKeyFile, 0o600)
        let bravoKeyFile = try Fixtures.file("AuthKey_BRAVOKEY01.p8", bravoKey.pemRepresentation)
        let caFile = try Fixtures.file("ca.pem", apns.trustRootPEM)
        let masterKey = Data((0..<32).map { UInt8(($0 * 13 + 5) % 256) }).base64EncodedString()
        let masterKeyFile = try Fixtures.file("orderflow-secret.key", masterKey + "\n")
        let cli = try CLI(databaseURL: database.connectionString, extraEnvironment: ["ORDERFLOW_SECRET_KEY_FILE": masterKeyFile])

        var outputs: [(String, CLI.Result)] = []
        outputs.append(("merchant add", try await cli.run("merchant", "add", "bravo", "--name", "Bravo Burgers")))
        let set = try await cli.run("merchant", "set-apns", "bravo", "--bundle-id", "com.bravo.orders", "--team-id", "BRAVOTEAM1",
                                    "--key-id", "BRAVOKEY01", "--key", bravoKeyFile, "--url", apns.baseURL, "--ca", caFile)
        #expect(set.status == 0, "\(set)")
        outputs.append(("merchant set-apns", set))

        let defaultToken = EngineFixture.token(701)
        let bravoToken = EngineFixture.token(702)
        for (each, order, token) in [(engine, "D1", defaultToken), (bravoEngine, "B1", bravoToken)] {
            _ = try await each.createOrder(NewOrder(orderID: order, workflow: "food-order",
                attributes: ["merchantName": "Secret Kitchen", "orderNumber": .string(order), "itemCount": 1]))
            try await each.registerActivityToken(orderID: order, deviceID: "phone-\(order)", token: token)
            _ = try await each.advance(order, to: "accept")
        }
        let worker = try cli.start([
            "worker", "run", "--apns-key", defaultKeyFile, "--apns-key-id", "DEFAULTKEY", "--apns-team-id", "DEFAULTTEA",
            "--apns-topic", "com.example.orders", "--apns-url", apns.baseURL, "--apns-ca", caFile, "--connections", "3",
        ], environment: ["ORDERFLOW_LOG_LEVEL": "trace"])
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await engine.order("D1").pendingCommands + bravoEngine.order("B1").pendingCommands == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        worker.interrupt()
        let stopped = try await worker.finish()
        #expect(stopped.status == 0, "\(stopped)")
        outputs.append(("worker (trace)", stopped))
        outputs.append(("merchant list", try await cli.run("merchant", "list")))
        outputs.append(("merchant list --json", try await cli.run("merchant", "list", "--json")))

        // Each app's pushes: its own key and topic, through the endpoint set-apns named.
        #expect(!apns.pushes(forToken: defaultToken).isEmpty && !apns.pushes(forToken: bravoToken).isEmpty, "\(apns.rejections())")
        #expect(apns.pushes(forToken: defaultToken).allSatisfy { $0.keyID == "DEFAULTKEY" && $0.topic.hasPrefix("com.example.orders.") })
        #expect(apns.pushes(forToken: bravoToken).allSatisfy { $0.keyID == "BRAVOKEY01" && $0.topic.hasPrefix("com.bravo.orders.") })

        var defaultScan = SecretScan(tokens: [defaultToken, bravoToken], key: defaultKey, pushes: apns.pushes())
        var bravoScan = SecretScan(tokens: [], key: bravoKey)
        for (label, result) in outputs {
            let text = result.stdout + result.stderr
            defaultScan.check(text, "orderflow \(label)")
            bravoScan.check(text, "orderflow \(label)")
            #expect(!text.contains(masterKey) && !text.contains(masterKey.prefix(24)), "\(label) shows the master key")
        }
        defaultScan.report("merchant apps")
        try await apns.stop()
        await engine.shutdown()
    }
}
