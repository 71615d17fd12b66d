import Foundation
import PGKit
import PostgresTesting
import TestTags
import Testing

/// The queueing delay of statements waiting for a commit group stays near the pool's
/// `queueTarget`: under a burst far above what the groups commit, the admitted commit soon and
/// the rest are refused at once; at capacity nobody is refused. Timing-sensitive: runs alone.
@Suite("Timing: group commit queue target", .tags(.timing), .timeLimit(.minutes(2)))
struct TimingGroupCommitQueueTests {
    /// Each statement costs the server about half a millisecond, so that two groups of 64
    /// commit a few thousand a second: a burst of thousands at once is far above that.
    static func slowInsert(_ value: String, into pool: PostgresPool) async throws(PostgresError) {
        _ = try await pool.queryCommittingTogether(PostgresQuery("INSERT INTO t (v) SELECT $1 FROM pg_sleep(0.0005)", value))
    }

    /// How each of `count` callers started at once fared: seconds until its answer, and its refusal.
    static func burst(_ count: Int, prefix: String, into pool: PostgresPool) async -> [(seconds: Double, refusal: PostgresError?)] {
        await withTaskGroup(of: (Double, PostgresError?).self) { group in
            for index in 0..<count {
                group.addTask {
                    let started = ContinuousClock.now
                    do throws(PostgresError) {
                        try await slowInsert("\(prefix)\(index)", into: pool)
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

    @Test func aBurstFarAboveCapacityIsAdmittedUpToTheTargetAndTheRestRefusedAtOnce() async throws {
        let pool = try await TimingQueueTargetTests.pool(target: .milliseconds(50))
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
        let pool = try await TimingQueueTargetTests.pool(target: .milliseconds(50))
        let until = ContinuousClock.now + .seconds(1)
        let refusals = try await withThrowingTaskGroup(of: Int.self) { group in
            for caller in 0..<100 {
                group.addTask {
                    var refused = 0
                    var index = 0
                    while ContinuousClock.now < until {
                        do throws(PostgresError) {
                            try await Self.slowInsert("c\(caller)-\(index)", into: pool)
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
