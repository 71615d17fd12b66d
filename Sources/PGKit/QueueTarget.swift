/// The commit groups' bound on queueing delay (`PostgresPool.Configuration.queueTarget`), as
/// CoDel bounds a queue's (and gRPC's and Envoy's adaptive concurrency after it): under
/// overload the groups keep committing at their pace, and a statement either goes out within
/// about the target or is refused at once.
///
/// A burst (a stall of the machine, callers that came together) queues for a moment and drains:
/// nobody is refused. A queue is *standing* once the statements that groups take from it (the
/// oldest of them) waited longer than the target at every take for a whole `interval`: more work
/// comes than the groups commit, and every statement admitted to it would wait longer and none
/// be served sooner. While it stands, a statement beyond the `floor` is admitted only if the
/// groups ahead of it are expected to take it within the target, and at each group's end the
/// back of the queue beyond that is refused (those admitted just before the queue was seen
/// standing). It stands until the groups catch up: a group takes every statement waiting.
///
/// The `floor` — the groups allowed in flight, each full — is never refused for the target:
/// group commit needs a queue deep enough to fill every group in flight, and refusing those
/// would shrink the groups and with them the pace.
///
/// A value inside `CommitGroups`, read and changed under its lock.
struct QueueTarget {
    /// Seconds a statement should wait at most for its group, under overload.
    let target: Double
    /// Statements waiting that are never refused for the target.
    let floor: Int
    /// When the statements taken first waited longer than the target, while they do.
    private var aboveSince: ContinuousClock.Instant?
    /// The queue stood above the target for an interval, and no group has taken all of it since.
    private(set) var standing = false

    /// How long the statements taken must wait longer than the target before the queue counts
    /// as standing: CoDel's interval, long beside a group's run and short beside a caller's patience.
    static let interval: Duration = .milliseconds(100)

    init(target: Duration, floor: Int) {
        self.target = max(0, target.seconds)
        self.floor = max(1, floor)
    }

    /// A group took statements from the queue at `now`, the oldest of them queued at `oldest`,
    /// leaving `left` waiting.
    mutating func took(oldest: ContinuousClock.Instant, left: Int, at now: ContinuousClock.Instant) {
        if left == 0 {
            // The groups caught up: whatever stood has drained.
            aboveSince = nil
            standing = false
            return
        }
        guard (now - oldest).seconds > target else {
            aboveSince = nil
            return
        }
        guard let since = aboveSince else {
            aboveSince = now
            return
        }
        if now - since >= Self.interval { standing = true }
    }

    /// Whether a statement `position` places back, expected to wait `wait` seconds for the
    /// groups ahead (nil: their pace is not known yet), is refused for the target.
    func refuses(position: Int, wait: Double?) -> Bool {
        guard standing, position > floor, let wait else { return false }
        return wait > target
    }

    /// How many statements may wait while the queue stands, at `perPosition` seconds of wait
    /// for each place: the floor, or what the groups take within the target if more.
    func admissible(perPosition: Double) -> Int {
        guard perPosition > 0 else { return Int.max }
        return max(floor, Int(target / perPosition))
    }
}
