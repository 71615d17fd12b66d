import FCM
import Foundation
import PGKit

/// The SQL of the Android side: each device's FCM registration token and each merchant's
/// sealed FCM service account. Sealed bytes travel as base64 text (`decode($n, 'base64')`).
struct AndroidStore: Sendable {
    let pool: PostgresPool

    /// Saves (or replaces: tokens rotate) a device's FCM registration token, making the device
    /// known to the merchant if it was not.
    func saveFCMToken(merchantID: String, deviceID: String, token: String) async throws {
        try await pool.query(PostgresQuery("""
            INSERT INTO devices (merchant_id, device_id, fcm_token, fcm_token_updated_at) VALUES ($1, $2, $3, now())
            ON CONFLICT (merchant_id, device_id)
            DO UPDATE SET fcm_token = EXCLUDED.fcm_token, fcm_token_updated_at = now(), fcm_token_invalid_at = NULL,
                          updated_at = now()
            """, merchantID, deviceID, token))
    }

    /// The device's FCM token, nil when it has none.
    func fcmToken(merchantID: String, deviceID: String) async throws -> String? {
        try await pool.query(PostgresQuery(
            "SELECT fcm_token FROM devices WHERE merchant_id = $1 AND device_id = $2", merchantID, deviceID)
        ).first?.decode("fcm_token", as: String?.self) ?? nil
    }

    /// Stores (or replaces, one revision later) a merchant's FCM project. False when the
    /// merchant does not exist.
    func saveFCMApp(merchantID: String, account: FCM.FCMServiceAccount, sealedKey: Data, masterKeyID: String) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            INSERT INTO merchant_fcm_apps (merchant_id, project_id, client_email, token_uri, key_sealed, key_fingerprint, master_key_id)
            SELECT m.merchant_id, $2, $3, $4, decode($5, 'base64'), $6, $7
            FROM merchants m WHERE m.merchant_id = $1
            ON CONFLICT (merchant_id) DO UPDATE
            SET project_id = EXCLUDED.project_id, client_email = EXCLUDED.client_email, token_uri = EXCLUDED.token_uri,
                key_sealed = EXCLUDED.key_sealed, key_fingerprint = EXCLUDED.key_fingerprint,
                master_key_id = EXCLUDED.master_key_id, revision = merchant_fcm_apps.revision + 1, updated_at = now()
            """, merchantID, account.projectID, account.clientEmail, account.tokenURI, sealedKey.base64EncodedString(),
            account.fingerprint, masterKeyID)).affectedRows == 1
    }

    /// What may be shown of a merchant's FCM project; nil when it has none.
    func fcmApp(of merchantID: String) async throws -> MerchantFCMSummary? {
        try await pool.query(PostgresQuery("""
            SELECT project_id, client_email, key_fingerprint, updated_at FROM merchant_fcm_apps WHERE merchant_id = $1
            """, merchantID)).first.map { row in
            MerchantFCMSummary(projectID: try row.decode("project_id"), clientEmail: try row.decode("client_email"),
                               keyFingerprint: try row.decode("key_fingerprint"), updatedAt: try row.decode("updated_at"))
        }
    }

    /// Forgets a merchant's FCM project and its sealed key. False when it had none.
    func removeFCMApp(merchantID: String) async throws -> Bool {
        try await pool.query(PostgresQuery(
            "DELETE FROM merchant_fcm_apps WHERE merchant_id = $1", merchantID)).affectedRows == 1
    }

    /// The sealed service account JSON and the master key that sealed it; nil without a project.
    func sealedFCMKey(of merchantID: String) async throws -> (sealed: Data, projectID: String, masterKeyID: String)? {
        try await pool.query(PostgresQuery("""
            SELECT encode(key_sealed, 'base64') AS key_sealed, project_id, master_key_id FROM merchant_fcm_apps WHERE merchant_id = $1
            """, merchantID)).first.map { row in
            (Data(base64Encoded: try row.decode("key_sealed", as: String.self), options: .ignoreUnknownCharacters) ?? Data(), try row.decode("project_id"),
             try row.decode("master_key_id"))
        }
    }

    // MARK: Master-key rotation (inside one transaction, on its connection)

    /// Every merchant's sealed FCM service account, locked until the transaction ends.
    static func lockSealedFCMKeys(_ connection: isolated PostgresConnection) async throws -> PostgresRows {
        try await connection.query(PostgresQuery("""
            SELECT merchant_id, project_id, encode(key_sealed, 'base64') AS sealed, master_key_id
            FROM merchant_fcm_apps ORDER BY merchant_id FOR UPDATE
            """))
    }

    static func resealFCMKey(_ connection: isolated PostgresConnection, merchantID: String, sealed: Data, masterKeyID: String) async throws {
        try await connection.query(PostgresQuery("""
            UPDATE merchant_fcm_apps SET key_sealed = decode($2, 'base64'), master_key_id = $3, revision = revision + 1, updated_at = now()
            WHERE merchant_id = $1
            """, merchantID, sealed.base64EncodedString(), masterKeyID))
    }
}
