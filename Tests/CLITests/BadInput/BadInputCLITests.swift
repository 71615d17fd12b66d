import Crypto
import Foundation
import OrderFlowTesting
import Testing

/// Malformed or missing settings for the command line: the database URL and the worker's APNs
/// key and ids. Each must give one line on stderr that says what is wrong and what to do, the
/// documented exit code, and never a password or key material; the worker must not start.
@Suite("Bad input: database URL and APNs settings")
struct BadInputCLITests {
    @Test(.timeLimit(.minutes(5)))
    func badSettingsAreRefusedInOneLine() async throws {
        let check = CLIBadInputChecker()
        try await Self.databaseURLs(check)
        try await Self.apnsSettings(check)
        try await Self.merchantIDs(check)
        try await Self.textPolicy(check)
        print(check.summary)
        #expect(check.failures == 0, "\(check.failures) cases misbehaved; see the issues above")
    }

    /// The throw-away server's host and port (from `ORDERFLOW_TEST_DATABASE_URL`).
    static func server() throws -> (host: String, port: Int) {
        let url = try #require(ProcessInfo.processInfo.environment["ORDERFLOW_TEST_DATABASE_URL"].flatMap(URLComponents.init(string:)),
                               "ORDERFLOW_TEST_DATABASE_URL is not set: run the tests with scripts/test")
        return (try #require(url.host), url.port ?? 5432)
    }

    // MARK: Merchant

    /// A merchant id the engine cannot store is refused before the database is touched.
    static func merchantIDs(_ check: CLIBadInputChecker) async throws {
        let cli = try CLI(databaseURL: "postgresql://u@127.0.0.1:1/x")
        let cases: [(String, String, [String])] = [
            // (An environment variable cannot carry NUL: the library's own check covers that.)
            ("a terminal escape", "acme\u{1B}[31m", ["ORDERFLOW_MERCHANT", "U+001B", "unset it"]),
            ("a line break", "acme\nevil", ["ORDERFLOW_MERCHANT", "U+000A"]),
            ("201 characters", String(repeating: "m", count: 201), ["ORDERFLOW_MERCHANT", "201 characters"]),
            // Printable, but outside the id policy.
            ("SQL", "'); DROP TABLE orders; --", ["ORDERFLOW_MERCHANT", "U+0027", "ASCII letters, digits"]),
            ("emoji", "🍕🍕🍕", ["ORDERFLOW_MERCHANT", "U+1F355"]),
            ("a right-to-left override", "ab\u{202E}cd", ["ORDERFLOW_MERCHANT", "ab\\u{202E}cd", "U+202E"]),
        ]
        for (label, value, fragments) in cases {
            for command in [["list"], ["advance", "1042", "ready"]] {
                let result = try await cli.run(command, environment: ["ORDERFLOW_MERCHANT": value])
                check.expect("merchant id with \(label) (\(command[0]))", category: "merchant id", result, status: 64, mentioning: fragments,
                             notMentioning: ["127.0.0.1:1"])
            }
        }
    }

    // MARK: The text policy, through the CLI

