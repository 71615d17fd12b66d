import Foundation
import PGKit

/// What a master-key rotation sealed anew.
public struct MasterKeyRotation: Sendable, Hashable {
    /// Merchants' APNs keys, now sealed under the new master key.
    public var apnsKeys: Int
    /// Client-secret key versions, now sealed under the new master key (unsealed ones included).
    public var clientSecretKeys: Int
    /// Merchants' FCM service accounts, now sealed under the new master key.
    public var fcmKeys: Int = 0
}

extension OrderFlowEngine {
    /// Seals every stored secret anew under `new`: the merchants' APNs keys, client-secret
    /// keys and FCM service accounts, opened with `current` (needed once anything is sealed; unsealed client-secret keys
    /// are sealed too). One transaction: either everything is under the new key or nothing
    /// changed. Processes still holding the old key cannot open them afterwards: restart them
    /// with the new one.
    /// - Throws: `invalidConfiguration` when `current` is missing or is not the key a secret
    ///   was sealed with (nothing changes then).
    public func rotateMasterKey(current: MasterKey?, new: MasterKey) async throws -> MasterKeyRotation {
        try await translatingErrors {
            try await pool.transaction { connection -> MasterKeyRotation in
                func refuse(_ what: String, sealedBy: String) -> OrderFlowError {
                    OrderFlowError(.invalidConfiguration,
                        "\(what) is sealed under the master key with id \(sealedBy), and \(current.map { "the current key given has id \($0.id)" } ?? "no current key was given"); give the key it was sealed with (ORDERFLOW_SECRET_KEY_FILE); nothing changed")
                }
                let apps = try await MerchantStore.lockSealedAPNSKeys(connection)
                for app in apps {
                    let merchantID: String = try app.decode("merchant_id")
                    let context = Self.keyContext(merchantID: merchantID, teamID: try app.decode("team_id"), keyID: try app.decode("key_id"))
                    let sealedBy: String = try app.decode("master_key_id")
                    guard let current, current.id == sealedBy,
                          let sealed = Data(base64Encoded: try app.decode("sealed", as: String.self), options: .ignoreUnknownCharacters),
                          let pem = current.open(sealed, context: context)
                    else { throw refuse("merchant \(Self.shown(merchantID))'s APNs key", sealedBy: sealedBy) }
                    try await MerchantStore.resealAPNSKey(connection, merchantID: merchantID,
                                                          sealed: try new.seal(pem, context: context), masterKeyID: new.id)
                }
                let keys = try await MerchantStore.lockClientKeys(connection)
                for row in keys {
                    let merchantID: String = try row.decode("merchant_id")
                    let stored = try MerchantStore.clientKeyRow(row)
                    let context = Self.clientKeyContext(merchantID: merchantID, version: stored.version)
                    let key: Data
                    if let plain = stored.plain {
                        key = plain
                    } else {
                        let sealedBy = stored.masterKeyID ?? "?"
                        guard let current, current.id == sealedBy, let sealed = stored.sealed,
                              let opened = current.open(sealed, context: context)
                        else { throw refuse("merchant \(Self.shown(merchantID))'s client-secret key", sealedBy: sealedBy) }
                        key = opened
                    }
                    try await MerchantStore.resealClientKey(connection, merchantID: merchantID, version: stored.version,
                                                            sealed: try new.seal(key, context: context), masterKeyID: new.id)
                }
                let accounts = try await AndroidStore.lockSealedFCMKeys(connection)
                for account in accounts {
                    let merchantID: String = try account.decode("merchant_id")
                    let context = Self.fcmKeyContext(merchantID: merchantID, projectID: try account.decode("project_id"))
                    let sealedBy: String = try account.decode("master_key_id")
                    guard let current, current.id == sealedBy,
                          let sealed = Data(base64Encoded: try account.decode("sealed", as: String.self), options: .ignoreUnknownCharacters),
                          let json = current.open(sealed, context: context)
                    else { throw refuse("merchant \(Self.shown(merchantID))'s FCM service account", sealedBy: sealedBy) }
                    try await AndroidStore.resealFCMKey(connection, merchantID: merchantID,
                                                        sealed: try new.seal(json, context: context), masterKeyID: new.id)
                }
                return MasterKeyRotation(apnsKeys: apps.count, clientSecretKeys: keys.count, fcmKeys: accounts.count)
            }
        }
    }
}
