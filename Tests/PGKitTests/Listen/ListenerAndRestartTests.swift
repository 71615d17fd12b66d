import Foundation
import LocalPostgres
import PGKit
import PostgresTesting
import TestTags
import Testing

@Suite("LISTEN/NOTIFY and server restarts")
struct ListenerAndRestartTests {
    @Test(.timeLimit(.minutes(3)))
    func listenerDeliversAndResubscribesAfterReconnect() async throws {
        let (configuration, name) = try Self.namedConfiguration()
        let channel = Self.randomChannel()
        let listener = RunningListener(configuration: configuration, channels: [channel])
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .connected(reconnected: false))

        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 2))
        try await pool.notify(channel: channel, payload: "first")
        #expect(await events.next() == .notification(channel: channel, payload: "first"))

        // Kill the listener's backend: it must reconnect and LISTEN again by itself.
        try await pool.query(PostgresQuery(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
            name + " listener"))
        #expect(await events.next() == .connected(reconnected: true))
        try await pool.notify(channel: channel, payload: "second")
        #expect(await events.next() == .notification(channel: channel, payload: "second"))

        await listener.stop()
        #expect(await events.next() == nil, "events finish when the listener stops")
        await pool.close()
    }

    /// Everything a burst sends arrives, in the order sent: thousands in one transaction
    /// (delivered together at commit), and several senders at once.
    @Test(.timeLimit(.minutes(3)))
    func aBurstOfNotificationsArrivesWhole() async throws {
        let (configuration, _) = try Self.namedConfiguration()
        let channel = Self.randomChannel()
        let listener = RunningListener(configuration: configuration, channels: [channel, Self.randomChannel()])
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .connected(reconnected: false))
        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 8))

        // (Sizes kept modest: the timing suites share the machine in a filtered run.)
        let count = 2_000
        try await pool.query(PostgresQuery(
            "SELECT count(pg_notify($1, g::text)) AS sent FROM generate_series(1, $2::int) AS g", channel, count))
        var received: [PostgresListener.Event] = []
        while received.count < count, let event = await events.next() { received.append(event) }
        #expect(received == (1...count).map { .notification(channel: channel, payload: String($0)) })

        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask {
                    for index in 0..<100 { try await pool.notify(channel: channel, payload: "\(sender)-\(index)") }
                }
            }
            try await group.waitForAll()
        }
        var payloads: [String] = []
        while payloads.count < 400, case .notification(_, let payload)? = await events.next() {
            payloads.append(payload)
        }
        #expect(Set(payloads) == Set((0..<4).flatMap { sender in (0..<100).map { "\(sender)-\($0)" } }))
        #expect(payloads.count == 400)
        let inSendersOrder = (0..<4).allSatisfy { sender in
            payloads.filter { $0.hasPrefix("\(sender)-") } == (0..<100).map { "\(sender)-\($0)" }
        }
        #expect(inSendersOrder, "one sender's notifications keep their order")

        await listener.stop()
        await pool.close()
    }

    @Test(.timeLimit(.minutes(2)))
    func poolAndListenerRecoverFromServerRestart() async throws {
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
        let channel = Self.randomChannel()
        let listener = RunningListener(configuration: configuration, channels: [channel])
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .connected(reconnected: false))

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
        // And the listener LISTENs again on the new server by itself.
        #expect(await events.next() == .connected(reconnected: true))
        try await pool.notify(channel: channel, payload: "after the restart")
        #expect(await events.next() == .notification(channel: channel, payload: "after the restart"))
        await listener.stop()
        await pool.close()
    }

    // MARK: Helpers

    /// The test server with an application name of this test's own, so that its listener's
    /// backend can be found (and killed) without touching other tests' listeners.
    static func namedConfiguration() throws -> (PostgresConfiguration, String) {
        var configuration = try TestDatabase.serverConfiguration()
        configuration.applicationName = "orderflow-test-\(UInt32.random(in: 0...UInt32.max))"
        return (configuration, configuration.applicationName)
    }

    static func randomChannel() -> String { "orderflow_test_\(UInt32.random(in: 0...UInt32.max))" }

    /// Threads of this process, less the short-lived ones that open connections.
    static func lastingThreadCount() -> Int {
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return threads.filter { thread in
            let name = try? String(contentsOfFile: "/proc/self/task/\(thread)/comm", encoding: .utf8)
            return name?.hasPrefix("pg connect") != true
        }.count
    }

    /// A local TCP port that nothing listens on (bound, then released).
    static func closedPort() throws -> UInt16 {
        let server = try SilentServer()
        return server.port
    }
}

