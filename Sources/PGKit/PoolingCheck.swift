import Logging

extension PostgresConnection {
    /// Whether the server sessions behind `configuration` are shared between clients from one
    /// transaction to the next: a connection pooler in transaction (or statement) pooling, such
    /// as PgBouncer's `pool_mode = transaction`. False for a direct connection and for a pooler
    /// in session pooling, where a client keeps its server session until it disconnects.
    ///
    /// Poolers do not say which mode they run in, so the sessions are asked. A direct
    /// connection's startup names its server process (libpq's `PQbackendPID`), the one
    /// `pg_backend_pid()` then returns; a pooler hands out a cancellation key of its own, so the
    /// two differ behind one. Behind a pooler, two connections take turns asking for their
    /// server process: in session pooling each keeps its own for its whole life; in transaction
    /// pooling a server process goes back to the pool after every statement, so one
    /// connection's process changes, or the other is served by the process the first just
    /// released (PgBouncer reuses the most recently released one first).
    ///
    /// The statements go through the simple protocol: a prepared statement could itself land on
    /// another client's session.
    public static func sharesSessionsBetweenTransactions(
        _ configuration: PostgresConfiguration, logger: Logger = Logger(label: "orderflow.postgres")
    ) async throws(PostgresError) -> Bool {
        let first = try await connect(configuration, logger: logger)
        var second: PostgresConnection?
        do throws(PostgresError) {
            let firstProcess = try await first.serverProcess()
            guard Int(await first.backendPID()) != firstProcess else {
                await first.close()
                return false
            }
            let other = try await connect(configuration, logger: logger)
            second = other
            var secondProcess: Int?
            var shared = false
            for _ in 0..<3 where !shared {
                let seen = try await other.serverProcess()
                let again = try await first.serverProcess()
                shared = seen == firstProcess || again != firstProcess || (secondProcess.map { $0 != seen } ?? false)
                secondProcess = seen
            }
            await first.close()
            await other.close()
            return shared
        } catch {
            await first.close()
            await second?.close()
            throw error
        }
    }

    /// `pg_backend_pid()` of the server session serving this statement.
    private func serverProcess() async throws(PostgresError) -> Int {
        try await query(PostgresQuery(severalStatements: "SELECT pg_backend_pid() AS pid")).single().decode("pid")
    }
}
