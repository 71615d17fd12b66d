import Foundation
import LocalFCM
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// Android devices' FCM tokens and merchants' Firebase projects: each door refuses the wrong
/// merchant, the wrong key and the wrong shape, and a refusal changes nothing.
@Suite("Android devices and Firebase projects", .serialized)
struct AndroidDevicesTests {
    static let masterKey = MasterKey(bytes: Data((0..<32).map { UInt8($0) }))
    static let otherMasterKey = MasterKey(bytes: Data((0..<32).map { UInt8(255 - $0) }))
    /// A real service account (the process's shared RSA key: making one costs a fifth of a
    /// second of CPU), as Google would issue it.
    static let account = try! LocalFCMServiceAccountKey.generate(
        projectID: "luigis-orders", tokenURI: "https://oauth2.googleapis.com/token", accountName: "orderflow")
    /// A line of the key's PEM body: no message or table may show it.
    static let privateKeyBody = String(((try! JSONSerialization.jsonObject(with: Data(account.json.utf8)) as! [String: Any])["private_key"] as! String)
        .split(separator: "\n")[1])
    static let token = "fTqa1:APA91b" + String(repeating: "Xy_9-", count: 30)

    static func serviceAccount(_ changes: [String: Any?] = [:]) -> String {
        var object = try! JSONSerialization.jsonObject(with: Data(account.json.utf8)) as! [String: Any]
        for (key, value) in changes { object[key] = value ?? nil }
        return String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    func withFixture(_ body: (EngineFixture) async throws -> Void) async throws {
        let fixture = try await EngineFixture.make()
        do {
            try await fixture.engine.addMerchant("default")
            try await fixture.engine.addMerchant("bravo")
            try await body(fixture)
        } catch {
            await fixture.shutdown()
            throw error
        }
        await fixture.shutdown()
    }

    func tokens(_ fixture: EngineFixture) async throws -> [String] {
        try await fixture.engine.pool.query(PostgresQuery(
            "SELECT merchant_id || '/' || device_id || '=' || coalesce(fcm_token, '-') AS row FROM devices ORDER BY 1")
        ).map { try $0.decode("row") }
    }

    @Test func aDeviceRegistersItsTokenForItsMerchantOnly() async throws {
        try await withFixture { fixture in
            let bravo = try fixture.engine.forMerchant("bravo")
            #expect(try await fixture.engine.registerFCMToken(deviceID: "anna-pixel", token: "  \(Self.token)\n") == Self.token)
            try await bravo.registerFCMToken(deviceID: "anna-pixel", token: Self.token + "b")
            // A rotated token replaces the old one, for this merchant's device only.
            try await fixture.engine.registerFCMToken(deviceID: "anna-pixel", token: Self.token + "2")
            #expect(try await tokens(fixture) == ["bravo/anna-pixel=\(Self.token)b", "default/anna-pixel=\(Self.token)2"])
        }
    }

    @Test(arguments: ["", "short", String(repeating: "a", count: 4097), Self.token + " x", Self.token + "é", Self.token + "'; DROP TABLE devices; --"])
    func aTokenThatIsNoFCMTokenIsRefusedAndChangesNothing(_ bad: String) async throws {
        try await withFixture { fixture in
            try await fixture.engine.registerFCMToken(deviceID: "anna-pixel", token: Self.token)
            let before = try await TableContents.read(fixture.database)
            let error = await #expect(throws: OrderFlowError.self) {
                try await fixture.engine.registerFCMToken(deviceID: "anna-pixel", token: bad)
            }
            #expect(error?.code == .invalidInput)
            #expect(error?.message.contains("FCM registration token") == true)
            #expect(TableContents.changes(before, try await TableContents.read(fixture.database)).isEmpty)
        }
    }

