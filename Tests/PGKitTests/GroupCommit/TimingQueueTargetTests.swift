import Foundation
import PGKit
import PostgresTesting
import Synchronization
import TestTags
import Testing

/// The commit groups' queueing target (`PostgresPool.Configuration.queueTarget`): under a burst
/// far above what the groups commit — spread over a second, or all at once — the callers
/// admitted wait near the target and the rest are refused quickly with a `retryAfter`; at
/// capacity nobody is refused. Timing-sensitive: it runs alone (`scripts/test`'s timing group).
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

    @Test func aBurstOverASecondKeepsTheAdmittedWaitsShortAndRefusesTheRestQuickly() async throws {
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

    /// How each of `count` callers started at once fared: seconds until its answer, and its refusal.
    static func burst(_ count: Int, prefix: String, into pool: PostgresPool) async -> [(seconds: Double, refusal: PostgresError?)] {
        await withTaskGroup(of: (Double, PostgresError?).self) { group in
            for index in 0..<count {
                group.addTask {
                    let started = ContinuousClock.now
                    do throws(PostgresError) {
                        try await insert("\(prefix)\(index)", into: pool)
                        return ((ContinuousClock.now - started) / .seconds(1), nil)
                    } catch {
                        return ((ContinuousClock.now - started) / .seconds(1), error)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    static func percentile(_ values: [Double], _ share: Double) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * share))]
    }

    @Test func aBurstAllAtOnceIsAdmittedUpToTheTargetAndTheRestRefusedAtOnce() async throws {
        let pool = try await Self.pool(target: .milliseconds(50))
        // The groups' pace is learnt first (a burst within capacity: nobody refused).
        let warmUp = await Self.burst(200, prefix: "w", into: pool)
        #expect(warmUp.allSatisfy { $0.refusal == nil }, "\(warmUp.compactMap(\.refusal).first.map(\.message) ?? "")")

        let outcomes = await Self.burst(3000, prefix: "b", into: pool)
        let admitted = outcomes.filter { $0.refusal == nil }.map(\.seconds)
        let refused = outcomes.compactMap { outcome in outcome.refusal.map { (outcome.seconds, $0) } }
        #expect(admitted.count >= 128, "the groups in flight and the next ones were filled: \(admitted.count) admitted")
        #expect(refused.count > 1000, "most of a burst 3000 at once, far above capacity, is refused: \(refused.count) refused")
        for (_, error) in refused.prefix(5) {
            #expect(error.kind == .poolBusy && error.retryAfter != nil, "\(error.kind): \(error.message)")
            #expect(error.message.hasPrefix("busy: "), "\(error.message)")
        }
        // Admitted: the groups in flight and about two more each (without the target they
        // would have queued behind the whole burst, a second and more); refused: at once.
        let admittedP90 = Self.percentile(admitted, 0.9)
        let refusedP50 = Self.percentile(refused.map(\.0), 0.5)
        #expect(admittedP90 < 0.6, "admitted callers wait a few groups, not the burst: p90 \(admittedP90) s")
        // Refused at arrival once the queue is seen standing, or from its back at the next
        // group's end: within the interval and a group or two, not after the burst's wait.
        #expect(refusedP50 < 0.4, "refusals come soon: p50 \(refusedP50) s")

        // Nothing written for a refused statement, every admitted one written once; the queue drained.
        let rows: Int = try await pool.query(PostgresQuery("SELECT count(*)::int AS n FROM t WHERE v LIKE 'b%'")).single().decode("n")
        #expect(rows == admitted.count)
        #expect(pool.groupStatistics.waiting == 0 && pool.groupStatistics.groupsInFlight == 0)
        let after = await Self.burst(50, prefix: "a", into: pool)
        #expect(after.allSatisfy { $0.refusal == nil }, "after the burst, callers within capacity are admitted")
        await pool.close()
    }

    /// Callers that keep statements coming, no more than the groups commit: none refused.
    @Test func atCapacityNobodyIsRefused() async throws {
        let pool = try await Self.pool(target: .milliseconds(50))
        let until = ContinuousClock.now + .seconds(1)
        let refusals = try await withThrowingTaskGroup(of: Int.self) { group in
            for caller in 0..<100 {
                group.addTask {
                    var refused = 0
                    var index = 0
                    while ContinuousClock.now < until {
                        do throws(PostgresError) {
                            try await Self.insert("c\(caller)-\(index)", into: pool)
                        } catch {
                            if error.kind == .poolBusy { refused += 1 } else { throw error }
                        }
                        index += 1
                    }
                    return refused
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(refusals == 0)
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
