import Synchronization

/// Wakes every claim loop of one worker at once: rung by the engine's in-process signal, by
/// LISTEN notifications, by the time-limit scan and at shutdown.
///
/// A loop takes a ``ticket`` before it claims and waits with it afterwards: a ring in between
/// is not lost, the wait returns at once.
final class WorkerDoorbell: Sendable {
    private struct State {
        var rings: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The number of rings so far.
    var ticket: UInt64 { state.withLock { $0.rings } }

    func ring() {
        let waiters = state.withLock { state in
            state.rings &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns after a ring later than `ticket`, after `timeout`, or when the task is cancelled.
    func wait(after ticket: UInt64, timeout: Duration) async {
        if state.withLock({ $0.rings != ticket }) { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForRing(after: ticket) }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns after a ring later than `ticket`, or when the task is cancelled.
    func waitForRing(after ticket: UInt64) async {
        let id = state.withLock { state in
            defer { state.nextWaiter &+= 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.rings != ticket || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}

/// A one-way latch, set once (graceful shutdown) and awaited by whoever must react: a doorbell
/// rung at most once, waited on from before the first ring.
final class StopLatch: Sendable {
    private let bell = WorkerDoorbell()

    var isSet: Bool { bell.ticket != 0 }

    func set() {
        if !isSet { bell.ring() }  // a second, racing ring changes nothing: it stays set
    }

    /// Returns once set, or when the task is cancelled.
    func wait() async {
        await bell.waitForRing(after: 0)
    }

    /// Returns once set, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        await bell.wait(after: 0, timeout: timeout)
    }
}
