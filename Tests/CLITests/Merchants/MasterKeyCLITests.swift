import Crypto
import Foundation
import LocalFCM
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// Client-secret keys sealed under the master key, rotated by version; the master key rotated
/// over every sealed secret — and each done the wrong way (another key), refused with nothing
/// changed.
@Suite("Master key and client-secret keys", .serialized)
struct MasterKeyCLITests {
    static func newKey() -> String { Data(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }).base64EncodedString() }

    /// The stored secrets' rows as text: equal before and after means nothing changed.
    static func sealedRows(_ database: PostgresConfiguration) async throws -> String {
        try await PostgresConnection.withConnection(database) { connection in
            let apps: [String] = try await connection.query(PostgresQuery(
                "SELECT merchant_id || ':' || encode(key_sealed, 'hex') || ':' || master_key_id AS r FROM merchant_apps ORDER BY 1"))
                .map { try $0.decode("r") }
            let keys: [String] = try await connection.query(PostgresQuery("""
                SELECT merchant_id || ':' || version || ':' || coalesce(encode(key, 'hex'), '-') || ':'
                       || coalesce(encode(key_sealed, 'hex'), '-') || ':' || coalesce(master_key_id, '-') AS r
                FROM merchant_client_keys ORDER BY 1
                """)).map { try $0.decode("r") }
            let accounts: [String] = try await connection.query(PostgresQuery(
                "SELECT merchant_id || ':' || encode(key_sealed, 'hex') || ':' || master_key_id AS r FROM merchant_fcm_apps ORDER BY 1"))
                .map { try $0.decode("r") }
            return (apps + keys + accounts).joined(separator: "\n")
        }
    }

    @Test("client-secret keys: sealed at rest, rotated by version, older secrets retired on request", .timeLimit(.minutes(3)))
    func clientSecretKeys() async throws {
        let database = try await TestDatabase.fresh(prefix: "clientkeys")
        _ = try await Schema.migrate(database)
        let masterText = Self.newKey()
        let master = try MasterKey(base64: masterText, source: "test")
        var configuration = OrderFlowConfiguration(database: database)
        configuration.masterKey = master
        let engine = OrderFlowEngine(configuration: configuration)
        defer { Task { await engine.shutdown() } }
        let first = try await engine.clientSecret(forOrder: "1042")
        #expect(try await engine.resolveClientSecret(first)?.orderID == "1042")
        let rows = try await Self.sealedRows(database)
        #expect(rows.contains(":1:-:") && rows.hasSuffix(":\(master.id)"), "sealed, no plain key: \(rows)")

        // An engine without that master key cannot read the sealed key: it says which key it needs.
        let blind = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database))
        defer { Task { await blind.shutdown() } }
        await #expect { _ = try await blind.resolveClientSecret(first) } throws: { error in
            (error as? OrderFlowError)?.code == .invalidConfiguration && "\(error)".contains(master.id)
        }

        let cli = try CLI(databaseURL: database.connectionString)
        let environment = ["ORDERFLOW_SECRET_KEY": masterText]
        let rotated = try await cli.run(["merchant", "rotate-client-key", "default"], environment: environment)
        #expect(rotated.status == 0 && rotated.stdout.contains("key version 2"), "\(rotated)")
        // Another process (a running server sees the new version within a minute).
        let rotatedEngine = OrderFlowEngine(configuration: configuration)
        defer { Task { await rotatedEngine.shutdown() } }
        let second = try await rotatedEngine.clientSecret(forOrder: "1042")
        #expect(second != first && second.contains(".v2."), "\(second)")
        #expect(try await engine.resolveClientSecret(first)?.orderID == "1042", "older secrets work until retired")
        // This engine read its keyring moments ago, and reads it again for an unknown version at
        // most once a second (made-up versions cost no query each): on a fast machine the new
        // version is seen a moment later, not at once.
        var resolved = try await engine.resolveClientSecret(second)
        let deadline = ContinuousClock.now + .seconds(5)
        while resolved == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            resolved = try await engine.resolveClientSecret(second)
        }
        #expect(resolved?.orderID == "1042")
        let retired = try await cli.run(["merchant", "rotate-client-key", "default", "--retire-older"], environment: environment)
        #expect(retired.status == 0 && retired.stdout.contains("key version 3"), "\(retired)")
        let fresh = OrderFlowEngine(configuration: configuration)
        defer { Task { await fresh.shutdown() } }
        let firstAfter = try await fresh.resolveClientSecret(first)
        let secondAfter = try await fresh.resolveClientSecret(second)
        #expect(firstAfter == nil && secondAfter == nil, "retired versions open nothing")
        #expect(try await fresh.resolveClientSecret(try await fresh.clientSecret(forOrder: "1042"))?.orderID == "1042")
        let unknown = try await cli.run(["merchant", "rotate-client-key", "nobody"], environment: environment)
        #expect(unknown.status == 66 && unknown.stderr.contains("nobody"), "\(unknown)")
    }

    @Test("master-key rotate seals every secret under the new key; the wrong current key changes nothing", .timeLimit(.minutes(3)))
    func masterKeyRotation() async throws {
        let database = try await TestDatabase.fresh(prefix: "masterkey")
        _ = try await Schema.migrate(database)
        let cli = try CLI(databaseURL: database.connectionString)
        let old = Self.newKey()
        let oldKey = try MasterKey(base64: old, source: "test")

        // A merchant with its Firebase service account and APNs key sealed under the old key,
        // and an unsealed client-secret key.
        _ = try await cli.run("merchant", "add", "acme")
        let account = try LocalFCMServiceAccountKey.generate(projectID: "acme-orders", tokenURI: "https://oauth2.googleapis.com/token")
        let accountFile = try Fixtures.file("acme-firebase.json", account.json)
        let fcm = try await cli.run(["merchant", "set-fcm", "acme", "--service-account", accountFile], environment: ["ORDERFLOW_SECRET_KEY": old])
        #expect(fcm.status == 0, "\(fcm)")
        let apnsKey = P256.Signing.PrivateKey()
        let keyFile = try Fixtures.file("AuthKey_ACME000001.p8", apnsKey.pemRepresentation)
        // An APNs key under another master key than the stored Firebase key's: refused, nothing stored.
        let onlyFCM = try await Self.sealedRows(database)
        let mixed = try await cli.run(["merchant", "set-apns", "acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01",
                                       "--key-id", "ACME000001", "--key", keyFile], environment: ["ORDERFLOW_SECRET_KEY": Self.newKey()])
        #expect(mixed.status != 0 && mixed.stderr.contains("another master key (id \(oldKey.id))")
                && mixed.stderr.contains("Firebase service accounts"), "\(mixed)")
        #expect(try await Self.sealedRows(database) == onlyFCM, "a refused APNs key stores nothing")
        let set = try await cli.run(["merchant", "set-apns", "acme", "--bundle-id", "com.acme.orders", "--team-id", "TEAMACME01",
                                     "--key-id", "ACME000001", "--key", keyFile], environment: ["ORDERFLOW_SECRET_KEY": old])
        #expect(set.status == 0, "\(set)")
        let unsealed = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, merchantID: "acme"))
        defer { Task { await unsealed.shutdown() } }
        let secret = try await unsealed.clientSecret(forOrder: "7")
        let plain = try await Self.sealedRows(database)
        #expect(plain.contains(":-:-"), "stored unsealed without a master key: \(plain)")

        // The wrong current key: refused, one sentence naming the key needed, nothing changed.
        let newFile = try Fixtures.file("new.key", Self.newKey())
        let before = try await Self.sealedRows(database)
        let wrong = try await cli.run(["master-key", "rotate", "--new-key-file", newFile], environment: ["ORDERFLOW_SECRET_KEY": Self.newKey()])
        #expect(wrong.status != 0 && wrong.stderr.contains(oldKey.id) && wrong.stderr.contains("nothing changed"), "\(wrong)")
        #expect(try await Self.sealedRows(database) == before)
        let none = try await cli.run(["master-key", "rotate", "--new-key-file", newFile])
        let afterNone = try await Self.sealedRows(database)
        #expect(none.status != 0 && afterNone == before, "\(none)")

        // The right one: every secret under the new key; secrets handed out still work.
        let rotated = try await cli.run(["master-key", "rotate", "--new-key-file", newFile], environment: ["ORDERFLOW_SECRET_KEY": old])
        #expect(rotated.status == 0 && rotated.stdout.contains("sealed 1 APNs key, 1 Firebase service account and 1 client-secret key"), "\(rotated)")
        let newKey = try MasterKey(base64: try String(contentsOfFile: newFile, encoding: .utf8), source: "test")
        let after = try await Self.sealedRows(database)
        #expect(!after.contains(oldKey.id) && after.contains(newKey.id) && !after.contains(":-:-"), "\(after)")
        var configuration = OrderFlowConfiguration(database: database, merchantID: "acme")
        configuration.masterKey = newKey
        let withNew = OrderFlowEngine(configuration: configuration)
        defer { Task { await withNew.shutdown() } }
        #expect(try await withNew.resolveClientSecret(secret)?.orderID == "7")
        #expect(try await withNew.fcmServiceAccount(merchantID: "acme", masterKey: newKey)?.projectID == "acme-orders")
        let newText = try String(contentsOfFile: newFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!rotated.stdout.contains(old) && !rotated.stdout.contains(newText), "no key is ever printed")
    }
}
