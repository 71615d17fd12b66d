import Synchronization

/// How far the worker in this process runs behind the advances that give it work, and the
/// admission of advances that follows from it (``OrderFlowConfiguration/pushLagTarget``).
///
/// Each claim of the worker says how many commands it took and how long the oldest had been
/// due: near zero while the worker keeps up, growing while more comes than it sends. Once that
/// age has stood above the target for ``interval`` (a standing queue, as CoDel reckons one, not
/// a burst) — or at once when it is ``farBehind`` targets behind, which no burst worth riding
/// out puts it — advances are admitted at a rate, as TCP paces a sender (additive increase,
/// multiplicative decrease): half what the worker claimed in the last second, so that it
/// drains what waits; halved again each interval the lag still stands; raised each second the
/// lag stays under the target by half the highest pace the worker showed lately (a fixed step:
/// one growing with the pace it admits would compound, overshoot the worker by more each time
/// and build the very backlog pacing is for), and unbounded again once it is twice
/// the worker's pace with the lag under the target for a second. An advance beyond the rate is
/// refused at once as busy, before anything of it is rendered or written: the worker keeps up
/// with what is admitted, whose pushes reach the phones within about the target, instead of
/// every push waiting seconds behind the others.
///
/// Claims of orders whose merchants are paused or held back do not happen, so their waiting
/// commands do not count. Without a claim for ``silence`` (no worker in this process, or one
/// stopped), nothing is refused.
final class PushLag: Sendable {
    /// Seconds a command may wait for the worker before advances are paced.
    let target: Double
    private let state = Mutex(State())

    private struct State {
        var aboveSince: ContinuousClock.Instant?
        var calmSince: ContinuousClock.Instant?
        var lastClaim: ContinuousClock.Instant?
        var lastAge = 0.0
        /// Commands claimed, by when, over the last second.
        var claims: [(at: ContinuousClock.Instant, commands: Int)] = []
        /// Advances admitted a second; nil: every advance.
        var rate: Double?
        /// Advances a second the rate rises by, each second the lag stays under the target.
        var increase = 0.0
        /// The worker's highest pace lately (commands claimed a second), and when it was seen:
        /// what it can do, where its pace of the moment is only what it was given.
        var peakPace = 0.0
        var peakAt: ContinuousClock.Instant?
        var lastDecrease: ContinuousClock.Instant?
        var tokens = 0.0
        var lastRefill: ContinuousClock.Instant?
    }

    /// How long the lag must stay above the target before advances are paced, and between
    /// two decreases of the pace.
    static let interval: Duration = .milliseconds(100)
    /// How long without a claim before the lag counts as unknown and nothing is refused.
    static let silence: Duration = .seconds(1)
    /// The pace never falls below this many advances a second.
    static let minimumRate = 10.0
    /// A lag this many times the target is paced at once, without waiting for it to stand.
    static let farBehind = 4.0
    /// How long the worker's highest pace is remembered.
    static let peakMemory: Duration = .seconds(5)

    init(target: Duration) {
        self.target = max(0, target.inSeconds)
    }

    /// A claim took `commands` commands, the oldest of which had been due `age` seconds (0 when
    /// it found none).
    func claimed(commands: Int, oldestAge age: Double, at now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            state.lastClaim = now
            state.lastAge = age
            state.claims.append((now, commands))
            if let stale = state.claims.firstIndex(where: { now - $0.at <= .seconds(1) }), stale > 0 {
                state.claims.removeFirst(stale)
            }
            let current = Self.pace(state.claims)
            if current >= state.peakPace || state.peakAt.map({ now - $0 > Self.peakMemory }) ?? true {
                state.peakPace = current
                state.peakAt = now
            }
            guard age > target else {
                state.aboveSince = nil
                if state.calmSince == nil { state.calmSince = now }
                return
            }
            state.calmSince = nil
            let since = state.aboveSince ?? now
            state.aboveSince = since
            let standing = now - since >= Self.interval || age > Self.farBehind * target
            guard standing, state.lastDecrease.map({ now - $0 >= Self.interval }) ?? true else { return }
            // Multiplicative decrease: from the worker's pace (when first paced) or the pace itself.
            let base = state.rate ?? current
            state.rate = max(Self.minimumRate, base / 2)
            state.increase = max(Self.minimumRate, state.peakPace / 2)
            state.lastDecrease = now
            state.tokens = 0
            state.lastRefill = now
        }
    }

    /// Commands claimed a second, over the claims kept.
    private static func pace(_ claims: [(at: ContinuousClock.Instant, commands: Int)]) -> Double {
        guard let first = claims.first, let last = claims.last else { return minimumRate }
        let seconds = max(0.1, (last.at - first.at).inSeconds)
        return Double(claims.reduce(0) { $0 + $1.commands }) / seconds
    }

    /// The refusal an advance arriving at `now` gets, or nil to admit it.
    func refusal(at now: ContinuousClock.Instant = .now) -> OrderFlowError? {
        let refused = state.withLock { state -> (behind: Double, rate: Double)? in
            guard let rate = state.rate else { return nil }
            guard let last = state.lastClaim, now - last < Self.silence else {
                state.rate = nil
                return nil
            }
            let elapsed = state.lastRefill.map { (now - $0).inSeconds } ?? 0
            state.lastRefill = now
            var paced = rate
            if let calm = state.calmSince {
                // Additive increase while the worker keeps up.
                paced += state.increase * elapsed
                if now - calm >= .seconds(1), paced >= 2 * Self.pace(state.claims) {
                    state.rate = nil
                    return nil
                }
            }
            state.rate = paced
            state.tokens = min(max(1, paced * 0.05), state.tokens + paced * elapsed)
            guard state.tokens < 1 else {
                state.tokens -= 1
                return nil
            }
            return (state.lastAge, paced)
        }
        guard let refused else { return nil }
        var busy = OrderFlowError(.busy, "busy: this server's pushes run \(Int(refused.behind * 1000)) ms behind its advances "
            + "(it keeps them within \(Int(target * 1000)) ms), and it takes about \(Int(refused.rate)) advances a second "
            + "until they catch up; nothing was written")
        busy.isBusy = true
        busy.retryAfter = .milliseconds(Int64(max(100, min(refused.behind, 5) * 1000)))
        return busy
    }

}
