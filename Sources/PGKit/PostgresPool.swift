import Logging
import ServiceLifecycle

/// A bounded pool of `PostgresConnection`s.
///
/// Connections open lazily up to `maximumConnections`; a caller waits at most `acquireTimeout`
/// for one to become free. A connection that broke (server restart, network) is closed and
/// replaced on the next acquire; after one breaks, the idle ones are checked before reuse.
/// Run the pool in a `ServiceGroup` (or call `close()`) so that connections close at shutdown.
public actor PostgresPool: Service {
    public struct Configuration: Sendable {
        public var connection: PostgresConfiguration
        /// At most this many connections at once. Default 8.
        public var maximumConnections: Int = 8
        /// How long `withConnection` waits for a free connection. Default 10 s.
        public var acquireTimeout: Duration = .seconds(10)

        public init(connection: PostgresConfiguration, maximumConnections: Int = 8, acquireTimeout: Duration = .seconds(10)) {
            self.connection = connection
            self.maximumConnections = max(1, maximumConnections)
            self.acquireTimeout = acquireTimeout
        }
    }

    public nonisolated let configuration: Configuration
    private let logger: Logger
    private var idle: [(connection: PostgresConnection, since: ContinuousClock.Instant)] = []
    /// Open or opening connections, in use or idle.
    private var openCount = 0
    private var waiters: [(id: Int, continuation: CheckedContinuation<PostgresConnection, any Error>)] = []
    private var nextWaiterID = 0
    private var closed = false

    public init(_ configuration: Configuration, logger: Logger = Logger(label: "orderflow.postgres")) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Lends a connection to `body` and takes it back afterwards, also when `body` throws.
    @discardableResult
    public func withConnection<T: Sendable>(
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await acquire()
        do {
            let value = try await body(connection)
            await release(connection)
            return value
        } catch {
            await release(connection)
            throw error
        }
    }

    /// Runs `body` in a transaction on a pooled connection.
    @discardableResult
    public func transaction<T: Sendable>(
        _ body: @Sendable (isolated PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in try await connection.transaction(body) }
    }

    /// Runs one statement on a pooled connection.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await withConnection { connection in try await connection.query(query) }
    }

    /// Connections open now (in use or idle), and callers waiting for one.
    public var statistics: (open: Int, idle: Int, waiting: Int) { (openCount, idle.count, waiters.count) }

    // MARK: Acquire and release

    private func acquire() async throws -> PostgresConnection {
        while true {
            guard !closed else { throw PostgresError(.shutdown, "the connection pool is shut down") }
            if let (connection, since) = idle.popLast() {
                // A connection returned moments ago is as good as it was; one that sat idle
                // may have been closed by the server meanwhile: look (without blocking).
                if !connection.health.isBroken && ContinuousClock.now - since < .milliseconds(100) { return connection }
                if await connection.isUsable() { return connection }
                await discard(connection)
                continue
            }
            if openCount < configuration.maximumConnections {
                openCount += 1
                do {
                    return try await PostgresConnection.connect(configuration.connection, logger: logger)
                } catch {
                    openCount -= 1
                    throw error
                }
            }
            return try await waitForConnection()
        }
    }

    private func waitForConnection() async throws -> PostgresConnection {
        let id = nextWaiterID
        nextWaiterID += 1
        let timeout = configuration.acquireTimeout
        // The timer is a child of this call: it ends when the wait ends.
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [weak self] in
                try await Task.sleep(for: timeout)
                await self?.failWaiter(id, PostgresError(
                    .poolTimeout,
                    "no database connection became free within \(timeout) (all \(self?.configuration.maximumConnections ?? 0) in use)",
                    hint: "the database is overloaded or a caller holds connections too long"))
            }
            defer { group.cancelAll() }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    waiters.append((id, continuation))
                }
            } onCancel: {
                Task { await self.failWaiter(id, CancellationError()) }
            }
        }
    }

    private func failWaiter(_ id: Int, _ error: any Error) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(throwing: error)
    }

    private func release(_ connection: PostgresConnection) async {
        guard !closed, !connection.health.isBroken else {
            await discard(connection)
            return
        }
        if !waiters.isEmpty {
            waiters.removeFirst().continuation.resume(returning: connection)
        } else {
            idle.append((connection, .now))
        }
    }

    /// Closes a broken connection; a waiter, if any, gets a fresh one.
    private func discard(_ connection: PostgresConnection) async {
        await connection.close()
        openCount -= 1
        guard !closed, !waiters.isEmpty else { return }
        openCount += 1
        do {
            let fresh = try await PostgresConnection.connect(configuration.connection, logger: logger)
            if waiters.isEmpty {
                idle.append((fresh, .now))
            } else {
                waiters.removeFirst().continuation.resume(returning: fresh)
            }
        } catch {
            openCount -= 1
            if !waiters.isEmpty { waiters.removeFirst().continuation.resume(throwing: error) }
        }
    }

    /// Closes every idle connection and refuses new work; connections in use close on return.
    public func close() async {
        closed = true
        let connections = idle.map(\.connection)
        idle = []
        for connection in connections {
            await connection.close()
            openCount -= 1
        }
        for waiter in waiters {
            waiter.continuation.resume(throwing: PostgresError(.shutdown, "the connection pool is shut down"))
        }
        waiters = []
    }

    /// Keeps the pool open until graceful shutdown, then closes it.
    public func run() async throws {
        try? await gracefulShutdown()
        await close()
    }
}