    /// Ids outside the policy and content values that are not one line of printable text:
    /// refused by the engine (exit 65), the value shown escaped, nothing printed raw.
    static func textPolicy(_ check: CLIBadInputChecker) async throws {
        let cli = try await CLI.withFreshDatabase()
        let food = ["--workflow", "food-order", "--attr", "orderNumber=7", "--attr", "itemCount=1"]
        for step in [["workflow", "apply", Fixtures.foodOrder], ["order", "create", "1042", "--attr", "merchantName=Luigi's"] + food,
                     ["advance", "1042", "accept"], ["advance", "1042", "ready"]] {
            let result = try await cli.run(step)
            if result.status != 0 { check.fail("setting up: \(result)") }
        }
        let ids = "ASCII letters, digits"
        // (label, arguments, environment, fragments)
        let cases: [(String, [String], [String: String], [String])] = [
            ("order id: SQL", ["order", "create", "'); DROP TABLE orders; --", "--attr", "merchantName=M"] + food, [:],
             ["the order id", "\"'); DROP TABLE orders; --\"", "U+0027", ids]),
            ("order id: emoji", ["order", "create", "🍕🍕🍕", "--attr", "merchantName=M"] + food, [:], ["the order id", "U+1F355", ids]),
            ("order id: right-to-left override", ["order", "create", "ab\u{202E}cd", "--attr", "merchantName=M"] + food, [:],
             ["the order id", "ab\\u{202E}cd", "U+202E"]),
            ("order id: ESC", ["order", "create", "ab\u{1B}[31m", "--attr", "merchantName=M"] + food, [:], ["the order id", "U+001B"]),
            ("order id: U+0001", ["order", "create", "ab\u{1}cd", "--attr", "merchantName=M"] + food, [:], ["the order id", "U+0001"]),
            ("order id: a line break", ["order", "create", "ab\ncd", "--attr", "merchantName=M"] + food, [:], ["the order id", "U+000A"]),
            ("order id to show: SQL", ["show", "'); DROP TABLE orders; --"], [:], ["the order id", ids]),
            ("device id: emoji", ["follow", "1042", "🍕🍕🍕"], [:], ["the device id", "U+1F355"]),
            ("state or event: right-to-left override", ["advance", "1042", "ab\u{202E}cd"], [:], ["the state or event name", "U+202E"]),
            ("idempotency key: a space", ["advance", "1042", "dispatch", "--eta", "15m", "--idempotency-key", "a b"], [:],
             ["the idempotency key", "U+0020"]),
            ("actor: SQL", ["advance", "1042", "dispatch", "--eta", "15m"], ["ORDERFLOW_ACTOR": "'); DROP TABLE orders; --"],
             ["the actor", ids]),
            ("attribute: ESC", ["order", "create", "1043", "--attr", "merchantName=Lu\u{1B}[31migi"] + food, [:],
             ["attribute merchantName", "Lu\\u{1B}[31migi", "U+001B"]),
            ("attribute: U+0001", ["order", "create", "1043", "--attr", "merchantName=Lu\u{1}igi"] + food, [:], ["merchantName", "U+0001"]),
            ("driver: right-to-left override", ["advance", "1042", "dispatch", "--eta", "15m", "--driver", "ab\u{202E}cd"], [:],
             ["input driver", "ab\\u{202E}cd", "U+202E", "does not close"]),
            ("driver: a tab", ["advance", "1042", "dispatch", "--eta", "15m", "--driver", "Sam\tLee"], [:], ["input driver", "U+0009"]),
            ("cancel reason: a line break", ["cancel", "1042", "--reason", "closed\nfor today"], [:], ["input reason", "line break"]),
        ]
        for (label, arguments, environment, fragments) in cases {
            let result = try await cli.run(arguments, environment: environment)
            check.expect(label, category: "text policy", result, status: 65, mentioning: fragments)
        }
        // The parser's own refusal quotes the stray argument: escaped as well (exit 64).
        let stray = try await cli.run("show", "1042", "x\u{1B}[2J\u{202E}y")
        check.expect("a stray argument with ESC and U+202E", category: "text policy", stray, status: 64,
                     mentioning: ["x\\u{1B}[2J\\u{202E}y"])
        // What the policy lets in: closed direction isolates, and the order is still where it was.
        let accepted = try await cli.run(["order", "create", "1044", "--attr", "merchantName=\u{2067}שלום\u{2069} Pizza"] + food)
        if accepted.status != 0 { check.fail("a closed isolate in an attribute was refused: \(accepted)") }
        let unchanged = try await cli.run("show", "1042", "--json")
        if !unchanged.stdout.contains("\"state\" : \"ready\"") { check.fail("order 1042 moved: \(unchanged)") }
    }

    // MARK: Database URL

