import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// Advances written in groups (`OrderFlowConfiguration.commitGroups`): however they are
/// grouped, every advance commits exactly once with its history row and its outbox command,
/// a retried key answers with the first result, and a lost race is a conflict.
@Suite("Engine: advances committed in groups", .timeLimit(.minutes(3)))  // a test past it (a lost wake-up) is reported as failed
struct GroupCommitEngineTests {
    /// One group in flight (everyone else waits and is grouped), and two (the default: groups
    /// side by side, each as large as the last one started).
    @Test(arguments: [false, true], [1, 2])
    func everyAdvanceCommitsOnceWithItsCommand(onPreferredExecutor: Bool, groups: Int) async throws {
        let fixture = try await EngineFixture.make()
        var configuration = OrderFlowConfiguration(database: fixture.database, maximumConnections: 24)
        configuration.commitGroups = groups
        let engine = OrderFlowEngine(configuration: configuration)
        let orders = (0..<12).map { "group-\($0)" }
        for id in orders { try await fixture.createFoodOrder(id) }
        let steps: [(String, JSONValue)] = [
            ("accept", ["eta": "+20m"]), ("ready", [:]), ("dispatch", ["eta": "+15m", "driver": "Sam"]), ("deliver", [:]),
        ]
        let executor = onPreferredExecutor ? engine.preferredExecutor : nil
        // Two callers per order try every step (one with idempotency keys, one without), and
        // a third retries the keyed caller's steps: each step must win exactly once.
        let outcomes = try await withThrowingTaskGroup(of: [String: [String]].self) { group in
            for id in orders {
                for caller in 0..<3 {
                    group.addTask(executorPreference: executor) {
                        var won: [String] = []
                        for (step, input) in steps {
                            do {
                                let key: String? = caller == 1 ? nil : "\(id)-\(step)"
                                // A busy engine (a starved machine's slow groups) is retried, as a
                                // client told `busy` does: nothing of the refused call was written.
                                var answer: AdvanceResult?
                                while answer == nil {
                                    do {
                                        answer = try await engine.advance(id, to: step, input: input, idempotencyKey: key)
                                    } catch let error as OrderFlowError where error.isBusy {
                                        try await Task.sleep(for: .milliseconds(50))
                                    }
                                }
                                let result = answer!
                                if !result.replayed { won.append(result.transition.to) }
                            } catch let error as OrderFlowError where [OrderFlowError.Code.conflict, .invalidTransition].contains(error.code) {
                                continue
                            }
                        }
                        return [id: won]
                    }
                }
            }
            return try await group.reduce(into: [:]) { $0.merge($1) { $0 + $1 } }
        }
        for id in orders {
            let history = try await engine.history(id)
            #expect(history.transitions.map(\.seq) == [1, 2, 3, 4, 5], "\(id): \(history.transitions.map(\.to))")
            #expect(Set(outcomes[id] ?? []).count == (outcomes[id] ?? []).count, "\(id): a step won twice: \(outcomes[id] ?? [])")
            // One command per step: the start and every advance, each once, in step order.
            let commands = try await engine.pool.query(PostgresQuery(
                "SELECT seq, kind FROM activity_commands WHERE order_id = $1 ORDER BY seq", id))
            #expect(try commands.map { try $0.decode("seq", as: Int.self) } == [1, 2, 3, 4, 5], "\(id)")
            #expect(try commands.last?.decode("kind", as: String.self) == "end", "\(id)")
        }
        // The real batch statement ran (a broken one would fall back to one advance at a time
        // and still give these answers); some batches fail on the shared keys, by design.
        #expect(engine.pool.groupStatistics.batches > 0, "no group ran as one statement: \(engine.pool.groupStatistics)")
        await engine.shutdown()
        await fixture.shutdown()
    }
}
