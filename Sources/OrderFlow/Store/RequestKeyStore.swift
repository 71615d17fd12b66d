import Foundation
import PGKit

/// The SQL of idempotency keys for calls without an exactly-once record of their own.
struct RequestKeyStore: Sendable {
    let pool: PostgresPool
    let merchantID: String

    struct Used: Sendable {
        var operation: String
        var digest: Data
        var result: String
    }

    /// What the key's first use recorded, if it was used within the day.
    func used(key: String) async throws -> Used? {
        try await pool.query(PostgresQuery("""
            SELECT operation, encode(request_digest, 'base64') AS digest, result::text AS result FROM request_keys
            WHERE merchant_id = $1 AND idempotency_key = $2 AND created_at > now() - interval '1 day'
            """, merchantID, key)).first.map { row in
            Used(operation: try row.decode("operation"), digest: Data(base64Encoded: try row.decode("digest", as: String.self)) ?? Data(),
                 result: try row.decode("result"))
        }
    }

    /// Records the key's first use (a use older than a day is replaced); false when another
    /// call recorded it meanwhile.
    func record(key: String, operation: String, digest: Data, result: String) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            INSERT INTO request_keys (merchant_id, idempotency_key, operation, request_digest, result)
            VALUES ($1, $2, $3, decode($4, 'base64'), $5::jsonb)
            ON CONFLICT (merchant_id, idempotency_key) DO UPDATE
            SET operation = EXCLUDED.operation, request_digest = EXCLUDED.request_digest, result = EXCLUDED.result,
                created_at = now()
            WHERE request_keys.created_at <= now() - interval '1 day'
            RETURNING 1 AS recorded
            """, merchantID, key, operation, digest.base64EncodedString(), result)).count == 1
    }
}
