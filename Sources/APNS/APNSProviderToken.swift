import Crypto
import Foundation
import Synchronization

/// A team's APNs signing key: the `.p8` P-256 private key with its key id and team id.
///
/// The key material is never printed: `description` shows only the ids.
public struct APNSSigningKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let privateKey: P256.Signing.PrivateKey
    /// The 10-character key id Apple shows next to the key (the JWT header's `kid`).
    public let keyID: String
    /// The 10-character team id (the JWT claim `iss`).
    public let teamID: String

    /// Uses a key already in memory.
    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) throws {
        try Self.validate(keyID: keyID, teamID: teamID, path: nil)
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Parses the PEM text of a `.p8` key (`-----BEGIN PRIVATE KEY-----`).
    public init(pemRepresentation: String, keyID: String, teamID: String) throws {
        try self.init(pemRepresentation: pemRepresentation, keyID: keyID, teamID: teamID, path: nil)
    }

    /// Reads and parses the `.p8` key file at `path`.
    ///
    /// - Throws: ``APNSCredentialsError`` naming the path when the file is missing, unreadable, or
    ///   not a P-256 private key.
    public init(contentsOfFile path: String, keyID: String, teamID: String) throws {
        // A .p8 file is about 250 bytes: anything else is refused before it is read.
        let pem: String
        do throws(SmallTextFile.Problem) {
            pem = try SmallTextFile.read(path, maximumBytes: Self.maximumKeyFileBytes)
        } catch {
            switch error {
            case .missing:
                throw APNSCredentialsError(
                    code: .keyFileNotFound,
                    path: path,
                    message: "No APNs signing key at '\(path)'. Download the key (.p8) from the Apple Developer "
                        + "account (Certificates, Identifiers & Profiles > Keys) and point the configuration at its path."
                )
            case .directory, .notRegularFile:
                let what = error == .directory ? "a directory" : "not a regular file"
                throw APNSCredentialsError(
                    code: .keyFileUnreadable,
                    path: path,
                    message: "The APNs signing key path '\(path)' is \(what); give the path of the .p8 key file itself."
                )
            case .tooLarge(let size):
                throw APNSCredentialsError(
                    code: .invalidKey,
                    path: path,
                    message: "The file at '\(path)' is \(size) bytes, far more than an APNs signing key (.p8, about 250 bytes); "
                        + "check that the path names the key Apple issued."
                )
            case .unreadable, .notText:
                throw APNSCredentialsError(
                    code: .keyFileUnreadable,
                    path: path,
                    message: "Could not read the APNs signing key at '\(path)': it must be a readable UTF-8 "
                        + "text file (check its permissions for the user running OrderFlow)."
                )
            }
        }
        try self.init(pemRepresentation: pem, keyID: keyID, teamID: teamID, path: path)
    }

    /// Larger files are refused unread.
    public static let maximumKeyFileBytes = 64 * 1024

    private init(pemRepresentation: String, keyID: String, teamID: String, path: String?) throws {
        try Self.validate(keyID: keyID, teamID: teamID, path: path)
        let source = path.map { "The file at '\($0)'" } ?? "The configured APNs key"
        do {
            self.privateKey = try P256.Signing.PrivateKey(
                pemRepresentation: pemRepresentation.trimmingCharacters(in: .whitespacesAndNewlines)
            )
        } catch {
            // The underlying error is not included: it could quote parts of the key.
            throw APNSCredentialsError(
                code: .invalidKey,
                path: path,
                message: "\(source) \(Self.whatIsWrong(with: pemRepresentation)). Use the .p8 file Apple "
                    + "issued for APNs (it starts with '-----BEGIN PRIVATE KEY-----'), unmodified."
            )
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Why `pem` is not a P-256 private key, without quoting any of it (only the PEM label,
    /// which is not secret).
    static func whatIsWrong(with pem: String) -> String {
        let text = pem.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return "is empty, not a PEM-encoded P-256 private key" }
        guard let begin = text.range(of: "-----BEGIN ") else {
            return "is not PEM text (it has no '-----BEGIN' line), not a PEM-encoded P-256 private key"
        }
        let label = text[begin.upperBound...].prefix { $0 != "-" && $0 != "\n" }.prefix(40)
        switch label {
        case "PRIVATE KEY", "EC PRIVATE KEY":
            if (try? P384.Signing.PrivateKey(pemRepresentation: text)) != nil {
                return "holds a P-384 key, but APNs signs with a P-256 (ES256) key"
            }
            if (try? P521.Signing.PrivateKey(pemRepresentation: text)) != nil {
                return "holds a P-521 key, but APNs signs with a P-256 (ES256) key"
            }
            return "is not a PEM-encoded P-256 private key (it may be an RSA key, or damaged)"
        case "RSA PRIVATE KEY":
            return "holds an RSA key, but APNs signs with a P-256 (ES256) key"
        case "ENCRYPTED PRIVATE KEY":
            return "holds an encrypted key; APNs keys are not encrypted"
        default:
            return "holds a PEM '\(label)', not a P-256 private key"
        }
    }

    private static func validate(keyID: String, teamID: String, path: String?) throws {
        if keyID.isEmpty {
            throw APNSCredentialsError(
                code: .missingKeyID,
                path: path,
                message: "The APNs key id is empty: set it to the 10-character id shown next to the key in the Apple Developer account."
            )
        }
        if teamID.isEmpty {
            throw APNSCredentialsError(
                code: .missingTeamID,
                path: path,
                message: "The APNs team id is empty: set it to the 10-character team id of the Apple Developer account that owns the key."
            )
        }
    }

    /// `SHA256:` and the first 16 hex characters of the SHA-256 of the public key (DER): names
    /// the key in listings without revealing anything of it. Two copies of one key agree.
    public var fingerprint: String {
        let digest = SHA256.hash(data: self.privateKey.publicKey.derRepresentation)
        return "SHA256:" + digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// Signs a provider token issued at `now` (rounded down to the second). Callers keep one
    /// token for 20 to 60 minutes: ``APNSProviderTokenFactory`` in one process, or a source
    /// shared by several (``APNSProviderTokenSource``).
    public func signProviderToken(at now: Date) throws -> APNSProviderToken {
        let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
        let header = JSONValue.object(["alg": .string("ES256"), "kid": .string(self.keyID)])
        // `iat` is a JSON number: APNs refuses a string.
        let claims = JSONValue.object(["iss": .string(self.teamID), "iat": .int(Int(issuedAt))])
        let signingInput = Base64URL.encode(header.serialized) + "." + Base64URL.encode(claims.serialized)
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try self.privateKey.signature(for: Data(signingInput.utf8))
        } catch {
            throw APNSCredentialsError(
                code: .signingFailed,
                path: nil,
                message: "Could not sign an APNs provider token with key \(self.keyID); check that the key is a valid P-256 key."
            )
        }
        return APNSProviderToken(
            jwt: signingInput + "." + Base64URL.encode(signature.rawRepresentation),
            issuedAt: Date(timeIntervalSince1970: TimeInterval(issuedAt))
        )
    }

    /// A 32-byte key derived from the signing key (HKDF-SHA256), for sealing what only holders
    /// of the key may read — such as a provider token kept in a shared store.
    public func derivedKey(purpose: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: self.privateKey.rawRepresentation),
            info: Data(purpose.utf8), outputByteCount: 32)
    }

    public var description: String {
        "APNSSigningKey(keyID: \(self.keyID), teamID: \(self.teamID))"
    }

    public var debugDescription: String { self.description }
    /// `dump(key)` shows the ids, not the key's bytes.
    public var customMirror: Mirror { Mirror(self, children: ["keyID": self.keyID, "teamID": self.teamID]) }
}

