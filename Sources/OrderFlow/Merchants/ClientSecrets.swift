import APNSCore
import Crypto
import Foundation

/// What an order's client secret grants: that order of that merchant, nothing else.
public struct ClientSecretGrant: Sendable, Hashable {
    public var merchantID: String
    public var orderID: String

    public init(merchantID: String, orderID: String) {
        self.merchantID = merchantID
        self.orderID = orderID
    }
}

/// A merchant's client-secret keys as this process last read them: each live version's key.
struct ClientKeyring: Sendable {
    var keys: [Int: Data]
    var readAt: ContinuousClock.Instant

    var newest: (version: Int, key: Data)? {
        keys.max { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

extension OrderFlowEngine {
    /// Every client secret begins so: `of_cs_<merchant>.<order>.<mac>` for the merchant's first
    /// key, `of_cs_<merchant>.<order>.v<version>.<mac>` for later ones; the ids in base64url.
    public static let clientSecretScheme = "of_cs_"

    /// How long a process trusts the keyring it read: a key rotated or retired elsewhere is
    /// seen within this long (a secret naming a version it does not know is read again at once).
    static let clientKeyringRecheck: Duration = .seconds(60)

    /// The order's client secret, for the customer's app: an HMAC-SHA256 over merchant and
    /// order under the merchant's newest client-secret key (made on first use, kept in the
    /// database sealed under the master key when the engine has one), so the secret is never
    /// stored and the same order gets the same secret until the key is rotated. It grants that
    /// order's reads and the app's reports (see the HTTP API), never another order's.
    public func clientSecret(forOrder orderID: String) async throws -> String {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            var keyring = try await clientKeyring(merchantID: merchantID)
            if keyring?.newest == nil {
                try await addClientSecretKey(merchantID: merchantID, version: 1)
                keyring = try await clientKeyring(merchantID: merchantID, reread: true)
            }
            guard let newest = keyring?.newest else {
                throw OrderFlowError(.unexpected, "the client-secret key of merchant \(Self.shown(merchantID)) could not be made; try again")
            }
            let (version, key) = newest
            let mac = Self.clientSecretMAC(key: key, merchantID: merchantID, orderID: orderID)
            return Self.clientSecretScheme + Base64URL.encode(Data(merchantID.utf8)) + "." + Base64URL.encode(Data(orderID.utf8))
                + (version == 1 ? "" : ".v\(version)") + "." + Base64URL.encode(mac)
        }
    }

    /// The order a presented client secret grants; nil for a malformed or forged one, one of a
    /// merchant that never made one, or one made with a retired key. Compared in constant time.
    ///
    /// Only reads: a secret naming a merchant that has no key (any text an attacker makes up)
    /// writes no row and leaves nothing in this process's memory.
    public func resolveClientSecret(_ presented: String) async throws -> ClientSecretGrant? {
        try await translatingErrors {
            guard presented.hasPrefix(Self.clientSecretScheme), presented.utf8.count <= 700 else { return nil }
            let parts = presented.dropFirst(Self.clientSecretScheme.count).split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3 || parts.count == 4,
                  let merchantData = Base64URL.decode(parts[0]), let merchantID = String(data: merchantData, encoding: .utf8),
                  let orderData = Base64URL.decode(parts[1]), let orderID = String(data: orderData, encoding: .utf8),
                  let mac = Base64URL.decode(parts[parts.count - 1]), mac.count == 32,
                  (try? OrderFlowConfiguration.validate(merchantID: merchantID)) != nil,
                  (try? Self.validateIdentifier(orderID, what: "order id")) != nil
            else { return nil }
            var version = 1
            if parts.count == 4 {
                guard parts[2].hasPrefix("v"), let given = Int(parts[2].dropFirst()), given >= 2, given <= 1_000_000 else { return nil }
                version = given
            }
            let keyring = try await clientKeyring(merchantID: merchantID)
            var key = keyring?.keys[version]
            if key == nil, version > 1, keyring.map({ ContinuousClock.now - $0.readAt >= .seconds(1) }) ?? false {
                // A version made since this process read the keyring (a rotation elsewhere); read
                // again at most once a second, so that made-up versions cost no query each.
                key = try await clientKeyring(merchantID: merchantID, reread: true)?.keys[version]
            }
            guard let key else { return nil }
            let expected = Self.clientSecretMAC(key: key, merchantID: merchantID, orderID: orderID)
            guard Self.constantTimeEqual(expected, mac) else { return nil }
            return ClientSecretGrant(merchantID: merchantID, orderID: orderID)
        }
    }

    /// Makes a new version of a merchant's client-secret key: new secrets are made with it, and
    /// those of older versions keep working until `retiringOlder` (then they stop at once in
    /// this process, and in others within a minute). Returns the new version.
    @discardableResult
    public func rotateClientSecretKey(merchantID: String, retiringOlder: Bool = false) async throws -> Int {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            var known = merchantID == configuration.merchantID
            if !known { known = try await merchantStore.merchantExists(merchantID) }
            guard known else { throw Self.unknownMerchant(merchantID) }
            var version = 0
            for _ in 0..<3 {
                let rows = try await merchantStore.clientKeys(merchantID: merchantID)
                version = (rows.first?.version ?? 0) + 1
                if try await addClientSecretKey(merchantID: merchantID, version: version) { break }
                version = 0
            }
            guard version > 0 else { throw OrderFlowError(.conflict, "the client-secret key of merchant \(Self.shown(merchantID)) is being rotated by another call; try again") }
            if retiringOlder { _ = try await merchantStore.retireClientKeys(merchantID: merchantID, below: version) }
            clientKeys.withLock { $0[merchantID] = nil }
            return version
        }
    }

    /// Stores a new key version, sealed under the master key when the engine has one.
    @discardableResult
    private func addClientSecretKey(merchantID: String, version: Int) async throws -> Bool {
        let key = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        if let masterKey = configuration.masterKey {
            let sealed = try masterKey.seal(key, context: Self.clientKeyContext(merchantID: merchantID, version: version))
            return try await merchantStore.insertClientKey(merchantID: merchantID, version: version, plain: nil, sealed: sealed,
                                                           masterKeyID: masterKey.id)
        }
        return try await merchantStore.insertClientKey(merchantID: merchantID, version: version, plain: key, sealed: nil, masterKeyID: nil)
    }

    /// The merchant's keyring, from this process's memory while it is fresh; nil when the
    /// merchant never made a key (misses are not remembered, so memory holds only keyrings of
    /// merchants that have keys).
    private func clientKeyring(merchantID: String, reread: Bool = false) async throws -> ClientKeyring? {
        let now = ContinuousClock.now
        if !reread, let known = clientKeys.withLock({ $0[merchantID] }), now - known.readAt < Self.clientKeyringRecheck {
            return known
        }
        let rows = try await merchantStore.clientKeys(merchantID: merchantID)
        guard !rows.isEmpty else {
            clientKeys.withLock { $0[merchantID] = nil }
            return nil
        }
        var keys: [Int: Data] = [:]
        var unopened: OrderFlowError?
        for row in rows {
            // A version this process cannot open (sealed under another master key) is left out
            // and said in the log: the others keep working.
            do {
                keys[row.version] = try openClientKey(row, merchantID: merchantID)
            } catch let error as OrderFlowError {
                logger.error("a client-secret key cannot be opened", metadata: [
                    "merchant": "\(merchantID)", "version": "\(row.version)", "reason": "\(error.message)"])
                unopened = unopened ?? error
            }
        }
        if keys.isEmpty, let unopened { throw unopened }
        let keyring = ClientKeyring(keys: keys, readAt: now)
        clientKeys.withLock { $0[merchantID] = keyring }
        return keyring
    }

    private func openClientKey(_ row: MerchantStore.ClientKeyRow, merchantID: String) throws -> Data {
        if let plain = row.plain, plain.count == 32 { return plain }
        guard let sealed = row.sealed, let sealedBy = row.masterKeyID else {
            throw OrderFlowError(.unexpected, "the stored client-secret key of merchant \(Self.shown(merchantID)) (version \(row.version)) is damaged")
        }
        guard let masterKey = configuration.masterKey, masterKey.id == sealedBy else {
            throw OrderFlowError(.invalidConfiguration,
                "the client-secret keys are sealed under the master key with id \(sealedBy), and this process has \(configuration.masterKey.map { "the one with id \($0.id)" } ?? "none"); give it the master key they were sealed with (ORDERFLOW_SECRET_KEY_FILE)")
        }
        guard let key = masterKey.open(sealed, context: Self.clientKeyContext(merchantID: merchantID, version: row.version)), key.count == 32 else {
            throw OrderFlowError(.unexpected, "the sealed client-secret key of merchant \(Self.shown(merchantID)) (version \(row.version)) does not open; it was changed in the database")
        }
        return key
    }

    /// What a sealed client-secret key is bound to: its row.
    static func clientKeyContext(merchantID: String, version: Int) -> String {
        "orderflow merchant_client_keys \(merchantID) \(version)"
    }

    private static func clientSecretMAC(key: Data, merchantID: String, orderID: String) -> Data {
        // Domain-separated, with a separator no id contains.
        let message = Data("orderflow client secret v1\u{0}\(merchantID)\u{0}\(orderID)".utf8)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }
}
