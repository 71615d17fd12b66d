import Foundation
import PGKit

/// OrderFlow's database schema: the numbered migrations shipped in `sql/`.
public enum Schema {
    /// The migrations bundled with this version of OrderFlow, in order.
    public static func migrations() throws -> [Migration] {
        guard let folder = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw PostgresError(.invalidConfiguration, "the OrderFlow resource bundle has no Migrations folder; rebuild OrderFlow")
        }
        return try Migration.load(from: folder)
    }

    /// Applies pending migrations (a no-op when the schema is current).
    public static func migrate(_ configuration: PostgresConfiguration) async throws -> Migrator.Report {
        try await Migrator(migrations: migrations()).migrate(configuration)
    }
}
