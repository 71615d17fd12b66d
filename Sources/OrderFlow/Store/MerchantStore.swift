import Foundation
import PGKit

/// The SQL of merchants, their APNs apps, their API keys, the shared provider tokens and the
/// push state workers record. Sealed bytes travel as base64 text (`decode($n, 'base64')`).
struct MerchantStore: Sendable {
    let pool: PostgresPool

    // MARK: Merchants

    /// Adds a merchant; false when one with this id exists (nothing changes then).
    func addMerchant(id: String, name: String?) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            INSERT INTO merchants (merchant_id, name) VALUES ($1, $2) ON CONFLICT (merchant_id) DO NOTHING
            """, id, name)).affectedRows == 1
    }

    func merchantExists(_ id: String) async throws -> Bool {
        try await pool.query(PostgresQuery("SELECT 1 AS one FROM merchants WHERE merchant_id = $1", id)).first != nil
    }

    /// Every merchant with its app (when it has one) and push state, by id.
    func merchants() async throws -> [MerchantSummary] {
        try await pool.query(PostgresQuery("""
            SELECT m.merchant_id, m.name, m.created_at, m.push_status, m.push_status_reason, m.push_status_since,
                   m.push_status_until, a.bundle_id, a.team_id, a.key_id, a.key_fingerprint, a.environment,
                   a.endpoint_url, a.updated_at AS app_updated_at
            FROM merchants m LEFT JOIN merchant_apps a ON a.merchant_id = m.merchant_id
            ORDER BY m.merchant_id
            """)).map { row in
            var app: MerchantAppSummary?
            if let bundleID = try row.decode("bundle_id", as: String?.self) {
                app = MerchantAppSummary(
                    bundleID: bundleID, teamID: try row.decode("team_id"), keyID: try row.decode("key_id"),
                    keyFingerprint: try row.decode("key_fingerprint"), environment: try row.decode("environment"),
                    endpointURL: try row.decode("endpoint_url", as: String?.self), updatedAt: try row.decode("app_updated_at"))
            }
            return MerchantSummary(
                id: try row.decode("merchant_id"), name: try row.decode("name", as: String?.self),
                createdAt: try row.decode("created_at"), app: app,
                pushState: MerchantPushState(
                    status: MerchantPushState.Status(rawValue: try row.decode("push_status")) ?? .ok,
                    reason: try row.decode("push_status_reason", as: String?.self),
                    since: try row.decode("push_status_since", as: Date?.self),
                    until: try row.decode("push_status_until", as: Date?.self)))
        }
    }

    // MARK: Apps

    /// The master key ids, other than `masterKeyID`, that sealed any stored key: merchants' APNs
    /// keys and Firebase service accounts.
    func otherMasterKeyIDs(than masterKeyID: String) async throws -> [String] {
        try await pool.query(PostgresQuery("""
            SELECT master_key_id FROM merchant_apps WHERE master_key_id <> $1
            UNION SELECT master_key_id FROM merchant_fcm_apps WHERE master_key_id <> $1 ORDER BY 1
            """, masterKeyID)).map { try $0.decode("master_key_id") }
    }

    /// Stores (or replaces, one revision later) a merchant's app. False when the merchant does
    /// not exist.
    func saveApp(_ app: StoredMerchantApp) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            INSERT INTO merchant_apps (merchant_id, bundle_id, team_id, key_id, key_sealed, key_fingerprint, master_key_id,
                                       environment, endpoint_url, endpoint_ca)
            SELECT m.merchant_id, $2, $3, $4, decode($5, 'base64'), $6, $7, $8, $9, $10
            FROM merchants m WHERE m.merchant_id = $1
            ON CONFLICT (merchant_id) DO UPDATE
            SET bundle_id = EXCLUDED.bundle_id, team_id = EXCLUDED.team_id, key_id = EXCLUDED.key_id,
                key_sealed = EXCLUDED.key_sealed, key_fingerprint = EXCLUDED.key_fingerprint,
                master_key_id = EXCLUDED.master_key_id, environment = EXCLUDED.environment,
                endpoint_url = EXCLUDED.endpoint_url, endpoint_ca = EXCLUDED.endpoint_ca,
                revision = merchant_apps.revision + 1, updated_at = now()
            """, app.merchantID, app.bundleID, app.teamID, app.keyID, app.sealedKey.base64EncodedString(),
            app.keyFingerprint, app.masterKeyID, app.environment, app.endpointURL, app.endpointCA)).affectedRows == 1
    }

    /// A merchant's stored app, nil when it has none.
    func app(of merchantID: String) async throws -> StoredMerchantApp? {
        try await pool.query(PostgresQuery("""
            SELECT merchant_id, bundle_id, team_id, key_id, encode(key_sealed, 'base64') AS key_sealed, key_fingerprint,
                   master_key_id, environment, endpoint_url, endpoint_ca, revision
            FROM merchant_apps WHERE merchant_id = $1
            """, merchantID)).first.map { row in
            StoredMerchantApp(
                merchantID: try row.decode("merchant_id"), bundleID: try row.decode("bundle_id"),
                teamID: try row.decode("team_id"), keyID: try row.decode("key_id"),
                sealedKey: Data(base64Encoded: try row.decode("key_sealed", as: String.self), options: .ignoreUnknownCharacters) ?? Data(),
                keyFingerprint: try row.decode("key_fingerprint"), masterKeyID: try row.decode("master_key_id"),
                environment: try row.decode("environment"), endpointURL: try row.decode("endpoint_url", as: String?.self),
                endpointCA: try row.decode("endpoint_ca", as: String?.self), revision: try row.decode("revision"))
        }
    }

    // MARK: Push state

    /// Records what a worker found about merchants' pushes (`ok` clears the rest). Only rows
    /// whose state changes are written; returns the ids that changed.
    func setPushState(_ merchantIDs: [String], _ state: MerchantPushState) async throws -> [String] {
        try await pool.query(PostgresQuery("""
            UPDATE merchants
            SET push_status = $2, push_status_reason = $3,
                push_status_since = CASE WHEN $2 = 'ok' THEN NULL ELSE COALESCE(push_status_since, now()) END,
                push_status_until = $4
            WHERE merchant_id = ANY($1::text[])
              AND (push_status <> $2 OR push_status_reason IS DISTINCT FROM $3)
            RETURNING merchant_id
            """, merchantIDs, state.status.rawValue, state.reason, state.until)).map { try $0.decode("merchant_id") }
    }

    // MARK: API keys

    func insertAPIKey(prefix: String, merchantID: String, name: String?, secretHash: Data) async throws -> APIKeySummary? {
        try await pool.query(PostgresQuery("""
            INSERT INTO merchant_api_keys (prefix, merchant_id, name, secret_hash)
            SELECT $1, m.merchant_id, $3, decode($4, 'base64') FROM merchants m WHERE m.merchant_id = $2
            RETURNING prefix, merchant_id, name, created_at, last_used_at, revoked_at
            """, prefix, merchantID, name, secretHash.base64EncodedString())).first.map(Self.apiKey)
    }

    func apiKeys(merchantID: String) async throws -> [APIKeySummary] {
        try await pool.query(PostgresQuery("""
            SELECT prefix, merchant_id, name, created_at, last_used_at, revoked_at
            FROM merchant_api_keys WHERE merchant_id = $1 ORDER BY created_at, prefix
            """, merchantID)).map(Self.apiKey)
    }

    /// Revokes a key; false when the merchant has no live key with this prefix.
    func revokeAPIKey(merchantID: String, prefix: String) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            UPDATE merchant_api_keys SET revoked_at = now()
            WHERE merchant_id = $1 AND prefix = $2 AND revoked_at IS NULL
            """, merchantID, prefix)).affectedRows == 1
    }

    /// The live key with this prefix: its merchant and the hash to compare with.
    func liveAPIKey(prefix: String) async throws -> (merchantID: String, secretHash: Data)? {
        try await pool.query(PostgresQuery("""
            SELECT merchant_id, encode(secret_hash, 'base64') AS secret_hash
            FROM merchant_api_keys WHERE prefix = $1 AND revoked_at IS NULL
            """, prefix)).first.map { row in
            (try row.decode("merchant_id"),
             Data(base64Encoded: try row.decode("secret_hash", as: String.self), options: .ignoreUnknownCharacters) ?? Data())
        }
    }

    /// Notes a key's use, at most once a minute per key (a busy API writes no row per request).
    func touchAPIKey(prefix: String) async throws {
        try await pool.query(PostgresQuery("""
            UPDATE merchant_api_keys SET last_used_at = now()
            WHERE prefix = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
            """, prefix))
    }

    private static func apiKey(_ row: PostgresRow) throws -> APIKeySummary {
        APIKeySummary(
            prefix: try row.decode("prefix"), merchantID: try row.decode("merchant_id"), name: try row.decode("name", as: String?.self),
            createdAt: try row.decode("created_at"), lastUsedAt: try row.decode("last_used_at", as: Date?.self),
            revokedAt: try row.decode("revoked_at", as: Date?.self))
    }

    // MARK: Client secrets

    /// The merchant's client-secret key, stored on first use: a concurrent first use keeps
    /// whichever key was inserted first, and both callers get that one.
    /// A client-secret key's row: the key itself where it is stored unsealed, else sealed.
    struct ClientKeyRow: Sendable {
        var version: Int
        var plain: Data?
        var sealed: Data?
        var masterKeyID: String?
    }

    /// The merchant's client-secret keys, newest first (none when it never made one).
    func clientKeys(merchantID: String) async throws -> [ClientKeyRow] {
        try await pool.query(PostgresQuery("""
            SELECT version, encode(key, 'base64') AS plain, encode(key_sealed, 'base64') AS sealed, master_key_id
            FROM merchant_client_keys WHERE merchant_id = $1 ORDER BY version DESC
            """, merchantID)).map(Self.clientKeyRow)
    }

    /// Stores a new version of the merchant's key (sealed, or plain without a master key);
    /// false when that version exists already (another process made it first).
    func insertClientKey(merchantID: String, version: Int, plain: Data?, sealed: Data?, masterKeyID: String?) async throws -> Bool {
        try await pool.query(PostgresQuery("""
            INSERT INTO merchant_client_keys (merchant_id, version, key, key_sealed, master_key_id)
            VALUES ($1, $2, decode($3, 'base64'), decode($4, 'base64'), $5)
            ON CONFLICT (merchant_id, version) DO NOTHING
            RETURNING version
            """, merchantID, version, plain?.base64EncodedString(), sealed?.base64EncodedString(), masterKeyID)).count == 1
    }

    /// Deletes the merchant's key versions below `version`: secrets made with them stop working.
    func retireClientKeys(merchantID: String, below version: Int) async throws -> Int {
        try await pool.query(PostgresQuery(
            "DELETE FROM merchant_client_keys WHERE merchant_id = $1 AND version < $2", merchantID, version)).affectedRows
    }

    // MARK: Master-key rotation (inside one transaction, on its connection)

    /// Every merchant's sealed APNs key, locked until the transaction ends.
    static func lockSealedAPNSKeys(_ connection: isolated PostgresConnection) async throws -> PostgresRows {
        try await connection.query(PostgresQuery("""
            SELECT merchant_id, team_id, key_id, encode(key_sealed, 'base64') AS sealed, master_key_id
            FROM merchant_apps ORDER BY merchant_id FOR UPDATE
            """))
    }

    static func resealAPNSKey(_ connection: isolated PostgresConnection, merchantID: String, sealed: Data, masterKeyID: String) async throws {
        try await connection.query(PostgresQuery("""
            UPDATE merchant_apps SET key_sealed = decode($2, 'base64'), master_key_id = $3, revision = revision + 1, updated_at = now()
            WHERE merchant_id = $1
            """, merchantID, sealed.base64EncodedString(), masterKeyID))
    }

    /// Every client-secret key version, locked until the transaction ends.
    static func lockClientKeys(_ connection: isolated PostgresConnection) async throws -> PostgresRows {
        try await connection.query(PostgresQuery("""
            SELECT merchant_id, version, encode(key, 'base64') AS plain, encode(key_sealed, 'base64') AS sealed, master_key_id
            FROM merchant_client_keys ORDER BY merchant_id, version FOR UPDATE
            """))
    }

    static func resealClientKey(_ connection: isolated PostgresConnection, merchantID: String, version: Int, sealed: Data,
                                masterKeyID: String) async throws {
        try await connection.query(PostgresQuery("""
            UPDATE merchant_client_keys SET key = NULL, key_sealed = decode($3, 'base64'), master_key_id = $4
            WHERE merchant_id = $1 AND version = $2
            """, merchantID, version, sealed.base64EncodedString(), masterKeyID))
    }

    static func clientKeyRow(_ row: PostgresRow) throws -> ClientKeyRow {
        ClientKeyRow(
            version: try row.decode("version"),
            plain: try row.decode("plain", as: String?.self).flatMap { Data(base64Encoded: $0, options: .ignoreUnknownCharacters) },
            sealed: try row.decode("sealed", as: String?.self).flatMap { Data(base64Encoded: $0, options: .ignoreUnknownCharacters) },
            masterKeyID: try row.decode("master_key_id", as: String?.self))
    }

    // MARK: Shared provider tokens

    /// Runs `decide` on the stored token of (team, key) — sealed bytes and issue time — holding
    /// the (team, key)'s advisory lock for the transaction, so that one worker at a time decides;
    /// stores what it returns (a new token) and gives back the token to use.
    func withProviderToken(
        teamID: String, keyID: String,
        _ decide: @Sendable ((sealed: Data, issuedAt: Date)?) throws -> ProviderTokenDecision
    ) async throws -> ProviderTokenDecision {
        try await pool.transaction { connection in
            try await connection.query(PostgresQuery(
                "SELECT pg_advisory_xact_lock(hashtextextended('orderflow.apns_provider_token:' || $1 || ':' || $2, 0))",
                teamID, keyID))
            let stored = try await connection.query(PostgresQuery("""
                SELECT encode(token_sealed, 'base64') AS token_sealed, issued_at
                FROM apns_provider_tokens WHERE team_id = $1 AND key_id = $2
                """, teamID, keyID)).first.map { row in
                (sealed: Data(base64Encoded: try row.decode("token_sealed", as: String.self), options: .ignoreUnknownCharacters) ?? Data(),
                 issuedAt: try row.decode("issued_at", as: Date.self))
            }
            let decision = try decide(stored)
            if case .signed(_, let sealed) = decision {
                try await connection.query(PostgresQuery("""
                    INSERT INTO apns_provider_tokens (team_id, key_id, token_sealed, issued_at)
                    VALUES ($1, $2, decode($3, 'base64'), to_timestamp($4))
                    ON CONFLICT (team_id, key_id) DO UPDATE
                    SET token_sealed = EXCLUDED.token_sealed, issued_at = EXCLUDED.issued_at
                    """, teamID, keyID, sealed.base64EncodedString(), decision.token.issuedAt.timeIntervalSince1970))
            }
            return decision
        }
    }
}

/// A merchant's app as stored: the key sealed under the master key.
struct StoredMerchantApp: Sendable {
    var merchantID: String
    var bundleID: String
    var teamID: String
    var keyID: String
    var sealedKey: Data
    var keyFingerprint: String
    var masterKeyID: String
    var environment: String
    var endpointURL: String?
    var endpointCA: String?
    var revision: Int = 1
}
