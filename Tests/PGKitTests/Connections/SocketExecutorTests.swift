import Foundation
@testable import PGKit
import PostgresTesting
import Synchronization
import Testing

/// Where the tasks found themselves, gathered from all of them.
private final class Seen: Sendable {
    let elsewhere = Mutex<[String]>([])
    let onSocketThread = Mutex<Int>(0)
}

@Suite("The socket thread as a task executor")
struct SocketExecutorTests {
    /// Tasks preferring the executor run on the socket thread between their statements, get
    /// their own answers, and are woken there by timers and by other threads; tasks without
    /// the preference never run there. Several rounds, so that a job arriving just as the
    /// thread goes to sleep is met many times: a lost wake-up hangs the test.
    @Test(.timeLimit(.minutes(3)))
    func preferringTasksRunOnTheSocketThreadAndGetTheirAnswers() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 6))
        let seen = Seen()
        for round in 0..<5 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<30 {
                    let prefers = task % 3 != 0
                    group.addTask(executorPreference: prefers ? PostgresConnection.socketExecutor : nil) {
                        for step in 0..<4 {
                            let value = round * 1000 + task * 10 + step
                            let answer: Int
                            if step == 2 {
                                answer = try await pool.transaction { connection in
                                    try await connection.query(PostgresQuery("SELECT $1::int + 0 AS v", value)).single().decode("v")
                                }
                            } else {
                                answer = try await pool.query(PostgresQuery("SELECT $1::int AS v", value)).single().decode("v")
                            }
                            #expect(answer == value)
                            let name = currentThreadName()
                            if prefers {
                                if name == "pg sockets" {
                                    seen.onSocketThread.withLock { $0 += 1 }
                                } else {
                                    seen.elsewhere.withLock { $0.append("preferring task \(task) after step \(step) on \(name)") }
                                }
                            } else if name == "pg sockets" {
                                seen.elsewhere.withLock { $0.append("task \(task) without preference on the socket thread") }
                            }
                            if step == 1 { try await Task.sleep(for: .milliseconds(1)) }  // resumed from a timer
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        #expect(seen.elsewhere.withLock { $0 } == [])
        #expect(seen.onSocketThread.withLock { $0 } == 5 * 20 * 4)
        await pool.close()
    }

    /// A preferring task's error, cancellation and a statement that fails behave as anywhere.
    @Test(.timeLimit(.minutes(3)))
    func errorsAndCancellationReachPreferringTasks() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        try await withTaskExecutorPreference(PostgresConnection.socketExecutor) {
            let rows = try await PostgresConnection.withConnection(configuration) { connection in
                await #expect(throws: PostgresError.self) {
                    try await connection.query(PostgresQuery("SELECT 1 / 0"))
                }
                return try await connection.query(PostgresQuery("SELECT 7 AS v"))
            }
            #expect(try rows.single().decode("v", as: Int.self) == 7)
            let sleeper = Task(executorPreference: PostgresConnection.socketExecutor) {
                try await Task.sleep(for: .seconds(30))
            }
            sleeper.cancel()
            await #expect(throws: CancellationError.self) { try await sleeper.value }
        }
    }
}
