import Logging
import Synchronization

extension PostgresPool {
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
    /// server for all of them, instead of one each. (A second group started as soon as one is
    /// in flight holds only two or three statements, each group run serially by its own server
    /// process, and does no better than one group at a time; one at a time leaves a core idle.)
    ///
    /// A statement waiting for its group holds no connection, so groups are not bounded by the
    /// pool's size: many callers on few connections gather into groups of dozens, where callers
    /// each holding a connection through their group's commit would be capped at the pool's
    /// size. Nothing else bounds the waiting, so it has its own admission control: a statement
    /// that would wait longer than 80 % of `acquireTimeout` for the groups ahead of it, at the
    /// pace groups went lately (from their start to their end), is refused at once (`poolBusy`,
    /// with a `retryAfter`), as the pool refuses a caller for a connection; and with a
    /// `Configuration.queueTarget`, once the queue stands above it, so is one the groups could
    /// not take within the target (`QueueTarget`). When the caller running a
    /// group cannot get a connection (busy, timed out, the server gone), every statement of the
    /// group gets that error; none of them ran.
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
        // Its settings would hold for the whole group's transaction, everyone's statements.
        guard query.localSettings.isEmpty else {
            throw PostgresError(.invalidParameter, "a statement with settings of its own cannot be committed with others; run it alone (query)")
        }
        guard configuration.commitGroups > 0 else {
            // Grouping off: the statement alone, on a connection of its own.
            return try await CommitGrouping.commitAlone(query, pool: self)
        }
        return try await grouping.commit(query, batch: batch, pool: self)
    }

    /// The refusal a `queryCommittingTogether` statement arriving now would get (busy, with a
    /// `retryAfter`), or nil when it would be admitted: a caller about to prepare a statement at
    /// some cost learns before preparing it, and under overload the refused cost next to nothing.
    /// A statement admitted by it may still be refused when it comes.
    public var commitGroupRefusal: PostgresError? {
        guard configuration.commitGroups > 0 else { return nil }
        return grouping.refusalNow
    }

    /// How `queryCommittingTogether`'s callers were grouped so far: groups run, the statements
    /// in them, the time they were in flight (summed over groups), and how many groups ran as
    /// their batch form or tried to and failed (then ran one statement at a time); and now: the
    /// groups in flight, the statements waiting for a later group, and how many a group beside
    /// others must hold.
    public var groupStatistics: GroupStatistics {
        grouping.statistics
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
        /// Statements refused so far for the queueing target (`Configuration.queueTarget`).
        public var refusedForTarget: Int
        /// Whether the statements waiting stand above the queueing target now.
        public var standing: Bool
    }
}

/// Group commit for `PostgresPool.queryCommittingTogether`: gathers the statements that come
/// while groups are in flight into later groups, decides who runs each group, and refuses a
/// statement that could not be committed in time.
///
/// Its books are a lock, like the pool's: a statement arriving, and a group ending, are a few
/// instructions under a `Mutex`, with no hop to another executor. Only a statement that has to
/// wait for a later group suspends.
final class CommitGrouping: Sendable {
    /// Statements waiting for the next group, and groups in flight.
    private let groups: Mutex<CommitGroups>
    /// At most this many groups in flight at once (`PostgresPool.Configuration.commitGroups`).
    let limit: Int
    /// A statement expected to wait longer than this, in seconds, for the groups ahead of it
    /// is refused (see `PostgresPool.queryCommittingTogether`).
    private let longestWait: Double

    /// At most this many statements in one group: a group runs serially on one server
    /// process, and its last statement's caller waits for all of them.
    static let largestGroup = 64

    init(limit: Int, acquireTimeout: Duration, queueTarget: Duration? = nil) {
        self.limit = limit
        self.longestWait = acquireTimeout.seconds * LoadShedding.admissionMargin
        var groups = CommitGroups()
        // The groups allowed in flight, each full: group commit needs that many waiting.
        groups.queueTarget = queueTarget.map { QueueTarget(target: $0, floor: max(1, limit) * Self.largestGroup) }
        self.groups = Mutex(groups)
    }

