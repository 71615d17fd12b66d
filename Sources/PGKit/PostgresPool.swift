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
/// Admission control: the pool keeps track of its pace — how often a connection came back while
/// all were in use (`ReleasePace`), or until it has seen enough of that, how long callers hold
/// a connection. When every connection is in use and the callers already waiting would take
/// longer to serve than most of the time a new caller may wait (80 % of `acquireTimeout`: the
/// pace wavers under overload, a caller admitted on the edge would time out), the new caller is
/// refused at once with `PostgresError.Kind.poolBusy` instead of queueing for a timeout it
/// cannot beat. Under overload the connections keep working at their pace on the callers that
/// can be served, and the rest learn it in microseconds, with a `retryAfter`.
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

        public init(connection: PostgresConfiguration, maximumConnections: Int = 8, acquireTimeout: Duration = .seconds(10)) {
            self.connection = connection
            self.maximumConnections = max(1, maximumConnections)
            self.acquireTimeout = acquireTimeout
        }
    }

    public let configuration: Configuration
    private let logger: Logger
    private let state = Mutex(State())
    /// Statements waiting for `queryCommittingTogether`'s next group, and groups in flight.
    private let commitGroups = Mutex(CommitGroups())

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
        /// Recent time a caller holds a connection, in seconds (moving average); nil until the
        /// first connection comes back.
        var holdTime: Double?
        /// The pace connections came back while all were in use: the pool's pace when it is
        /// the bottleneck.
        var pace = ReleasePace()
        var lastRelease: ContinuousClock.Instant?
        /// Whether the last connection to come back went straight to a waiting caller (so
        /// every connection stayed in use until the next one came back).
        var lastReleaseServedWaiter = false

        /// How long the callers waiting now (and one more) should take to serve, in seconds.
        func queueWait(connections: Int) -> Double? {
            servingInterval(connections: connections).map { Double(waiters.count + 1) * $0 }
        }

        /// How long, by recent experience, the pool takes to serve one more waiting caller: the
        /// pace connections came back while all were in use (`ReleasePace`), or, until enough
        /// of that was seen, the mean hold time over the connections.
        func servingInterval(connections: Int) -> Double? {
            pace.mean ?? holdTime.map { $0 / Double(connections) }
        }
    }

    /// The share of its remaining time a caller is admitted to wait for, by the estimate. The
    /// estimate follows the pace of the last few dozen holds; under overload the pace wavers, and
    /// admitting callers up to their whole deadline let some of them wait 10 s and time out
    /// after all (`orderflow-bench e2e --overload`: p99 to the answer 10.0 s). The margin turns
    /// those into busy answers given at once.
    static let admissionMargin = 0.8

    /// Weight of one hold in the moving average: about the last 30 holds count.
    private static let holdTimeWeight = 1.0 / 16

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

    /// Runs one statement committed together with other callers' statements when several come
    /// at once: group commit.
    ///
    /// With no group in flight the statement runs at once, alone. While one is in flight, a
    /// statement waits for a later group. A new group starts beside those in flight (up to
    /// `Configuration.commitGroups`) when the statements waiting, with the one arriving, are as
    /// many as the last group started held and as its share of the callers lately busy (in
    /// flight or waiting; with 2 groups, half of them), at least two (`GroupSizing`): the
    /// arriving caller runs it. When a group ends, the statements waiting go out as the next
    /// group if it was the last group in flight (whoever waits, however few) or if they reach
    /// that size; the first of them runs it. So a statement waits at most for the groups in
    /// flight when it came (and, with more than 64 waiting, for its turn among them). The caller
    /// who runs a group takes a connection from the pool (waiting its turn there like any
    /// caller) and runs the whole group on it, as one pipeline and one transaction
    /// (`PostgresConnection`'s `queryGroup`): one round trip, one commit and one wake-up of the
    /// server for all of them, instead of one each. (A second group started as soon as one was
    /// in flight held two or three statements with 8 callers, each group run serially by its own
    /// server process, and did no better than one group at a time; one at a time left a core
    /// idle. BENCHMARKS.md, 2026-11-27.)
    ///
    /// A statement waiting for its group holds no connection, so groups are not bounded by the
    /// pool's size: 64 callers on 8 connections gather into groups of dozens, where callers
    /// each holding a connection through their group's commit were capped at 8 (`orderflow-bench
    /// http`, BENCHMARKS.md, 2026-11-27, session 20). Nothing else bounds the waiting, so it has
    /// its own admission control: a statement that would wait longer than 80 % of
    /// `acquireTimeout` for the groups ahead of it, at the pace groups ran lately on their
    /// connections, is refused at once (`poolBusy`, with a `retryAfter`), as the pool refuses a
    /// caller for a connection. When the caller running a group cannot get a connection (busy,
    /// timed out, the server gone), every statement of the group gets that error; none of them
    /// ran.
    ///
    /// Each statement commits exactly once, or fails on its own: when a group fails (one of its
    /// statements is refused, a deadlock with another group), nothing of it was committed, and
    /// every statement of it is run again alone, in the group's order, on the same connection,
    /// and gets its own answer. Only when the connection is lost does every statement of its
    /// group get that error (as a statement alone would: its outcome is unknown).
    ///
    /// For statements that need not see each other's effects beyond what a serial run in one
    /// transaction gives (each sees the earlier ones' writes), and outside a transaction.
    ///
    /// `batch`, when given, is the same statement written once for many: each of its
    /// parameters `$n` is an array (`$n::text[]`, `$n::jsonb[]`, …) holding parameter `$n` of
    /// every statement of the group, in the group's order, and each row it returns names the
    /// statement it belongs to in a column `batch_ordinal` (1 for the first; `unnest(…) WITH
    /// ORDINALITY` gives it). A group whose statements all have the same batch form runs as
    /// that one statement: one parse, one plan and one execution on the server instead of one
    /// each, which is most of a small statement's cost there. It must give every statement the
    /// rows that statement would get in some serial order of the group; when it fails, each
    /// statement runs alone, as above.
    public func queryCommittingTogether(
        _ query: PostgresQuery, batch: StaticString? = nil
    ) async throws(PostgresError) -> PostgresRows {
        guard configuration.commitGroups > 0 else {
            // Grouping off: the statement alone, on a connection of its own.
            return try await runTakingConnection([GroupMember(query: query, batch: nil, continuation: nil)]).results[0].get()
        }
        return try await committingTogether(query, batch: batch)
    }

    /// Takes a connection, runs `members` on it as a group (see `runGroup`) and gives it back:
    /// each member's answer, the batch outcome, and how long the group held the connection
    /// (zero when none could be taken: then every member gets that error, and none ran).
    private func runTakingConnection(
        _ members: [GroupMember]
    ) async -> (results: [Result<PostgresRows, PostgresError>], batch: BatchOutcome?, took: Duration) {
        let connection: PostgresConnection
        do {
            connection = try await acquire()
        } catch {
            let refused = error as? PostgresError
                ?? PostgresError(.connectionFailed, "could not take a connection from the pool: \(error)")
            return (Array(repeating: .failure(refused), count: members.count), nil, .zero)
        }
        let acquired = ContinuousClock.now
        let (results, batch) = await runGroup(members, on: connection)
        let took = ContinuousClock.now - acquired
        await release(connection, heldSince: acquired)
        return (results, batch, took)
    }

    /// `queryCommittingTogether` with groups on.
    private func committingTogether(_ query: PostgresQuery, batch: StaticString?) async throws(PostgresError) -> PostgresRows {
        let limit = configuration.commitGroups
        let turn: GroupTurn = await withUnsafeContinuation { continuation in
            let arrival = commitGroups.withLock { groups -> GroupArrival in
                let own = GroupMember(query: query, batch: batch, continuation: nil)
                groups.sizing.arrival(waiting: groups.waiting.count)
                if groups.inFlight == 0 {
                    groups.start(size: 1)
                    return .lead([own])
                }
                // Beside a group in flight, a new one starts only once it is as large as the last
                // one started and holds its share of the busy callers: the statements that wait
                // meanwhile would otherwise go out in twos and threes, each group run serially by
                // its own server process and committed by a WAL flush of its own.
                if groups.inFlight < limit, groups.waiting.count + 1 >= groups.besideThreshold(limit: limit) {
                    let count = min(groups.waiting.count, Self.largestGroup - 1)
                    defer { groups.waiting.removeFirst(count) }
                    groups.start(size: count + 1)
                    // The arriving caller runs it, so it comes first (any serial order of
                    // concurrent statements will do; the first member is the one that runs).
                    return .lead([own] + groups.waiting.prefix(count))
                }
                // Holding no connection, nothing else bounds the queue: refuse a statement that
                // could not be committed in time at the pace groups go now.
                if let wait = groups.expectedWait(position: groups.waiting.count + 1),
                   wait > configuration.acquireTimeout.seconds * Self.admissionMargin {
                    return .refused(groupBusyError(waiting: groups.waiting.count, wait: wait))
                }
                groups.waiting.append(GroupMember(query: query, batch: batch, continuation: continuation))
                return .wait
            }
            switch arrival {
            case .lead(let members): continuation.resume(returning: .lead(members))
            case .refused(let error): continuation.resume(returning: .done(.failure(error)))
            case .wait: break
            }
        }
        switch turn {
        case .done(let result):
            return try result.get()
        case .lead(let members):
            // The caller running the group takes a connection for it, and only for it; the time
            // the group held it is the pace admission control reckons with.
            let (results, batch, took) = await runTakingConnection(members)
            // The next group, if statements came meanwhile and this was the last group in flight
            // or they are as many as a group beside others must be: its first caller runs it.
            let next = commitGroups.withLock { groups -> [GroupMember]? in
                groups.record(size: members.count, took: took, batch: batch)
                groups.end(size: members.count)
                // The last group in flight always takes whoever waits; beside others, only a
                // group as large as a new one would have to be.
                guard !groups.waiting.isEmpty, groups.inFlight == 0 || groups.waiting.count >= groups.besideThreshold(limit: limit) else {
                    return nil
                }
                let count = min(groups.waiting.count, Self.largestGroup)
                defer { groups.waiting.removeFirst(count) }
                groups.start(size: count)
                return Array(groups.waiting.prefix(count))
            }
            if let next { next[0].continuation?.resume(returning: .lead(next)) }
            for (member, result) in zip(members.dropFirst(), results.dropFirst()) {
                member.continuation?.resume(returning: .done(result))
            }
            return try results[0].get()
        }
    }

    /// At most this many statements in one group: a group runs serially on one server
    /// process, and its last statement's caller waits for all of them.
    fileprivate static let largestGroup = 64

    /// Runs a group — as its batch form when every statement has the same one, else as a
    /// pipeline — and on failure each statement alone (see `queryCommittingTogether`).
    private func runGroup(
        _ members: [GroupMember], on connection: PostgresConnection
    ) async -> (results: [Result<PostgresRows, PostgresError>], batch: BatchOutcome?) {
        let queries = members.map(\.query)
        var batchOutcome: BatchOutcome?
        if queries.count > 1 {
            do throws(PostgresError) {
                if let batch = Self.commonBatch(of: members) {
                    let rows: PostgresRows
                    do throws(PostgresError) {
                        rows = try await connection.queryBatch(try Self.batchQuery(batch, queries))
                    } catch {
                        batchOutcome = .failed
                        // A statement refused for its data (a key taken) is the fallback's
                        // business; any other failure of a batch statement is worth a look: its
                        // groups then all run one statement at a time.
                        if !error.isUniqueViolation {
                            logger.warning("postgres batch statement failed; its statements run one by one", metadata: [
                                "postgres.group.size": "\(queries.count)", "postgres.error": "\(error.message)",
                            ])
                        }
                        throw error
                    }
                    // Committed: from here on nothing runs again, whatever the rows say (a batch
                    // statement without `batch_ordinal` is a mistake in the source, which its
                    // tests catch: GroupCommitTests, GroupCommitEngineTests).
                    do throws(PostgresError) {
                        return (try rows.splitByBatchOrdinal(count: queries.count).map { .success($0) }, .ran)
                    } catch {
                        return (Array(repeating: .failure(error), count: queries.count), .ran)
                    }
                }
                return (try await connection.queryGroup(queries).map { .success($0) }, nil)
            } catch {
                // Nothing of the group was committed: each statement alone gives its own answer.
                logger.debug("postgres group failed; running its statements one by one", metadata: [
                    "postgres.group.size": "\(queries.count)", "postgres.error": "\(error.message)",
                ])
            }
        }
        var results: [Result<PostgresRows, PostgresError>] = []
        results.reserveCapacity(queries.count)
        for query in queries {
            do throws(PostgresError) {
                results.append(.success(try await connection.query(query)))
            } catch {
                results.append(.failure(error))
            }
        }
        return (results, batchOutcome)
    }

    /// The batch form every member of the group has, if they all have the same one.
    private static func commonBatch(of members: [GroupMember]) -> StaticString? {
        guard let batch = members[0].batch, batch.hasPointerRepresentation else { return nil }
        let address = batch.utf8Start
        for member in members.dropFirst() {
            guard let other = member.batch, other.hasPointerRepresentation, other.utf8Start == address else { return nil }
        }
        return batch
    }

    /// The batch statement for `queries`: its parameter `$n` is the array of their `$n`s.
    private static func batchQuery(_ batch: StaticString, _ queries: [PostgresQuery]) throws(PostgresError) -> PostgresQuery {
        let width = queries[0].bindings.count
        var columns = Array(repeating: PostgresArrayLiteral.Builder(), count: width)
        for query in queries {
            guard query.bindings.count == width else {
                throw PostgresError(.invalidParameter, "the statements of a batch must have the same parameters")
            }
            for (index, text) in try PostgresConnection.parameters(of: query).enumerated() {
                columns[index].append(text)
            }
        }
        return PostgresQuery(batch, bindings: columns.map { $0.finished() })
    }

    /// How `queryCommittingTogether`'s callers were grouped so far: groups run, the statements
    /// in them, the time they were in flight (summed over groups), and how many groups ran as
    /// their batch form or tried to and failed (then ran one statement at a time); and now: the
    /// groups in flight, the statements waiting for a later group, and how many a group beside
    /// others must hold.
    public var groupStatistics: GroupStatistics {
        commitGroups.withLock {
            GroupStatistics(groups: $0.groupsRun, statements: $0.statementsRun, inFlight: $0.timeInFlight,
                            batches: $0.batchesRun, failedBatches: $0.batchesFailed,
                            groupsInFlight: $0.inFlight, waiting: $0.waiting.count,
                            besideThreshold: $0.besideThreshold(limit: configuration.commitGroups))
        }
    }

    public struct GroupStatistics: Sendable {
        public var groups: Int
        public var statements: Int
        public var inFlight: Duration
        public var batches: Int
        public var failedBatches: Int
        public var groupsInFlight: Int
        public var waiting: Int
        /// How many statements a group started beside others in flight must hold now.
        public var besideThreshold: Int
    }

    /// Connections open now (in use or idle), and callers waiting for one.
    public var statistics: (open: Int, idle: Int, waiting: Int) {
        get async { state.withLock { ($0.openCount, $0.idle.count, $0.waiters.count) } }
    }

    /// How long, by recent experience, the pool takes to serve one more waiting caller — the
    /// pace its admission control and shedding reckon with (`poolBusy`); nil before any
    /// connection came back. Under overload its inverse is the pool's throughput.
    public var servingInterval: Duration? {
        state.withLock { $0.servingInterval(connections: configuration.maximumConnections) }.map { .seconds($0) }
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
        // One deadline for the whole call, however often the wait is retried.
        var deadline: ContinuousClock.Instant?
        while true {
            switch try nextAcquireStep(deadline: &deadline) {
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
                if let connection = try await waitForConnection(until: deadline!) { return connection }
            }
        }
    }

    /// The next step of an acquire; sets `deadline` when the caller first has to wait, and
    /// refuses (`poolBusy`) a caller that would wait longer than it may.
    private func nextAcquireStep(deadline: inout ContinuousClock.Instant?) throws(PostgresError) -> AcquireStep {
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
            if let wait = state.queueWait(connections: maximum), wait > (until - now).seconds * Self.admissionMargin {
                var error = PostgresError(
                    .poolBusy,
                    "busy: \(Self.allInUse(maximum)) and \(state.waiters.count) \(state.waiters.count == 1 ? "caller" : "callers") waiting (about \(Self.seconds(wait)) of work, "
                        + "too close to the \(Self.seconds(timeout.seconds)) a caller may wait); retry shortly, or raise the pool size")
                error.retryAfter = .milliseconds(Int64((wait * 1000).rounded(.up)))
                throw error
            }
            return .wait
        }
    }

    private static func allInUse(_ maximum: Int) -> String {
        maximum == 1 ? "the pool's one connection is in use" : "all \(maximum) connections in use"
    }

    private static func seconds(_ value: Double) -> String {
        value < 10 ? "\((value * 10).rounded() / 10) s" : "\(Int(value.rounded(.up))) s"
    }

    /// Waits until a connection is handed over (or nil: try again) or `deadline` passes.
    ///
    /// A waiter costs a continuation and a place in the queue, nothing more: one timer for the
    /// whole pool (`expireWaiters`) fails those whose deadline passed. (A timer task per waiter
    /// put thousands of sleeping tasks and their cancellations on the two-thread concurrency
    /// pool under overload, slowing the very callers that held connections.)
    private func waitForConnection(until deadline: ContinuousClock.Instant) async throws -> PostgresConnection? {
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
                    state.waiters.append(id: id, deadline: deadline, continuation)
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
    /// timeout may be told up to 20 ms late.
    ///
    /// It also sheds the hopeless: a caller admitted when the queue looked short enough waits
    /// on while the pace may fall (a slower stretch of the server, of the machine); one that
    /// the queue ahead of it could not get through before its deadline even if every
    /// connection came back now and then kept the pool's recent pace is refused now with the
    /// busy answer instead of at its deadline after the full wait (`orderflow-bench e2e
    /// --overload` had hundreds of callers refused only after 10 s).
    private func expireWaiters() async {
        let maximum = configuration.maximumConnections
        // The pace read at the previous look. One stall (a checkpoint, a descheduled thread)
        // makes one long interval between releases and lifts the pace read for a while (with a
        // moving average of a few dozen releases, shedding on that reading refused thousands the
        // pool then served). So a waiter is shed only when hopeless at the better of two
        // readings a look apart.
        var previousInterval: Double?
        while true {
            let now = ContinuousClock.now
            let (expired, error, shed, busy, next, interval) = state.withLock { state in
                let expired = state.waiters.removeExpired(at: now)
                var shed: [WaiterQueue.Continuation] = []
                var busy: PostgresError?
                let interval = state.servingInterval(connections: maximum)
                if let interval, let previousInterval {
                    let best = min(interval, previousInterval)
                    shed = state.waiters.removeHopeless(at: now, connections: maximum, holdPerConnection: best * Double(maximum))
                    if !shed.isEmpty { busy = shedError(state, interval: best) }
                }
                let next = state.waiters.firstDeadline
                if next == nil { state.expiryTimerRuns = false }
                return (expired, expired.isEmpty ? nil : timeoutError(state), shed, busy, next, interval)
            }
            previousInterval = interval
            if let error {
                for waiter in expired { waiter.resume(throwing: error) }
            }
            if let busy {
                for waiter in shed { waiter.resume(throwing: busy) }
            }
            guard let next else { return }
            // Look again at the first deadline, and meanwhile every so often for the hopeless.
            try? await Task.sleep(until: max(min(next, now + Self.sheddingInterval), now + .milliseconds(20)))
        }
    }

    /// How often the waiting callers are looked over for those who can no longer be served in time.
    private static let sheddingInterval: Duration = .milliseconds(100)

    /// Waiters refused because the queue ahead of them would outlast their deadlines.
    private func shedError(_ state: State, interval: Double) -> PostgresError {
        var error = PostgresError(
            .poolBusy,
            "busy: \(Self.allInUse(configuration.maximumConnections)), and at the pool's pace now (one caller every "
                + "\(Self.milliseconds(interval))) the callers queued ahead could not be served before this one's wait ran out; "
                + "retry shortly, or raise the pool size")
        // When the queue that stays should be through.
        error.retryAfter = .milliseconds(Int64((Double(state.waiters.count) * interval * 1000).rounded(.up)))
        return error
    }

    private static func milliseconds(_ value: Double) -> String {
        value < 0.01 ? "\((value * 10_000).rounded() / 10) ms" : "\(Int((value * 1000).rounded())) ms"
    }

    /// A statement refused a place among those waiting for a group (see
    /// `queryCommittingTogether(_:batch:)`).
    private func groupBusyError(waiting: Int, wait: Double) -> PostgresError {
        var error = PostgresError(
            .poolBusy,
            "busy: the statements waiting to be committed ahead of this one (\(waiting)) are about \(Self.seconds(wait)) "
                + "of work at the pace groups commit now, longer than it may wait; retry shortly")
        error.retryAfter = .milliseconds(Int64((wait * 1000).rounded(.up)))
        return error
    }

    /// A waiter's deadline passed.
    private func timeoutError(_ state: State) -> PostgresError {
        let maximum = configuration.maximumConnections
        var error = PostgresError(
            .poolTimeout,
            "busy: \(Self.allInUse(maximum)), none became free within \(Self.seconds(configuration.acquireTimeout.seconds)); retry shortly, or raise the pool size",
            hint: "if the database itself is idle, a caller holds connections too long")
        error.retryAfter = state.queueWait(connections: maximum).map { .milliseconds(Int64(($0 * 1000).rounded(.up))) }
        return error
    }

    private func failWaiter(_ id: Int, _ error: any Error) {
        let waiter = state.withLock { state in
            state.waiters.remove(id: id)
        }
        waiter?.resume(throwing: error)
    }

    private func release(_ connection: PostgresConnection, heldSince acquired: ContinuousClock.Instant) async {
        let waiter = state.withLock { state -> CheckedContinuation<PostgresConnection?, any Error>?? in
            // Read under the lock, so that releases are timed in the order they are counted.
            let now = ContinuousClock.now
            let held = (now - acquired).seconds
            state.holdTime = state.holdTime.map { $0 + (held - $0) * Self.holdTimeWeight } ?? held
            if state.lastReleaseServedWaiter, let last = state.lastRelease {
                state.pace.add((now - last).seconds)
            }
            state.lastRelease = now
            state.lastReleaseServedWaiter = false
            guard !state.closed, !connection.health.isBroken else { return .none }
            if let first = state.waiters.removeFirst() {
                state.lastReleaseServedWaiter = true
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

extension Duration {
    /// In seconds, as a `Double`.
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// The callers waiting for a connection, first come first served. Under overload thousands
/// wait: taking the first is O(1) (an index moves; the array is compacted now and then), not
/// an `Array.removeFirst` that moves every other waiter on each release.
private struct WaiterQueue {
    typealias Continuation = CheckedContinuation<PostgresConnection?, any Error>
    private var items: [(id: Int, deadline: ContinuousClock.Instant, continuation: Continuation)] = []
    private var head = 0

    var count: Int { items.count - head }
    var firstDeadline: ContinuousClock.Instant? { head < items.count ? items[head].deadline : nil }

    mutating func append(id: Int, deadline: ContinuousClock.Instant, _ continuation: Continuation) {
        items.append((id, deadline, continuation))
    }

    /// Removes the waiters at the front whose deadline is not after `now`. (A waiter that
    /// queued again after a retry sits behind later deadlines and is told when it reaches the
    /// front: late, never early.)
    mutating func removeExpired(at now: ContinuousClock.Instant) -> [Continuation] {
        var expired: [Continuation] = []
        while head < items.count, items[head].deadline <= now, let first = removeFirst() {
            expired.append(first)
        }
        return expired
    }

    /// Removes the waiters at the back that cannot be served before their deadlines even at
    /// best: each of the `connections` could come back at once, and after that serves one
    /// caller per `holdPerConnection` seconds, so the waiter with `k` waiters ahead of it waits
    /// at least `k / connections` (rounded down) holds. The optimistic bound keeps callers that
    /// a pool which is merely slow (long holds, all started together) will serve; under
    /// overload, with thousands queued, it is within one hold of the expected wait.
    ///
    /// Only the back is looked at, up to the first waiter that can still make it: the cost is
    /// the number shed, not the queue's length (a scan of 13,000 waiters ten times a second,
    /// under the pool's lock, was 8 % of an overloaded process's time). A waiter that queued
    /// again after a retry, ahead of later deadlines, is not shed; it times out as before.
    mutating func removeHopeless(at now: ContinuousClock.Instant, connections: Int, holdPerConnection: Double) -> [Continuation] {
        guard holdPerConnection > 0, connections > 0 else { return [] }
        let hold = Duration.seconds(holdPerConnection)
        var end = items.count
        while end > head, now + hold * ((end - 1 - head) / connections) > items[end - 1].deadline {
            end -= 1
        }
        guard end < items.count else { return [] }
        let hopeless = items[end...].map(\.continuation)
        items.removeSubrange(end...)
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
        return hopeless
    }

    mutating func removeFirst() -> Continuation? {
        guard head < items.count else { return nil }
        let first = items[head].continuation
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return first
    }

    /// Removes the waiter `id` (timed out or cancelled), if it still waits. Waiters time out in
    /// the order they came, so the search from the front is short.
    mutating func remove(id: Int) -> Continuation? {
        guard let index = items[head...].firstIndex(where: { $0.id == id }) else { return nil }
        return items.remove(at: index).continuation
    }

    mutating func removeAll() -> [Continuation] {
        defer { items = []; head = 0 }
        return items[head...].map(\.continuation)
    }
}

/// The statements waiting for the next group of `queryCommittingTogether`, and the groups in
/// flight. Invariant: statements wait only while at least one group is in flight, and the last
/// group in flight to end always takes them.
private struct CommitGroups {
    var waiting: [GroupMember] = []
    var inFlight = 0
    var sizing = GroupSizing()
    var groupsRun = 0
    var statementsRun = 0
    var timeInFlight: Duration = .zero
    var batchesRun = 0
    var batchesFailed = 0

    /// A group of `size` statements goes out.
    mutating func start(size: Int) {
        inFlight += 1
        sizing.started(size: size)
    }

    /// A group of `size` statements ended.
    mutating func end(size: Int) {
        inFlight -= 1
        sizing.ended(size: size)
    }

    /// How many statements a group started beside others in flight must hold (`GroupSizing`).
    func besideThreshold(limit: Int) -> Int {
        sizing.besideThreshold(groups: limit, largest: PostgresPool.largestGroup)
    }

    /// Seconds a group took per statement in it, lately (moving average); nil before the first.
    var secondsPerStatement: Double?

    /// How long a statement `position` places back in the queue would wait, at the pace of the
    /// last groups with as many in flight as now; nil before any group ended.
    func expectedWait(position: Int) -> Double? {
        secondsPerStatement.map { Double(position) * $0 / Double(max(1, inFlight)) }
    }

    mutating func record(size: Int, took: Duration, batch: BatchOutcome?) {
        groupsRun += 1
        statementsRun += size
        timeInFlight += took
        switch batch {
        case .ran?: batchesRun += 1
        case .failed?: batchesFailed += 1
        case nil: break
        }
        // A group whose runner got no connection ran nothing: it says nothing of the pace.
        if took > .zero {
            let perStatement = took.seconds / Double(size)
            secondsPerStatement = secondsPerStatement.map { $0 + (perStatement - $0) / 16 } ?? perStatement
        }
    }
}

/// What a statement arriving for a group does: run a group now, wait for one, or go away.
private enum GroupArrival {
    case lead([GroupMember])
    case wait
    case refused(PostgresError)
}

/// Whether a group ran as its batch form, or tried to and failed (for `groupStatistics`).
private enum BatchOutcome {
    case ran, failed
}

private struct GroupMember: Sendable {
    let query: PostgresQuery
    /// The statement written once for many (see `queryCommittingTogether`).
    let batch: StaticString?
    /// Nil for a caller that started a group on arrival (it is not suspended). The first member
    /// of a group is always the one that runs it: a waiter resumed to run the next group keeps
    /// its continuation here, already used, and is never resumed again.
    let continuation: UnsafeContinuation<GroupTurn, Never>?
}

/// What a statement waiting for a group is resumed with: its answer, or the group to run.
private enum GroupTurn: Sendable {
    case done(Result<PostgresRows, PostgresError>)
    case lead([GroupMember])
}
