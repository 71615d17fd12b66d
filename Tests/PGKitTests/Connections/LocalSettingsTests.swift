import PGKit
import PostgresTesting
import Testing

/// A statement with settings of its own (`PostgresQuery.withLocalSettings`): in effect while it
/// is planned and run, gone with its commit, and never spread to other callers' statements.
@Suite("PostgreSQL: a statement's own settings")
struct LocalSettingsTests {
    static let noSeqScan: [(name: StaticString, value: StaticString)] = [("enable_seqscan", "off"), ("synchronous_commit", "off")]

    @Test func settingsHoldForTheStatementAndEndWithIt() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        try await PostgresConnection.withConnection(configuration) { connection in
            let settings = PostgresQuery("SELECT current_setting('enable_seqscan') AS scan, current_setting('synchronous_commit') AS sync")
            let own = try await connection.query(settings.withLocalSettings(Self.noSeqScan)).single()
            #expect(try own.decode("scan", as: String.self) == "off")
            #expect(try own.decode("sync", as: String.self) == "off")
            // The next statement on the same connection runs with the session's settings again.
            let after = try await connection.query(settings).single()
            #expect(try after.decode("scan", as: String.self) == "on")
            #expect(try after.decode("sync", as: String.self) == "on")
            // Planned at each run (sent in the pipeline unprepared), the same.
            let eachRun = try await connection.query(settings.plannedEachRun().withLocalSettings(Self.noSeqScan)).single()
            #expect(try eachRun.decode("scan", as: String.self) == "off")
        }
    }

    /// The point of it: a prepared statement is planned with them. A table the statistics call
    /// empty is scanned whole without them, read by its index with them.
    @Test func thePlanIsMadeWithThem() async throws {
        let configuration = try await TestDatabase.fresh()
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.execute("CREATE TABLE queue (id integer PRIMARY KEY, payload text)")
            try await connection.execute("ANALYZE queue")
            let explain = PostgresQuery("EXPLAIN SELECT payload FROM queue WHERE id = 7")
            let plain = try await connection.query(explain).map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
            #expect(plain.contains("Seq Scan"), "\(plain)")
            let own = try await connection.query(explain.withLocalSettings(Self.noSeqScan))
                .map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
            #expect(own.contains("Index Scan using queue_pkey") && !own.contains("Seq Scan"), "\(own)")
        }
    }

    /// A statement that fails with its settings writes nothing, and the connection goes on
    /// with its own settings.
    @Test func aFailedStatementWritesNothingAndLeavesNoSetting() async throws {
        let configuration = try await TestDatabase.fresh()
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.execute("CREATE TABLE t (v integer PRIMARY KEY)")
            try await connection.query(PostgresQuery("INSERT INTO t VALUES (1)"))
            await #expect(throws: PostgresError.self) {
                try await connection.query(PostgresQuery("INSERT INTO t VALUES (2), (1)").withLocalSettings(Self.noSeqScan))
            }
            #expect(try await connection.query(PostgresQuery("SELECT count(*) AS n FROM t")).single().decode("n", as: Int.self) == 1)
            let scan = try await connection.query(PostgresQuery("SELECT current_setting('enable_seqscan') AS v")).single()
            #expect(try scan.decode("v", as: String.self) == "on")
        }
    }

    /// Its settings would hold for everything in the same transaction: refused inside one, and
    /// refused for a commit group (the other callers' statements).
    @Test func refusedWhereTheyWouldReachOtherStatements() async throws {
        let configuration = try await TestDatabase.fresh()
        let own = PostgresQuery("SELECT 1 AS one").withLocalSettings(Self.noSeqScan)
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.transaction { connection in
                await #expect(throws: PostgresError.self) { try await connection.query(own) }
            }
            let scan = try await connection.query(PostgresQuery("SELECT current_setting('enable_seqscan') AS v")).single()
            #expect(try scan.decode("v", as: String.self) == "on")
        }
        var poolConfiguration = PostgresPool.Configuration(connection: configuration, maximumConnections: 1)
        poolConfiguration.commitGroups = 1
        let pool = PostgresPool(poolConfiguration)
        let refusal = await #expect(throws: PostgresError.self) { try await pool.queryCommittingTogether(own) }
        #expect(refusal?.kind == .invalidParameter && refusal?.message.contains("cannot be committed with others") == true, "\(String(describing: refusal))")
        await pool.close()
    }
}