    @Test func aServiceAccountIsSealedBoundToItsMerchantAndShownByFingerprint() async throws {
        try await withFixture { fixture in
            let summary = try await fixture.engine.setFCMServiceAccount(
                merchantID: "bravo", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.masterKey)
            #expect(summary.projectID == "luigis-orders")
            #expect(summary.clientEmail == "orderflow@luigis-orders.iam.gserviceaccount.com")
            #expect(summary.keyFingerprint.hasPrefix("SHA256:") && summary.keyFingerprint.count == 23)
            #expect(try await fixture.engine.fcmProject(merchantID: "default") == nil)

            // Stored sealed: no part of the key is in the table.
            let everything = try await TableContents.read(fixture.database).values.joined()
            #expect(!everything.contains(String(Self.privateKeyBody.prefix(40))))
            #expect(!everything.contains("PRIVATE KEY"))

            let opened = try #require(try await fixture.engine.fcmServiceAccount(merchantID: "bravo", masterKey: Self.masterKey))
            #expect(opened.projectID == "luigis-orders")
            #expect(opened.fingerprint == summary.keyFingerprint, "one fingerprint: the public key's, as shown to operators")
            #expect(!"\(opened)".contains("PRIVATE"))
            await #expect(throws: OrderFlowError.self) {
                _ = try await fixture.engine.fcmServiceAccount(merchantID: "bravo", masterKey: Self.otherMasterKey)
            }
            // Moved to another merchant's row, the sealed key does not open: it is bound to bravo.
            try await fixture.engine.pool.query(PostgresQuery("""
                INSERT INTO merchant_fcm_apps (merchant_id, project_id, client_email, token_uri, key_sealed, key_fingerprint, master_key_id)
                SELECT 'default', project_id, client_email, token_uri, key_sealed, key_fingerprint, master_key_id
                FROM merchant_fcm_apps WHERE merchant_id = 'bravo'
                """))
            let error = await #expect(throws: OrderFlowError.self) {
                _ = try await fixture.engine.fcmServiceAccount(merchantID: "default", masterKey: Self.masterKey)
            }
            #expect(error?.code == .invalidConfiguration)
        }
    }

    static let badAccounts: [(json: String, message: String)] = [
        ("not json", "is not a JSON object"),
        ("[1]", "is not a JSON object"),
        (serviceAccount(["type": "authorized_user"]), "has `type` \"authorized_user\", not \"service_account\""),
        (serviceAccount(["type": nil]), "has no text field `type`"),
        (serviceAccount(["project_id": nil]), "has no text field `project_id`"),
        (serviceAccount(["project_id": "Luigis Orders"]), "is not a Google Cloud project id"),
        (serviceAccount(["client_email": nil]), "has no text field `client_email`"),
        (serviceAccount(["client_email": "nobody"]), "`client_email` that is not an e-mail address"),
        (serviceAccount(["private_key": nil]), "has no text field `private_key`"),
        (serviceAccount(["private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-secret-material"]), "`private_key` that is not a PEM private key"),
        (serviceAccount(["token_uri": "file:///etc/passwd"]), "`token_uri` that is not an http(s) URL"),
    ]

    @Test(arguments: badAccounts.indices)
    func aFileOfTheWrongShapeIsRefusedWithoutShowingTheKeyAndChangesNothing(_ index: Int) async throws {
        let bad = Self.badAccounts[index]
        try await withFixture { fixture in
            try await fixture.engine.setFCMServiceAccount(merchantID: "bravo", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.masterKey)
            let before = try await TableContents.read(fixture.database)
            let error = await #expect(throws: OrderFlowError.self) {
                try await fixture.engine.setFCMServiceAccount(merchantID: "bravo", serviceAccountJSON: bad.json, masterKey: Self.masterKey)
            }
            #expect(error?.code == .invalidInput)
            #expect(error?.message.contains(bad.message) == true, "\(String(describing: error))")
            #expect(error.map { !"\($0)".contains("secret-material") && !"\($0)".contains(String(Self.privateKeyBody.prefix(20))) } == true)
            #expect(TableContents.changes(before, try await TableContents.read(fixture.database)).isEmpty)
        }
    }

    @Test func aMasterKeyRotationSealsTheServiceAccountsAnew() async throws {
        try await withFixture { fixture in
            try await fixture.engine.setFCMServiceAccount(merchantID: "bravo", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.masterKey)
            let rotation = try await fixture.engine.rotateMasterKey(current: Self.masterKey, new: Self.otherMasterKey)
            #expect(rotation.fcmKeys == 1)
            #expect(try await fixture.engine.fcmServiceAccount(merchantID: "bravo", masterKey: Self.otherMasterKey)?.projectID == "luigis-orders")
            await #expect(throws: OrderFlowError.self) {
                _ = try await fixture.engine.fcmServiceAccount(merchantID: "bravo", masterKey: Self.masterKey)
            }
        }
    }

    @Test func anUnknownMerchantOrAnotherMasterKeyIsRefusedAndChangesNothing() async throws {
        try await withFixture { fixture in
            try await fixture.engine.setFCMServiceAccount(merchantID: "bravo", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.masterKey)
            let before = try await TableContents.read(fixture.database)
            let unknown = await #expect(throws: OrderFlowError.self) {
                try await fixture.engine.setFCMServiceAccount(merchantID: "charlie", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.masterKey)
            }
            #expect(unknown?.code == .notFound)
            let otherKey = await #expect(throws: OrderFlowError.self) {
                try await fixture.engine.setFCMServiceAccount(merchantID: "default", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.otherMasterKey)
            }
            #expect(otherKey?.code == .invalidConfiguration)
            #expect(TableContents.changes(before, try await TableContents.read(fixture.database)).isEmpty)
        }
    }

    @Test func removingAFirebaseProjectTakesOnlyThatMerchantsAndFreesTheMasterKey() async throws {
        try await withFixture { fixture in
            try await fixture.engine.setFCMServiceAccount(merchantID: "bravo", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.masterKey)
            let before = try await TableContents.read(fixture.database)
            #expect(try await fixture.engine.removeFCMServiceAccount(merchantID: "default") == false, "default has no project")
            #expect(try await fixture.engine.removeFCMServiceAccount(merchantID: "charlie") == false, "an unknown merchant")
            #expect(TableContents.changes(before, try await TableContents.read(fixture.database)).isEmpty, "bravo's project stays")
            #expect(try await fixture.engine.removeFCMServiceAccount(merchantID: "bravo"))
            #expect(try await fixture.engine.fcmProject(merchantID: "bravo") == nil)
            // Nothing sealed under the old key is left: another master key may seal now.
            try await fixture.engine.setFCMServiceAccount(merchantID: "default", serviceAccountJSON: Self.serviceAccount(), masterKey: Self.otherMasterKey)
        }
    }
}
