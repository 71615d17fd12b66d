import Foundation
import PGKit
import PostgresTesting
import Synchronization
import TestTags
import Testing

/// The commit groups' queueing target (`PostgresPool.Configuration.queueTarget`): under a burst
/// far above what the groups commit, the callers admitted wait near the target and the rest are
/// refused quickly with a `retryAfter`; at capacity nobody is refused. Timing-sensitive: it runs
/// alone (`scripts/test`'s timing group).
@Suite("Timing: group commit queueing target", .tags(.timing), .timeLimit(.minutes(2)))
struct TimingQueueTargetTests {
    static func pool(target: Duration) async throws -> PostgresPool {
        let pool = try await GroupCommitTests.pool(groups: 2, connections: 4)
        var configuration = pool.configuration
        await pool.close()
        configuration.queueTarget = target
        return PostgresPool(configuration)
    }

    /// Each statement costs the server about half a millisecond, so a group of 64 about 40 ms.
    static func insert(_ value: String, into pool: PostgresPool) async throws(PostgresError) {
        _ = try await pool.queryCommittingTogether(PostgresQuery("INSERT INTO t (v) SELECT $1 FROM pg_sleep(0.0005)", value))
    }

    @Test func aBurstFarAboveCapacityKeepsTheAdmittedWaitsShortAndRefusesTheRestQuickly() async throws {
        let pool = try await Self.pool(target: .milliseconds(30))
        let outcomes = Outcomes()
        // 6,000 statements over one second, several times what two groups commit: without a
        // target they would all queue, the last ones for seconds.
        let waves = 20
        let perWave = 300
        let start = ContinuousClock.now
        await withDiscardingTaskGroup { group in
            for wave in 0..<waves {
                try? await Task.sleep(until: start + .milliseconds(50 * wave))
                for index in 0..<perWave {
                    group.addTask {
                        let asked = ContinuousClock.now
                        do throws(PostgresError) {
                            try await Self.insert("\(wave)-\(index)", into: pool)
                            outcomes.commit("\(wave)-\(index)", after: ContinuousClock.now - asked)
                        } catch {
                            outcomes.refuse(error, after: ContinuousClock.now - asked)
                        }
                    }
                }
            }
        }
        let (committed, waits, refusals) = outcomes.all
        #expect(committed.count + refusals.count == waves * perWave, "every caller answered")
        #expect(!refusals.isEmpty, "a burst far above capacity refused nobody")
        #expect(committed.count > perWave, "the groups kept committing: \(committed.count)")
        for (error, _) in refusals.prefix(50) {
            #expect(error.kind == .poolBusy, "\(error)")
            #expect(error.retryAfter != nil, "\(error)")
        }
        let refusedAfter = refusals.map(\.1).sorted()
        #expect(refusedAfter[refusedAfter.count / 2] < .milliseconds(300), "refused quickly: median \(refusedAfter[refusedAfter.count / 2])")
        let sortedWaits = waits.sorted()
        let median = sortedWaits[sortedWaits.count / 2]
        let p99 = sortedWaits[sortedWaits.count * 99 / 100]
        // An admitted caller waits for the group in flight and then for its own: with a full
        // group's worth always admitted (groups must fill), about two groups of 64 statements of
        // half a millisecond and more each, on top of the target — without it, seconds.
        #expect(median < .milliseconds(500), "admitted callers waited near the target: median \(median)")
        #expect(p99 < .seconds(1), "admitted callers waited near the target: p99 \(p99)")
        // Nothing written for a refused statement, nothing lost of an admitted one.
        #expect(try await GroupCommitTests.stored(pool).sorted() == committed.sorted())
        // After the burst the queue has drained, and a statement commits at once.
        #expect(pool.groupStatistics.waiting == 0)
        #expect(pool.groupStatistics.groupsInFlight == 0)
        try await Self.insert("after", into: pool)
        await pool.close()
    }

    @Test func atCapacityNobodyIsRefused() async throws {
        let pool = try await Self.pool(target: .milliseconds(30))
        let end = ContinuousClock.now + .milliseconds(1500)
        let outcomes = Outcomes()
        await withDiscardingTaskGroup { group in
            for caller in 0..<8 {
                group.addTask {
                    var index = 0
                    while ContinuousClock.now < end {
                        let asked = ContinuousClock.now
                        do throws(PostgresError) {
                            try await Self.insert("\(caller)-\(index)", into: pool)
                            outcomes.commit("\(caller)-\(index)", after: ContinuousClock.now - asked)
                        } catch {
                            outcomes.refuse(error, after: ContinuousClock.now - asked)
                        }
                        index += 1
                    }
                }
            }
        }
        let (committed, _, refusals) = outcomes.all
        #expect(refusals.isEmpty, "refused at capacity: \(refusals.first.map { "\($0.0)" } ?? "")")
        #expect(committed.count > 8)
        await pool.close()
    }
}

/// What the callers of a test got, with how long each call took.
private final class Outcomes: Sendable {
    private let state = Mutex<(committed: [String], waits: [Duration], refusals: [(PostgresError, Duration)])>(([], [], []))

    func commit(_ value: String, after: Duration) { state.withLock { $0.committed.append(value); $0.waits.append(after) } }
    func refuse(_ error: PostgresError, after: Duration) { state.withLock { $0.refusals.append((error, after)) } }
    var all: (committed: [String], waits: [Duration], refusals: [(PostgresError, Duration)]) { state.withLock { $0 } }
}
