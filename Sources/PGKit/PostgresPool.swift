import Logging
import ServiceLifecycle
import Synchronization

/// A bounded pool of `PostgresConnection`s.
///
/// Connections open lazily up to `maximumConnections`; a caller waits at most `acquireTimeout`
/// for one to become free, and as long for a new one to open (to whichever server accepts it,
/// when the configuration names several: after a failover, the promoted one). A connection that
/// broke (server restart, network) is closed and replaced on the next acquire; one that sat
/// idle is checked before reuse.
/// Run the pool in a `ServiceGroup` (or call `close()`) so that connections close at shutdown.
///
/// The pool's books are a lock, not an actor: taking an idle connection and giving it back are
/// a few instructions under a `Mutex`, with no hop to another executor. Only a caller that has
/// to wait for a connection suspends.
public final class PostgresPool: Service, Sendable {
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

    public let configuration: Configuration
    private let logger: Logger
    private let state = Mutex(State())

    /// A connection returned this recently is trusted without looking at its socket.
    private static let trustedIdleTime: Duration = .milliseconds(100)

    private struct State {
        var idle: [(connection: PostgresConnection, since: ContinuousClock.Instant)] = []
        /// Open or opening connections, in use or idle.
        var openCount = 0
        /// First come, first served. A waiter is resumed with a connection, or with nil to
        /// try again (a slot became free, or a connection to check appeared).
        var waiters: [(id: Int, continuation: CheckedContinuation<PostgresConnection?, any Error>)] = []
        var nextWaiterID = 0
        var closed = false
    }

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
    public var statistics: (open: Int, idle: Int, waiting: Int) {
        get async { state.withLock { ($0.openCount, $0.idle.count, $0.waiters.count) } }
    }

    // MARK: Acquire and release

    private enum AcquireStep {
        case ready(PostgresConnection)
        /// Idle for a while, or possibly broken: look before lending it.
        case check(PostgresConnection)
        /// A slot is reserved (counted in `openCount`): open a connection into it.
        case open
        case wait
    }

    private func acquire() async throws -> PostgresConnection {
        var deadline: ContinuousClock.Instant?
        while true {
            switch try nextAcquireStep() {
            case .ready(let connection):
                return connection
            case .check(let connection):
                if await connection.isUsable() { return connection }
                await discard(connection)
            case .open:
                do {
                    return try await PostgresConnection.connect(configuration.connection, logger: logger, within: configuration.acquireTimeout)
                } catch {
                    freeSlot()
                    throw error
                }
            case .wait:
                // One deadline for the whole call, however often the wait is retried.
                let until = deadline ?? ContinuousClock.now + configuration.acquireTimeout
                deadline = until
                if let connection = try await waitForConnection(until: until) { return connection }
            }
        }
    }

    private func nextAcquireStep() throws(PostgresError) -> AcquireStep {
        let maximum = configuration.maximumConnections
        return try state.withLock { state throws(PostgresError) -> AcquireStep in
            guard !state.closed else { throw PostgresError(.shutdown, "the connection pool is shut down") }
            if let (connection, since) = state.idle.popLast() {
                // A connection returned moments ago is as good as it was; one that sat idle
                // may have been closed by the server meanwhile: look (without blocking).
                if !connection.health.isBroken && ContinuousClock.now - since < Self.trustedIdleTime { return .ready(connection) }
                return .check(connection)
            }
            if state.openCount < maximum {
                state.openCount += 1
                return .open
            }
            return .wait
        }
    }

    /// Waits until a connection is handed over (or nil: try again) or `deadline` passes.
    private func waitForConnection(until deadline: ContinuousClock.Instant) async throws -> PostgresConnection? {
        let id = state.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        let maximum = configuration.maximumConnections
        let timeout = configuration.acquireTimeout
        let timedOut = PostgresError(
            .poolTimeout,
            "no database connection became free within \(timeout) (all \(maximum) in use)",
            hint: "the database is overloaded or a caller holds connections too long")
        // The timer is a child of this call: it ends when the wait ends.
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [weak self] in
                try await Task.sleep(until: deadline)
                self?.failWaiter(id, timedOut)
            }
            defer { group.cancelAll() }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let outcome = state.withLock { state -> Result<PostgresConnection?, any Error>? in
                        // Decided under the same lock as the registration, so that nothing
                        // released or cancelled in between is missed.
                        if state.closed { return .failure(PostgresError(.shutdown, "the connection pool is shut down")) }
                        if Task.isCancelled { return .failure(CancellationError()) }
                        if !state.idle.isEmpty || state.openCount < maximum { return .success(nil) }
                        // On a busy machine the timer may have fired before this waiter was
                        // registered (it would then find nobody to fail): the clock decides.
                        if ContinuousClock.now >= deadline { return .failure(timedOut) }
                        state.waiters.append((id, continuation))
                        return nil
                    }
                    if let outcome { continuation.resume(with: outcome) }
                }
            } onCancel: {
                failWaiter(id, CancellationError())
            }
        }
    }

    private func failWaiter(_ id: Int, _ error: any Error) {
        let waiter = state.withLock { state in
            state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0).continuation }
        }
        waiter?.resume(throwing: error)
    }

    private func release(_ connection: PostgresConnection) async {
        let waiter = state.withLock { state -> CheckedContinuation<PostgresConnection?, any Error>?? in
            guard !state.closed, !connection.health.isBroken else { return .none }
            if !state.waiters.isEmpty { return .some(state.waiters.removeFirst().continuation) }
            state.idle.append((connection, .now))
            return .some(nil)
        }
        switch waiter {
        case .none: await discard(connection)
        case .some(let waiter?): waiter.resume(returning: connection)
        case .some(nil): break
        }
    }

    /// Closes a broken connection; its slot goes to the first waiter, if any, which opens a
    /// fresh connection in it.
    private func discard(_ connection: PostgresConnection) async {
        await connection.close()
        freeSlot()
    }

    private func freeSlot() {
        let waiter = state.withLock { state in
            state.openCount -= 1
            return state.closed || state.waiters.isEmpty ? nil : state.waiters.removeFirst().continuation
        }
        waiter?.resume(returning: nil)
    }

    /// Closes every idle connection and refuses new work; connections in use close on return.
    public func close() async {
        let (connections, waiters) = state.withLock { state in
            state.closed = true
            let connections = state.idle.map(\.connection)
            state.openCount -= connections.count
            state.idle = []
            defer { state.waiters = [] }
            return (connections, state.waiters.map(\.continuation))
        }
        for connection in connections { await connection.close() }
        for waiter in waiters { waiter.resume(throwing: PostgresError(.shutdown, "the connection pool is shut down")) }
    }

    /// Keeps the pool open until graceful shutdown, then closes it.
    public func run() async throws {
        try? await gracefulShutdown()
        await close()
    }
}
