import Foundation
import PGKit

/// How OrderFlow connects to PostgreSQL: a URL or conninfo string, parsed and checked
/// (`try DatabaseConfiguration("postgresql://app@db.internal/orders")`). It is PGKit's
/// `PostgresConfiguration`, named here so that callers of the engine need not import PGKit.
public typealias DatabaseConfiguration = PostgresConfiguration

/// OrderFlow's database schema: the numbered migrations shipped in `sql/`.
public enum Schema {
    /// The migrations bundled with this version of OrderFlow, in order.
    public static func migrations() throws -> [Migration] {
        guard let folder = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw OrderFlowError(.unexpected, "the OrderFlow resource bundle has no Migrations folder; rebuild OrderFlow")
        }
        return try Migration.load(from: folder)
    }

    /// The newest migration this version of OrderFlow needs.
    public static func bundledVersion() throws -> Int {
        try migrations().last?.version ?? 0
    }

    /// Applies pending migrations (a no-op when the schema is current).
    public static func migrate(_ configuration: DatabaseConfiguration) async throws -> Migrator.Report {
        try await translatingErrors {
            try await Migrator(migrations: migrations()).migrate(configuration)
        }
    }

    /// Refuses a database reached through a connection pooler in transaction pooling
    /// (PgBouncer's `pool_mode = transaction`): the engine keeps per session what such a pooler
    /// hands to other clients between transactions — prepared statements, the worker's LISTEN,
    /// the migrations' advisory lock. A direct connection, or a pooler in session pooling,
    /// passes. Long-running processes ask once, at start (two short connections).
    /// - Throws: `OrderFlowError.invalidConfiguration` naming the supported setups.
    public static func checkSessionsAreKept(_ configuration: DatabaseConfiguration) async throws {
        try await translatingErrors {
            guard try await PostgresConnection.sharesSessionsBetweenTransactions(configuration) else { return }
            throw OrderFlowError(.invalidConfiguration,
                "the database URL leads through a connection pooler in transaction pooling (such as PgBouncer's pool_mode = transaction), which OrderFlow cannot use because it keeps prepared statements, LISTEN and advisory locks per session: connect to PostgreSQL directly, or through PgBouncer in session pooling (pool_mode = session)")
        }
    }

    /// Where a database's schema stands against the one this OrderFlow needs.
    public struct Status: Sendable, Equatable {
        /// The newest migration applied to the database; 0 when it has no OrderFlow schema.
        public var applied: Int
        /// The newest migration this OrderFlow bundles.
        public var bundled: Int
        public var isCurrent: Bool { applied >= bundled }
    }
}

extension OrderFlowEngine {
    /// Compares the database's schema with the bundled migrations (one cheap query).
    public func schemaStatus() async throws -> Schema.Status {
        try await translatingErrors {
            Schema.Status(applied: try await Migrator.appliedVersion(on: pool), bundled: try Schema.bundledVersion())
        }
    }
}
