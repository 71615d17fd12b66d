import APNSCore
import Crypto
import Foundation
import _CryptoExtras

/// A Google service account's JSON key, the file the Firebase console issues under Project
/// settings > Service accounts > Generate new private key.
///
/// Only what sending needs is kept: the project, the account's e-mail, the key id, the RSA
/// private key and where to exchange a signed assertion for an access token. The key is never
/// printed: `description`, `dump` and every error show the project, the e-mail and the key id.
public struct FCMServiceAccount: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The Firebase (Google Cloud) project id: the `{project}` of `projects/{project}/messages:send`.
    public let projectID: String
    /// The account's e-mail (`…@….iam.gserviceaccount.com`): the assertion's issuer.
    public let clientEmail: String
    /// The id of this key of the account (the assertion's `kid`).
    public let privateKeyID: String
    /// Where access tokens are obtained (`https://oauth2.googleapis.com/token`).
    public let tokenURI: String
    let privateKey: _RSA.Signing.PrivateKey

    /// A service-account file is about 2.4 KB; anything much larger is not one.
    public static let maximumFileBytes = 64 * 1024
    /// The OAuth 2 scope that allows sending FCM messages.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    /// Parses the JSON text of a service-account key.
    ///
    /// - Parameter json: the file's contents.
    /// - Throws: ``FCMCredentialsError`` saying which field is missing or wrong, without any of the key.
    public init(json: String) throws {
        try self.init(json: json, path: nil)
    }

    /// Reads and parses the service-account key file at `path`.
    ///
    /// - Parameter path: the JSON file the Firebase console downloaded.
    /// - Throws: ``FCMCredentialsError`` naming the path: missing, unreadable, not JSON, not a
    ///   service-account key, or a field missing or wrong.
    public init(contentsOfFile path: String) throws {
        let text: String
        do throws(SmallTextFile.Problem) {
            text = try SmallTextFile.read(path, maximumBytes: Self.maximumFileBytes)
        } catch {
            let what = switch error {
            case .missing: "does not exist"
            case .directory: "is a directory, not the key file"
            case .notRegularFile: "is not a regular file"
            case .tooLarge(let size): "is \(size) bytes, far larger than a service-account key (about 2.4 KB)"
            case .unreadable: "cannot be read by this user (check its permissions)"
            case .notText: "is not UTF-8 text"
            }
            throw FCMCredentialsError(
                code: error == .missing ? .fileNotFound : .fileUnreadable, path: path,
                message: "The FCM service-account key '\(path)' \(what). " + Self.whereToGetOne)
        }
        try self.init(json: text, path: path)
    }

    static let whereToGetOne = "Download one from the Firebase console (Project settings > Service accounts > "
        + "Generate new private key) and give the path of that JSON file."

    private init(json: String, path: String?) throws {
        let named = path.map { "The FCM service-account key '\($0)'" } ?? "The FCM service-account key"
        func refuse(_ code: FCMCredentialsError.Code, _ problem: String) -> FCMCredentialsError {
            FCMCredentialsError(code: code, path: path, message: "\(named) \(problem)")
        }
        guard json.utf8.count <= Self.maximumFileBytes else {
            throw refuse(.notJSON, "is not a JSON object: it is \(json.utf8.count) bytes, far larger than a service-account key (about 2.4 KB). " + Self.whereToGetOne)
        }
        let value: JSONValue
        do {
            value = try JSONValue(json: json)
        } catch {
            // Only the position: the parser's words could quote part of the key.
            throw refuse(.notJSON, "is not a JSON object: the text is not JSON (it breaks at byte \(error.offset)). " + Self.whereToGetOne)
        }
        guard let object = value.objectValue else {
            throw refuse(.notJSON, "is not a JSON object: the text is JSON, but not an object. " + Self.whereToGetOne)
        }
        func text(_ field: String) throws -> String {
            guard let member = object[field] else {
                throw refuse(.missingField, "has no \"\(field)\": a file that has no text field `\(field)` is not one Google issued. " + Self.whereToGetOne)
            }
            guard let text = member.stringValue, !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                let what = switch member {
                case .string: "an empty string"
                case .int, .double: "a number"
                case .bool: "true or false"
                case .null: "null"
                case .array: "a list"
                case .object: "an object"
                }
                throw refuse(.invalidField, "has \"\(field)\" as \(what), not text. " + Self.whereToGetOne)
            }
            return text
        }
        let type = try text("type")
        guard type == "service_account" else {
            // Short and chosen by Google ("authorized_user", "external_account"): safe to show.
            let shown = String(type.prefix(40))
            throw refuse(.notServiceAccount,
                "has `type` \"\(shown)\", not \"service_account\": a \"\(shown)\" credential is not a service-account key. " + Self.whereToGetOne)
        }
        let projectID = try text("project_id")
        guard Self.isProjectID(projectID) else {
            throw refuse(.invalidField,
                "has `project_id` \"\(projectID.prefix(40))\", which is not a Google Cloud project id (6 to 30 lowercase letters, digits and hyphens, starting with a letter). " + Self.whereToGetOne)
        }
        self.projectID = projectID
        self.clientEmail = try text("client_email")
        self.privateKeyID = try text("private_key_id")
        self.tokenURI = try text("token_uri")
        guard self.clientEmail.contains("@"), self.clientEmail.utf8.count <= 320, !self.clientEmail.contains(where: \.isWhitespace) else {
            throw refuse(.invalidField, "has a `client_email` that is not an e-mail address. " + Self.whereToGetOne)
        }
        // The signed assertion goes there and the access token comes back: never in the clear.
        guard let url = URL(string: self.tokenURI), ["https", "http"].contains(url.scheme?.lowercased()), url.host != nil else {
            throw refuse(.invalidField, "has a `token_uri` that is not an http(s) URL (Google's is https://oauth2.googleapis.com/token).")
        }
        guard url.scheme?.lowercased() == "https" else {
            throw refuse(.invalidField, "has a `token_uri` that is not an https:// URL: the signed assertion and the access token would cross the network unencrypted (Google's is https://oauth2.googleapis.com/token).")
        }
        let pem = try text("private_key")
        guard pem.contains("-----BEGIN PRIVATE KEY-----") || pem.contains("-----BEGIN RSA PRIVATE KEY-----") else {
            // Never the key itself, not even a part of it.
            throw refuse(.invalidKey,
                "has a `private_key` that is not a PEM private key (it is not a PEM RSA private key: '-----BEGIN PRIVATE KEY-----' … '-----END PRIVATE KEY-----'). " + Self.whereToGetOne)
        }
        do {
            self.privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw refuse(.invalidKey, "has a `private_key` that is not a usable RSA key of 2048 bits or more (damaged, or another kind of key). " + Self.whereToGetOne)
        }
    }

    /// Google's rule for project ids: 6 to 30 lowercase letters, digits and hyphens, starting
    /// with a letter. The id becomes a path segment of every send (`projects/{id}/messages:send`).
    static func isProjectID(_ id: String) -> Bool {
        let scalars = id.unicodeScalars
        guard (6...30).contains(scalars.count), let first = scalars.first, ("a"..."z").contains(first) else { return false }
        return scalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    }

    /// The signed JWT of the OAuth 2 JWT bearer grant (RFC 7523), as Google's token endpoint takes
    /// it: RS256 (PKCS#1 v1.5, SHA-256), `kid` = ``privateKeyID``; claims `iss` = ``clientEmail``,
    /// `scope` = ``messagingScope``, `aud` = ``tokenURI``, `iat` = `now`, `exp` = `iat` + `lifetime`.
    ///
    /// - Parameters:
    ///   - now: the issue time (rounded down to the second).
    ///   - lifetime: how long the assertion is valid; Google refuses more than an hour.
    /// - Throws: ``FCMCredentialsError`` with ``FCMCredentialsError/Code/signingFailed``.
    public func signedAssertion(at now: Date, lifetime: Duration = .seconds(3600)) throws -> String {
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        let header = JSONValue.object(["alg": "RS256", "typ": "JWT", "kid": .string(self.privateKeyID)])
        let claims = JSONValue.object([
            "iss": .string(self.clientEmail),
            "scope": .string(Self.messagingScope),
            "aud": .string(self.tokenURI),
            "iat": .int(issuedAt),
            "exp": .int(issuedAt + Int(lifetime.components.seconds)),
        ])
        let signingInput = Base64URL.encode(header.serialized) + "." + Base64URL.encode(claims.serialized)
        do {
            let signature = try self.privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
            return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
        } catch {
            throw FCMCredentialsError(
                code: .signingFailed, path: nil,
                message: "Could not sign the OAuth assertion of \(self.clientEmail) (key \(self.privateKeyID)); replace the service-account key.")
        }
    }

    /// `SHA256:` and the first 16 hex characters of the SHA-256 of the public key (DER): names the
    /// key in listings without revealing anything of it. Two copies of one key agree.
    ///
    /// The public key's, not the private key's bytes: the same key pair gives the same
    /// fingerprint whichever encoding its file uses (PKCS#8 or PKCS#1 PEM); an operator can
    /// check it from the public half alone (`openssl pkey -pubout -outform DER | sha256sum`)
    /// without handling the secret; and nothing derived from the secret itself is ever shown.
    public var fingerprint: String {
        let digest = SHA256.hash(data: self.privateKey.publicKey.derRepresentation)
        return "SHA256:" + digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// A 32-byte key derived from the private key (HKDF-SHA256), for sealing what only holders of
    /// the key may read, such as an access token kept in a store that several workers share.
    ///
    /// - Parameter purpose: what the key is for; different purposes give unrelated keys.
    public func derivedKey(purpose: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: self.privateKey.derRepresentation),
            info: Data(purpose.utf8), outputByteCount: 32)
    }

    public var description: String {
        "FCMServiceAccount(projectID: \(self.projectID), clientEmail: \(self.clientEmail), privateKeyID: \(self.privateKeyID))"
    }

    public var debugDescription: String { self.description }
    /// `dump(account)` shows the ids, not the key.
    public var customMirror: Mirror {
        Mirror(self, children: ["projectID": self.projectID, "clientEmail": self.clientEmail, "privateKeyID": self.privateKeyID])
    }
}
