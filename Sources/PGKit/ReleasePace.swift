/// How fast a pool with every connection in use gives one back: the mean time between two
/// connections coming back, over the last `window` such intervals.
///
/// The mean over the whole stretch those intervals cover (their sum divided by their count),
/// not a moving average of the latest few: connections come back in bursts (a commit group's
/// callers let go together, then none for a while), and an average of the last dozen intervals
/// swung between half and twice the true pace with them; over a long window a burst and the gap
/// after it count as what they are together. Nor the mean hold time divided by the
/// connections: that leaves out the time between a connection coming back and the next caller
/// running with it (its task scheduled on a busy machine), and read 10–20 % faster than the pool
/// served under overload (`orderflow-bench e2e --overload`).
struct ReleasePace {
    /// Intervals in seconds, a ring: `next` is where the next one goes.
    private var intervals: [Double]
    private var next = 0
    private var count = 0
    private var sum = 0.0

    /// Intervals kept: about half a second of a pool serving 2,000 callers a second — long
    /// beside a burst, short beside a caller's deadline of seconds.
    static let window = 1024
    /// Fewer intervals than this tell too little: the pool reckons with its hold times then.
    static let minimumCount = 32
    /// An interval counts as at most this many times the mean. A long stall (the server's
    /// checkpoint, the machine paused for a second) is a delay rather than a pace: the time it
    /// took has passed for every waiting caller, whose deadlines the pool compares with the
    /// clock. Counted whole, one stall of 1.5 s among intervals of 0.86 ms read as a pace of
    /// 2.2 ms for the next second, and the shedding refused 5,345 callers while the pool worked
    /// through the 2,661 left in under three seconds. But a slow stretch of many shorter stalls
    /// is a pace: capped at 32 times the mean, two seconds of them (a third to a half of the
    /// usual commits) left the reading unmoved and 1,345 callers waited out their deadline
    /// (`orderflow-bench e2e --overload`, 4×). At 256 times, stalls up to a sixth of a second
    /// at 0.65 ms count whole.
    static let stallFactor = 256.0

    init() {
        intervals = Array(repeating: 0, count: Self.window)
    }

    /// One more interval (seconds) during which every connection was in use.
    mutating func add(_ interval: Double) {
        var interval = max(0, interval)
        if let mean { interval = min(interval, mean * Self.stallFactor) }
        if count == Self.window { sum -= intervals[next] } else { count += 1 }
        intervals[next] = interval
        sum += interval
        next += 1
        if next == Self.window {
            next = 0
            // Adding and taking away for ever drifts; once a round, the sum is counted afresh.
            sum = intervals.reduce(0, +)
        }
    }

    /// Seconds between two connections coming back, on average over the window; nil until
    /// `minimumCount` intervals were seen.
    var mean: Double? {
        count >= Self.minimumCount ? max(0, sum) / Double(count) : nil
    }
}
