import Synchronization

/// How far the worker in this process runs behind the advances that give it work, and the
/// admission of advances that follows from it (``OrderFlowConfiguration/pushLagTarget``).
///
/// Each claim of the worker says how long the oldest command it took had been due: near zero
/// while the worker keeps up, growing while more comes than it sends. Once that age has stood
/// above the target for ``interval`` (a standing queue, as CoDel reckons one, not a burst),
/// advances are refused at once as busy, before anything of them is rendered or written, and
/// admitted again as soon as a claim takes commands younger than the target or finds none: the
/// worker drains what was committed, and the advances admitted reach their phones within about
/// the target, instead of every advance's push waiting behind seconds of others.
///
/// Claims of orders whose merchants are paused or held back do not happen, so their waiting
/// commands do not count. Without a claim for ``silence`` (no worker in this process, or one
/// stopped), nothing is refused.
final class PushLag: Sendable {
    /// Seconds a command may wait for the worker before advances are refused.
    let target: Double
    private let state = Mutex(State())

    private struct State {
        var aboveSince: ContinuousClock.Instant?
        var lastClaim: ContinuousClock.Instant?
        var lastAge = 0.0
    }

    /// How long the lag must stay above the target before advances are refused.
    static let interval: Duration = .milliseconds(100)
    /// How long without a claim before the lag counts as unknown.
    static let silence: Duration = .seconds(1)

    init(target: Duration) {
        self.target = max(0, Double(target.components.seconds) + Double(target.components.attoseconds) / 1e18)
    }

    /// A claim took commands the oldest of which had been due `age` seconds (0 when it found none).
    func claimed(oldestAge age: Double, at now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            state.lastClaim = now
            state.lastAge = age
            if age > target {
                if state.aboveSince == nil { state.aboveSince = now }
            } else {
                state.aboveSince = nil
            }
        }
    }

    /// The refusal an advance arriving at `now` gets, or nil to admit it.
    func refusal(at now: ContinuousClock.Instant = .now) -> OrderFlowError? {
        let behind = state.withLock { state -> Double? in
            guard let since = state.aboveSince, let last = state.lastClaim,
                  now - since >= Self.interval, now - last < Self.silence else { return nil }
            return state.lastAge
        }
        guard let behind else { return nil }
        var busy = OrderFlowError(.busy, "busy: this server's pushes run \(Int(behind * 1000)) ms behind its advances, "
            + "more than the \(Int(target * 1000)) ms it keeps them to; nothing was written")
        busy.isBusy = true
        // About when the worker has sent what waits ahead.
        busy.retryAfter = .milliseconds(Int64(max(100, min(behind, 5) * 1000)))
        return busy
    }
}
