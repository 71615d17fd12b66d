import Crypto
import FCM
import Foundation

/// What a worker did with the shared access token of a service account key.
enum FCMAccessTokenDecision: Sendable {
    /// Another worker's token, still good.
    case reuse(FCMAccessToken)
    /// A new one from Google, to be stored sealed.
    case exchanged(FCMAccessToken, sealed: Data)

    var token: FCMAccessToken {
        switch self {
        case .reuse(let token), .exchanged(let token, _): token
        }
    }
}

/// The OAuth 2 access token of one service account key, shared through PostgreSQL by every
/// worker that sends with the key, as ``SharedProviderTokens`` shares the APNs provider token:
/// one exchange with Google serves all of them until shortly before it expires.
///
/// The token is kept in `fcm_access_tokens`, sealed (AES-GCM) under a key derived from the
/// account's private key, so that only holders of the key can read it. Each worker keeps its
/// copy in an `FCMAccessTokenCache` and asks the database only when its copy is due or FCM
/// refused it; under the key's advisory lock the first to ask exchanges, the others take its
/// token. A token FCM refused (`401`) is never handed out again.
struct SharedFCMAccessTokens: Sendable {
    let store: FCMDeliveryStore
    let clientEmail: String
    let keyFingerprint: String
    /// Derived from the service account's private key.
    let sealingKey: SymmetricKey
    /// A stored token with less than this left is replaced.
    let refreshMargin: Duration

    /// - Parameter privateKeyPEM: the account's `private_key`, from which the sealing key comes.
    init(store: FCMDeliveryStore, clientEmail: String, keyFingerprint: String, privateKeyPEM: String, refreshMargin: Duration) {
        self.store = store
        self.clientEmail = clientEmail
        self.keyFingerprint = keyFingerprint
        self.refreshMargin = refreshMargin
        sealingKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(privateKeyPEM.utf8)),
            info: Data("orderflow shared FCM access token".utf8), outputByteCount: 32)
    }

    /// The stored token when it is good for longer than the margin and not the one FCM
    /// refused; else a new one from `exchange`, stored for the others.
    func fetch(now: Date, rejected: FCMAccessToken?, exchange: FCMTokenExchange) async throws -> FCMAccessToken {
        let context = Data("\(clientEmail) \(keyFingerprint)".utf8)
        let margin = refreshMargin.inSeconds
        return try await store.withAccessToken(clientEmail: clientEmail, keyFingerprint: keyFingerprint) { [sealingKey] stored in
            if let stored, let box = try? AES.GCM.SealedBox(combined: stored.sealed),
               let opened = try? AES.GCM.open(box, using: sealingKey, authenticating: context),
               let value = String(data: opened, encoding: .utf8),
               value != rejected?.value, stored.expiresAt.timeIntervalSince(now) > margin
            {
                return .reuse(FCMAccessToken(value: value, expiresAt: stored.expiresAt))
            }
            // None stored, one sealed under another key (a new key of the account), due, or refused.
            let token = try await exchange.exchange(at: now)
            let sealed = try AES.GCM.seal(Data(token.value.utf8), using: sealingKey, authenticating: context).combined!
            return .exchanged(token, sealed: sealed)
        }.token
    }
}