/// A signed provider token (JWT) and the second it was issued at.
public struct APNSProviderToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The compact JWT, sent as `authorization: bearer <jwt>`.
    public let jwt: String
    /// The `iat` claim.
    public let issuedAt: Date

    /// A token signed earlier (read back from a shared store).
    public init(jwt: String, issuedAt: Date) {
        self.jwt = jwt
        self.issuedAt = issuedAt
    }

    public var description: String {
        "APNSProviderToken(issuedAt: \(Int(self.issuedAt.timeIntervalSince1970)))"
    }

    public var debugDescription: String { self.description }
    /// `dump(token)` shows when it was issued, not the signed JWT.
    public var customMirror: Mirror { Mirror(self, children: ["issuedAt": self.issuedAt]) }
}

/// Where an ``APNSClient`` gets the provider token for each request. The client's own
/// ``APNSProviderTokenFactory`` by default; a program running several processes with one key
/// supplies a source they share, so that one token is in use at a time (APNs answers
/// `429 TooManyProviderTokenUpdates` when several are signed within 20 minutes).
public protocol APNSProviderTokenSource: Sendable {
    /// The token to send now; signs (or fetches) a new one when the current one is due.
    func providerToken() async throws -> APNSProviderToken
    /// Records that APNs answered `ExpiredProviderToken` to a request signed with `token`.
    /// - Returns: whether a retry will carry a different token; false when the current one is
    ///   younger than 20 minutes, so none may be signed yet.
    func providerTokenExpired(_ token: APNSProviderToken) -> Bool
}