    static func databaseURLs(_ check: CLIBadInputChecker) async throws {
        let (host, port) = try server()
        let category = "database URL"
        let secret = "hunter2-Pa55"
        // (label, variables, exit code, fragments)
        let cases: [(String, [String: String], Int32, [String])] = [
            ("not a URL", ["ORDERFLOW_DATABASE_URL": "not a url"], 64, ["ORDERFLOW_DATABASE_URL", "not a usable database URL", "postgresql://"]),
            ("another scheme", ["ORDERFLOW_DATABASE_URL": "mysql://u:\(secret)@\(host):\(port)/db"], 64, ["ORDERFLOW_DATABASE_URL"]),
            ("unknown conninfo key", ["ORDERFLOW_DATABASE_URL": "host=\(host) bogus=1 password=\(secret)"], 64, ["bogus"]),
            ("bad percent-encoding in the password", ["ORDERFLOW_DATABASE_URL": "postgresql://u:\(secret)%zz@\(host):\(port)/db"], 64,
             ["ORDERFLOW_DATABASE_URL"]),
            ("unclosed IPv6 host", ["ORDERFLOW_DATABASE_URL": "postgresql://u:\(secret)@[::1:\(port)/db"], 64, ["ORDERFLOW_DATABASE_URL"]),
            ("port out of range", ["ORDERFLOW_DATABASE_URL": "postgresql://u:\(secret)@\(host):99999/db"], 64, ["port", "99999", "1 to 65535"]),
            ("port not a number", ["ORDERFLOW_DATABASE_URL": "postgresql://u:\(secret)@\(host):abc/db"], 64, ["port", "abc"]),
            ("set but empty", ["ORDERFLOW_DATABASE_URL": "   "], 64, ["ORDERFLOW_DATABASE_URL is set but empty", "unset it"]),
            ("DATABASE_URL malformed", ["DATABASE_URL": "not a url"], 64, ["DATABASE_URL is not a usable database URL"]),
            ("DATABASE_URL set but empty", ["DATABASE_URL": ""], 64, ["DATABASE_URL is set but empty"]),
            ("no host at all", ["ORDERFLOW_DATABASE_URL": "postgres://", "PGHOST": "/nonexistent-socket-dir"], 69,
             ["cannot connect", "/nonexistent-socket-dir"]),
            ("nothing listens on the port", ["ORDERFLOW_DATABASE_URL": "postgresql://u:\(secret)@127.0.0.1:1/db"], 69,
             ["cannot connect", "127.0.0.1:1", "check that the server is running"]),
            ("unknown host", ["ORDERFLOW_DATABASE_URL": "postgresql://u:\(secret)@no-such-host.invalid:\(port)/db"], 69,
             ["cannot connect", "no-such-host.invalid"]),
            ("unknown user with a password", ["ORDERFLOW_DATABASE_URL": "postgresql://nobody_here:\(secret)@\(host):\(port)/postgres"], 69,
             ["nobody_here"]),
            ("unknown database", ["ORDERFLOW_DATABASE_URL": "postgresql://orderflow_test:\(secret)@\(host):\(port)/no_such_db"], 69,
             ["no_such_db"]),
            ("conninfo with a password, nothing listening", ["ORDERFLOW_DATABASE_URL": "host=127.0.0.1 port=1 user=u password=\(secret)"], 69,
             ["cannot connect", "127.0.0.1:1"]),
            ("a server without the schema", ["ORDERFLOW_DATABASE_URL": "postgresql://orderflow_test:\(secret)@\(host):\(port)/postgres"], 69,
             ["no OrderFlow schema", "orderflow migrate"]),
        ]
        for (label, variables, status, fragments) in cases {
            let cli = try CLI(databaseURL: nil, extraEnvironment: variables)
            for command in [["list"], ["advance", "1042", "ready"]] {
                let result = try await cli.run(command)
                check.expect("\(label) (\(command[0]))", category: category, result, status: status, mentioning: fragments,
                             notMentioning: [secret, "hunter2"])
            }
            // Nothing was started in the working directory instead (no embedded database).
            let embedded = cli.directory.appendingPathComponent(".orderflow").path
            if FileManager.default.fileExists(atPath: embedded) {
                check.fail("\(label): an embedded database was set up in \(embedded)")
            }
        }
    }

    // MARK: APNs settings of `worker run`

