import Foundation
import PGKit
import PostgresTesting
import Synchronization
import Testing

/// Groups in flight side by side: who takes the statements waiting when one ends, and the
/// statements refused when none could commit in time. The groups wait on locks the tests hold.
extension GroupCommitTests {
    /// A group that ends beside another still in flight leaves fewer statements waiting than a
    /// group must hold (here one, against the two of the last group started); the last group in
    /// flight takes them when it ends. The two groups in flight wait on locks the test holds.
    @Test func aGroupEndingBesideAnotherLeavesTooFewWaiting() async throws {
        let pool = try await Self.pool(groups: 2)
        let locks = try await HeldLocks(database: pool.configuration.connection, keys: [1, 2])
        try await withThrowingTaskGroup(of: Void.self) { group in
            try await Self.startTwoGroupsWaitingForLocks(pool, in: &group)
            let lone = Task { try await Self.insert("a", into: pool) }
            try await Self.waitUntil("the insert waits") { pool.groupStatistics.waiting == 1 }
            locks.release(1)
            try await Self.waitUntil("the first group ends") { pool.groupStatistics.groups == 1 }
            #expect(pool.groupStatistics.waiting == 1, "one statement waiting is fewer than a group beside another must hold")
            #expect(pool.groupStatistics.groupsInFlight == 1)
            #expect(try await Self.stored(pool) == [])
            locks.release(2)
            _ = try await lone.value
            try await group.waitForAll()
        }
        #expect(try await Self.stored(pool) == ["a"], "the last group in flight took the lone statement when it ended")
        #expect(pool.groupStatistics.groups == 3)
        await locks.close()
        await pool.close()
    }

