import Foundation
import PGKit

/// The worker's SQL for the Android side: a merchant's sealed FCM service account as the
/// worker opens it, and the OAuth access tokens every worker shares.
struct FCMDeliveryStore: Sendable {
    let pool: PostgresPool

    /// The merchant's Firebase project with its sealed service account; nil when it has none.
    func app(of merchantID: String) async throws -> StoredFCMApp? {
        try await pool.query(PostgresQuery("""
            SELECT project_id, client_email, encode(key_sealed, 'base64') AS key_sealed, key_fingerprint, master_key_id, revision
            FROM merchant_fcm_apps WHERE merchant_id = $1
            """, merchantID)).first.map { row in
            StoredFCMApp(
                merchantID: merchantID, projectID: try row.decode("project_id"), clientEmail: try row.decode("client_email"),
                sealedKey: Data(base64Encoded: try row.decode("key_sealed", as: String.self), options: .ignoreUnknownCharacters) ?? Data(),
                keyFingerprint: try row.decode("key_fingerprint"), masterKeyID: try row.decode("master_key_id"),
                revision: try row.decode("revision"))
        }
    }

    /// Runs `decide` on the stored access token of a service account key under a transaction's
    /// advisory lock on the key, so that workers asking at the same time wait for the first
    /// one's answer; stores what `decide` obtained.
    func withAccessToken(
        clientEmail: String, keyFingerprint: String,
        _ decide: @Sendable ((sealed: Data, expiresAt: Date)?) async throws -> FCMAccessTokenDecision
    ) async throws -> FCMAccessTokenDecision {
        try await pool.transaction { connection in
            try await connection.query(PostgresQuery(
                "SELECT pg_advisory_xact_lock(hashtextextended('orderflow.fcm_access_token:' || $1 || ':' || $2, 0))",
                clientEmail, keyFingerprint))
            let stored = try await connection.query(PostgresQuery("""
                SELECT encode(token_sealed, 'base64') AS token_sealed, expires_at
                FROM fcm_access_tokens WHERE client_email = $1 AND key_fingerprint = $2
                """, clientEmail, keyFingerprint)).first.map { row in
                (sealed: Data(base64Encoded: try row.decode("token_sealed", as: String.self), options: .ignoreUnknownCharacters) ?? Data(),
                 expiresAt: try row.decode("expires_at", as: Date.self))
            }
            let decision = try await decide(stored)
            if case .exchanged(let token, let sealed) = decision {
                try await connection.query(PostgresQuery("""
                    INSERT INTO fcm_access_tokens (client_email, key_fingerprint, token_sealed, expires_at)
                    VALUES ($1, $2, decode($3, 'base64'), to_timestamp($4))
                    ON CONFLICT (client_email, key_fingerprint) DO UPDATE
                    SET token_sealed = EXCLUDED.token_sealed, expires_at = EXCLUDED.expires_at, updated_at = now()
                    """, clientEmail, keyFingerprint, sealed.base64EncodedString(), token.expiresAt.timeIntervalSince1970))
            }
            return decision
        }
    }
}

/// A merchant's Firebase project as stored: the service account sealed under the master key.
struct StoredFCMApp: Sendable {
    var merchantID: String
    var projectID: String
    var clientEmail: String
    var sealedKey: Data
    var keyFingerprint: String
    var masterKeyID: String
    var revision: Int
}
