import APNSCore
import Foundation
import _CryptoExtras

/// A service-account key made for tests, the demo and benchmarks: a fresh 2048-bit RSA key and
/// the JSON file Google would issue for it, its `token_uri` pointing at a stand-in.
public struct LocalFCMServiceAccountKey: Sendable {
    /// `project_id`.
    public let projectID: String
    /// `client_email`.
    public let clientEmail: String
    /// `private_key_id`.
    public let privateKeyID: String
    /// `token_uri`.
    public let tokenURI: String
    /// The public half, which the stand-in verifies assertions with.
    public let publicKey: _RSA.Signing.PublicKey
    /// The file's text, with every field Google's has (the private key in PKCS#8 PEM).
    public let json: String

    /// Makes a service account's key file.
    ///
    /// Making a 2048-bit RSA key costs a fifth of a second of CPU, and on the concurrency pool
    /// that is time every other task waits: a test process making one per test stalls for
    /// seconds. So accounts share one RSA key per process (each has its own e-mail and key id,
    /// which is what the stand-in tells them apart by), unless `freshKey` asks for another, as a
    /// test of a replaced key must.
    ///
    /// - Parameters:
    ///   - projectID: the Firebase project.
    ///   - tokenURI: where its assertions are exchanged (``LocalFCMServer/tokenURI``).
    ///   - accountName: the part of the e-mail before `@`.
    ///   - freshKey: make a new RSA key instead of the process's shared one.
    public static func generate(
        projectID: String, tokenURI: String, accountName: String = "firebase-adminsdk-test", freshKey: Bool = false
    ) throws -> Self {
        let key = freshKey ? try _RSA.Signing.PrivateKey(keySize: .bits2048) : try sharedKey.get()
        let clientEmail = "\(accountName)@\(projectID).iam.gserviceaccount.com"
        let keyID = (0..<20).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let clientID = String((0..<21).map { _ in Character(String(Int.random(in: 0...9))) })
        let email = clientEmail.replacingOccurrences(of: "@", with: "%40")
        let file = JSONValue.object([
            "type": "service_account",
            "project_id": .string(projectID),
            "private_key_id": .string(keyID),
            "private_key": .string(key.pkcs8PEMRepresentation + "\n"),
            "client_email": .string(clientEmail),
            "client_id": .string(clientID),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": .string(tokenURI),
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": .string("https://www.googleapis.com/robot/v1/metadata/x509/\(email)"),
            "universe_domain": "googleapis.com",
        ])
        return Self(
            projectID: projectID, clientEmail: clientEmail, privateKeyID: keyID, tokenURI: tokenURI,
            publicKey: key.publicKey, json: file.jsonString)
    }

    /// The RSA key accounts share, made once per process on first use.
    private static let sharedKey = Result { try _RSA.Signing.PrivateKey(keySize: .bits2048) }

    /// Writes the file, readable by its owner only, as a key file should be.
    ///
    /// - Parameter path: where to write it.
    public func write(to path: String) throws {
        try Data(self.json.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }
}
