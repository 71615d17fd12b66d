import FCM
import Foundation

/// Android phones: their FCM registration tokens, and each merchant's Firebase project.
extension OrderFlowEngine {
    /// The characters of an FCM registration token (Firebase's are about 160 of them).
    static let fcmTokenLengths = 32...4096

    var androidStore: AndroidStore { AndroidStore(pool: pool) }

    /// Stores a device's FCM registration token (it may rotate: the new one replaces the old,
    /// and a token FCM had reported gone is usable again). The device is this engine's
    /// merchant's; another merchant's device of the same id is another device. Returns the
    /// token as stored (trimmed).
    /// - Throws: `invalidInput` for a token that is not an FCM registration token.
    @discardableResult
    public func registerFCMToken(deviceID: String, token: String) async throws -> String {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            let token = try Self.normalizedFCMToken(token)
            try await androidStore.saveFCMToken(merchantID: configuration.merchantID, deviceID: deviceID, token: token)
            return token
        }
    }

    static func normalizedFCMToken(_ token: String) throws -> String {
        let trimmed = token.trimmingCharacters(in: .whitespacesAndNewlines)
        let advice = "pass the token FirebaseMessaging.getToken() gave the app"
        guard fcmTokenLengths.contains(trimmed.utf8.count) else {
            throw OrderFlowError(.invalidInput,
                "the FCM registration token is \(trimmed.utf8.count) characters long; one has \(fcmTokenLengths.lowerBound) to \(fcmTokenLengths.upperBound): \(advice)")
        }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:.".unicodeScalars)
        if let index = Array(trimmed.unicodeScalars).firstIndex(where: { !allowed.contains($0) }) {
            throw OrderFlowError(.invalidInput,
                "the FCM registration token has a character at position \(index + 1) that no FCM token has (they use letters, digits, `-`, `_`, `:` and `.`): \(advice)")
        }
        return trimmed
    }

    /// Gives a merchant its Firebase project (again, to rotate the key): the service account
    /// JSON is checked (`FCM.FCMServiceAccount`: its fields and its RSA key), sealed with AES-GCM under `masterKey`, bound to
    /// the merchant and the project, and stored; it is never logged or shown.
    ///
    /// Nothing is stored when anything is wrong: a file of the wrong shape, an unknown
    /// merchant, or stored keys sealed under another master key.
    /// - Throws: `OrderFlowError` (`.invalidInput`, `.notFound`, `.invalidConfiguration`).
    @discardableResult
    public func setFCMServiceAccount(merchantID: String, serviceAccountJSON: String, masterKey: MasterKey) async throws -> MerchantFCMSummary {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            let account: FCM.FCMServiceAccount
            do {
                account = try FCM.FCMServiceAccount(json: serviceAccountJSON)
            } catch let error as FCMCredentialsError {
                throw OrderFlowError(.invalidInput, error.message)
            }
            guard try await merchantStore.merchantExists(merchantID) else { throw Self.unknownMerchant(merchantID) }
            try await requireStoredKeysSealed(under: masterKey)
            let sealed = try masterKey.seal(Data(serviceAccountJSON.utf8), context: Self.fcmKeyContext(merchantID: merchantID, projectID: account.projectID))
            guard try await androidStore.saveFCMApp(merchantID: merchantID, account: account, sealedKey: sealed, masterKeyID: masterKey.id) else {
                throw Self.unknownMerchant(merchantID)
            }
            return try await androidStore.fcmApp(of: merchantID)!
        }
    }

    /// What may be shown of a merchant's Firebase project (never the key); nil when it has none.
    public func fcmProject(merchantID: String) async throws -> MerchantFCMSummary? {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            return try await androidStore.fcmApp(of: merchantID)
        }
    }

    /// Takes a merchant's Firebase project away, its sealed service account with it: its Android
    /// followers' messages then wait, as for a merchant that never had one. For a key that must
    /// not outlive its use (the demo's throw-away project, sealed under a key nobody keeps).
    ///
    /// - Parameter merchantID: the merchant whose project goes; other merchants' stay.
    /// - Returns: false when the merchant had no Firebase project.
    @discardableResult
    public func removeFCMServiceAccount(merchantID: String) async throws -> Bool {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            return try await androidStore.removeFCMApp(merchantID: merchantID)
        }
    }

    /// The merchant's service account, opened with `masterKey`, for an FCM sender; nil when the
    /// merchant has no Firebase project.
    /// - Throws: `invalidConfiguration` when the key was sealed under another master key.
    public func fcmServiceAccount(merchantID: String, masterKey: MasterKey) async throws -> FCM.FCMServiceAccount? {
        try await translatingErrors {
            guard let stored = try await androidStore.sealedFCMKey(of: merchantID) else { return nil }
            guard let json = masterKey.open(stored.sealed, context: Self.fcmKeyContext(merchantID: merchantID, projectID: stored.projectID)) else {
                throw OrderFlowError(.invalidConfiguration,
                    "merchant \(Self.shown(merchantID))'s FCM key is sealed under master key \(stored.masterKeyID), not the one given (\(masterKey.id)); use the master key it was stored with")
            }
            do {
                return try FCM.FCMServiceAccount(json: String(decoding: json, as: UTF8.self))
            } catch let error as FCMCredentialsError {
                throw OrderFlowError(.invalidConfiguration, "merchant \(Self.shown(merchantID))'s stored FCM key no longer reads: \(error.message)")
            }
        }
    }

    /// What a sealed FCM key is bound to: opening it for another merchant or project fails.
    static func fcmKeyContext(merchantID: String, projectID: String) -> String {
        "orderflow fcm service account\u{0}\(merchantID)\u{0}\(projectID)"
    }
}
