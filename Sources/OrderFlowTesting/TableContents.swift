import PGKit

/// Every row of every table of a database's public schema, one text per table: read before and
/// after a refused request, equal texts prove that nothing was written.
public enum TableContents {
    public static func read(_ database: PostgresConfiguration) async throws -> [String: String] {
        try await PostgresConnection.withConnection(database) { connection in
            let tables: [String] = try await connection.query(PostgresQuery(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")).map { try $0.decode("tablename") }
            var contents: [String: String] = [:]
            for table in tables {
                // The name comes from the catalog, quoted: the one identifier not bound as a parameter.
                let quoted = "\"" + table.replacingOccurrences(of: "\"", with: "\"\"") + "\""
                contents[table] = try await connection.query(PostgresQuery(unsafeSQL:
                    "SELECT coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '') AS rows FROM \(quoted) t"))
                    .single().decode("rows", as: String.self)
            }
            return contents
        }
    }

    /// The tables whose rows differ, each with its rows before and after.
    public static func changes(_ before: [String: String], _ after: [String: String]) -> [String] {
        Set(before.keys).union(after.keys).sorted().filter { before[$0] != after[$0] }.map { table in
            "table \(table):\nbefore \(before[table] ?? "-")\nafter \(after[table] ?? "-")"
        }
    }
}
