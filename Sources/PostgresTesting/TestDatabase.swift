import Foundation
import PGKit

/// Databases for integration tests, on the server named by `ORDERFLOW_TEST_DATABASE_URL`
/// (set by `scripts/test`, which starts a throw-away PostgreSQL for the run).
///
/// A missing variable is a test failure, not a skip: integration tests must really run.
public enum TestDatabase {
    public struct NotConfigured: Error, CustomStringConvertible {
        public var description: String {
            "ORDERFLOW_TEST_DATABASE_URL is not set: run the tests with scripts/test, which starts a throw-away PostgreSQL"
        }
    }

    /// The server's administrative connection (a superuser on the throw-away cluster).
    public static func serverConfiguration() throws -> PostgresConfiguration {
        guard let url = ProcessInfo.processInfo.environment["ORDERFLOW_TEST_DATABASE_URL"], !url.isEmpty else {
            throw NotConfigured()
        }
        return try PostgresConfiguration(url)
    }

    /// Creates an empty database of its own for one test or suite and returns its configuration.
    /// Names are unique, so tests run in parallel without seeing each other's rows.
    public static func fresh(prefix: String = "t") async throws -> PostgresConfiguration {
        let server = try serverConfiguration()
        let name = "\(prefix)_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased())"
        try await PostgresConnection.withConnection(server) { connection in
            // CREATE DATABASE takes no parameters; the name is generated above from a UUID.
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        return try PostgresConfiguration(replacingDatabase(in: server.connectionString, with: name))
    }

    /// The same server URL with another database name.
    static func replacingDatabase(in url: String, with database: String) -> String {
        guard var components = URLComponents(string: url), url.contains("://") else {
            return url + " dbname=\(database)"
        }
        components.path = "/" + database
        return components.string ?? url
    }
}
