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
///
/// Admission control (`LoadShedding`): when every connection is in use and the callers already
/// waiting would take longer to serve than most of the time a new caller may wait, the new
/// caller is refused at once with `PostgresError.Kind.poolBusy` and a `retryAfter`, and waiting
/// callers that can no longer be served in time are refused as soon as that is clear.
/// Statements committed together (`queryCommittingTogether`) are grouped by `CommitGrouping`.
///
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
        /// How long `withConnection` waits for a free connection (and, 80 % of it, how long a
        /// statement may expect to wait for its commit group, see `queryCommittingTogether`).
        /// Default 10 s.
        public var acquireTimeout: Duration = .seconds(10)
        /// At most this many groups of `queryCommittingTogether` statements in flight at once
        /// (each on one connection, run by one server process). Statements that come while a
        /// group is in flight go out together in a later group: one round trip and one commit
        /// for all of them. A group beside others in flight starts only once it holds as many
        /// statements as the last group started (at least two); the last group in flight
        /// always takes whoever waits. Default 2; 1 runs one group at a time; 0 or
        /// less turns grouping off (every statement then runs alone, as `query` runs it).
        public var commitGroups: Int = 2
        /// The queueing delay `queryCommittingTogether`'s statements should see under overload,
        /// or nil for none. A burst queues and is served; once the statements taken into groups
        /// have waited longer than this for 100 ms (a standing queue, as CoDel reckons it), a
        /// statement beyond those that fill the groups in flight is admitted only if the groups
        /// are expected to take it within the target, the rest are refused at once with
        /// `poolBusy` and a `retryAfter`, and the back of the queue beyond it is refused without
        /// being run. The groups keep committing at their pace and the statements they admit
        /// commit soon. `acquireTimeout` stays the longest any statement waits. Default nil:
        /// statements are admitted up to 80 % of `acquireTimeout`.
        public var queueTarget: Duration?

        public init(connection: PostgresConfiguration, maximumConnections: Int = 8, acquireTimeout: Duration = .seconds(10)) {
            self.connection = connection
            self.maximumConnections = max(1, maximumConnections)
            self.acquireTimeout = acquireTimeout
        }
    }

    public let configuration: Configuration
    let logger: Logger
    private let state = Mutex(State())
    /// Statements waiting for `queryCommittingTogether`'s next group, and groups in flight.
    let grouping: CommitGrouping

    /// A connection returned this recently is trusted without looking at its socket.
    private static let trustedIdleTime: Duration = .milliseconds(100)

    private struct State {
        var idle: [(connection: PostgresConnection, since: ContinuousClock.Instant)] = []
        /// Open or opening connections, in use or idle.
        var openCount = 0
        /// First come, first served. A waiter is resumed with a connection, or with nil to
        /// try again (a slot became free, or a connection to check appeared).
        var waiters = WaiterQueue()
        var nextWaiterID = 0
        var closed = false
        /// `expireWaiters` runs (it stops when nobody waits).
        var expiryTimerRuns = false
        /// The pool's recent pace, and the admission decisions taken on it.
        var shedding = LoadShedding()
    }

    public init(_ configuration: Configuration, logger: Logger = Logger(label: "orderflow.postgres")) {
        self.configuration = configuration
        self.logger = logger
        self.grouping = CommitGrouping(
            limit: configuration.commitGroups, acquireTimeout: configuration.acquireTimeout, queueTarget: configuration.queueTarget)
    }


    /// Lends a connection to `body` and takes it back afterwards, also when `body` throws.
    @discardableResult
    public func withConnection<T: Sendable>(
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await acquire()
        let acquired = ContinuousClock.now
        do {
            let value = try await body(connection)
            await release(connection, heldSince: acquired)
            return value
        } catch {
            await release(connection, heldSince: acquired)
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

    /// How long, by recent experience, the pool takes to serve one more waiting caller — the
    /// pace its admission control and shedding reckon with (`poolBusy`); nil before any
    /// connection came back. Under overload its inverse is the pool's throughput.
    public var servingInterval: Duration? {
        state.withLock { $0.shedding.servingInterval(connections: configuration.maximumConnections) }.map { .seconds($0) }
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

    /// A connection from the pool; `first` queues the caller ahead of those waiting, and never
    /// refuses it for the queue's length (a commit group: its one connection serves many callers).
    func acquire(first: Bool = false) async throws -> PostgresConnection {
        // One deadline for the whole call, however often the wait is retried.
        var deadline: ContinuousClock.Instant?
        while true {
            switch try nextAcquireStep(deadline: &deadline, first: first) {
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
                if let connection = try await waitForConnection(until: deadline!, first: first) { return connection }
            }
        }
    }

    /// The next step of an acquire; sets `deadline` when the caller first has to wait, and
    /// refuses (`poolBusy`) a caller that would wait longer than it may.
    private func nextAcquireStep(deadline: inout ContinuousClock.Instant?, first: Bool) throws(PostgresError) -> AcquireStep {
        let maximum = configuration.maximumConnections
        let timeout = configuration.acquireTimeout
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
            let now = ContinuousClock.now
            let until = deadline ?? now + timeout
            deadline = until
            if !first, let refusal = state.shedding.admissionRefusal(
                waiting: state.waiters.count, connections: maximum, remaining: (until - now).seconds, timeout: timeout
            ) {
                throw refusal
            }
            return .wait
        }
    }

    /// Waits until a connection is handed over (or nil: try again) or `deadline` passes.
    ///
    /// A waiter costs a continuation and a place in the queue, nothing more: one timer for the
    /// whole pool (`expireWaiters`) fails those whose deadline passed. (A timer task per waiter
    /// would put thousands of sleeping tasks and their cancellations on the concurrency pool
    /// under overload, slowing the very callers that hold connections.)
    private func waitForConnection(until deadline: ContinuousClock.Instant, first: Bool) async throws -> PostgresConnection? {
        let id = state.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        let maximum = configuration.maximumConnections
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let (outcome, startsTimer) = state.withLock { state -> (Result<PostgresConnection?, any Error>?, Bool) in
                    // Decided under the same lock as the registration, so that nothing
                    // released or cancelled in between is missed.
                    if state.closed { return (.failure(PostgresError(.shutdown, "the connection pool is shut down")), false) }
                    if Task.isCancelled { return (.failure(CancellationError()), false) }
                    if !state.idle.isEmpty || state.openCount < maximum { return (.success(nil), false) }
                    if ContinuousClock.now >= deadline { return (.failure(timeoutError(state)), false) }
                    if first {
                        state.waiters.prepend(id: id, deadline: deadline, continuation)
                    } else {
                        state.waiters.append(id: id, deadline: deadline, continuation)
                    }
                    defer { state.expiryTimerRuns = true }
                    return (nil, !state.expiryTimerRuns)
                }
                if let outcome { continuation.resume(with: outcome) }
                if startsTimer {
                    // The pool's one timer, running while anyone waits (it ends when the queue
                    // is empty); not tied to this caller, who may be served long before.
                    Task { [weak self] in await self?.expireWaiters() }
                }
            }
        } onCancel: {
            failWaiter(id, CancellationError())
        }
    }

    /// Fails the waiters whose deadline passed, sleeping until the first one's deadline in
    /// between, and returns when nobody waits. Deadlines come in queue order (one timeout for
    /// every caller), so only the front is looked at; wake-ups are at least 20 ms apart, so a
    /// timeout may be told up to 20 ms late. It also sheds the hopeless
    /// (`LoadShedding.shedHopeless`), every `LoadShedding.sheddingInterval` at most.
    private func expireWaiters() async {
        let maximum = configuration.maximumConnections
        // The pace read at the previous look (see `LoadShedding.shedHopeless`).
        var previousInterval: Double?
        while true {
            let now = ContinuousClock.now
            let (expired, error, shed, busy, next) = state.withLock { state in
                let expired = state.waiters.removeExpired(at: now)
                let (shed, busy) = state.shedding.shedHopeless(
                    from: &state.waiters, at: now, connections: maximum, previousInterval: &previousInterval)
                let next = state.waiters.firstDeadline
                if next == nil { state.expiryTimerRuns = false }
                return (expired, expired.isEmpty ? nil : timeoutError(state), shed, busy, next)
            }
            if let error {
                for waiter in expired { waiter.resume(throwing: error) }
            }
            if let busy {
                for waiter in shed { waiter.resume(throwing: busy) }
            }
            guard let next else { return }
            // Look again at the first deadline, and meanwhile every so often for the hopeless.
            try? await Task.sleep(until: max(min(next, now + LoadShedding.sheddingInterval), now + .milliseconds(20)))
        }
    }

    /// A waiter's deadline passed.
    private func timeoutError(_ state: State) -> PostgresError {
        let maximum = configuration.maximumConnections
        var error = PostgresError(
            .poolTimeout,
            "busy: \(PoolWording.allInUse(maximum)), none became free within \(PoolWording.seconds(configuration.acquireTimeout.seconds)); retry shortly, or raise the pool size",
            hint: "if the database itself is idle, a caller holds connections too long")
        error.retryAfter = state.shedding.queueWait(waiting: state.waiters.count, connections: maximum).map { .milliseconds(Int64(($0 * 1000).rounded(.up))) }
        return error
    }

    private func failWaiter(_ id: Int, _ error: any Error) {
        let waiter = state.withLock { state in
            state.waiters.remove(id: id)
        }
        waiter?.resume(throwing: error)
    }

    func release(_ connection: PostgresConnection, heldSince acquired: ContinuousClock.Instant) async {
        let waiter = state.withLock { state -> CheckedContinuation<PostgresConnection?, any Error>?? in
            // Read under the lock, so that releases are timed in the order they are counted.
            state.shedding.connectionReturned(at: .now, heldSince: acquired)
            guard !state.closed, !connection.health.isBroken else { return .none }
            if let first = state.waiters.removeFirst() {
                state.shedding.returnedConnectionServedWaiter()
                return .some(first)
            }
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
            return state.closed ? nil : state.waiters.removeFirst()
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
            return (connections, state.waiters.removeAll())
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