    static func apnsSettings(_ check: CLIBadInputChecker) async throws {
        let category = "APNs settings"
        let key = P256.Signing.PrivateKey()
        let goodKey = try Fixtures.file("AuthKey_GOOD.p8", key.pemRepresentation)
        chmod(goodKey, 0o600)
        let base: [String: String] = [
            // Nothing listens here: a worker that got past its APNs checks would exit 69.
            "ORDERFLOW_DATABASE_URL": "postgresql://u@127.0.0.1:1/x",
            "ORDERFLOW_APNS_KEY": goodKey, "ORDERFLOW_APNS_KEY_ID": "KEY1234567", "ORDERFLOW_APNS_TEAM_ID": "TEAM123456",
            "ORDERFLOW_APNS_TOPIC": "com.example.orders",
        ]
        for name in ["ORDERFLOW_APNS_KEY", "ORDERFLOW_APNS_KEY_ID", "ORDERFLOW_APNS_TEAM_ID", "ORDERFLOW_APNS_TOPIC", "ORDERFLOW_APNS_ENV",
                     "ORDERFLOW_APNS_URL", "ORDERFLOW_APNS_CA", "ORDERFLOW_FCM_URL", "ORDERFLOW_FCM_CA"] where ProcessInfo.processInfo.environment[name] != nil {
            Issue.record("\(name) is set in the test environment; the cases below assume it is not")
        }

        // The settings above are good: only the database stops this worker.
        let control = try await run(["worker", "run"], base)
        if control.status != 69 { check.fail("control: good APNs settings should get as far as the database (exit 69): \(control)") }

        let p384 = P384.Signing.PrivateKey().pemRepresentation
        let p521 = P521.Signing.PrivateKey().pemRepresentation
        let keyMaterial = [String(key.pemRepresentation.split(separator: "\n")[1].prefix(24)),
                           String(p384.split(separator: "\n")[1].prefix(24)), String(p521.split(separator: "\n")[1].prefix(24))]
        var files: [(String, String, [String])] = [
            ("missing file", "/nonexistent/AuthKey_X.p8", ["/nonexistent/AuthKey_X.p8", "does not exist"]),
            ("empty file", try Fixtures.file("empty.p8", ""), ["is empty", "P-256"]),
            ("not PEM", try Fixtures.file("text.p8", "this is not a key\n"), ["not PEM", "BEGIN PRIVATE KEY"]),
            ("P-384 key", try Fixtures.file("p384.p8", p384), ["P-384", "P-256"]),
            ("P-521 key", try Fixtures.file("p521.p8", p521), ["P-521", "P-256"]),
            ("public key", try Fixtures.file("public.pem", key.publicKey.pemRepresentation), ["PUBLIC KEY", "not a P-256 private key"]),
            ("certificate", try Fixtures.file("cert.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
             ["CERTIFICATE", "not a P-256 private key"]),
            ("damaged key", try Fixtures.file("damaged.p8", key.pemRepresentation.replacingOccurrences(of: "A", with: "B")), ["P-256"]),
            ("a directory", FileManager.default.temporaryDirectory.path, ["is a directory", ".p8"]),
            ("100 KB file", try Fixtures.file("big.p8", String(repeating: "k", count: 100_000)), ["100000 bytes", "250 bytes"]),
        ]
        let binary = try Fixtures.file("binary.p8", "")
        try Data([0xFF, 0xFE, 0x00, 0x80, 0xC3]).write(to: URL(fileURLWithPath: binary))
        files.append(("binary file", binary, ["UTF-8"]))
        // A FIFO: reading it would wait for a writer forever.
        let fifo = try Fixtures.file("fifo-dir-marker", "") + ".fifo"
        if mkfifo(fifo, 0o600) == 0 { files.append(("a FIFO", fifo, ["not a regular file"])) }
        if let rsa = rsaKeyPEM() {
            files.append(("RSA key", try Fixtures.file("rsa.p8", rsa), ["RSA"]))
        }
        if geteuid() != 0 {
            let unreadable = try Fixtures.file("unreadable.p8", key.pemRepresentation)
            chmod(unreadable, 0o000)
            files.append(("unreadable file", unreadable, ["cannot read"]))
        }
        for (label, path, fragments) in files {
            let result = try await run(["worker", "run"], base.merging(["ORDERFLOW_APNS_KEY": path]) { _, new in new })
            check.expect("key: \(label)", category: category, result, status: 64, mentioning: ["ORDERFLOW_APNS_KEY"] + fragments,
                         notMentioning: keyMaterial)
        }

        // (label, variable changes, fragments); nil removes the variable.
        let settings: [(String, [String: String?], [String])] = [
            ("no key", ["ORDERFLOW_APNS_KEY": nil], ["no APNs signing key", "--apns-key", "ORDERFLOW_APNS_KEY"]),
            ("no key id", ["ORDERFLOW_APNS_KEY_ID": nil], ["no APNs key id", "ORDERFLOW_APNS_KEY_ID"]),
            ("blank key id", ["ORDERFLOW_APNS_KEY_ID": "   "], ["no APNs key id"]),
            ("short key id", ["ORDERFLOW_APNS_KEY_ID": "ABC"], ["ORDERFLOW_APNS_KEY_ID is \"ABC\"", "10-character"]),
            ("lower-case key id", ["ORDERFLOW_APNS_KEY_ID": "key1234567"], ["ORDERFLOW_APNS_KEY_ID", "capital letters and digits"]),
            ("key id with a quote", ["ORDERFLOW_APNS_KEY_ID": "KEY12'4567"], ["ORDERFLOW_APNS_KEY_ID"]),
            ("no team id", ["ORDERFLOW_APNS_TEAM_ID": nil], ["no APNs team id", "ORDERFLOW_APNS_TEAM_ID"]),
            ("short team id", ["ORDERFLOW_APNS_TEAM_ID": "TEAM"], ["ORDERFLOW_APNS_TEAM_ID is \"TEAM\"", "10-character"]),
            ("11-character team id", ["ORDERFLOW_APNS_TEAM_ID": "TEAM1234567"], ["ORDERFLOW_APNS_TEAM_ID"]),
            ("no topic", ["ORDERFLOW_APNS_TOPIC": nil], ["no APNs topic", "ORDERFLOW_APNS_TOPIC"]),
            ("topic with spaces", ["ORDERFLOW_APNS_TOPIC": "com example orders"], ["ORDERFLOW_APNS_TOPIC", "bundle id"]),
            ("topic with a path", ["ORDERFLOW_APNS_TOPIC": "com.example/../x"], ["ORDERFLOW_APNS_TOPIC", "bundle id"]),
            ("topic with the Live Activity suffix", ["ORDERFLOW_APNS_TOPIC": "com.example.orders.push-type.liveactivity"],
             ["push-type.liveactivity", "the worker adds"]),
            ("unknown environment", ["ORDERFLOW_APNS_ENV": "staging"], ["ORDERFLOW_APNS_ENV", "production or sandbox"]),
            ("http endpoint", ["ORDERFLOW_APNS_URL": "http://127.0.0.1:1"], ["https"]),
            ("endpoint that is not a URL", ["ORDERFLOW_APNS_URL": "not a url"], ["https"]),
            ("CA file that is not PEM", ["ORDERFLOW_APNS_URL": "https://127.0.0.1:1", "ORDERFLOW_APNS_CA": try Fixtures.file("ca.pem", "nope")],
             ["PEM certificates"]),
            ("CA path that is a directory", ["ORDERFLOW_APNS_URL": "https://127.0.0.1:1", "ORDERFLOW_APNS_CA": FileManager.default.temporaryDirectory.path],
             ["ORDERFLOW_APNS_CA", "cannot be read"]),
            ("CA file that does not exist", ["ORDERFLOW_APNS_URL": "https://127.0.0.1:1", "ORDERFLOW_APNS_CA": "/nonexistent/ca.pem"],
             ["ORDERFLOW_APNS_CA", "cannot be read"]),
            ("http FCM endpoint", ["ORDERFLOW_FCM_URL": "http://127.0.0.1:1"], ["ORDERFLOW_FCM_URL", "https"]),
            ("FCM CA file that does not exist", ["ORDERFLOW_FCM_CA": "/nonexistent/ca.pem"], ["ORDERFLOW_FCM_CA", "cannot be read"]),
            ("FCM CA file that is not PEM", ["ORDERFLOW_FCM_CA": try Fixtures.file("fcm-ca.pem", "nope")], ["ORDERFLOW_FCM_CA", "PEM"]),
        ]
        for (label, changes, fragments) in settings {
            var environment = base
            for (name, value) in changes { environment[name] = value }
            let removed = changes.filter { $0.value == nil }.map(\.key)
            let result = try await run(["worker", "run"], environment, removing: removed)
            check.expect(label, category: category, result, status: 64, mentioning: fragments, notMentioning: keyMaterial)
        }
        // A flag wins over the variable, and the message names the flag.
        let flagged = try await run(["worker", "run", "--apns-key-id", "SHORT"], base)
        check.expect("flag --apns-key-id SHORT", category: category, flagged, status: 64, mentioning: ["--apns-key-id is \"SHORT\""])
        let fcmFlagged = try await run(["worker", "run", "--fcm-url", "ftp://x"], base)
        check.expect("flag --fcm-url ftp://x", category: category, fcmFlagged, status: 64, mentioning: ["--fcm-url is \"ftp://x\""])
    }

    /// Runs `orderflow` with exactly these APNs variables (none inherited).
    static func run(_ arguments: [String], _ environment: [String: String], removing removed: [String] = []) async throws -> CLI.Result {
        var cli = try CLI(databaseURL: environment["ORDERFLOW_DATABASE_URL"])
        for name in removed { cli.environment[name] = nil }
        return try await cli.run(arguments, environment: environment.filter { $0.key != "ORDERFLOW_DATABASE_URL" })
    }

    /// An RSA private key from openssl, when it is installed. (Written to a file, not read
    /// from a pipe: a pipe read interrupted by another test's SIGCHLD stops Foundation.)
    static func rsaKeyPEM() -> String? {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-rsa-\(UUID().uuidString).pem").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return try? String(contentsOfFile: path, encoding: .utf8)
    }
}

/// Checks one command line's failure and keeps the tally.
final class CLIBadInputChecker {
    private(set) var counts: [(category: String, count: Int)] = []
    private(set) var failures = 0