/// Signs and caches the provider token of one (team, key).
///
/// APNs refuses a token older than an hour (`ExpiredProviderToken`) and one regenerated more often
/// than every 20 minutes (`TooManyProviderTokenUpdates`, which also makes the connection unusable
/// for a while). So one token is reused until it is ``refreshInterval`` old (50 minutes by
/// default), and a new one is never signed less than ``minimumRegenerationInterval`` after the
/// previous one, even when APNs calls the current one expired.
public final class APNSProviderTokenFactory: APNSProviderTokenSource {
    /// How long a token is reused by default before a new one is signed.
    public static let defaultRefreshInterval: Duration = .seconds(50 * 60)
    /// The shortest time between two signed tokens; APNs punishes faster regeneration.
    public static let minimumRegenerationInterval: Duration = .seconds(20 * 60)

    public let signingKey: APNSSigningKey
    public let refreshInterval: Duration
    private let currentTime: @Sendable () -> Date
    private let state = Mutex<State>(State())

    private struct State {
        var current: APNSProviderToken?
        var renewalRequested = false
    }

    /// - Parameters:
    ///   - refreshInterval: how long a token is reused; clamped to between 20 and 55 minutes.
    ///   - currentTime: the clock (injectable for tests).
    public init(
        signingKey: APNSSigningKey,
        refreshInterval: Duration = APNSProviderTokenFactory.defaultRefreshInterval,
        currentTime: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.signingKey = signingKey
        self.refreshInterval = min(max(refreshInterval, Self.minimumRegenerationInterval), .seconds(55 * 60))
        self.currentTime = currentTime
    }

    /// ``currentToken()``, as an ``APNSProviderTokenSource``.
    public func providerToken() async throws -> APNSProviderToken {
        try self.currentToken()
    }

    /// The token to send now: the cached one, or a newly signed one when the cached one is due.
    public func currentToken() throws -> APNSProviderToken {
        let now = self.currentTime()
        return try self.state.withLock { state in
            if let token = state.current {
                let age = Self.age(of: token, at: now)
                let due = age >= self.refreshInterval
                    || (state.renewalRequested && age >= Self.minimumRegenerationInterval)
                if !due {
                    return token
                }
            }
            let token = try self.sign(at: now)
            state.current = token
            state.renewalRequested = false
            return token
        }
    }

    /// Records that APNs answered `ExpiredProviderToken` to a request signed with `token`.
    ///
    /// - Returns: `true` when a retry will carry a different token (one is already in use, or the
    ///   current one is at least 20 minutes old and will be replaced); `false` when the current token
    ///   is younger than 20 minutes, so no new one may be signed yet.
    @discardableResult
    public func providerTokenExpired(_ token: APNSProviderToken) -> Bool {
        let now = self.currentTime()
        return self.state.withLock { state in
            guard let current = state.current, current == token else {
                return true
            }
            guard Self.age(of: current, at: now) >= Self.minimumRegenerationInterval else {
                return false
            }
            state.renewalRequested = true
            return true
        }
    }

    private static func age(of token: APNSProviderToken, at now: Date) -> Duration {
        .milliseconds(Int64((now.timeIntervalSince(token.issuedAt) * 1000).rounded(.down)))
    }

    private func sign(at now: Date) throws -> APNSProviderToken {
        try self.signingKey.signProviderToken(at: now)
    }
}

