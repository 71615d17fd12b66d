import Foundation
import Synchronization
import PGKit
import WorkflowKit

/// A workflow version as stored.
public struct StoredWorkflow: Sendable {
    public var name: String
    public var version: Int
    public var workflow: Workflow
    /// The YAML exactly as applied.
    public var source: String
    public var createdAt: Date
}

/// The result of applying a workflow file.
public struct AppliedWorkflow: Sendable, Hashable, Codable {
    public var name: String
    public var version: Int
    /// False when the content equals the latest stored version: nothing was written.
    public var created: Bool
}

/// One line of `workflow list`.
public struct WorkflowVersionSummary: Sendable, Hashable, Codable {
    public var name: String
    public var latestVersion: Int
    public var versions: Int
    public var updatedAt: Date
}

/// Stored workflow versions, with parsed definitions cached: versions are immutable, so a
/// version once loaded never needs loading again.
public actor WorkflowCatalog {
    private let pool: PostgresPool
    private nonisolated let merchantID: String
    /// Parsed versions; readable without a hop to the actor (the hot path of every advance).
    private let cache = Mutex<[VersionKey: Workflow]>([:])

    private struct VersionKey: Hashable, Sendable {
        var name: String
        var version: Int
    }

    init(pool: PostgresPool, merchantID: String) {
        self.pool = pool
        self.merchantID = merchantID
    }

    /// Validates `yaml` and stores it as a new version when its content differs from the latest
    /// version (comments and formatting do not count); otherwise changes nothing.
    /// The merchants of `scope` that have at least one stored workflow.
    func merchantIDs(in scope: MerchantScope) async throws -> [String] {
        try await pool.query(PostgresQuery("""
            SELECT DISTINCT merchant_id FROM workflow_versions
            WHERE $1::text[] IS NULL OR merchant_id = ANY($1::text[])
            ORDER BY merchant_id
            """, scope.boundMerchantIDs)).map { try $0.decode("merchant_id", as: String.self) }
    }

    public func apply(yaml: String, file: String) async throws -> AppliedWorkflow {
        let workflow = try WorkflowLoader.load(yaml: yaml, file: file)
        let canonical = workflow.canonicalJSON
        let merchantID = self.merchantID
        let applied = try await translatingErrors {
            try await pool.transaction { connection in
                // Serialise applies of one workflow so that version numbers never collide.
                try await connection.query(PostgresQuery(
                    "SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2))", merchantID, workflow.name))
                let latest = try await connection.query(PostgresQuery("""
                    SELECT version, checksum = encode(sha256(convert_to($3, 'UTF8')), 'hex') AS same
                    FROM workflow_versions WHERE merchant_id = $1 AND name = $2
                    ORDER BY version DESC LIMIT 1
                    """, merchantID, workflow.name, canonical)).first
                if let latest, try latest.decode("same", as: Bool.self) {
                    return AppliedWorkflow(name: workflow.name, version: try latest.decode("version"), created: false)
                }
                let version = (try latest?.decode("version", as: Int.self) ?? 0) + 1
                try await connection.query(PostgresQuery("""
                    INSERT INTO workflow_versions (merchant_id, name, version, definition, source, checksum)
                    VALUES ($1, $2, $3, $4::text::jsonb, $5, encode(sha256(convert_to($4::text, 'UTF8')), 'hex'))
                    """, merchantID, workflow.name, version, canonical, yaml))
                return AppliedWorkflow(name: workflow.name, version: version, created: true)
            }
        }
        if applied.created { cache.withLock { $0[VersionKey(name: workflow.name, version: applied.version)] = workflow } }
        return applied
    }

    /// A pinned version (from cache after the first load, without a hop to the actor: the
    /// HTTP API asks for it on every advance it answers).
    public nonisolated func workflow(named name: String, version: Int) async throws -> Workflow {
        if let cached = cachedWorkflow(named: name, version: version) { return cached }
        return try await stored(named: name, version: version).workflow
    }

    /// A version already loaded, without waiting for the actor.
    nonisolated func cachedWorkflow(named name: String, version: Int) -> Workflow? {
        cache.withLock { $0[VersionKey(name: name, version: version)] }
    }

    /// The newest version of `name`.
    public func latest(named name: String) async throws -> (version: Int, workflow: Workflow) {
        let stored = try await stored(named: name, version: nil)
        return (stored.version, stored.workflow)
    }

    /// A stored version with its source; the newest when `version` is nil.
    public func stored(named name: String, version: Int?) async throws -> StoredWorkflow {
        let row = try await translatingErrors {
            try await pool.query(PostgresQuery("""
                SELECT version, source, created_at FROM workflow_versions
                WHERE merchant_id = $1 AND name = $2 AND ($3::int IS NULL OR version = $3)
                ORDER BY version DESC LIMIT 1
                """, merchantID, name, version)).first
        }
        guard let row else {
            let known = try await summaries().map(\.name)
            let what = version.map { "version \($0) of workflow \"\(name)\"" } ?? "workflow \"\(name)\""
            throw OrderFlowError(
                .notFound,
                "\(what) does not exist" + (known.isEmpty ? "" : "; known workflows: \(known.joined(separator: ", "))"),
                remedy: known.isEmpty ? .applyWorkflow : nil,
                candidates: known)
        }
        let storedVersion: Int = try row.decode("version")
        let source: String = try row.decode("source")
        let key = VersionKey(name: name, version: storedVersion)
        let workflow: Workflow
        if let cached = cache.withLock({ $0[key] }) {
            workflow = cached
        } else {
            workflow = try WorkflowLoader.load(yaml: source, file: "\(name)@\(storedVersion)")
            cache.withLock { $0[key] = workflow }
        }
        return StoredWorkflow(name: name, version: storedVersion, workflow: workflow, source: source,
                              createdAt: try row.decode("created_at"))
    }

    /// Every workflow with its newest version.
    public func summaries() async throws -> [WorkflowVersionSummary] {
        try await translatingErrors {
            try await pool.query(PostgresQuery("""
                SELECT name, max(version) AS latest, count(*) AS versions, max(created_at) AS updated_at
                FROM workflow_versions WHERE merchant_id = $1 GROUP BY name ORDER BY name
                """, merchantID)).map { row in
                WorkflowVersionSummary(name: try row.decode("name"), latestVersion: try row.decode("latest"),
                                       versions: try row.decode("versions"), updatedAt: try row.decode("updated_at"))
            }
        }
    }

    /// Every stored (name, version), for the timer scan.
    func allVersions() async throws -> [(name: String, version: Int)] {
        try await pool.query(PostgresQuery(
            "SELECT name, version FROM workflow_versions WHERE merchant_id = $1 ORDER BY name, version", merchantID)
        ).map { (try $0.decode("name", as: String.self), try $0.decode("version", as: Int.self)) }
    }
}
