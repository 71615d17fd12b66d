/// How fast a pool with every connection in use gives one back: the mean time between two
/// connections coming back, over the last `window` such intervals.
///
/// The mean over the whole stretch those intervals cover (their sum divided by their count),
/// not a moving average of the latest few: connections come back in bursts (a commit group's
/// callers let go together, then none for a while), and an average of the last dozen intervals
/// swings between half and twice the true pace with them; over a long window a burst and the gap
/// after it count as what they are together. Nor the mean hold time divided by the
/// connections: that leaves out the time between a connection coming back and the next caller
/// running with it (its task scheduled on a busy machine), and reads faster than the pool
/// serves under overload.
struct ReleasePace {
    /// Intervals in seconds, a ring: `next` is where the next one goes.
    private var intervals: [Double]
    private var next = 0
    private var count = 0
    private var sum = 0.0

    /// Intervals kept: a fraction of a second of a pool serving thousands of callers a second —
    /// long beside a burst, short beside a caller's deadline of seconds.
    static let window = 1024
    /// Fewer intervals than this tell too little: the pool reckons with its hold times then.
    static let minimumCount = 32
    /// An interval counts as at most this many times the mean. A long stall (the server's
    /// checkpoint, the machine paused for a second) is a delay rather than a pace: the time it
    /// took has passed for every waiting caller, whose deadlines the pool compares with the
    /// clock. Counted whole, one stall among sub-millisecond intervals would read as a pace
    /// several times slower for the next second, and the shedding would refuse callers the pool
    /// then serves in time. But a slow stretch of many shorter stalls is a pace: capped too low
    /// (a few dozen times the mean), such a stretch leaves the reading unmoved and callers wait
    /// out their deadlines instead of being told at once. At 256 times, stalls up to about a
    /// sixth of a second count whole at the pace of a loaded pool.
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
