import Foundation
import Logging

/// One numbered SQL file, `0001_initial.sql`.
public struct Migration: Sendable, Hashable {
    public var version: Int
    public var name: String
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    public var fileName: String { "\(name).sql" }

    /// Reads every `NNNN_description.sql` in `directory`, ordered by number.
    public static func load(from directory: URL) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw PostgresError(.invalidConfiguration, "cannot read the migrations folder \(directory.path): \(error.localizedDescription)")
        }
        var migrations: [Migration] = []
        for name in names where name.hasSuffix(".sql") {
            let stem = String(name.dropLast(4))
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else {
                throw PostgresError(.invalidConfiguration,
                                    "migration file \(name) must be named NNNN_description.sql (e.g. 0002_add_index.sql)")
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            migrations.append(Migration(version: version, name: stem, sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        for (a, b) in zip(migrations, migrations.dropFirst()) where a.version == b.version {
            throw PostgresError(.invalidConfiguration, "two migrations share number \(a.version): \(a.fileName) and \(b.fileName)")
        }
        return migrations
    }
}

/// Applies numbered migrations in order, each in its own transaction, under an advisory lock
/// so that concurrent runs take turns; records each with a checksum and refuses to run when a
/// file that was already applied has since been edited.
public struct Migrator: Sendable {
    public struct Report: Sendable {
        /// Migrations this run applied, in order.
        public var applied: [Migration]
        /// Migrations that were already in the database.
        public var alreadyApplied: Int
    }

    public struct Status: Sendable {
        public var migration: Migration
        public var appliedAt: Date?
    }

    public let migrations: [Migration]
    private let logger: Logger
    /// Advisory lock key: "orderflow.migrate" hashed once; any constant works, it only has to
    /// be the same for every migrator of this schema.
    private static let lockKey: Int64 = 0x6F72_6466_6D69_6772

    public init(migrations: [Migration], logger: Logger = Logger(label: "orderflow.migrate")) {
        self.migrations = migrations
        self.logger = logger
    }

    /// Applies what is pending. Running it again is a no-op.
    public func migrate(_ configuration: PostgresConfiguration) async throws -> Report {
        // The advisory lock is held by the session, so everything runs on one connection.
        try await PostgresConnection.withConnection(configuration, logger: logger) { connection in
            try await migrate(on: connection)
        }
    }

    public func migrate(on connection: PostgresConnection) async throws -> Report {
        try await connection.query(PostgresQuery("SELECT pg_advisory_lock($1)", Self.lockKey))
        do {
            let report = try await applyPending(on: connection)
            try await connection.query(PostgresQuery("SELECT pg_advisory_unlock($1)", Self.lockKey))
            return report
        } catch {
            _ = try? await connection.query(PostgresQuery("SELECT pg_advisory_unlock($1)", Self.lockKey))
            throw error
        }
    }

    /// Which migrations are applied, and when.
    public func status(_ configuration: PostgresConfiguration) async throws -> [Status] {
        try await PostgresConnection.withConnection(configuration, logger: logger) { connection in
            try await status(on: connection)
        }
    }

    /// The newest migration applied to the database, or 0 when none is (also when the
    /// migrations table does not exist yet). Compare it with `migrations.last?.version`.
    public static func appliedVersion(on pool: PostgresPool) async throws -> Int {
        try await pool.withConnection { connection in try await appliedVersion(on: connection) }
    }

    public static func appliedVersion(on connection: PostgresConnection) async throws -> Int {
        // One connection for both statements: the table cannot be planned before it exists.
        try await connection.run { connection in
            guard try await migrationsTableExists(on: connection) else { return 0 }
            return try await connection.query(PostgresQuery("SELECT coalesce(max(version), 0) AS version FROM schema_migrations"))
                .single().decode("version", as: Int.self)
        }
    }

    private static func migrationsTableExists(on connection: PostgresConnection) async throws -> Bool {
        try await connection.query(PostgresQuery("SELECT to_regclass('schema_migrations') IS NOT NULL AS present"))
            .single().decode("present", as: Bool.self)
    }

    private func status(on connection: PostgresConnection) async throws -> [Status] {
        var applied: [Int: Date] = [:]
        if try await Self.migrationsTableExists(on: connection) {
            for row in try await connection.query(PostgresQuery("SELECT version, applied_at FROM schema_migrations")) {
                applied[try row.decode("version", as: Int.self)] = try row.decode("applied_at", as: Date.self)
            }
        }
        return migrations.map { Status(migration: $0, appliedAt: applied[$0.version]) }
    }

    private func applyPending(on connection: PostgresConnection) async throws -> Report {
        try await connection.execute("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        var applied: [Int: (name: String, checksum: String)] = [:]
        for row in try await connection.query(PostgresQuery("SELECT version, name, checksum FROM schema_migrations")) {
            applied[try row.decode("version")] = (try row.decode("name"), try row.decode("checksum"))
        }
        let known = Set(migrations.map(\.version))
        if let unknown = applied.keys.filter({ !known.contains($0) }).sorted().first {
            throw PostgresError(
                .unexpectedResult,
                "the database has migration \(applied[unknown]!.name) applied, which this version of OrderFlow does not know",
                hint: "run a newer orderflow, or restore the missing file in sql/")
        }
        var report = Report(applied: [], alreadyApplied: 0)
        for migration in migrations {
            let checksum = try await connection.query(
                PostgresQuery("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex') AS sum", migration.sql)
            ).single().decode("sum", as: String.self)
            if let done = applied[migration.version] {
                guard done.checksum == checksum else {
                    throw PostgresError(
                        .unexpectedResult,
                        "migration \(migration.fileName) was edited after it was applied "
                            + "(checksum \(done.checksum.prefix(12))… in the database, \(checksum.prefix(12))… on disk)",
                        hint: "restore the file as it was and put the change in a new numbered migration")
                }
                report.alreadyApplied += 1
                continue
            }
            logger.info("applying migration", metadata: ["migration": "\(migration.fileName)"])
            try await apply(migration, checksum: checksum, on: connection)
            report.applied.append(migration)
        }
        return report
    }

    /// How many times a migration that lost a lock race is tried, and how long each try waits
    /// for a lock. Migrations run while the previous release serves (docs/operations.md): an
    /// `ALTER TABLE` waiting for its lock holds every later query of that table behind it, and
    /// may deadlock with a running transaction. So a try gives up on a lock after
    /// ``lockTimeout`` and is rolled back whole, and the migrator tries again after a pause:
    /// the live traffic waits at most that long, and a lost race is not an operator's problem.
    public static let attempts = 8
    public static let lockTimeout = "2s"

    private func apply(_ migration: Migration, checksum: String, on connection: PostgresConnection) async throws {
        var attempt = 1
        while true {
            do {
                try await connection.transaction { connection in
                    try await connection.query(PostgresQuery("SELECT set_config('lock_timeout', $1, true)", Self.lockTimeout))
                    try await connection.query(PostgresQuery(unsafeSQL: migration.sql))
                    try await connection.query(PostgresQuery(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                        migration.version, migration.name, checksum))
                }
                return
            } catch var error as PostgresError {
                // 40P01 deadlock, 40001 serialization failure, 55P03 lock not available.
                let lostARace = error.isSerializationFailure || error.sqlState == "55P03"
                if lostARace && attempt < Self.attempts {
                    logger.warning("migration lost a lock race with the running system; trying again", metadata: [
                        "migration": "\(migration.fileName)", "attempt": "\(attempt)", "postgres.error": "\(error.message)",
                    ])
                    try await Task.sleep(for: .milliseconds(200 * attempt))
                    attempt += 1
                    continue
                }
                error.message = "migration \(migration.fileName) failed and was rolled back: \(error.message)"
                if lostARace {
                    error.message += " (tried \(attempt) times, each waiting at most \(Self.lockTimeout) for locks the running system held)"
                }
                throw error
            }
        }
    }
}