    /// Runs `query` in a group with whoever else comes meanwhile, taking the group's connection
    /// from `pool`.
    func commit(_ query: PostgresQuery, batch: StaticString?, pool: PostgresPool) async throws(PostgresError) -> PostgresRows {
        let limit = self.limit
        let turn: GroupTurn = await withUnsafeContinuation { continuation in
            let arrival = groups.withLock { groups -> GroupArrival in
                let now = ContinuousClock.now
                let own = GroupMember(query: query, batch: batch, queued: now, continuation: nil)
                groups.sizing.arrival(waiting: groups.waiting.count)
                if groups.inFlight == 0 {
                    groups.start(size: 1)
                    return .lead([own], started: now)
                }
                // Beside a group in flight, a new one starts only once it is as large as the last
                // one started and holds its share of the busy callers: the statements that wait
                // meanwhile would otherwise go out in twos and threes, each group run serially by
                // its own server process and committed by a WAL flush of its own.
                if groups.inFlight < limit, groups.waiting.count + 1 >= groups.besideThreshold(limit: limit) {
                    let count = min(groups.waiting.count, Self.largestGroup - 1)
                    groups.start(size: count + 1)
                    // The arriving caller runs it, so it comes first (any serial order of
                    // concurrent statements will do; the first member is the one that runs).
                    return .lead([own] + groups.take(count, at: now), started: now)
                }
                if let refusal = refusal(&groups) {
                    return .refused(refusal)
                }
                groups.waiting.append(GroupMember(query: query, batch: batch, queued: now, continuation: continuation))
                return .wait
            }
            switch arrival {
            case .lead(let members, let started): continuation.resume(returning: .lead(members, started: started))
            case .refused(let error): continuation.resume(returning: .done(.failure(error)))
            case .wait: break
            }
        }
        switch turn {
        case .done(let result):
            return try result.get()
        case .lead(let members, let started):
            // The caller running the group takes a connection for it, and only for it.
            // Ahead of the callers waiting for a connection of their own: it serves a group.
            let (results, batch, ran) = await Self.runTakingConnection(members, pool: pool, first: true)
            // The next group, if statements came meanwhile and this was the last group in flight
            // or they are as many as a group beside others must be: its first caller runs it.
            let now = ContinuousClock.now
            let (next, shed) = groups.withLock { groups -> ([GroupMember]?, (members: [GroupMember], error: PostgresError)?) in
                // The time from the group's start to its end, waits for a thread and a connection
                // included, is the pace admission control reckons with.
                groups.record(size: members.count, took: ran ? now - started : .zero, batch: batch)
                groups.end(size: members.count)
                // While the queue stands above its target, its back that the groups cannot take
                // within the target is refused now rather than after the wait.
                let back = groups.shedBeyondTarget()
                let shed = back.isEmpty ? nil : (back, Self.shedError(groups, target: groups.queueTarget?.target ?? 0))
                // The last group in flight always takes whoever waits; beside others, only a
                // group as large as a new one would have to be.
                guard !groups.waiting.isEmpty, groups.inFlight == 0 || groups.waiting.count >= groups.besideThreshold(limit: limit) else {
                    return (nil, shed)
                }
                let count = min(groups.waiting.count, Self.largestGroup)
                groups.start(size: count)
                return (Array(groups.take(count, at: now)), shed)
            }
            if let next { next[0].continuation?.resume(returning: .lead(next, started: now)) }
            if let shed {
                for member in shed.members { member.continuation?.resume(returning: .done(.failure(shed.error))) }
            }
            for (member, result) in zip(members.dropFirst(), results.dropFirst()) {
                member.continuation?.resume(returning: .done(result))
            }
            return try results[0].get()
        }
    }

    /// The refusal for a statement arriving now behind those waiting in `groups`, or nil when it
    /// may wait: holding no connection, nothing else bounds the queue. Refused when it could not
    /// be committed in time at the pace groups go now, or, while the queue stands above its
    /// target, when it is beyond the floor and could not be committed within the target.
    private func refusal(_ groups: inout CommitGroups) -> PostgresError? {
        let position = groups.waiting.count + 1
        guard let wait = groups.expectedWait(position: position) else { return nil }
        if wait > longestWait {
            return Self.busyError(waiting: groups.waiting.count, wait: wait)
        }
        guard let target = groups.queueTarget, target.refuses(position: position, wait: wait) else { return nil }
        groups.refusedForTarget += 1
        return Self.overTargetError(waiting: groups.waiting.count, wait: wait, target: target.target)
    }

