import Foundation
import LocalPostgres
import PGKit
import PostgresTesting
import Testing

@Suite("LISTEN/NOTIFY and server restarts")
struct ListenerAndRestartTests {
    @Test func listenerDeliversAndResubscribesAfterReconnect() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let channel = "orderflow_test_\(UInt32.random(in: 0...UInt32.max))"
        let listener = PostgresListener(configuration: configuration, channels: [channel])
        listener.start()
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .connected(reconnected: false))

        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 2))
        try await pool.notify(channel: channel, payload: "first")
        #expect(await events.next() == .notification(channel: channel, payload: "first"))

        // Kill the listener's backend: it must reconnect and LISTEN again by itself.
        try await pool.query(PostgresQuery(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
            "orderflow listener"))
        #expect(await events.next() == .connected(reconnected: true))
        try await pool.notify(channel: channel, payload: "second")
        #expect(await events.next() == .notification(channel: channel, payload: "second"))

        await listener.stop()
        await pool.close()
    }

    @Test(.timeLimit(.minutes(2)))
    func poolRecoversFromServerRestart() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-restart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o755)
        let server = LocalPostgres(folder: folder)
        let url = try await server.start()
        do {
            try await restartScenario(server: server, url: url)
            try await server.stop()
        } catch {
            try? await server.stop()
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
        try? FileManager.default.removeItem(at: folder)
    }

    private func restartScenario(server: LocalPostgres, url: String) async throws {
        let configuration = try PostgresConfiguration(url)
        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 4, acquireTimeout: .seconds(2)))
        #expect(try await pool.query(PostgresQuery("SELECT 1 AS one")).single().decode("one", as: Int.self) == 1)

        // A query in flight when the server goes down fails with a clear connection error.
        async let inFlight: PostgresRows = pool.query(PostgresQuery("SELECT pg_sleep(5)"))
        try await Task.sleep(for: .milliseconds(300))
        try await server.stop()
        do {
            _ = try await inFlight
            Issue.record("the query survived a server shutdown")
        } catch let error as PostgresError {
            #expect(error.isConnectionProblem, "\(error)")
            #expect(error.isTransient)
            #expect(error.description.contains("127.0.0.1"))
        }
        // While it is down: a clear, retryable error.
        do {
            try await pool.query(PostgresQuery("SELECT 1 AS one"))
            Issue.record("a query succeeded with the server down")
        } catch let error as PostgresError {
            #expect(error.kind == .connectionFailed)
            #expect(error.isTransient)
        }
        // Back up on the same port: the same pool recovers by itself.
        let restartedURL = try await server.start()
        #expect(restartedURL == url)
        #expect(try await pool.query(PostgresQuery("SELECT 2 AS two")).single().decode("two", as: Int.self) == 2)
        await pool.close()
    }
}
