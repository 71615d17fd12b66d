import ArgumentParser
import Foundation
import PGKit

/// Whether time partitioning of the big append-only history would pay instead of the purge's
/// DELETE batches, measured in a scratch schema of the run's database: a copy of
/// `order_transitions` as it is (`plain`) and one partitioned by day on `occurred_at` (`part`),
/// each with the same rows — one day of old orders to purge, and recent ones. Purging the old
/// day costs DELETE batches of 100 orders by primary key (as `RetentionStore` deletes) in
/// `plain`, and DETACH + DROP of the day's partition in `part`: time and WAL of each. The hot
/// path is pgbench inserting history rows into each, alone and while the purge runs beside.
struct PartitionBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "partitions",
        abstract: "Time-partitioned history against DELETE batches: purge cost, WAL and the insert path.",
        discussion: "Example: swift run -c release orderflow-bench partitions --orders 20000 --seconds 10")

    @Option(help: "Old orders (6 history rows each) in the day that is purged, and as many recent ones.") var orders = 20_000
    @Option(help: "Seconds of each pgbench insert turn.") var seconds = 10
    @Option(help: "pgbench clients inserting history rows.") var clients = 8
    @Option(help: "PostgreSQL server URL (default: ORDERFLOW_DATABASE_URL, else a private cluster in .orderflow/).")
    var database: String?

    func run() async throws {
        try await BenchDatabase.with(url: database) { bench in try await measure(bench) }
    }

    private func measure(_ bench: BenchDatabase) async throws {
        let pool = PostgresPool(.init(connection: bench.configuration, maximumConnections: 2))
        do {
            try await measure(bench, pool)
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
    }

    private func measure(_ bench: BenchDatabase, _ pool: PostgresPool) async throws {
        for statement in Self.schema { try await pool.query(PostgresQuery(statement)) }
        print("\(orders) old orders (one day, 40 days ago) and \(orders) recent ones, 6 history rows each, in both tables…")

        // The purge, each way, on the same rows.
        try await seed(pool)
        let plainPurge = try await measured(pool) { try await deleteBatches(pool) }
        let partPurge = try await measured(pool) { try await dropOldDay(pool) }
        print(String(format: "purge of %d rows: deleted in batches %.2f s, WAL %.1f MB; partition detached and dropped %.3f s, WAL %.3f MB",
                     orders * 6, plainPurge.seconds, plainPurge.wal / 1e6, partPurge.seconds, partPurge.wal / 1e6))

        // The hot path: inserts alone into each, then beside each purge.
        var rates: [String: Double] = [:]
        for table in ["plain", "part"] {
            try await seed(pool)
            rates[table] = try await insertRate(bench, table: table)
            // Beside the inserts the DELETE batches pause as the purge does between them.
            let purge = Task { table == "plain" ? try await deleteBatches(pool, pause: .milliseconds(50)) : try await dropOldDay(pool) }
            rates[table + " beside its purge"] = try await insertRate(bench, table: table)
            try await purge.value
        }
        // The read of every claim and advance: an order's history by its key, which names no day,
        // so the partitioned table probes every partition's index.
        for table in ["plain", "part"] {
            rates["reads of " + table] = try await runPgbench(
                url: bench.url, script: table == "plain" ? Self.readPlain : Self.readPart, clients: clients, seconds: seconds,
                variables: ["orders": "\(orders)"])
        }
        for (label, rate) in rates.sorted(by: { $0.key < $1.key }) {
            let reads = label.hasPrefix("reads")
            print((reads ? "" : "inserts into ") + label.padding(toLength: reads ? 39 : 26, withPad: " ", startingAt: 0)
                  + String(format: reads ? "%8.0f orders read/s" : "%8.0f rows/s", rate))
        }
        print(String(format: "ratio partitioned/plain: inserts %.2f, reads by order %.2f; inserts beside their purge/alone: plain %.2f, partitioned %.2f",
                     rates["part"]! / rates["plain"]!, rates["reads of part"]! / rates["reads of plain"]!, rates["plain beside its purge"]! / rates["plain"]!,
                     rates["part beside its purge"]! / rates["part"]!))
        try await pool.query(PostgresQuery("DROP SCHEMA scratch CASCADE"))
    }

    /// Time and WAL of `body`, from a checkpoint.
    private func measured(_ pool: PostgresPool, _ body: () async throws -> Void) async throws -> (seconds: Double, wal: Double) {
        try await pool.query(PostgresQuery("CHECKPOINT"))
        let wal = try await OldOrders.walPosition(pool)
        let started = ContinuousClock.now
        try await body()
        return ((ContinuousClock.now - started).asSeconds, try await OldOrders.walPosition(pool) - wal)
    }

    /// Empties both tables, then writes the old day's rows and the recent ones into each.
    private func seed(_ pool: PostgresPool) async throws {
        try await pool.query(PostgresQuery("TRUNCATE scratch.plain, scratch.part"))
        try await pool.query(PostgresQuery("""
            CREATE TABLE IF NOT EXISTS scratch.part_old PARTITION OF scratch.part
                FOR VALUES FROM (now() - interval '41 days') TO (now() - interval '39 days')
            """))
        try await pool.query(PostgresQuery("""
            INSERT INTO scratch.plain (merchant_id, order_id, seq, from_state, to_state, event, input, rendered, actor, occurred_at)
            SELECT 'default', kind || g, s, 'ready', 'delivered', 'deliver', '{"eta": "2026-01-01T12:20:00Z"}',
                   '{"event": "update", "content": {"status": "delivered", "message": "Delivered. Enjoy your meal!", "eta": null, "driverName": "Sam"}, "alert": {"title": "Delivered", "body": "Order 1042 from Bench Bistro has arrived."}, "priority": 10}',
                   'api:bench', CASE kind WHEN 'old-' THEN now() - interval '40 days' ELSE now() END
            FROM generate_series(1, $1) AS g, generate_series(1, 6) AS s, (VALUES ('old-'), ('new-')) AS k(kind)
            """, orders))
        try await pool.query(PostgresQuery("INSERT INTO scratch.part SELECT * FROM scratch.plain"))
        try await pool.query(PostgresQuery("ANALYZE scratch.plain"))
        try await pool.query(PostgresQuery("ANALYZE scratch.part"))
    }

    /// The old day out of `plain`: batches of 100 orders by primary key, each its own transaction.
    private func deleteBatches(_ pool: PostgresPool, pause: Duration = .zero) async throws {
        var first = 1
        while first <= orders {
            try await pool.query(PostgresQuery("""
                DELETE FROM scratch.plain t USING generate_series($1::integer, $2::integer) AS g
                WHERE t.merchant_id = 'default' AND t.order_id = 'old-' || g
                """, first, min(orders, first + 99)))
            first += 100
            if pause > .zero { try await Task.sleep(for: pause) }
        }
    }

    /// The old day out of `part`: its partition detached and dropped.
    private func dropOldDay(_ pool: PostgresPool) async throws {
        try await pool.query(PostgresQuery("ALTER TABLE scratch.part DETACH PARTITION scratch.part_old"))
        try await pool.query(PostgresQuery("DROP TABLE scratch.part_old"))
    }

    /// pgbench inserting one history row per transaction into `table` for `seconds`.
    private func insertRate(_ bench: BenchDatabase, table: String) async throws -> Double {
        try await runPgbench(url: bench.url, script: table == "plain" ? Self.insertPlain : Self.insertPart, clients: clients, seconds: seconds)
    }

    private static let insertPlain = """
        \\set n random(1, 2000000000)
        INSERT INTO scratch.plain (merchant_id, order_id, seq, to_state, rendered, occurred_at) VALUES ('hot', 'hot-' || :n, :client_id, 'ready', '{"event": "update", "content": {"status": "ready"}}', now()) ON CONFLICT DO NOTHING;

        """
    private static let insertPart = """
        \\set n random(1, 2000000000)
        INSERT INTO scratch.part (merchant_id, order_id, seq, to_state, rendered, occurred_at) VALUES ('hot', 'hot-' || :n, :client_id, 'ready', '{"event": "update", "content": {"status": "ready"}}', now()) ON CONFLICT DO NOTHING;

        """

    private static let readPlain = """
        \\set n random(1, :orders)
        SELECT seq, rendered FROM scratch.plain WHERE merchant_id = 'default' AND order_id = 'new-' || :n ORDER BY seq;

        """
    private static let readPart = """
        \\set n random(1, :orders)
        SELECT seq, rendered FROM scratch.part WHERE merchant_id = 'default' AND order_id = 'new-' || :n ORDER BY seq;

        """

    /// `plain` as `order_transitions` is (its keys and the feed's index, without the
    /// append-only trigger); `part` the same partitioned by day, its primary key widened by the
    /// partition column as PostgreSQL requires (so `(merchant, order, seq)` and the idempotency
    /// key are no longer unique across days), with a partition per day of the last 38 days (a month's retention) and a default one.
    private static let schema: [StaticString] = [
        "DROP SCHEMA IF EXISTS scratch CASCADE",
        "CREATE SCHEMA scratch",
        "CREATE TABLE scratch.plain (LIKE public.order_transitions INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)",
        "CREATE TABLE scratch.part (LIKE public.order_transitions INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (occurred_at)",
        "ALTER TABLE scratch.part ADD PRIMARY KEY (merchant_id, order_id, seq, occurred_at)",
        "CREATE INDEX ON scratch.part (merchant_id, tx)",
        "CREATE TABLE scratch.part_rest PARTITION OF scratch.part DEFAULT",
        """
        DO $$ BEGIN
            -- Day 0 is today and the two days after it; one transaction, so one now().
            FOR d IN 0..37 LOOP
                EXECUTE format('CREATE TABLE scratch.part_%s PARTITION OF scratch.part FOR VALUES FROM (%L) TO (%L)',
                               d, now() - make_interval(days => d + 1),
                               CASE WHEN d = 0 THEN now() + interval '2 days' ELSE now() - make_interval(days => d) END);
            END LOOP;
        END $$
        """,
    ]
}
