import WorkflowKit
import Crypto
import Foundation

/// A Firebase service account's JSON key, checked for the fields an FCM sender needs. Its
/// `description` and every error name the project and the account, never the key.
public struct FCMServiceAccount: Sendable, CustomStringConvertible {
    /// The default `token_uri` of Google's service accounts.
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"
    /// A service account file is a few kilobytes; anything much larger is not one.
    public static let maximumFileBytes = 64 * 1024

    public let projectID: String
    public let clientEmail: String
    public let tokenURI: String
    /// The JSON as given: what is sealed and stored.
    let json: String
    /// `SHA256:` and 16 hex characters of the private key's DER bytes: shows which key is stored.
    public let keyFingerprint: String

    public var description: String { "FCMServiceAccount(project: \(projectID), account: \(clientEmail), key: \(keyFingerprint))" }

    /// Reads the JSON key Firebase gives (Project settings → Service accounts → Generate new
    /// private key). - Throws: `invalidInput` naming the first field that is missing or wrong.
    public init(json: String) throws {
        func refuse(_ problem: String) -> OrderFlowError {
            OrderFlowError(.invalidInput,
                "the FCM service account \(problem); give the JSON key file from the Firebase console (Project settings → Service accounts → Generate new private key)")
        }
        guard json.utf8.count <= Self.maximumFileBytes,
              let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        else { throw refuse("is not a JSON object") }
        func field(_ name: String) throws -> String {
            guard let value = object[name] as? String, !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw refuse("has no text field `\(name)`")
            }
            return value
        }
        guard try field("type") == "service_account" else {
            throw refuse("has `type` \"\(MessageText.excerpt(try field("type"), limit: 40))\", not \"service_account\"")
        }
        let projectID = try field("project_id")
        // Google's rule for project ids: 6 to 30 lowercase letters, digits and hyphens, starting with a letter.
        guard (6...30).contains(projectID.count), projectID.first?.isLetter == true,
              projectID.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" })
        else { throw refuse("has `project_id` \"\(MessageText.excerpt(projectID, limit: 40))\", which is not a Google Cloud project id") }
        let clientEmail = try field("client_email")
        guard clientEmail.contains("@"), clientEmail.count <= 320, !clientEmail.contains(where: \.isWhitespace) else {
            throw refuse("has a `client_email` that is not an e-mail address")
        }
        let tokenURI = (object["token_uri"] as? String) ?? Self.googleTokenURI
        guard let url = URL(string: tokenURI), ["https", "http"].contains(url.scheme ?? ""), url.host != nil else {
            throw refuse("has a `token_uri` that is not an http(s) URL")
        }
        let key = try field("private_key")
        guard let der = Self.pemBody(key, label: "PRIVATE KEY") else {
            // Never the key itself, not even a part of it.
            throw refuse("has a `private_key` that is not a PEM private key (-----BEGIN PRIVATE KEY----- … -----END PRIVATE KEY-----)")
        }
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
        self.json = json
        self.keyFingerprint = "SHA256:" + SHA256.hash(data: der).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// The DER bytes inside `-----BEGIN label----- … -----END label-----`.
    static func pemBody(_ pem: String, label: String) -> Data? {
        let begin = "-----BEGIN \(label)-----", end = "-----END \(label)-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end), start.upperBound < stop.lowerBound else { return nil }
        let base64 = pem[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
        guard let der = Data(base64Encoded: String(base64)), der.count >= 64 else { return nil }
        return der
    }
}

/// What may be shown of a merchant's FCM project: never the key, only its fingerprint.
public struct MerchantFCMSummary: Sendable, Equatable, Codable {
    public var projectID: String
    public var clientEmail: String
    /// `SHA256:` and 16 hex characters of the private key's digest.
    public var keyFingerprint: String
    public var updatedAt: Date
}
