import Synchronization

/// Wakes the claim loops of one worker: rung by the engine's in-process signal, by LISTEN
/// notifications, by the time-limit scan, by a loop whose claim came back full, and (every
/// loop at once) at shutdown.
///
/// A ``ring()`` is answered by one claim: it wakes the loop that has waited longest, or, when
/// every loop is busy, it stays pending and the next loop to wait returns at once and claims
/// again (a commit made while a loop claimed is not lost). Waking every idle loop for every
/// ring would make all but one of them claim nothing; and a busy loop that re-claimed after any
/// ring while it worked, answered by another loop or not, would keep every loop claiming back
/// to back: under a steady stream of commits most claims would be empty round trips taking the
/// database's time from the commits and the pushes. A loop whose claim came back full rings
/// again, so a backlog still brings in every loop.
final class WorkerDoorbell: Sendable {
    private struct State {
        var rings: UInt64 = 0
        /// A ring that found no loop waiting, not yet answered by a claim.
        var pending = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The number of rings so far.
    var ticket: UInt64 { state.withLock { $0.rings } }

    /// Wakes the loop that has waited longest; with none waiting, the next wait returns at once.
    func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.rings &+= 1
            guard let first = state.waiters.keys.min() else {
                state.pending = true
                return nil
            }
            return state.waiters.removeValue(forKey: first)
        }
        waiter?.resume()
    }

    /// Wakes every waiting loop (shutdown); with none waiting, the next wait returns at once.
    func ringAll() {
        let waiters = state.withLock { state in
            state.rings &+= 1
            if state.waiters.isEmpty { state.pending = true }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns when rung (true; at once when a ring is pending, which this answers), after
    /// `timeout` (false), or when the task is cancelled.
    @discardableResult
    func waitForWork(timeout: Duration) async -> Bool {
        if state.withLock({ state in
            defer { state.pending = false }
            return state.pending
        }) { return true }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.suspend { state in
                    defer { state.pending = false }
                    return state.pending
                }
                return !Task.isCancelled
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let rung = await group.next() ?? false
            group.cancelAll()
            return rung
        }
    }

    /// Returns after a ring later than `ticket`, or when the task is cancelled.
    func waitForRing(after ticket: UInt64) async {
        await suspend { $0.rings != ticket }
    }

    /// Suspends until a ring resumes this waiter, unless `ready` (checked under the lock, before
    /// waiting) says to return at once; cancellation resumes it too.
    private func suspend(unless ready: @escaping @Sendable (inout State) -> Bool) async {
        let id = state.withLock { state in
            defer { state.nextWaiter &+= 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if ready(&state) || Task.isCancelled { return true }
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
        if !isSet { bell.ringAll() }  // a second, racing ring changes nothing: it stays set
    }

    /// Returns once set, or when the task is cancelled.
    func wait() async {
        await bell.waitForRing(after: 0)
    }

    /// Returns once set, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait() }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }
}
