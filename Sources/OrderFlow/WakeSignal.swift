import Foundation
import PGKit
import Synchronization

/// Tells workers that activity commands are waiting, without a NOTIFY in any transaction.
///
/// A worker in the same process gets an in-process signal at once. Workers elsewhere get a
/// `pg_notify` sent after the commit, coalesced to at most one per interval; a worker that just
/// had work also polls briefly, so a commit that falls inside a coalescing window is still
/// picked up within milliseconds.
public final class WakeSignal: Sendable {
    private let pool: PostgresPool?
    private let channel: String
    private let interval: Duration
    private let state = Mutex(State())

    private struct State {
        var lastNotify: ContinuousClock.Instant?
        var waiters: [Int: AsyncStream<Void>.Continuation] = [:]
        var nextID = 0
    }

    init(pool: PostgresPool?, channel: String, interval: Duration) {
        self.pool = pool
        self.channel = channel
        self.interval = interval
    }

    /// A stream that yields whenever this process commits work for workers. Buffers at most one
    /// pending signal: several commits before the worker looks count as one wake-up.
    public func wakeUps() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.waiters[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.waiters.removeValue(forKey: id) }
        }
        return stream
    }

    /// Call after a commit that enqueued commands.
    func signal() async {
        let now = ContinuousClock.now
        let (waiters, shouldNotify) = state.withLock { state -> ([AsyncStream<Void>.Continuation], Bool) in
            let due = state.lastNotify.map { now - $0 >= interval } ?? true
            if due { state.lastNotify = now }
            return (Array(state.waiters.values), due)
        }
        for waiter in waiters { waiter.yield() }
        guard shouldNotify, let pool else { return }
        // Best effort: a lost wake-up only delays delivery until the worker's next poll.
        _ = try? await pool.notify(channel: channel)
    }
}
