import Synchronization

/// Open-loop driving: call `j` (0..<count) is due at `start + j / rate` and started then (to the
/// millisecond: calls due within the same millisecond start together), whether or not earlier
/// calls have finished; returns when every call has finished.
///
/// Each call runs in an unstructured task, not as a child of a task group. The Swift runtime
/// keeps a group's children in a list that it walks to unlink each child that finishes
/// (`swift::TaskGroup::removeChildTask`), so a group with tens of thousands of callers in
/// flight — an overloaded engine's queue — spends its time there, and the benchmark then
/// measures its own load generator while PostgreSQL and the engine's connections sit idle.
/// The load generator must not be what collapses.
func runOpenLoop(
    count: Int, rate: Int, _ call: @escaping @Sendable (_ index: Int, _ due: ContinuousClock.Instant) async -> Void
) async {
    let clock = ContinuousClock()
    let start = clock.now
    let finished = CountdownLatch(count)
    func due(_ index: Int) -> ContinuousClock.Instant { start + .nanoseconds(Int64(index) * 1_000_000_000 / Int64(rate)) }
    var index = 0
    var wake = start
    while index < count {
        // Every call due by now starts now, each still timed from its own due instant.
        let now = clock.now
        while index < count, due(index) <= now {
            let (this, instant) = (index, due(index))
            Task {
                await call(this, instant)
                finished.countDown()
            }
            index += 1
        }
        guard index < count else { break }
        // Wake-ups at least a millisecond apart on the schedule (not after the last, late, wake):
        // at thousands of calls a second a timer for each call costs this process CPU per call
        // that the engine under test shares. At 1,000 calls/s or fewer every call still has
        // its own wake-up.
        wake = max(due(index), wake + .milliseconds(1))
        try? await clock.sleep(until: wake)
    }
    await finished.wait()
}

/// Resumes its one waiter when it has been counted down `count` times.
private final class CountdownLatch: Sendable {
    private let state: Mutex<(remaining: Int, waiter: CheckedContinuation<Void, Never>?)>

    init(_ count: Int) { state = Mutex((count, nil)) }

    func countDown() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if state.remaining <= 0 { return true }
                state.waiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }
}
