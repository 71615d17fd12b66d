import Crypto
import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// `orderflow merchant …` and `orderflow api-key …` as their users meet them: the round trip,
/// every bad input refused in one line with nothing stored changed, and no key in any output.
@Suite("Merchants and API keys on the command line", .serialized)
struct MerchantCLITests {
    static let masterKey = Data((0..<32).map { UInt8($0 * 7 % 256) }).base64EncodedString()
    static let otherMasterKey = Data((0..<32).map { UInt8(255 - $0) }).base64EncodedString()

    @Test("add, set-apns, list: the key sealed and never shown; bad input changes nothing", .timeLimit(.minutes(3)))
    func merchantsAndApps() async throws {
        let database = try await TestDatabase.fresh(prefix: "merchants")
        _ = try await Schema.migrate(database)
        let cli = try CLI(databaseURL: database.connectionString)
        let sealed = ["ORDERFLOW_SECRET_KEY": Self.masterKey]
        let key = P256.Signing.PrivateKey()
        let keyFile = try Fixtures.file("AuthKey_ACME000001.p8", key.pemRepresentation)
        var scan = SecretScan(tokens: [], key: key)
        var outputs: [(String, CLI.Result)] = []

        let added = try await cli.run("merchant", "add", "acme", "--name", "Acme Pizza")
        #expect(added.status == 0 && added.stdout.contains("added merchant acme"), "\(added)")
        _ = try await cli.run("merchant", "add", "bistro")
        let twice = try await cli.run("merchant", "add", "acme")
        #expect(twice.status == 67 && twice.stderr.contains("exists already"), "\(twice)")

        let apnsArguments = ["--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01", "--key-id", "ACME000001", "--key", keyFile]
        let set = try await cli.run(["merchant", "set-apns", "acme"] + apnsArguments, environment: sealed)
        #expect(set.status == 0, "\(set)")
        outputs.append(("set-apns", set))
        let fingerprint = "SHA256:" + SHA256.hash(data: key.publicKey.derRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
        #expect(set.stdout.contains(fingerprint), "\(set)")

        let list = try await cli.run("merchant", "list")
        outputs.append(("list", list))
        for expected in ["acme", "Acme Pizza", "com.acme.orders", "TEAMACME01", "ACME000001", "production", fingerprint, "bistro", "(default app)"] {
            #expect(list.stdout.contains(expected), "merchant list lacks \(expected):\n\(list.stdout)")
        }
        let json = try await cli.run("merchant", "list", "--json")
        outputs.append(("list --json", json))
        #expect(json.status == 0 && json.stdout.contains("\"keyFingerprint\" : \"\(fingerprint)\""), "\(json)")

        // The key is stored sealed: its PEM is not in the row, and opens only with the master key.
        let storedText = try await PostgresConnection.withConnection(database) { connection in
            try await connection.query(PostgresQuery("SELECT encode(key_sealed, 'escape') AS k FROM merchant_apps")).single()
                .decode("k", as: String.self)
        }
        #expect(!storedText.contains("PRIVATE KEY"))

        // Bad input: one line each, the documented status, and the stored state unchanged.
        let p384 = try Fixtures.file("p384.p8", P384.Signing.PrivateKey().pemRepresentation)
        let garbage = try Fixtures.file("garbage.p8", "this is not a key\n")
        let folder = FileManager.default.temporaryDirectory.path
        let check = CLIBadInputChecker()
        let cases: [(String, [String], [String: String], Int32, [String])] = [
            ("missing .p8", ["acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01", "--key-id", "ACME000002", "--key", "/nonexistent/AuthKey.p8"], sealed, 65, ["/nonexistent/AuthKey.p8", "download"]),
            ("a directory as .p8", ["acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01", "--key-id", "ACME000002", "--key", folder], sealed, 65, ["directory", ".p8"]),
            ("malformed .p8", ["acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01", "--key-id", "ACME000002", "--key", garbage], sealed, 65, ["not PEM", ".p8"]),
            ("wrong curve", ["acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01", "--key-id", "ACME000002", "--key", p384], sealed, 65, ["P-384", "P-256"]),
            ("bundle id with spaces", ["acme", "--bundle-id", "com.acme orders", "--team-id", "TEAMACME01", "--key-id", "ACME000002", "--key", keyFile], sealed, 65, ["com.acme orders", "like com.example.orders"]),
            ("malformed key id", ["acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01", "--key-id", "acme-2", "--key", keyFile], sealed, 65, ["acme-2", "10 capital letters"]),
            ("unknown merchant", ["nobody", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01", "--key-id", "ACME000002", "--key", keyFile], sealed, 66, ["nobody", "orderflow merchant add"]),
            ("no master key", ["acme"] + apnsArguments, [:], 64, ["master key", "openssl rand -base64 32"]),
            ("a master key of the wrong length", ["acme"] + apnsArguments, ["ORDERFLOW_SECRET_KEY": Data(count: 16).base64EncodedString()], 64, ["16 bytes", "32", "openssl rand"]),
            ("a master key that is not base64", ["acme"] + apnsArguments, ["ORDERFLOW_SECRET_KEY": "not base64!"], 64, ["not base64", "openssl rand"]),
            ("keys sealed under another master key", ["bistro"] + apnsArguments, ["ORDERFLOW_SECRET_KEY": Self.otherMasterKey], 64, ["another master key", "the one given"]),
        ]
        let keyLines = key.pemRepresentation.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        for (label, arguments, environment, status, fragments) in cases {
            let result = try await cli.run(["merchant", "set-apns"] + arguments, environment: environment)
            check.expect(label, category: "merchant set-apns", result, status: status, mentioning: fragments, notMentioning: keyLines)
            // A refused key's message names the PEM label it expected (no key material): the
            // scan's shape check would take that for armour, so only the fragments apply there.
            if !["malformed .p8", "wrong curve"].contains(label) { outputs.append((label, result)) }
        }
        let after = try await cli.run("merchant", "list", "--json")
        #expect(after.stdout == json.stdout, "a refused set-apns changed what is stored:\n\(json.stdout)\n\(after.stdout)")
        print(check.summary)
        #expect(check.failures == 0)

        // Rotation: set-apns again with a new key replaces the fingerprint.
        let newKey = P256.Signing.PrivateKey()
        let newKeyFile = try Fixtures.file("AuthKey_ACME000002.p8", newKey.pemRepresentation)
        let rotated = try await cli.run(["merchant", "set-apns", "acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01",
                                         "--key-id", "ACME000002", "--key", newKeyFile, "--environment", "sandbox"], environment: sealed)
        #expect(rotated.status == 0, "\(rotated)")
        let relisted = try await cli.run("merchant", "list")
        #expect(relisted.stdout.contains("ACME000002") && relisted.stdout.contains("sandbox") && !relisted.stdout.contains(fingerprint), "\(relisted)")
        outputs += [("rotated", rotated), ("relisted", relisted)]

        // What a worker recorded shows in the list: a paused merchant, why, and until when.
        try await PostgresConnection.withConnection(database) { connection in
            try await connection.query(PostgresQuery("""
                UPDATE merchants SET push_status = 'paused', push_status_reason = 'APNs rejected … 403 InvalidProviderToken',
                       push_status_since = now(), push_status_until = now() + interval '5 minutes'
                WHERE merchant_id = 'acme'
                """))
        }
        let pausedList = try await cli.run("merchant", "list")
        print(pausedList.stdout)
        let acmeLine = pausedList.stdout.split(separator: "\n").first { $0.hasPrefix("acme") } ?? ""
        #expect(acmeLine.contains("paused until") && acmeLine.contains("InvalidProviderToken"), "\(pausedList)")
        #expect(pausedList.stdout.split(separator: "\n").first { $0.hasPrefix("bistro") }?.hasSuffix("ok") == true, "\(pausedList)")

        let scanNew = SecretScan(tokens: [], key: newKey)
        for (label, result) in outputs {
            scan.check(result.stdout + result.stderr, "orderflow merchant (\(label))")
        }
        var scanRotated = scanNew
        scanRotated.check(rotated.stdout + rotated.stderr + relisted.stdout, "orderflow merchant (rotated)")
        scan.report("merchant commands")
    }

    @Test("api-key create prints the secret once; list shows its prefix; a revoked key no longer resolves", .timeLimit(.minutes(2)))
    func apiKeyRoundTrip() async throws {
        let database = try await TestDatabase.fresh(prefix: "apikeys")
        _ = try await Schema.migrate(database)
        let cli = try CLI(databaseURL: database.connectionString)
        #expect(try await cli.run("merchant", "add", "acme").status == 0)

        let created = try await cli.run("api-key", "create", "--merchant", "acme", "--name", "pos")
        #expect(created.status == 0, "\(created)")
        let secret = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(secret.hasPrefix("of_live_") && secret.count == 8 + 10 + 1 + 32, "\(created)")
        #expect(created.stderr.contains("shown only this once"))
        let prefix = String(secret.dropFirst(8).prefix(10))

        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 2))
        #expect(try await engine.resolveAPIKey(secret) == "acme")
        #expect(try await engine.resolveAPIKey(String(secret.dropLast()) + (secret.last == "a" ? "b" : "a")) == nil, "a wrong secret")
        #expect(try await engine.resolveAPIKey("of_live_\(prefix)") == nil, "a prefix alone")
        #expect(try await engine.resolveAPIKey("nonsense") == nil)

        let list = try await cli.run("api-key", "list", "--merchant", "acme")
        #expect(list.status == 0 && list.stdout.contains(prefix) && list.stdout.contains("pos") && list.stdout.contains("live"), "\(list)")
        #expect(!list.stdout.contains(secret.suffix(32)), "the list shows the secret")
        let json = try await cli.run("api-key", "list", "--merchant", "acme", "--json")
        #expect(json.status == 0 && json.stdout.contains("\"lastUsedAt\""), "used once: \(json)")
        #expect(!json.stdout.contains(secret.suffix(32)))

        let unknown = try await cli.run("api-key", "create", "--merchant", "nobody")
        #expect(unknown.status == 66 && unknown.stderrLines.count == 1 && unknown.stderr.contains("orderflow merchant add"), "\(unknown)")
        let wrongPrefix = try await cli.run("api-key", "revoke", "--merchant", "acme", "zzzzzzzzzz")
        #expect(wrongPrefix.status == 66, "\(wrongPrefix)")

        let revoked = try await cli.run("api-key", "revoke", "--merchant", "acme", prefix)
        #expect(revoked.status == 0, "\(revoked)")
        // Revoked by another process: refused once this engine's read of the key is a second old.
        try await Task.sleep(for: OrderFlowEngine.apiKeyRecheck)
        #expect(try await engine.resolveAPIKey(secret) == nil, "a revoked key resolves")

        // Revoked through the engine that resolves it: refused at once, though it was just read.
        let second = try await cli.run("api-key", "create", "--merchant", "acme", "--name", "till")
        let secondSecret = second.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await engine.resolveAPIKey(secondSecret) == "acme")
        try await engine.revokeAPIKey(merchantID: "acme", prefix: String(secondSecret.dropFirst(8).prefix(10)))
        #expect(try await engine.resolveAPIKey(secondSecret) == nil, "a key revoked in this process still resolves")
        let relisted = try await cli.run("api-key", "list", "--merchant", "acme")
        #expect(relisted.stdout.contains("revoked"), "\(relisted)")
        // Only its hash is stored.
        let stored = try await engine.pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM merchant_api_keys WHERE position($1 IN encode(secret_hash, 'escape')) > 0", String(secret.suffix(32))))
            .single().decode("n", as: Int.self)
        #expect(stored == 0)
        await engine.shutdown()
    }
}