/// Measures time and counts threads: in a full run these run alone (`scripts/test` runs the
/// "Timing" suites after the rest).
@Suite("LISTEN: prompt stop, no thread of its own", .tags(.timing))
struct TimingListenerTests {
    /// Stop ends whatever the listener waits for at once — notifications, the backoff between
    /// connection attempts, a server that does not answer — instead of noticing a flag on its
    /// next turn.
    @Test(.timeLimit(.minutes(3)))
    func stopIsPrompt() async throws {
        let (configuration, name) = try ListenerAndRestartTests.namedConfiguration()
        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 1))
        let listener = RunningListener(configuration: configuration, channels: [ListenerAndRestartTests.randomChannel()])
        var events = listener.events.makeAsyncIterator()
        #expect(await events.next() == .connected(reconnected: false))
        try await Task.sleep(for: .milliseconds(100))  // asleep on its socket
        let whileListening = await ContinuousClock().measure { await listener.stop() }
        #expect(whileListening < .milliseconds(200), "stop while listening took \(whileListening)")
        // Its connection is closed, not left for the server to notice (the backend exits
        // moments after the goodbye).
        var remaining = 1
        for _ in 0..<100 where remaining > 0 {
            remaining = try await pool.query(PostgresQuery(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1", name + " listener"))
                .single().decode("n", as: Int.self)
            if remaining > 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(remaining == 0)
        await pool.close()

        // Nothing listens on the port: connecting fails at once, then it backs off.
        let refusing = RunningListener(
            configuration: try PostgresConfiguration("postgresql://orderflow@127.0.0.1:\(try ListenerAndRestartTests.closedPort())/orderflow"),
            channels: ["nobody"])
        // Attempts at about 0, 0.1, 0.3, 0.7 and 1.5 s: at 1.6 s it sleeps until about 2.3 s.
        try await Task.sleep(for: .milliseconds(1600))
        let whileBackingOff = await ContinuousClock().measure { await refusing.stop() }
        #expect(whileBackingOff < .milliseconds(200), "stop while backing off took \(whileBackingOff)")

        // A server that accepts the TCP connection and never answers: libpq's connect blocks
        // (on its own short-lived thread) until connect_timeout; stop does not wait for it.
        let silent = try SilentServer()
        var silentConfiguration = try PostgresConfiguration("postgresql://orderflow@127.0.0.1:\(silent.port)/orderflow")
        silentConfiguration.connectTimeoutSeconds = 10
        let hanging = RunningListener(configuration: silentConfiguration, channels: ["nobody"])
        try await Task.sleep(for: .milliseconds(300))
        let whileConnecting = await ContinuousClock().measure { await hanging.stop() }
        #expect(whileConnecting < .milliseconds(200), "stop while connecting took \(whileConnecting)")
    }

    /// Listeners wait on the one socket thread: eight of them add no thread (the old design
    /// had one each).
    @Test(.timeLimit(.minutes(3)))
    func listenersHaveNoThreadOfTheirOwn() async throws {
        let (configuration, _) = try ListenerAndRestartTests.namedConfiguration()
        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 1))
        try await pool.query(PostgresQuery("SELECT 1"))  // the socket thread exists from here on
        let before = ListenerAndRestartTests.lastingThreadCount()
        let channels = (0..<8).map { _ in ListenerAndRestartTests.randomChannel() }
        let listeners = channels.map { RunningListener(configuration: configuration, channels: [$0]) }
        var iterators = listeners.map { $0.events.makeAsyncIterator() }
        for index in iterators.indices {
            #expect(await iterators[index].next() == .connected(reconnected: false))
            try await pool.notify(channel: channels[index], payload: "hello \(index)")
            #expect(await iterators[index].next() == .notification(channel: channels[index], payload: "hello \(index)"))
        }
        let during = ListenerAndRestartTests.lastingThreadCount()
        // A margin for threads that tests running in parallel may start meanwhile.
        #expect(during - before < 4, "threads: \(before) before, \(during) with 8 listeners")
        for listener in listeners { await listener.stop() }
        await pool.close()
    }

}

/// A listener running in a task of its own; `stop()` cancels it and returns when `run()` has.
private struct RunningListener {
    let events: AsyncStream<PostgresListener.Event>
    private let task: Task<Void, any Error>

    init(configuration: PostgresConfiguration, channels: [String]) {
        let listener = PostgresListener(configuration: configuration, channels: channels)
        events = listener.events
        task = Task { try await listener.run() }
    }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}

/// A TCP socket on 127.0.0.1 that accepts connections (the kernel completes the handshake)
/// and never answers; closed when released.
final class SilentServer {
    let socket: Int32
    let port: UInt16

    init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(socket, address, length) == 0 && listen(socket, 16) == 0 && getsockname(socket, address, &length) == 0
            }
        }
        guard socket >= 0, bound else {
            let reason = String(cString: strerror(errno))
            close(socket)
            throw PostgresError(.invalidConfiguration, "cannot open a local test socket: \(reason)")
        }
        self.socket = socket
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(socket) }
}
