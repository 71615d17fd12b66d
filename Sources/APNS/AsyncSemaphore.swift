import Synchronization

/// Limits how many tasks run a section at once; waiters are served first come, first served and
/// leave the queue when cancelled.
final class AsyncSemaphore: Sendable {
    private struct State {
        var permits: Int
        var nextWaiterID: UInt64 = 0
        /// Waiter ids in arrival order; ids whose waiter was cancelled are skipped.
        var queue: [UInt64] = []
        var queueHead = 0
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]

        mutating func popFirstWaiter() -> CheckedContinuation<Void, any Error>? {
            while self.queueHead < self.queue.count {
                let id = self.queue[self.queueHead]
                self.queueHead += 1
                if let continuation = self.waiters.removeValue(forKey: id) {
                    self.compactQueue()
                    return continuation
                }
            }
            self.compactQueue()
            return nil
        }

        private mutating func compactQueue() {
            if self.queueHead == self.queue.count {
                self.queue.removeAll(keepingCapacity: true)
                self.queueHead = 0
            } else if self.queueHead > 1024, self.queueHead * 2 > self.queue.count {
                self.queue.removeFirst(self.queueHead)
                self.queueHead = 0
            }
        }
    }

    private let state: Mutex<State>

    init(permits: Int) {
        precondition(permits > 0, "a semaphore needs at least one permit")
        self.state = Mutex(State(permits: permits))
    }

    /// Takes a permit, waiting for one if none is free.
    ///
    /// - Throws: `CancellationError` if the task is cancelled while waiting.
    func acquire() async throws {
        let id: UInt64? = self.state.withLock { state in
            if state.permits > 0 {
                state.permits -= 1
                return nil
            }
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        guard let id else { return }

        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = self.state.withLock { state in
                    if Task.isCancelled { return true }
                    // A permit may have come back between the first check and now.
                    if state.permits > 0 {
                        state.permits -= 1
                        continuation.resume()
                        return false
                    }
                    state.queue.append(id)
                    state.waiters[id] = continuation
                    return false
                }
                if cancelled {
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let continuation = self.state.withLock { $0.waiters.removeValue(forKey: id) }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Returns a permit, handing it straight to the longest waiter if there is one.
    func release() {
        let waiter = self.state.withLock { state in
            if let waiter = state.popFirstWaiter() {
                return Optional(waiter)
            }
            state.permits += 1
            return nil
        }
        waiter?.resume()
    }
}