    var summary: String {
        let total = counts.map(\.count).reduce(0, +)
        return "bad input (CLI): \(total) cases, all rejected in one line with the documented exit code, no password or key printed ("
            + counts.map { "\($0.category) \($0.count)" }.joined(separator: ", ") + ")"
    }

    func fail(_ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        failures += 1
        Issue.record("\(message)", sourceLocation: sourceLocation)
    }

    func expect(_ label: String, category: String, _ result: CLI.Result, status: Int32, mentioning fragments: [String],
                notMentioning secrets: [String] = [], sourceLocation: SourceLocation = #_sourceLocation)
    {
        var problems: [String] = []
        if result.status != status { problems.append("exit \(result.status), expected \(status)") }
        if result.stderrLines.count != 1 { problems.append("\(result.stderrLines.count) lines on stderr, expected 1") }
        if !result.stderr.hasPrefix("orderflow: ") { problems.append("stderr does not start with `orderflow: `") }
        for fragment in fragments where !result.stderr.lowercased().contains(fragment.lowercased()) {
            problems.append("stderr lacks \"\(fragment)\"")
        }
        for secret in secrets where result.stderr.contains(secret) || result.stdout.contains(secret) {
            problems.append("output shows \"\(secret.prefix(8))…\"")
        }
        for marker in ["SQLSTATE", "Optional(", "Error(", "unexpected error", "Fatal error"] where result.stderr.contains(marker) {
            problems.append("stderr shows internals (\(marker))")
        }
        let raw = HostileText.terminalControls(in: result.stdout + result.stderr)
        if !raw.isEmpty { problems.append("output holds \(raw.joined(separator: ", ")) raw") }
        if result.seconds > 20 { problems.append("took \(Int(result.seconds)) s") }
        if problems.isEmpty {
            if let index = counts.firstIndex(where: { $0.category == category }) {
                counts[index].count += 1
            } else {
                counts.append((category, 1))
            }
        } else {
            fail("\(category) / \(label): \(problems.joined(separator: "; "))\n\(result)", sourceLocation: sourceLocation)
        }
    }
}
