/// How many statements a commit group started beside others in flight must hold
/// (`PostgresPool.queryCommittingTogether`): as many as the last group started, and its share
/// (one of the groups allowed in flight) of the callers lately busy — at least two.
///
/// With 8 callers and 2 groups the share is 4: the callers a group answered come back as the
/// next group, and each commit (one WAL flush) carries 4 statements. Were a group beside another
/// to need only as many as the last group held, groups would settle smaller than the share, with
/// some callers always a group behind, and fewer statements carried per WAL flush.
struct GroupSizing: Sendable {
    /// How many statements the group started last holds.
    private(set) var lastStarted = 0
    /// Statements in the groups in flight.
    private(set) var statementsInFlight = 0
    /// The most statements in flight and waiting (with the one arriving) that arrivals met, over
    /// the current and the previous stretch of `stretch` arrivals: how many callers keep
    /// statements coming, lately. (A burst raises it for at most two stretches; a statement
    /// still waits at most for the groups in flight when it came, since the last of them to
    /// end takes whoever waits.)
    private var peak = (current: 0, previous: 0, arrivals: 0)
    static let stretch = 32

    /// A statement arrives, finding `waiting` statements waiting.
    mutating func arrival(waiting: Int) {
        if peak.arrivals == Self.stretch {
            peak = (0, peak.current, 0)
        }
        peak.arrivals += 1
        peak.current = max(peak.current, statementsInFlight + waiting + 1)
    }

    /// A group of `size` statements goes out.
    mutating func started(size: Int) {
        statementsInFlight += size
        lastStarted = size
    }

    /// A group of `size` statements ended.
    mutating func ended(size: Int) {
        statementsInFlight -= size
    }

    /// The size a group beside others must reach, with at most `groups` in flight and groups
    /// of at most `largest`.
    func besideThreshold(groups: Int, largest: Int) -> Int {
        let busy = max(peak.current, peak.previous)
        let share = (busy + groups - 1) / max(1, groups)
        return min(largest, max(2, lastStarted, share))
    }
}
