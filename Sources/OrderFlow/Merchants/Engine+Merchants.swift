import APNS
import Crypto
import Foundation
import WorkflowKit

extension OrderFlowEngine {
    /// The SQL of merchants, apps and API keys.
    var merchantStore: MerchantStore { MerchantStore(pool: pool) }

    // MARK: Merchants

    /// Adds a merchant (a tenant). Its pushes go through the worker's default app until it is
    /// given its own with ``setAPNSApp(_:masterKey:)``.
    /// - Throws: `OrderFlowError.alreadyExists` when the id is taken; `.invalidInput` for an id
    ///   or name that cannot be stored.
    @discardableResult
    public func addMerchant(_ merchantID: String, name: String? = nil) async throws -> MerchantSummary {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            try Self.validateName(name, what: "merchant name")
            guard try await merchantStore.addMerchant(id: merchantID, name: name) else {
                throw OrderFlowError(.alreadyExists, "merchant \(Self.shown(merchantID)) exists already", remedy: .findMerchant)
            }
            return try await merchants().first { $0.id == merchantID }!
        }
    }

    /// Every merchant, by id, with its app (never the key: its fingerprint) and push state.
    public func merchants() async throws -> [MerchantSummary] {
        try await translatingErrors { try await merchantStore.merchants() }
    }

    /// Gives a merchant its own APNs app, or replaces it (a key rotation: pushes in flight finish
    /// with the old key, workers use the new one for the next). The key is checked (a P-256
    /// `.p8` key), sealed with AES-GCM under `masterKey` and stored; it is never logged.
    ///
    /// Nothing is stored when anything is wrong: a key that does not load, a malformed bundle,
    /// key or team id, an unknown merchant, or a database whose keys were sealed under another
    /// master key.
    /// - Throws: `OrderFlowError` (`.invalidInput`, `.notFound`, `.invalidConfiguration`) saying
    ///   what is wrong and what to do.
    @discardableResult
    public func setAPNSApp(_ app: MerchantAPNSApp, masterKey: MasterKey) async throws -> MerchantAppSummary {
        try await translatingErrors {
            try Self.validateIdentifier(app.merchantID, what: "merchant id")
            if let problem = APNSAppIdentifiers.bundleIDProblem(app.bundleID) {
                throw OrderFlowError(.invalidInput, "the bundle id \(problem)")
            }
            for (id, what) in [(app.credentials.keyID, "key id"), (app.credentials.teamID, "team id")]
            where !APNSAppIdentifiers.isAppleID(id) {
                throw OrderFlowError(.invalidInput,
                    "the \(what) \"\(MessageText.excerpt(id, limit: 20))\" is not an Apple \(what): give the 10 capital letters and digits shown in the Apple Developer account")
            }
            let signingKey: APNSSigningKey
            let pem: String
            do {
                signingKey = try app.credentials.loadSigningKey()
                switch app.credentials.key {
                case .pem(let text): pem = text
                case .file(let path): pem = try SmallTextFile.read(path, maximumBytes: APNSSigningKey.maximumKeyFileBytes)
                }
                try APNSClientConfiguration(environment: app.environment, credentials: app.credentials).validate()
            } catch let error as APNSCredentialsError {
                throw OrderFlowError(.invalidInput, error.message)
            } catch let error as APNSConfigurationError {
                throw OrderFlowError(.invalidInput, error.message)
            } catch is SmallTextFile.Problem {
                throw OrderFlowError(.invalidInput, "the APNs key file cannot be read; check its path and permissions")
            }
            guard try await merchantStore.merchantExists(app.merchantID) else {
                throw Self.unknownMerchant(app.merchantID)
            }
            try await requireStoredKeysSealed(under: masterKey)
            let (environment, url, ca): (String, String?, String?) = switch app.environment {
            case .production: ("production", nil, nil)
            case .sandbox: ("sandbox", nil, nil)
            case .custom(let url, let ca): ("custom", url, ca)
            }
            let stored = StoredMerchantApp(
                merchantID: app.merchantID, bundleID: app.bundleID, teamID: app.credentials.teamID, keyID: app.credentials.keyID,
                sealedKey: try masterKey.seal(Data(pem.utf8), context: Self.keyContext(merchantID: app.merchantID, teamID: app.credentials.teamID, keyID: app.credentials.keyID)),
                keyFingerprint: signingKey.fingerprint, masterKeyID: masterKey.id,
                environment: environment, endpointURL: url, endpointCA: ca)
            guard try await merchantStore.saveApp(stored) else { throw Self.unknownMerchant(app.merchantID) }
            return try await merchantStore.merchants().first { $0.id == app.merchantID }!.app!
        }
    }

    /// Refuses a key sealed under `masterKey` while other stored keys (merchants' APNs keys or
    /// Firebase service accounts) are sealed under another: one master key opens them all, so
    /// that a worker or a rotation given one key never meets a key it cannot open.
    func requireStoredKeysSealed(under masterKey: MasterKey) async throws {
        let others = try await merchantStore.otherMasterKeyIDs(than: masterKey.id)
        if !others.isEmpty {
            throw OrderFlowError(.invalidConfiguration,
                "the stored keys (merchants' APNs keys, Firebase service accounts) are sealed under another master key (id \(others.joined(separator: ", "))), not the one given (id \(masterKey.id)); use the master key they were stored with")
        }
    }

    /// What a sealed key is bound to: opening it for another row fails.
    static func keyContext(merchantID: String, teamID: String, keyID: String) -> String {
        "orderflow merchant_apps \(merchantID) \(teamID) \(keyID)"
    }

    /// Checks that a merchant exists: the configured default merchant, or one added since.
    /// - Throws: `OrderFlowError.invalidInput` for an unusable id, `notFound` for an unknown one.
    public func requireMerchant(_ merchantID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            guard merchantID != configuration.merchantID else { return }
            guard try await merchantStore.merchantExists(merchantID) else {
                throw OrderFlowError(.notFound, "merchant \(Self.shown(merchantID)) does not exist", remedy: .listMerchants)
            }
        }
    }

    static func unknownMerchant(_ merchantID: String) -> OrderFlowError {
        OrderFlowError(.notFound, "there is no merchant \(shown(merchantID))", remedy: .addMerchant(merchantID))
    }

    // MARK: API keys

    /// Every API key begins so, then its prefix, `_` and the secret.
    public static let apiKeyScheme = "of_live_"
    /// The characters of a key's prefix and secret (no look-alikes: no l, o, 0, 1), as bytes.
    private static let apiKeyAlphabet: [UInt8] = Array("abcdefghijkmnpqrstuvwxyz23456789".utf8)

    /// Makes an API key for a merchant. The secret is in the answer only: the database keeps
    /// its SHA-256.
    public func createAPIKey(merchantID: String, name: String? = nil) async throws -> CreatedAPIKey {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            try Self.validateName(name, what: "API key name")
            func random(_ count: Int) -> String {
                var generator = SystemRandomNumberGenerator()
                return String(decoding: (0..<count).map { _ in Self.apiKeyAlphabet.randomElement(using: &generator)! }, as: UTF8.self)
            }
            for _ in 0..<3 {
                let prefix = random(10)
                let secret = Self.apiKeyScheme + prefix + "_" + random(32)
                do {
                    guard let key = try await merchantStore.insertAPIKey(
                        prefix: prefix, merchantID: merchantID, name: name, secretHash: Data(SHA256.hash(data: Data(secret.utf8))))
                    else { throw Self.unknownMerchant(merchantID) }
                    return CreatedAPIKey(key: key, secret: secret)
                } catch let error as OrderFlowError where error.code == .notFound {
                    throw error
                } catch where OrderFlowError.translating(error)?.code == .conflict {
                    continue  // a prefix taken already (1 in 2^50): draw another
                }
            }
            throw OrderFlowError(.unexpected, "could not draw an unused API key prefix; try again")
        }
    }

    /// A merchant's API keys, revoked ones included, oldest first (never their secrets).
    public func apiKeys(merchantID: String) async throws -> [APIKeySummary] {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            guard try await merchantStore.merchantExists(merchantID) else { throw Self.unknownMerchant(merchantID) }
            return try await merchantStore.apiKeys(merchantID: merchantID)
        }
    }

    /// Revokes a merchant's API key, named by its prefix (or the whole key): it no longer resolves.
    public func revokeAPIKey(merchantID: String, prefix: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            let prefix = Self.apiKeyParts(prefix)?.prefix ?? prefix
            // Forgotten before and after: a resolve racing the revocation cannot keep it alive.
            apiKeys.withLock { $0[prefix] = nil }
            defer { apiKeys.withLock { $0[prefix] = nil } }
            guard try await merchantStore.revokeAPIKey(merchantID: merchantID, prefix: prefix) else {
                throw OrderFlowError(.notFound,
                    "merchant \(Self.shown(merchantID)) has no live API key \(Self.shown(prefix))", remedy: .listAPIKeys(merchantID: merchantID))
            }
        }
    }

    /// The merchant a presented API key belongs to; nil for a malformed, unknown or revoked key.
    /// The key's prefix finds one row; the secret's SHA-256 is compared with the stored one in
    /// constant time.
    ///
    /// A busy API presents the same key on every request: the row read is kept for
    /// ``apiKeyRecheck`` (half a second), and its last use is written at most once a minute, so
    /// that a request costs no extra round trip to PostgreSQL. A key revoked through this engine
    /// stops working at once; one revoked by another process, within a second (the recheck plus
    /// a request already under way).
    public func resolveAPIKey(_ presented: String) async throws -> String? {
        try await translatingErrors {
            guard let parts = Self.apiKeyParts(presented), parts.hasSecret else { return nil }
            let hash = Data(SHA256.hash(data: Data(presented.utf8)))
            let now = ContinuousClock.now
            let cached = apiKeys.withLock { $0[parts.prefix] }
            if let cached, now - cached.checkedAt < Self.apiKeyRecheck {
                return Self.constantTimeEqual(hash, cached.secretHash) ? cached.merchantID : nil
            }
            guard let stored = try await merchantStore.liveAPIKey(prefix: parts.prefix) else {
                apiKeys.withLock { $0[parts.prefix] = nil }
                return nil
            }
            let touchDue = cached?.touchedAt.map { now - $0 >= .seconds(60) } ?? true
            let matches = Self.constantTimeEqual(hash, stored.secretHash)
            apiKeys.withLock {
                $0[parts.prefix] = VerifiedAPIKey(
                    merchantID: stored.merchantID, secretHash: stored.secretHash, checkedAt: now,
                    touchedAt: matches && touchDue ? now : cached?.touchedAt)
            }
            guard matches else { return nil }
            if touchDue { try await merchantStore.touchAPIKey(prefix: parts.prefix) }
            return stored.merchantID
        }
    }

    /// The public prefix of an API key (`of_live_<prefix>_…`), safe to log and to record as who
    /// made a change; nil for text that is not a key.
    public static func apiKeyPrefix(of key: String) -> String? {
        apiKeyParts(key)?.prefix
    }

    /// How long a key read from the database is trusted before it is read again: half of the
    /// second within which every replica refuses a revoked key, so that the promise holds with
    /// a request in flight and a busy machine's scheduling delay.
    public static let apiKeyRecheck: Duration = .milliseconds(500)

    /// `of_live_<prefix>_<secret>` split, or a bare prefix; nil for anything else. On the key's
    /// bytes: it runs for every API request (a `Set` of characters built per call shows in the
    /// HTTP server's profile).
    private static func apiKeyParts(_ text: String) -> (prefix: String, hasSecret: Bool)? {
        func isPrefix(_ bytes: Substring.UTF8View) -> Bool {
            bytes.count == 10 && bytes.allSatisfy { apiKeyAlphabet.contains($0) }
        }
        guard text.hasPrefix(apiKeyScheme) else {
            return isPrefix(Substring(text).utf8) ? (text, false) : nil
        }
        let rest = Substring(text).utf8.dropFirst(apiKeyScheme.utf8.count)
        let parts = rest.split(separator: UInt8(ascii: "_"), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count <= 2, isPrefix(parts[0]) else { return nil }
        return (String(Substring(parts[0])), parts.count == 2 && parts[1].count == 32)
    }

    /// Compares every byte whatever differs first: the time taken says nothing of the secret.
    public static func constantTimeEqual(_ a: Data, _ b: Data) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}

/// A live API key's row as last read: who it belongs to, the hash to compare with, when it was
/// read, and when this process last wrote its use.
struct VerifiedAPIKey: Sendable {
    var merchantID: String
    var secretHash: Data
    var checkedAt: ContinuousClock.Instant
    var touchedAt: ContinuousClock.Instant?
}
