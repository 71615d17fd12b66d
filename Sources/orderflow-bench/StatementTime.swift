import PGKit

/// The database's execution time per statement over a stretch of a benchmark, from
/// `pg_stat_statements`: two readings of this database's entries, and their difference. It
/// shows where the server's time goes, which neither latency nor commit counts reveal (a
/// statement whose plan turned into a scan shows here first). Planning and commit (WAL flush)
/// are not in it: `total_exec_time` is the executor's time, waits for row locks included.
struct StatementTime {
    struct Entry {
        var calls: Int
        var milliseconds: Double
        var text: String
    }

    /// By `queryid`.
    var entries: [Int64: Entry]

    /// This database's entries now; a failure saying why when the server does not run
    /// `pg_stat_statements` (`shared_preload_libraries`) or it cannot be installed here.
    static func read(_ pool: PostgresPool) async -> Result<StatementTime, BenchError> {
        do {
            // The view exists where the extension is installed; the benchmark's database is its
            // own, made for this run and dropped after it.
            _ = try await pool.query(PostgresQuery("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
            let rows = try await pool.query(PostgresQuery("""
                SELECT queryid, calls, total_exec_time, left(regexp_replace(query, '\\s+', ' ', 'g'), 200) AS text
                FROM pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL
                """))
            var entries: [Int64: Entry] = [:]
            for row in rows {
                let id: Int64 = try row.decode("queryid")
                let entry = Entry(calls: try row.decode("calls"), milliseconds: try row.decode("total_exec_time"),
                                  text: try row.decode("text"))
                // The same statement may be counted under several users; they add up.
                if let seen = entries[id] {
                    entries[id] = Entry(calls: seen.calls + entry.calls, milliseconds: seen.milliseconds + entry.milliseconds,
                                        text: seen.text)
                } else {
                    entries[id] = entry
                }
            }
            return .success(StatementTime(entries: entries))
        } catch {
            return .failure(BenchError("pg_stat_statements is not available (\(error)); load it with shared_preload_libraries to see where the database's time goes"))
        }
    }

    /// What ran between `earlier` and this reading, most time first.
    func since(_ earlier: StatementTime) -> [Entry] {
        entries.compactMap { id, now -> Entry? in
            let before = earlier.entries[id]
            let calls = now.calls - (before?.calls ?? 0)
            guard calls > 0 else { return nil }
            return Entry(calls: calls, milliseconds: now.milliseconds - (before?.milliseconds ?? 0), text: now.text)
        }
        .sorted { $0.milliseconds > $1.milliseconds }
    }

    /// Lines for the report: the `top` statements by time, each with its calls and mean.
    static func report(_ ran: [Entry], over seconds: Double, during stretch: String = "while driving", top: Int = 5) -> [String] {
        let total = ran.reduce(0) { $0 + $1.milliseconds }
        var lines = ["database execution time \(stretch): "
                     + String(format: "%.2f s in %.2f s (pg_stat_statements; commits' WAL flushes not included)", total / 1000, seconds)]
        for entry in ran.prefix(top) {
            // A statement's first 72 characters tell the engine's apart (`WITH delivered AS (`…).
            lines.append(String(format: "  %7.0f ms  %6ld calls × %6.2f ms  ", entry.milliseconds, entry.calls,
                                entry.milliseconds / Double(entry.calls)) + entry.text.prefix(72))
        }
        return lines
    }
}
