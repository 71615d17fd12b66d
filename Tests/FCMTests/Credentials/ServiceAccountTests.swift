import APNSCore
import Crypto
import FCM
import Foundation
import LocalFCM
import Testing
import _CryptoExtras

@Suite("FCM service accounts: the key file, the signed assertion, the exchange")
struct FCMServiceAccountTests {
    static let key = try! LocalFCMServiceAccountKey.generate(projectID: "orderflow-test", tokenURI: "https://oauth2.googleapis.com/token")

    /// The key's base64 body lines: none may appear in any message.
    static var keyLines: [String] {
        let pem = try! JSONValue(json: key.json)["private_key"]!.stringValue!
        return pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
    }

    private func refusal(_ json: String) -> FCMCredentialsError? {
        do {
            _ = try FCMServiceAccount(json: json)
            return nil
        } catch {
            return error as? FCMCredentialsError
        }
    }

    private func edited(_ change: (inout [String: JSONValue]) -> Void) -> String {
        var object = try! JSONValue(json: Self.key.json).objectValue!
        change(&object)
        return JSONValue.object(object).jsonString
    }

    @Test("a file Google would issue loads from its path; printed, it shows ids only")
    func loadsFromFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-\(UUID().uuidString).json").path
        try Self.key.write(to: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let account = try FCMServiceAccount(contentsOfFile: path)
        #expect(account.projectID == "orderflow-test")
        #expect(account.clientEmail == Self.key.clientEmail)
        #expect(account.privateKeyID == Self.key.privateKeyID)
        #expect(account.fingerprint.hasPrefix("SHA256:"))
        #expect(!"\(account)".contains("PRIVATE"))
    }

