/// The statements waiting for the next group of `PostgresPool.queryCommittingTogether`, and the
/// groups in flight. Invariant: statements wait only while at least one group is in flight, and
/// the last group in flight to end always takes them.
struct CommitGroups {
    var waiting: [GroupMember] = []
    var inFlight = 0
    var sizing = GroupSizing()
    var groupsRun = 0
    var statementsRun = 0
    var timeInFlight: Duration = .zero
    var batchesRun = 0
    var batchesFailed = 0
    /// Statements refused for the queueing target, so far.
    var refusedForTarget = 0
    /// The bound on queueing delay, if one is set (`QueueTarget`).
    var queueTarget: QueueTarget?

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
        sizing.besideThreshold(groups: limit, largest: CommitGrouping.largestGroup)
    }

    /// Seconds a group took per statement in it, lately (moving average); nil before the first.
    var secondsPerStatement: Double?

    /// The first `count` statements waiting, taken at `now` to go out as a group.
    mutating func take(_ count: Int, at now: ContinuousClock.Instant) -> ArraySlice<GroupMember> {
        if let oldest = waiting.first?.queued {
            queueTarget?.took(oldest: oldest, left: waiting.count - count, at: now)
        }
        defer { waiting.removeFirst(count) }
        return waiting.prefix(count)
    }

    /// While the queue stands above its target, removes and returns the statements at its back
    /// that the groups are not expected to take within the target (`QueueTarget.admissible`):
    /// admitted before the queue was seen standing, they are refused rather than kept waiting.
    mutating func shedBeyondTarget() -> [GroupMember] {
        guard let queueTarget, queueTarget.standing, let perPosition = expectedWait(position: 1) else { return [] }
        let keep = queueTarget.admissible(perPosition: perPosition)
        guard waiting.count > keep else { return [] }
        defer { waiting.removeSubrange(keep...) }
        refusedForTarget += waiting.count - keep
        return Array(waiting[keep...])
    }

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
enum GroupArrival {
    case lead([GroupMember], started: ContinuousClock.Instant)
    case wait
    case refused(PostgresError)
}

/// Whether a group ran as its batch form, or tried to and failed (for `PostgresPool.groupStatistics`).
enum BatchOutcome {
    case ran, failed
}

struct GroupMember: Sendable {
    let query: PostgresQuery
    /// The statement written once for many (see `PostgresPool.queryCommittingTogether`).
    let batch: StaticString?
    /// When it came: how long it waited for its group (`QueueTarget`).
    let queued: ContinuousClock.Instant
    /// Nil for a caller that started a group on arrival (it is not suspended). The first member
    /// of a group is always the one that runs it: a waiter resumed to run the next group keeps
    /// its continuation here, already used, and is never resumed again.
    let continuation: UnsafeContinuation<GroupTurn, Never>?
}

/// What a statement waiting for a group is resumed with: its answer, or the group to run.
enum GroupTurn: Sendable {
    case done(Result<PostgresRows, PostgresError>)
    /// The group to run, and when it was started: its time in flight counts from then, with the
    /// wait for its runner to be scheduled and for a connection.
    case lead([GroupMember], started: ContinuousClock.Instant)
}
