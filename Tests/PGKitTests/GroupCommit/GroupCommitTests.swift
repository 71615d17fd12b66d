import Foundation
import PGKit
import PostgresTesting
import Synchronization
import Testing

/// `PostgresPool.queryCommittingTogether`: statements that come while a group is in flight
/// commit together in the next one, and each still commits exactly once or fails on its own.
@Suite("PostgreSQL group commit", .timeLimit(.minutes(2)))  // a test past it (a lost wake-up) is reported as failed
struct GroupCommitTests {
    /// A pool of `connections` that lets `groups` groups be in flight (one unless said), and a
    /// table with a unique column.
    static func pool(groups: Int = 1, connections: Int = 8, acquireTimeout: Duration = .seconds(10)) async throws -> PostgresPool {
        var configuration = PostgresPool.Configuration(connection: try await TestDatabase.fresh(prefix: "group"), maximumConnections: connections)
        configuration.commitGroups = groups
        configuration.acquireTimeout = acquireTimeout
        let pool = PostgresPool(configuration)
        try await pool.query(PostgresQuery("CREATE TABLE t (v text PRIMARY KEY)"))
        return pool
    }

    /// Waits (at most 20 s) until the occupying `pg_sleep` runs on the server: a fixed pause
    /// let a loaded machine start a statement of the group before it.
    static func waitUntilOccupied(_ pool: PostgresPool) async throws {
        let started = ContinuousClock.now
        while ContinuousClock.now - started < .seconds(20) {
            if try await isOccupied(pool) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the occupying statement never ran")
    }

    /// Whether the occupying `pg_sleep` still runs on the server.
    static func isOccupied(_ pool: PostgresPool) async throws -> Bool {
        let running: Int = try await pool.query(PostgresQuery(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE 'SELECT pg_sleep%'"
        )).single().decode("n")
        return running > 0
    }

    /// Waits (at most 30 s) until `condition` holds.
    static func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        let started = ContinuousClock.now
        while ContinuousClock.now - started < .seconds(30) {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("never happened: \(what)")
    }

    /// `count` statements, sent at once through `queryCommittingTogether`, that each wait for the
    /// advisory lock `key` (held by `HeldLocks` until released): a group that ends exactly
    /// when the test lets it, however loaded the machine.
    static func waitForLock(_ key: Int, in pool: PostgresPool, count: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask {
                    _ = try await pool.queryCommittingTogether(PostgresQuery("SELECT pg_advisory_xact_lock($1) AS locked", key))
                }
            }
            try await group.waitForAll()
        }
    }

    /// With two groups allowed: a group of one waiting for lock 1 and, beside it (the next two
    /// statements make it), a group of two waiting for lock 2; returns when both are in flight.
    static func startTwoGroupsWaitingForLocks(_ pool: PostgresPool, in group: inout ThrowingTaskGroup<Void, any Error>) async throws {
        group.addTask { try await Self.waitForLock(1, in: pool, count: 1) }
        try await waitUntil("the first group is in flight") { pool.groupStatistics.groupsInFlight == 1 }
        group.addTask { try await Self.waitForLock(2, in: pool, count: 2) }
        try await waitUntil("the second group is in flight") { pool.groupStatistics.groupsInFlight == 2 }
    }

    /// Runs a group of one for a while, so that the statements sent meanwhile wait and form a group.
    static func occupy(_ pool: PostgresPool, seconds: Double) async throws {
        _ = try await pool.queryCommittingTogether(PostgresQuery("SELECT pg_sleep($1)", seconds))
    }

    static func insert(_ value: String, into pool: PostgresPool) async throws(PostgresError) -> String {
        try await pool.queryCommittingTogether(
            PostgresQuery("INSERT INTO t (v) VALUES ($1) RETURNING txid_current()::text AS tx", value)
        ).single().decode("tx", as: String.self)
    }

    static func stored(_ pool: PostgresPool) async throws -> [String] {
        try await pool.query(PostgresQuery("SELECT v FROM t ORDER BY v")).map { try $0.decode("v", as: String.self) }
    }

    @Test func statementsThatWaitCommitTogetherInOneTransaction() async throws {
        let pool = try await Self.pool()
        let transactions = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 3); return nil }
            try await Self.waitUntilOccupied(pool)  // the sleep leads; the inserts wait
            for value in ["a", "b", "c", "d", "e"] {
                group.addTask { try await Self.insert(value, into: pool) }
            }
            return try await group.reduce(into: [String]()) { if let tx = $1 { $0.append(tx) } }
        }
        #expect(transactions.count == 5)
        #expect(Set(transactions).count == 1, "one transaction for the group: \(transactions)")
        #expect(try await Self.stored(pool) == ["a", "b", "c", "d", "e"])
        await pool.close()
    }

    /// A refused statement in a group: nothing of the group commits, then each statement runs
    /// alone — the others commit once each, the refused one gets its own error.
    @Test func aFailedGroupRunsItsStatementsAlone() async throws {
        let pool = try await Self.pool()
        _ = try await Self.insert("taken", into: pool)
        let outcomes = try await withThrowingTaskGroup(of: (String, Result<String, PostgresError>)?.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 3); return nil }
            try await Self.waitUntilOccupied(pool)
            for value in ["x", "taken", "y"] {
                group.addTask {
                    do throws(PostgresError) {
                        return (value, .success(try await Self.insert(value, into: pool)))
                    } catch {
                        return (value, .failure(error))
                    }
                }
            }
            return try await group.reduce(into: [String: Result<String, PostgresError>]()) { if let pair = $1 { $0[pair.0] = pair.1 } }
        }
        guard case .failure(let error)? = outcomes["taken"] else {
            Issue.record("the duplicate was accepted: \(String(describing: outcomes["taken"]))")
            return
        }
        #expect(error.isUniqueViolation)
        let x = try #require(try? outcomes["x"]?.get())
        let y = try #require(try? outcomes["y"]?.get())
        #expect(x != y, "run alone after the group failed: a transaction each")
        #expect(try await Self.stored(pool) == ["taken", "x", "y"], "each once")
        await pool.close()
    }

    /// `insert`, with a batch form: the group's values as one array, each row naming its
    /// statement. Which of the two ran is in the answer (`form`).
    static func insertBatched(_ value: String, note: String?, into pool: PostgresPool) async throws -> (tx: String, form: String, stored: String) {
        let row = try await pool.queryCommittingTogether(
            PostgresQuery("""
                INSERT INTO notes (v, note) VALUES ($1, $2) RETURNING v, note IS NULL AS null_note, txid_current()::text AS tx, 'alone' AS form
                """, value, note),
            batch: """
                WITH i AS (SELECT * FROM unnest((SELECT $1::text[]), (SELECT $2::text[])) WITH ORDINALITY AS i(v, note, batch_ordinal)),
                     added AS (INSERT INTO notes (v, note) SELECT v, note FROM i RETURNING v, note)
                SELECT i.batch_ordinal, added.v, added.note IS NULL AS null_note, txid_current()::text AS tx, 'batch' AS form
                FROM added JOIN i USING (v)
                """
        ).single()
        let stored = try row.decode("v", as: String.self) + (try row.decode("null_note", as: Bool.self) ? " (no note)" : "")
        return (try row.decode("tx", as: String.self), try row.decode("form", as: String.self), stored)
    }

    /// A group whose statements have a batch form runs as that one statement: one transaction,
    /// each caller gets its own row, and values of every awkward kind (quotes, backslashes,
    /// the word NULL, braces and commas, non-ASCII, a real NULL) arrive as they were sent.
    @Test func aGroupWithABatchFormRunsAsOneStatement() async throws {
        let pool = try await Self.pool()
        try await pool.query(PostgresQuery("CREATE TABLE notes (v text PRIMARY KEY, note text)"))
        let values = ["plain", #"with "quotes" and \ backslash"#, "NULL", "{braces},commas", "é ✓", "no note"]
        let answers = try await withThrowingTaskGroup(of: (String, (tx: String, form: String, stored: String))?.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 3); return nil }
            try await Self.waitUntilOccupied(pool)
            for value in values {
                group.addTask { (value, try await Self.insertBatched(value, note: value == "no note" ? nil : "n", into: pool)) }
            }
            return try await group.reduce(into: [String: (tx: String, form: String, stored: String)]()) { if let pair = $1 { $0[pair.0] = pair.1 } }
        }
        #expect(answers.count == values.count)
        #expect(Set(answers.values.map(\.form)) == ["batch"], "the group ran as its batch form")
        #expect(pool.groupStatistics.batches == 1 && pool.groupStatistics.failedBatches == 0)
        #expect(Set(answers.values.map(\.tx)).count == 1, "one transaction for the group")
        for value in values {
            #expect(answers[value]?.stored == (value == "no note" ? "no note (no note)" : value), "each caller got its own row")
        }
        let stored = try await pool.query(PostgresQuery("SELECT v, note FROM notes ORDER BY v")).map {
            "\(try $0.decode("v", as: String.self))=\(try $0.decode("note", as: String?.self) ?? "NULL")"
        }
        #expect(stored == values.sorted().map { "\($0)=\($0 == "no note" ? "NULL" : "n")" })
        await pool.close()
    }

    /// A batch that fails (one value is taken) commits nothing; then each statement runs alone:
    /// the others once each, the duplicate with its own error.
    @Test func aFailedBatchRunsItsStatementsAlone() async throws {
        let pool = try await Self.pool()
        try await pool.query(PostgresQuery("CREATE TABLE notes (v text PRIMARY KEY, note text)"))
        try await pool.query(PostgresQuery("INSERT INTO notes (v) VALUES ('taken')"))
        let outcomes = try await withThrowingTaskGroup(of: (String, Result<String, any Error>)?.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 3); return nil }
            try await Self.waitUntilOccupied(pool)
            for value in ["x", "taken", "y"] {
                group.addTask {
                    do {
                        return (value, .success(try await Self.insertBatched(value, note: nil, into: pool).form))
                    } catch {
                        return (value, .failure(error))
                    }
                }
            }
            return try await group.reduce(into: [String: Result<String, any Error>]()) { if let pair = $1 { $0[pair.0] = pair.1 } }
        }
        guard case .failure(let error as PostgresError)? = outcomes["taken"] else {
            Issue.record("the duplicate was accepted: \(String(describing: outcomes["taken"]))")
            return
        }
        #expect(error.isUniqueViolation)
        #expect(pool.groupStatistics.failedBatches == 1)
        #expect(try #require(try? outcomes["x"]?.get()) == "alone")
        #expect(try #require(try? outcomes["y"]?.get()) == "alone")
        #expect(try await pool.query(PostgresQuery("SELECT v FROM notes ORDER BY v")).map { try $0.decode("v", as: String.self) }
                == ["taken", "x", "y"], "each once")
        await pool.close()
    }

    /// A group whose statements do not all have the same batch form runs as a pipeline.
    @Test func aMixedGroupRunsAsAPipeline() async throws {
        let pool = try await Self.pool()
        try await pool.query(PostgresQuery("CREATE TABLE notes (v text PRIMARY KEY, note text)"))
        let answers = try await withThrowingTaskGroup(of: (String, String)?.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 3); return nil }
            try await Self.waitUntilOccupied(pool)
            for value in ["b1", "b2"] {
                group.addTask { (value, try await Self.insertBatched(value, note: nil, into: pool).tx) }
            }
            group.addTask { ("plain", try await Self.insert("plain", into: pool)) }
            return try await group.reduce(into: [String: String]()) { if let pair = $1 { $0[pair.0] = pair.1 } }
        }
        #expect(answers.count == 3)
        #expect(Set(answers.values).count == 1, "one transaction for the group: \(answers)")
        #expect(pool.groupStatistics.batches == 0)
        await pool.close()
    }

    /// A batch statement whose rows do not name their statement is a mistake in the source: its
    /// statements committed, so none runs again — every caller gets the error, each row is
    /// stored once.
    @Test func aBatchWithoutOrdinalsFailsItsCallersButNeverRunsTwice() async throws {
        let pool = try await Self.pool()
        let outcomes = try await withThrowingTaskGroup(of: Result<Void, PostgresError>?.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 3); return nil }
            try await Self.waitUntilOccupied(pool)
            for value in ["p", "q", "r"] {
                group.addTask {
                    do {
                        _ = try await pool.queryCommittingTogether(
                            PostgresQuery("INSERT INTO t (v) VALUES ($1) RETURNING v", value),
                            batch: "INSERT INTO t (v) SELECT unnest((SELECT $1::text[])) RETURNING v")
                        return .success(())
                    } catch let error as PostgresError {
                        return .failure(error)
                    }
                }
            }
            return try await group.reduce(into: [Result<Void, PostgresError>]()) { if let outcome = $1 { $0.append(outcome) } }
        }
        #expect(outcomes.count == 3)
        for outcome in outcomes {
            guard case .failure(let error) = outcome else {
                Issue.record("a caller of the broken batch got an answer")
                continue
            }
            #expect(error.message.contains("batch_ordinal"), "\(error.message)")
        }
        #expect(try await Self.stored(pool) == ["p", "q", "r"], "each once, not run again")
        #expect(pool.groupStatistics.batches == 1)
        await pool.close()
    }

    /// With two groups allowed, a group beside the one in flight starts only once it is as
    /// large as the last one started: beside a group of one (the sleep), a lone statement
    /// waits; the next one makes two, and both go out together while the sleep still runs.
    @Test func aSecondGroupStartsBesideTheFirstOnlyOnceAsLarge() async throws {
        let pool = try await Self.pool(groups: 2)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 6) }
            try await Self.waitUntilOccupied(pool)  // a group of one in flight
            let lone = Task { try await Self.insert("a", into: pool) }
            // It waits (correct) or is written alone (wrong; the check below then fails).
            try await Self.waitUntil("the lone insert waits or is written") {
                pool.groupStatistics.waiting == 1 || pool.groupStatistics.groups > 0
            }
            #expect(try await Self.stored(pool) == [], "a lone statement waits instead of going out alone beside the group")
            let second = try await Self.insert("b", into: pool)
            let first = try await lone.value
            #expect(first == second, "the two went out as one group, in one transaction")
            #expect(try await Self.isOccupied(pool), "the second group ran beside the first, not after it")
            #expect(try await Self.stored(pool) == ["a", "b"])
            try await group.waitForAll()
        }
        #expect(pool.groupStatistics.groups == 2)
        #expect(pool.groupStatistics.statements == 3)
        await pool.close()
    }

    /// The last group in flight takes whoever waits, however few: beside a group of one, a
    /// lone statement is written as soon as that group ends.
    @Test func theLastGroupInFlightTakesWhoeverWaits() async throws {
        let pool = try await Self.pool(groups: 2)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await Self.occupy(pool, seconds: 1) }
            try await Self.waitUntilOccupied(pool)
            _ = try await Self.insert("a", into: pool)
            #expect(try await !Self.isOccupied(pool), "the lone statement waited for the group in flight to end")
            try await group.waitForAll()
        }
        #expect(try await Self.stored(pool) == ["a"])
        #expect(pool.groupStatistics.groups == 2)
        await pool.close()
    }
}