    @Test("bad files are refused saying what is wrong, and never with any of the key")
    func badFilesRefused() throws {
        let cases: [(String, FCMCredentialsError.Code, String)] = [
            ("{\"type\": ", .notJSON, "is not JSON"),
            ("[1, 2]", .notJSON, "not an object"),
            (self.edited { $0["type"] = "authorized_user" }, .notServiceAccount, "\"authorized_user\" credential"),
            (self.edited { $0["private_key"] = nil }, .missingField, "has no \"private_key\""),
            (self.edited { $0["project_id"] = 12 }, .invalidField, "\"project_id\" as a number"),
            (self.edited { $0["client_email"] = "nobody" }, .invalidField, "not an e-mail address"),
            (self.edited { $0["token_uri"] = "http://oauth2.googleapis.com/token" }, .invalidField, "not an https:// URL"),
            (self.edited { $0["private_key"] = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" }, .invalidKey, "not a PEM RSA private key"),
            (self.edited { object in
                // A damaged key: its lines shuffled.
                let lines = Self.keyLines
                object["private_key"] = .string("-----BEGIN PRIVATE KEY-----\n" + lines.reversed().joined(separator: "\n") + "\n-----END PRIVATE KEY-----\n")
            }, .invalidKey, "not a usable RSA key"),
        ]
        for (json, code, words) in cases {
            let error = try #require(self.refusal(json), "\(words)")
            #expect(error.code == code, "\(words)")
            #expect(error.message.contains(words), "\(error.message)")
            #expect(error.action == .credentialsError)
            for line in Self.keyLines.prefix(5) {
                #expect(!error.message.contains(line.prefix(24)))
            }
        }
        // Google's rule for project ids (the id becomes a path segment of every send).
        for projectID in ["Luigis Orders", "short", "1-starts-with-a-digit", "luigis_orders", String(repeating: "a", count: 31)] {
            let error = try #require(self.refusal(self.edited { $0["project_id"] = .string(projectID) }), "\(projectID)")
            #expect(error.code == .invalidField && error.message.contains("is not a Google Cloud project id"), "\(error.message)")
        }
        // An EC key (an APNs .p8 by mistake) is not an RSA key.
        let ecKey = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
        #expect(self.refusal(self.edited { $0["private_key"] = .string(ecKey) })?.code == .invalidKey)
    }

    @Test("the fingerprint is the public key's: the same for the key in PKCS#8 or PKCS#1 PEM")
    func fingerprintOfThePublicKey() throws {
        let pkcs8 = try JSONValue(json: Self.key.json)["private_key"]!.stringValue!
        let pkcs1 = try _RSA.Signing.PrivateKey(pemRepresentation: pkcs8).pemRepresentation
        #expect(pkcs1.hasPrefix("-----BEGIN RSA PRIVATE KEY-----"))
        let account = try FCMServiceAccount(json: Self.key.json)
        let again = try FCMServiceAccount(json: self.edited { $0["private_key"] = .string(pkcs1) })
        let expected = "SHA256:" + SHA256.hash(data: Self.key.publicKey.derRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
        #expect(account.fingerprint == expected && again.fingerprint == expected)
    }

    @Test("a missing path, a directory: refused naming the path")
    func badPaths() throws {
        let missing = "/nonexistent/fcm-key.json"
        let error = try #require(throws: FCMCredentialsError.self) { try FCMServiceAccount(contentsOfFile: missing) }
        #expect(error.code == .fileNotFound)
        #expect(error.message.contains(missing))
        #expect(error.message.contains("Firebase console"))
        let directory = try #require(throws: FCMCredentialsError.self) {
            try FCMServiceAccount(contentsOfFile: FileManager.default.temporaryDirectory.path)
        }
        #expect(directory.code == .fileUnreadable)
    }

    @Test("the assertion: RS256 with the key id, Google's claims, an hour's validity, a signature the public key verifies")
    func signedAssertion() throws {
        let account = try FCMServiceAccount(json: Self.key.json)
        let now = Date(timeIntervalSince1970: 1_800_000_000.7)
        let jwt = try account.signedAssertion(at: now)
        let parts = jwt.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let header = try JSONValue(data: try #require(Base64URL.decode(parts[0])))
        let claims = try JSONValue(data: try #require(Base64URL.decode(parts[1])))
        #expect(header == ["alg": "RS256", "typ": "JWT", "kid": .string(Self.key.privateKeyID)])
        #expect(claims == [
            "iss": .string(Self.key.clientEmail), "scope": "https://www.googleapis.com/auth/firebase.messaging",
            "aud": "https://oauth2.googleapis.com/token", "iat": 1_800_000_000, "exp": 1_800_003_600,
        ])
        let signature = _RSA.Signing.RSASignature(rawRepresentation: try #require(Base64URL.decode(parts[2])))
        #expect(Self.key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8), padding: .insecurePKCS1v1_5))
    }

    @Test("a revoked account or a replaced key: the exchange is refused, a credentials error without the assertion")
    func exchangeRefused() async throws {
        try await LocalFCMFixture.with { fixture in
            // Another key of the same account replaces the fixture's: its signature no longer verifies.
            let replacement = try LocalFCMServiceAccountKey.generate(projectID: LocalFCMFixture.projectID, tokenURI: fixture.server.tokenURI, freshKey: true)
            fixture.server.register(replacement)
            let refused = try await #require(throws: FCMCredentialsError.self) { try await fixture.client.send(dataMessage(1)) }
            #expect(refused.code == .tokenExchangeRefused)
            #expect(refused.action == .credentialsError)
            #expect(refused.message.contains("Invalid JWT Signature."))
            #expect(!refused.message.contains("eyJ"), "no part of the assertion")

            fixture.server.revokeServiceAccount(clientEmail: fixture.key.clientEmail)
            let revoked = try await #require(throws: FCMCredentialsError.self) { try await fixture.client.send(dataMessage(1)) }
            #expect(revoked.message.contains("account not found"))
            #expect(fixture.server.acceptedCount == 0)
        }
    }

    @Test("an assertion for another audience, or valid longer than an hour, is refused by the stand-in")
    func standInChecksClaims() async throws {
        try await LocalFCMFixture.with { fixture in
            // The same account, pointed at Google's endpoint while exchanging at the stand-in's.
            var object = try JSONValue(json: fixture.key.json).objectValue!
            object["token_uri"] = "https://oauth2.googleapis.com/token"
            let elsewhere = try FCMServiceAccount(json: JSONValue.object(object).jsonString)
            let assertion = try elsewhere.signedAssertion(at: Date())
            let answer = try await RawRequests(fixture: fixture).post(
                path: "/token", body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)",
                bearer: .some(nil), contentType: "application/x-www-form-urlencoded")
            #expect(answer.status == 400)
            #expect(answer.body["error"]?.stringValue == "invalid_grant")

            let long = try fixture.serviceAccount.signedAssertion(at: Date(), lifetime: .seconds(7200))
            let tooLong = try await RawRequests(fixture: fixture).post(
                path: "/token", body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(long)",
                bearer: .some(nil), contentType: "application/x-www-form-urlencoded")
            #expect(tooLong.body["error_description"]?.stringValue?.hasPrefix("Invalid JWT: Token must be a short-lived token") == true)
        }
    }
}