    /// A group that ends beside another still in flight takes the statements waiting when they
    /// are as many as the last group started; and after a group of three, a group beside another
    /// needs three: two wait, the third sends them.
    @Test func aGroupEndingBesideAnotherTakesTheWaitersWhenTheyAreAsMany() async throws {
        let pool = try await Self.pool(groups: 2)
        let locks = try await HeldLocks(database: pool.configuration.connection, keys: [1, 2])
        try await withThrowingTaskGroup(of: Void.self) { group in
            try await Self.startTwoGroupsWaitingForLocks(pool, in: &group)
            // Two groups in flight: these three wait; when the first group ends they are as many
            // as the last group started (two), and go out as one group of three.
            let three = (1...3).map { index in Task { try await Self.insert("c\(index)", into: pool) } }
            try await Self.waitUntil("three inserts wait") { pool.groupStatistics.waiting == 3 }
            locks.release(1)
            try await Self.waitUntil("the three go out when the first group ends") { pool.groupStatistics.waiting == 0 }
            if pool.groupStatistics.waiting > 0 { locks.release(2) }  // (failed above) so as not to hang
            var transactions: Set<String> = []
            for task in three { transactions.insert(try await task.value) }
            #expect(transactions.count == 1, "one group, one transaction: \(transactions)")
            #expect(pool.groupStatistics.groupsInFlight == 1, "taken when the first group ended, beside the second")
            // The last group started held three: beside the second group, two wait…
            let two = (0..<2).map { index in Task { try await Self.insert("x\(index)", into: pool) } }
            try await Self.waitUntil("two inserts wait") { pool.groupStatistics.waiting == 2 }
            #expect(pool.groupStatistics.groupsInFlight == 1, "two are fewer than the three a group beside another must now hold")
            if pool.groupStatistics.waiting != 2 { locks.release(2) }  // (failed above) so that the third cannot hang
            // …and the third sends all three at once.
            let third = try await Self.insert("x2", into: pool)
            for task in two { #expect(try await task.value == third) }
            #expect(pool.groupStatistics.waiting == 0)
            locks.release(2)
            try await group.waitForAll()
        }
        #expect(try await Self.stored(pool) == ["c1", "c2", "c3", "x0", "x1", "x2"])
        await locks.close()
        await pool.close()
    }

    /// With two groups in flight (three statements) and two waiting, five callers are busy: a
    /// group beside another must hold three, its share, though the last group started held two.
    /// So when the first group ends, the two stay waiting (as large as the last group, they
    /// went out before), and the last group in flight takes them when it ends.
    @Test func aGroupBesideAnotherHoldsItsShareOfTheBusyCallers() async throws {
        let pool = try await Self.pool(groups: 2)
        let locks = try await HeldLocks(database: pool.configuration.connection, keys: [1, 2])
        try await withThrowingTaskGroup(of: Void.self) { group in
            try await Self.startTwoGroupsWaitingForLocks(pool, in: &group)
            #expect(pool.groupStatistics.besideThreshold == 2, "three busy: a share of two")
            let two = (1...2).map { index in Task { try await Self.insert("s\(index)", into: pool) } }
            try await Self.waitUntil("two wait") { pool.groupStatistics.waiting == 2 }
            #expect(pool.groupStatistics.besideThreshold == 3, "five busy (three in flight, two waiting): half of them, rounded up")
            locks.release(1)
            try await Self.waitUntil("the first group ends") { pool.groupStatistics.groups == 1 }
            #expect(pool.groupStatistics.waiting == 2, "two waiting are fewer than the three a group beside another must hold")
            #expect(pool.groupStatistics.groupsInFlight == 1)
            #expect(try await Self.stored(pool) == [])
            locks.release(2)
            let transactions = Set([try await two[0].value, try await two[1].value])
            #expect(transactions.count == 1, "the last group in flight took both, as one group")
            try await group.waitForAll()
        }
        #expect(try await Self.stored(pool) == ["s1", "s2"])
        #expect(pool.groupStatistics.groups == 3)
        await locks.close()
        await pool.close()
    }

    /// Callers that hold no connection (`queryCommittingTogether(_:batch:)`) hold none while
    /// they wait either: a group is not capped at the pool's size.
    @Test func callersHoldingNoConnectionGatherIntoAGroupLargerThanThePool() async throws {
        let pool = try await Self.pool(connections: 2)
        let locks = try await HeldLocks(database: pool.configuration.connection, keys: [1])
        let values = (0..<20).map { String(format: "v%02d", $0) }
        let transactions = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                _ = try await pool.queryCommittingTogether(PostgresQuery("SELECT pg_advisory_xact_lock($1) AS locked", 1))
                return nil
            }
            try await Self.waitUntil("the first group is in flight") { pool.groupStatistics.groupsInFlight == 1 }
            for value in values {
                group.addTask {
                    try await pool.queryCommittingTogether(
                        PostgresQuery("INSERT INTO t (v) VALUES ($1) RETURNING txid_current()::text AS tx", value)
                    ).single().decode("tx", as: String.self)
                }
            }
            try await Self.waitUntil("all 20 wait for the next group") { pool.groupStatistics.waiting == 20 }
            let statistics = await pool.statistics
            #expect(statistics.open - statistics.idle == 1, "only the group in flight holds a connection: \(statistics)")
            locks.release(1)
            return try await group.reduce(into: [String]()) { if let tx = $1 { $0.append(tx) } }
        }
        #expect(transactions.count == 20)
        #expect(Set(transactions).count == 1, "one group, one transaction, for 20 statements on a pool of 2: \(Set(transactions))")
        #expect(try await Self.stored(pool) == values)
        await locks.close()
        await pool.close()
    }

    /// Nothing else bounds how many wait for a group when none holds a connection: a statement
    /// that would wait longer than most of `acquireTimeout` (80 %), at the pace the last group
    /// went, is refused at once and says busy; the ones admitted commit.
    @Test func aStatementThatCouldNotCommitInTimeIsRefusedAtOnce() async throws {
        let pool = try await Self.pool(connections: 2, acquireTimeout: .seconds(10))
        // The pace: a group of one that ran at least 2 s (a loaded machine adds to it). Waiters
        // are admitted while the wait ahead is under 8 s: the first (2 s, or a little more) is,
        // the fifth (at least 10 s) never is; where between them depends on the machine.
        _ = try await pool.queryCommittingTogether(PostgresQuery("SELECT pg_sleep(2)"))
        let locks = try await HeldLocks(database: pool.configuration.connection, keys: [1])
        let refusals = Refusals()
        var admitted: [String] = []
        var refusedAt: Int?
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { _ = try await pool.queryCommittingTogether(PostgresQuery("SELECT pg_advisory_xact_lock($1) AS locked", 1)) }
            try await Self.waitUntil("the first group is in flight") { pool.groupStatistics.groupsInFlight == 1 }
            for position in 1...6 {
                let value = "w\(position)"
                group.addTask {
                    let asked = ContinuousClock.now
                    do throws(PostgresError) {
                        _ = try await pool.queryCommittingTogether(PostgresQuery("INSERT INTO t (v) VALUES ($1)", value))
                    } catch {
                        refusals.add(error, after: ContinuousClock.now - asked)
                    }
                }
                try await Self.waitUntil("statement \(position) waits or is refused") {
                    pool.groupStatistics.waiting == admitted.count + 1 || !refusals.all.isEmpty
                }
                if !refusals.all.isEmpty { refusedAt = position; break }
                admitted.append(value)
            }
            locks.release(1)
            try await group.waitForAll()
        }
        let position = try #require(refusedAt, "six waiters behind a 2 s pace, none refused")
        #expect((2...5).contains(position), "the first waiter admitted, the fifth never: refused at \(position)")
        let (error, after) = try #require(refusals.all.first)
        #expect(after < .seconds(1), "refused at once, not after a wait: \(after)")
        #expect(error.kind == .poolBusy)
        #expect(error.message.hasPrefix("busy: the statements waiting to be committed ahead of this one (\(position - 1)) are about "), "\(error.message)")
        #expect(error.message.hasSuffix("longer than it may wait; retry shortly"), "\(error.message)")
        let retryAfter = try #require(error.retryAfter)
        #expect(retryAfter > .seconds(8), "\(retryAfter)")
        #expect(try await Self.stored(pool) == admitted)
        await locks.close()
        await pool.close()
    }

    @Test func withoutGroupsEveryStatementRunsAlone() async throws {
        let pool = try await Self.pool(groups: 0, connections: 4)
        let transactions = try await withThrowingTaskGroup(of: String.self) { group in
            for value in ["a", "b", "c", "d"] {
                group.addTask { try await Self.insert(value, into: pool) }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(Set(transactions).count == 4)
        #expect(try await Self.stored(pool) == ["a", "b", "c", "d"])
        await pool.close()
    }
}

/// Busy refusals a test's tasks met, with how long each call took.
private final class Refusals: Sendable {
    private let refusals = Mutex<[(PostgresError, Duration)]>([])

    func add(_ error: PostgresError, after: Duration) { refusals.withLock { $0.append((error, after)) } }
    var all: [(PostgresError, Duration)] { refusals.withLock { $0 } }
}

/// Advisory locks the test holds, each in a transaction of its own on a pool of its own, until
/// it releases them: statements waiting for one stay in flight exactly that long.
private final class HeldLocks: Sendable {
    private let pool: PostgresPool
    private let releases: [Int: AsyncStream<Void>.Continuation]
    private let holders: [Task<Void, any Error>]
    /// Releases every lock after a minute, whatever the test does: a broken pool that left a
    /// statement behind a held lock fails the test's checks instead of hanging the run.
    private let watchdog: Task<Void, Never>

    init(database: PostgresConfiguration, keys: [Int]) async throws {
        let pool = PostgresPool(.init(connection: database, maximumConnections: keys.count))
        var releases: [Int: AsyncStream<Void>.Continuation] = [:]
        var holders: [Task<Void, any Error>] = []
        for key in keys {
            let (release, released) = AsyncStream<Void>.makeStream()
            let (held, holding) = AsyncStream<Void>.makeStream()
            let holder = Task {
                defer { holding.finish() }  // a holder that fails ends the wait below
                try await pool.transaction { connection in
                    _ = try await connection.query(PostgresQuery("SELECT pg_advisory_xact_lock($1)", key))
                    holding.yield()
                    for await _ in release { break }
                }
            }
            holders.append(holder)
            var iterator = held.makeAsyncIterator()
            if await iterator.next() == nil { try await holder.value }  // the lock is held, or its error is thrown
            releases[key] = released
        }
        self.pool = pool
        self.releases = releases
        self.holders = holders
        watchdog = Task { [releases] in
            try? await Task.sleep(for: .seconds(60))
            for continuation in releases.values { continuation.finish() }
        }
    }

    /// Ends the transaction holding `key`: whoever waits for it goes on.
    func release(_ key: Int) {
        releases[key]?.yield()
        releases[key]?.finish()
    }

    func close() async {
        watchdog.cancel()
        for key in releases.keys { release(key) }
        for holder in holders { _ = try? await holder.value }
        await pool.close()
    }
}