    /// The refusal a statement arriving now would get (`PostgresPool.commitGroupRefusal`).
    var refusalNow: PostgresError? {
        groups.withLock { groups in
            // As `commit` decides: one that would start a group is never refused.
            let wouldLead = groups.inFlight == 0
                || (groups.inFlight < limit && groups.waiting.count + 1 >= groups.besideThreshold(limit: limit))
            return wouldLead ? nil : refusal(&groups)
        }
    }

    /// Runs `query` alone on a connection of its own, as a group of one: grouping is off.
    static func commitAlone(_ query: PostgresQuery, pool: PostgresPool) async throws(PostgresError) -> PostgresRows {
        try await runTakingConnection([GroupMember(query: query, batch: nil, queued: .now, continuation: nil)], pool: pool, first: false).results[0].get()
    }

    /// Takes a connection from `pool` (`first`: ahead of those waiting), runs `members` on it as a group (see `GroupRun`) and
    /// gives it back: each member's answer, the batch outcome, and whether it ran (false when no
    /// connection could be taken: then every member gets that error, and none ran).
    private static func runTakingConnection(
        _ members: [GroupMember], pool: PostgresPool, first: Bool
    ) async -> (results: [Result<PostgresRows, PostgresError>], batch: BatchOutcome?, ran: Bool) {
        let connection: PostgresConnection
        do {
            connection = try await pool.acquire(first: first)
        } catch {
            let refused = error as? PostgresError
                ?? PostgresError(.connectionFailed, "could not take a connection from the pool: \(error)")
            return (Array(repeating: .failure(refused), count: members.count), nil, false)
        }
        let acquired = ContinuousClock.now
        let (results, batch) = await GroupRun.run(members, on: connection, logger: pool.logger)
        await pool.release(connection, heldSince: acquired)
        return (results, batch, true)
    }

    /// A statement refused a place among those waiting for a group.
    private static func busyError(waiting: Int, wait: Double) -> PostgresError {
        var error = PostgresError(
            .poolBusy,
            "busy: the statements waiting to be committed ahead of this one (\(waiting)) are about \(PoolWording.seconds(wait)) "
                + "of work at the pace groups commit now, longer than it may wait; retry shortly")
        error.retryAfter = .milliseconds(Int64((wait * 1000).rounded(.up)))
        return error
    }

    /// A statement refused a place because the queue stands above its target (`QueueTarget`).
    private static func overTargetError(waiting: Int, wait: Double, target: Double) -> PostgresError {
        var error = PostgresError(
            .poolBusy,
            "busy: more statements come to be committed than the groups commit; the \(waiting) waiting ahead of this one are about "
                + "\(PoolWording.milliseconds(wait)) of work, longer than the \(PoolWording.milliseconds(target)) a statement should wait; retry shortly")
        error.retryAfter = .milliseconds(max(1, Int64((wait * 1000).rounded(.up))))
        return error
    }

    /// The statements at the back of a queue found standing above its target, refused before they ran.
    private static func shedError(_ groups: CommitGroups, target: Double) -> PostgresError {
        let wait = groups.expectedWait(position: groups.waiting.count) ?? target
        var error = PostgresError(
            .poolBusy,
            "busy: more statements come to be committed than the groups commit, and this one could not be committed within the "
                + "\(PoolWording.milliseconds(target)) a statement should wait; nothing of it was written; retry shortly")
        error.retryAfter = .milliseconds(max(1, Int64((max(wait, target) * 1000).rounded(.up))))
        return error
    }

    /// See `PostgresPool.groupStatistics`.
    var statistics: PostgresPool.GroupStatistics {
        groups.withLock {
            PostgresPool.GroupStatistics(
                groups: $0.groupsRun, statements: $0.statementsRun, inFlight: $0.timeInFlight,
                batches: $0.batchesRun, failedBatches: $0.batchesFailed,
                groupsInFlight: $0.inFlight, waiting: $0.waiting.count,
                besideThreshold: $0.besideThreshold(limit: limit),
                refusedForTarget: $0.refusedForTarget, standing: $0.queueTarget?.standing ?? false)
        }
    }
}
