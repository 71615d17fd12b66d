import Synchronization

/// How much work the advances of this process have given its worker that it has not yet
/// taken, and the admission of advances that follows from it
/// (``OrderFlowConfiguration/pushLagTarget``).
///
/// Each advance admitted is counted until its transition is committed (or it fails, and is
/// withdrawn), then as waiting until a claim of the worker takes it; a claim that comes back
/// short of a full batch found the queue empty, so the count of waiting ones starts again from
/// zero (which also forgets the commands other processes' workers took). By Little's law the
/// work ahead of a new advance, counted so, divided by the pace at which the worker takes
/// commands is how long it would wait: an advance is admitted while that is under the target,
/// and refused at once as busy, before anything of it is rendered or written, otherwise. The
/// bound is on the queue itself, not on the lag once it has built (which answers only after the
/// backlog it measures is there): under overload the worker is kept fed with about a target's
/// worth of work, its claims stay small and fast, and the pushes of what is admitted reach the
/// phones within about the target plus one claim and send.
///
/// The worker's pace is what it claimed over the last second; the work it may have ahead is
/// never less than ``minimumAhead`` commands, so that a worker that was idle, or slowed for a
/// moment, is given enough to show its pace again. Without a claim for ``silence`` (no worker
/// in this process, or one stopped), nothing is refused.
final class PushLag: Sendable {
    /// Seconds a command may wait for the worker.
    let target: Double
    private let state = Mutex(State())

    private struct State {
        /// Advances admitted whose transition is not yet committed.
        var inFlight = 0
        /// Commands committed by this process's advances that no claim has taken yet.
        var waiting = 0
        var lastClaim: ContinuousClock.Instant?
        /// Commands claimed, by when, over the last second, and their sum: kept as claims come
        /// and go, so that an admission, once per advance, adds nothing up.
        var claims: [(at: ContinuousClock.Instant, commands: Int)] = []
        var claimedInWindow = 0

        /// Forgets the claims older than the pace window at `now`.
        mutating func forgetClaims(before now: ContinuousClock.Instant) {
            guard let kept = claims.firstIndex(where: { now - $0.at <= PushLag.paceWindow }) else {
                claims.removeAll(keepingCapacity: true)
                claimedInWindow = 0
                return
            }
            guard kept > 0 else { return }
            claimedInWindow -= claims[..<kept].reduce(0) { $0 + $1.commands }
            claims.removeFirst(kept)
        }
    }

    /// How long without a claim before the worker counts as absent and nothing is refused.
    static let silence: Duration = .seconds(1)
    /// The work ahead of the worker is never held below this many commands.
    static let minimumAhead = 20
    /// Over how long the worker's pace is reckoned.
    static let paceWindow: Duration = .seconds(1)

    init(target: Duration) {
        self.target = max(0, target.inSeconds)
    }

    /// A claim took `commands` commands; `full`: it took as many orders as a batch holds, so
    /// more may be waiting.
    func claimed(commands: Int, full: Bool, at now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            state.lastClaim = now
            state.waiting = full ? max(0, state.waiting - commands) : 0
            state.claims.append((now, commands))
            state.claimedInWindow += commands
            state.forgetClaims(before: now)
        }
    }

    /// Admits an advance arriving at `now`, or throws the refusal it gets (``OrderFlowError/isBusy``).
    /// Returns whether the advance is counted: then ``committed()`` or ``withdrawn()`` must follow.
    func admit(at now: ContinuousClock.Instant = .now) throws -> Bool {
        let outcome = state.withLock { state -> (counted: Bool, refusedAhead: Int, bound: Int, pace: Double) in
            // No worker to measure: nothing refused, nothing counted.
            guard let last = state.lastClaim, now - last < Self.silence else { return (false, 0, 0, 0) }
            state.forgetClaims(before: now)
            let pace = Double(state.claimedInWindow) / Self.paceWindow.inSeconds
            let ahead = state.inFlight + state.waiting
            let bound = max(Self.minimumAhead, Int(target * pace))
            guard ahead >= bound else {
                state.inFlight += 1
                return (true, 0, bound, pace)
            }
            return (false, ahead, bound, pace)
        }
        guard outcome.refusedAhead > 0 else { return outcome.counted }
        var busy = OrderFlowError(.busy, "busy: this server's worker has \(outcome.refusedAhead) pushes to send before this advance's, "
            + "more than it sends in \(Int(target * 1000)) ms (\(Int(outcome.pace)) a second lately); nothing was written; retry shortly")
        busy.isBusy = true
        // Room comes as the worker takes what is ahead beyond the bound.
        let seconds = Double(outcome.refusedAhead - outcome.bound + 1) / max(1, outcome.pace)
        busy.retryAfter = .milliseconds(Int64(max(100, min(seconds, 1) * 1000)))
        throw busy
    }

    /// An admitted advance's transition was committed: its command waits for a claim.
    func committed() {
        state.withLock { state in
            state.inFlight = max(0, state.inFlight - 1)
            state.waiting += 1
        }
    }

    /// An admitted advance wrote nothing (it failed, or was a replay).
    func withdrawn() {
        state.withLock { state in state.inFlight = max(0, state.inFlight - 1) }
    }

    /// Advances admitted and not yet committed, and commands committed and not yet claimed.
    var workAhead: Int { state.withLock { $0.inFlight + $0.waiting } }
}
