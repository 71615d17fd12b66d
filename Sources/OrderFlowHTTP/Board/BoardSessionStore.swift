import Foundation
import PGKit

/// The SQL of the board's sign-in tokens and sessions, every value a bound parameter (the
/// tables are made by the engine's migrations). Secrets arrive here already hashed
/// (SHA-256, as base64 text for `decode($n, 'base64')`); the rows are found by their hash.
struct BoardSessionStore: Sendable {
    let pool: PostgresPool

    /// Stores a sign-in token for `merchantID`, valid for `seconds`, and deletes expired
    /// tokens and sessions.
    func insertSignInToken(hash: Data, merchantID: String, seconds: Int) async throws -> Date {
        _ = try await pool.query(PostgresQuery("DELETE FROM board_sign_in_tokens WHERE expires_at <= now()"))
        _ = try await pool.query(PostgresQuery("DELETE FROM board_sessions WHERE expires_at <= now()"))
        return try await pool.query(PostgresQuery("""
            INSERT INTO board_sign_in_tokens (token_hash, merchant_id, expires_at)
            VALUES (decode($1, 'base64'), $2, now() + $3::integer * interval '1 second')
            RETURNING expires_at
            """, hash.base64EncodedString(), merchantID, seconds)).single().decode("expires_at")
    }

    /// Whether the token is known and has not expired (it is not used).
    func signInTokenIsLive(hash: Data) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            SELECT 1 AS live FROM board_sign_in_tokens WHERE token_hash = decode($1, 'base64') AND expires_at > now()
            """, hash.base64EncodedString())).count == 1
    }

    /// Consumes the token (whether or not it is still valid: a token is used once) and, when
    /// it had not expired, starts a session for its merchant in the same statement. The
    /// session's merchant and expiry; nil for an unknown, used or expired token.
    func redeemSignInToken(hash: Data, sessionHash: Data, seconds: Int) async throws -> (merchantID: String, expiresAt: Date)? {
        guard let row = try await pool.query(PostgresQuery("""
            WITH used AS (
                DELETE FROM board_sign_in_tokens WHERE token_hash = decode($1, 'base64')
                RETURNING merchant_id, expires_at
            )
            INSERT INTO board_sessions (session_hash, merchant_id, expires_at)
            SELECT decode($2, 'base64'), merchant_id, now() + $3::integer * interval '1 second'
            FROM used WHERE expires_at > now()
            RETURNING merchant_id, expires_at
            """, hash.base64EncodedString(), sessionHash.base64EncodedString(), seconds)).first
        else { return nil }
        return (try row.decode("merchant_id"), try row.decode("expires_at"))
    }

    /// The merchant of a live session; nil for an unknown or expired one.
    func sessionMerchant(hash: Data) async throws -> String? {
        try await pool.query(PostgresQuery("""
            SELECT merchant_id FROM board_sessions WHERE session_hash = decode($1, 'base64') AND expires_at > now()
            """, hash.base64EncodedString())).first?.decode("merchant_id")
    }

    /// Ends a session (signing out).
    func deleteSession(hash: Data) async throws {
        _ = try await pool.query(PostgresQuery(
            "DELETE FROM board_sessions WHERE session_hash = decode($1, 'base64')", hash.base64EncodedString()))
    }
}
