import Foundation
import PGKit

/// What a master-key rotation sealed anew.
public struct MasterKeyRotation: Sendable, Hashable {
    /// Merchants' APNs keys, now sealed under the new master key.
    public var apnsKeys: Int
    /// Client-secret key versions, now sealed under the new master key (unsealed ones included).
    public var clientSecretKeys: Int
}

extension OrderFlowEngine {
    /// Seals every stored secret anew under `new`: the merchants' APNs keys and client-secret
    /// keys, opened with `current` (needed once anything is sealed; unsealed client-secret keys
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
                let apps = try await connection.query(PostgresQuery("""
                    SELECT merchant_id, team_id, key_id, encode(key_sealed, 'base64') AS sealed, master_key_id
                    FROM merchant_apps ORDER BY merchant_id FOR UPDATE
                    """))
                for app in apps {
                    let merchantID: String = try app.decode("merchant_id")
                    let context = Self.keyContext(merchantID: merchantID, teamID: try app.decode("team_id"), keyID: try app.decode("key_id"))
                    let sealedBy: String = try app.decode("master_key_id")
                    guard let current, current.id == sealedBy,
                          let sealed = Data(base64Encoded: try app.decode("sealed", as: String.self), options: .ignoreUnknownCharacters),
                          let pem = current.open(sealed, context: context)
                    else { throw refuse("merchant \(Self.shown(merchantID))'s APNs key", sealedBy: sealedBy) }
                    try await connection.query(PostgresQuery("""
                        UPDATE merchant_apps SET key_sealed = decode($2, 'base64'), master_key_id = $3, revision = revision + 1,
                                                 updated_at = now()
                        WHERE merchant_id = $1
                        """, merchantID, try new.seal(pem, context: context).base64EncodedString(), new.id))
                }
                let keys = try await connection.query(PostgresQuery("""
                    SELECT merchant_id, version, encode(key, 'base64') AS plain, encode(key_sealed, 'base64') AS sealed, master_key_id
                    FROM merchant_client_keys ORDER BY merchant_id, version FOR UPDATE
                    """))
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
                    try await connection.query(PostgresQuery("""
                        UPDATE merchant_client_keys SET key = NULL, key_sealed = decode($3, 'base64'), master_key_id = $4
                        WHERE merchant_id = $1 AND version = $2
                        """, merchantID, stored.version, try new.seal(key, context: context).base64EncodedString(), new.id))
                }
                return MasterKeyRotation(apnsKeys: apps.count, clientSecretKeys: keys.count)
            }
        }
    }
}
