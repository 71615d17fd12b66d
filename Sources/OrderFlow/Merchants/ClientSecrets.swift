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

extension OrderFlowEngine {
    /// Every client secret begins so: `of_cs_<merchant>.<order>.<mac>`, the ids in base64url.
    public static let clientSecretScheme = "of_cs_"

    /// The order's client secret, for the customer's app: an HMAC-SHA256 over merchant and
    /// order under the merchant's client-secret key (made on first use, kept in the database),
    /// so it is never stored and the same order always gets the same secret. It grants that
    /// order's reads and the app's reports (see the HTTP API), never another order's.
    public func clientSecret(forOrder orderID: String) async throws -> String {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            let key = try await clientSecretKey(merchantID: merchantID)
            let mac = Self.clientSecretMAC(key: key, merchantID: merchantID, orderID: orderID)
            return Self.clientSecretScheme + Base64URL.encode(Data(merchantID.utf8)) + "." + Base64URL.encode(Data(orderID.utf8))
                + "." + Base64URL.encode(mac)
        }
    }

    /// The order a presented client secret grants; nil for a malformed or forged one (or one
    /// of a merchant that never made one). Compared in constant time.
    ///
    /// Only reads: a secret naming a merchant that has no key (any text an attacker makes up)
    /// writes no row and leaves nothing in this process's memory.
    public func resolveClientSecret(_ presented: String) async throws -> ClientSecretGrant? {
        try await translatingErrors {
            guard presented.hasPrefix(Self.clientSecretScheme), presented.utf8.count <= 700 else { return nil }
            let parts = presented.dropFirst(Self.clientSecretScheme.count).split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3,
                  let merchantData = Base64URL.decode(parts[0]), let merchantID = String(data: merchantData, encoding: .utf8),
                  let orderData = Base64URL.decode(parts[1]), let orderID = String(data: orderData, encoding: .utf8),
                  let mac = Base64URL.decode(parts[2]), mac.count == 32,
                  (try? OrderFlowConfiguration.validate(merchantID: merchantID)) != nil,
                  (try? Self.validateIdentifier(orderID, what: "order id")) != nil
            else { return nil }
            guard let key = try await existingClientSecretKey(merchantID: merchantID) else { return nil }
            let expected = Self.clientSecretMAC(key: key, merchantID: merchantID, orderID: orderID)
            guard Self.constantTimeEqual(expected, mac) else { return nil }
            return ClientSecretGrant(merchantID: merchantID, orderID: orderID)
        }
    }

    /// The merchant's key, from this process's memory after the first read.
    private func clientSecretKey(merchantID: String) async throws -> Data {
        if let known = clientKeys.withLock({ $0[merchantID] }) { return known }
        let candidate = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        let key = try await merchantStore.clientKey(merchantID: merchantID, candidate: candidate)
        clientKeys.withLock { $0[merchantID] = key }
        return key
    }

    /// The merchant's key if it has made one; misses are not remembered, so memory holds only
    /// keys of merchants that exist.
    private func existingClientSecretKey(merchantID: String) async throws -> Data? {
        if let known = clientKeys.withLock({ $0[merchantID] }) { return known }
        guard let key = try await merchantStore.existingClientKey(merchantID: merchantID) else { return nil }
        clientKeys.withLock { $0[merchantID] = key }
        return key
    }

    private static func clientSecretMAC(key: Data, merchantID: String, orderID: String) -> Data {
        // Domain-separated, with a separator no id contains.
        let message = Data("orderflow client secret v1\u{0}\(merchantID)\u{0}\(orderID)".utf8)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }
}
