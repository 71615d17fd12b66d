/// The pool's admission control: how fast it serves callers lately, whether a caller who would
/// have to wait can be served before its deadline, and which waiting callers no longer can.
///
/// It keeps track of the pool's pace — how often a connection came back while all were in use
/// (`ReleasePace`), or until it has seen enough of that, how long callers hold a connection.
/// When every connection is in use and the callers already waiting would take longer to serve
/// than most of the time a new caller may wait (`admissionMargin` of it), the new caller is
/// refused at once with `PostgresError.Kind.poolBusy` instead of queueing for a timeout it
/// cannot beat. Under overload the connections keep working at their pace on the callers that
/// can be served, and the rest learn it in microseconds, with a `retryAfter`.
///
/// A value inside the pool's books, read and changed under the pool's lock: no lock of its own.
struct LoadShedding {
    /// Recent time a caller holds a connection, in seconds (moving average); nil until the
    /// first connection comes back.
    private var holdTime: Double?
    /// The pace connections came back while all were in use: the pool's pace when it is
    /// the bottleneck.
    private var pace = ReleasePace()
    private var lastRelease: ContinuousClock.Instant?
    /// Whether the last connection to come back went straight to a waiting caller (so
    /// every connection stayed in use until the next one came back).
    private var lastReleaseServedWaiter = false

    /// The share of its remaining time a caller is admitted to wait for, by the estimate. The
    /// estimate follows the pace of the last few dozen holds; under overload the pace wavers, and
    /// admitting callers up to their whole deadline lets some of them wait it out and time out
    /// after all. The margin turns those into busy answers given at once.
    static let admissionMargin = 0.8

    /// Weight of one hold in the moving average: about the last 30 holds count.
    private static let holdTimeWeight = 1.0 / 16

    /// How often the waiting callers are looked over for those who can no longer be served in time.
    static let sheddingInterval: Duration = .milliseconds(100)

    /// A connection held since `acquired` came back at `now`. Called under the pool's lock, so
    /// that releases are timed in the order they are counted.
    mutating func connectionReturned(at now: ContinuousClock.Instant, heldSince acquired: ContinuousClock.Instant) {
        let held = (now - acquired).seconds
        holdTime = holdTime.map { $0 + (held - $0) * Self.holdTimeWeight } ?? held
        if lastReleaseServedWaiter, let last = lastRelease {
            pace.add((now - last).seconds)
        }
        lastRelease = now
        lastReleaseServedWaiter = false
    }

    /// The connection that just came back went straight to a waiting caller.
    mutating func returnedConnectionServedWaiter() {
        lastReleaseServedWaiter = true
    }

    /// How long, by recent experience, the pool takes to serve one more waiting caller: the
    /// pace connections came back while all were in use (`ReleasePace`), or, until enough
    /// of that was seen, the mean hold time over the connections.
    func servingInterval(connections: Int) -> Double? {
        pace.mean ?? holdTime.map { $0 / Double(connections) }
    }

    /// How long the `waiting` callers (and one more) should take to serve, in seconds.
    func queueWait(waiting: Int, connections: Int) -> Double? {
        servingInterval(connections: connections).map { Double(waiting + 1) * $0 }
    }

    /// The refusal for a caller who would wait behind `waiting` others with `remaining` seconds
    /// left of the `timeout` it may wait, or nil when it may queue.
    func admissionRefusal(waiting: Int, connections: Int, remaining: Double, timeout: Duration) -> PostgresError? {
        guard let wait = queueWait(waiting: waiting, connections: connections),
              wait > remaining * Self.admissionMargin else { return nil }
        var error = PostgresError(
            .poolBusy,
            "busy: \(PoolWording.allInUse(connections)) and \(waiting) \(waiting == 1 ? "caller" : "callers") waiting (about \(PoolWording.seconds(wait)) of work, "
                + "too close to the \(PoolWording.seconds(timeout.seconds)) a caller may wait); retry shortly, or raise the pool size")
        error.retryAfter = .milliseconds(Int64((wait * 1000).rounded(.up)))
        return error
    }

    /// Removes from `waiters` the callers that the queue ahead of them could not get through
    /// before their deadlines even if every connection came back now and then kept the pool's
    /// recent pace, and the error to refuse them with.
    ///
    /// A caller admitted when the queue looked short enough waits on while the pace may fall (a
    /// slower stretch of the server, of the machine); refused now, it learns at once what it
    /// would otherwise learn at its deadline after the full wait. One stall (a checkpoint, a
    /// descheduled thread) makes one long interval between releases and lifts the pace read for
    /// a while, and shedding on that reading would refuse callers the pool then serves. So a
    /// waiter is shed only when hopeless at the better of two readings a look apart:
    /// `previousInterval` is the reading of the previous look, updated here.
    func shedHopeless(
        from waiters: inout WaiterQueue, at now: ContinuousClock.Instant, connections: Int, previousInterval: inout Double?
    ) -> (shed: [WaiterQueue.Continuation], error: PostgresError?) {
        let interval = servingInterval(connections: connections)
        defer { previousInterval = interval }
        guard let interval, let previousInterval else { return ([], nil) }
        let best = min(interval, previousInterval)
        let shed = waiters.removeHopeless(at: now, connections: connections, holdPerConnection: best * Double(connections))
        guard !shed.isEmpty else { return ([], nil) }
        var error = PostgresError(
            .poolBusy,
            "busy: \(PoolWording.allInUse(connections)), and at the pool's pace now (one caller every "
                + "\(PoolWording.milliseconds(best))) the callers queued ahead could not be served before this one's wait ran out; "
                + "retry shortly, or raise the pool size")
        // When the queue that stays should be through.
        error.retryAfter = .milliseconds(Int64((Double(waiters.count) * best * 1000).rounded(.up)))
        return (shed, error)
    }
}

/// The pool's words for its own state, shared by its refusals.
enum PoolWording {
    static func allInUse(_ maximum: Int) -> String {
        maximum == 1 ? "the pool's one connection is in use" : "all \(maximum) connections in use"
    }

    static func seconds(_ value: Double) -> String {
        value < 10 ? "\((value * 10).rounded() / 10) s" : "\(Int(value.rounded(.up))) s"
    }

    static func milliseconds(_ value: Double) -> String {
        value < 0.01 ? "\((value * 10_000).rounded() / 10) ms" : "\(Int((value * 1000).rounded())) ms"
    }
}

extension Duration {
    /// In seconds, as a `Double`.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
