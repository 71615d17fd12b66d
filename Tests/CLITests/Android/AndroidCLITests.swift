import Foundation
import LocalFCM
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// `orderflow merchant set-fcm` and `orderflow token register --fcm` as their users meet them:
/// the key sealed and never printed, a file of the wrong shape refused with nothing changed.
@Suite("Android on the command line", .serialized)
struct AndroidCLITests {
    static let masterKey = Data((0..<32).map { UInt8($0 * 7 % 256) }).base64EncodedString()
    /// A real service account (the process's shared RSA key).
    static let account = try! LocalFCMServiceAccountKey.generate(
        projectID: "acme-orders", tokenURI: "https://oauth2.googleapis.com/token", accountName: "push")
    /// A line of the key's PEM body: no output may show it.
    static let keyBody = String(((try! JSONSerialization.jsonObject(with: Data(account.json.utf8)) as! [String: Any])["private_key"] as! String)
        .split(separator: "\n")[1])

    static func serviceAccount(type: String = "service_account") -> String {
        var object = try! JSONSerialization.jsonObject(with: Data(account.json.utf8)) as! [String: Any]
        object["type"] = type
        return String(decoding: try! JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    @Test("set-fcm and token register --fcm: sealed, never shown; bad input changes nothing", .timeLimit(.minutes(3)))
    func setFCMAndRegister() async throws {
        let database = try await TestDatabase.fresh(prefix: "android")
        _ = try await Schema.migrate(database)
        let cli = try CLI(databaseURL: database.connectionString)
        let sealed = ["ORDERFLOW_SECRET_KEY": Self.masterKey]
        _ = try await cli.run("merchant", "add", "acme")
        let good = try Fixtures.file("acme-firebase.json", Self.serviceAccount())
        let set = try await cli.run(["merchant", "set-fcm", "acme", "--service-account", good], environment: sealed)
        #expect(set.status == 0 && set.stdout.contains("Firebase project acme-orders") && set.stdout.contains("key SHA256:"), "\(set)")

        let before = try await TableContents.read(database)
        let wrong = try Fixtures.file("user.json", Self.serviceAccount(type: "authorized_user"))
        let refused = try await cli.run(["merchant", "set-fcm", "acme", "--service-account", wrong], environment: sealed)
        #expect(refused.status != 0 && refused.stderr.contains("not \"service_account\""), "\(refused)")
        let unknown = try await cli.run(["merchant", "set-fcm", "nobody", "--service-account", good], environment: sealed)
        #expect(unknown.status != 0, "\(unknown)")
        let noKey = try await cli.run(["merchant", "set-fcm", "acme", "--service-account", good])
        #expect(noKey.status != 0 && noKey.stderr.contains("ORDERFLOW_SECRET_KEY"), "\(noKey)")
        #expect(TableContents.changes(before, try await TableContents.read(database)).isEmpty)

        let token = "cAbc1:APA91b" + String(repeating: "Qz_7-", count: 30)
        let registered = try await cli.run("token", "register", "--device", "anna-pixel", "--fcm", token)
        #expect(registered.status == 0 && registered.stdout.contains("registered FCM token …") && !registered.stdout.contains(token), "\(registered)")
        let badToken = try await cli.run("token", "register", "--device", "anna-pixel", "--fcm", "nope")
        #expect(badToken.status != 0 && badToken.stderr.contains("FCM registration token"), "\(badToken)")
        let two = try await cli.run("token", "register", "--device", "anna-pixel", "--fcm", token, "--device-token", "ab")
        #expect(two.status != 0 && two.stderr.contains("--fcm"), "\(two)")

        for result in [set, refused, unknown, noKey, registered, badToken, two] {
            #expect(!(result.stdout + result.stderr).contains(String(Self.keyBody.prefix(24))))
            #expect(!(result.stdout + result.stderr).contains("PRIVATE KEY"))
        }
    }
}
