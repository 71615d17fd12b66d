import Foundation
import PGKit
import Synchronization

/// Tells workers that activity commands are waiting, without a NOTIFY in any transaction.
///
/// A worker in the same process gets an in-process signal at once. Workers elsewhere get a
/// `pg_notify` sent after the commit, coalesced to at most one per interval: the first commit
/// of a window notifies at once, and a commit inside the window gets one trailing notify at
/// its end, so no commit waits for a worker's idle poll.
public final class WakeSignal: Sendable {
    private let pool: PostgresPool?
    private let channel: String
    private let interval: Duration
    private let state = Mutex(State())

    private struct State {
        var lastNotify: ContinuousClock.Instant?
        var trailingScheduled = false
        var handlers: [Int: @Sendable () -> Void] = [:]
        var nextID = 0
    }

    /// The work the engine's advances have given the worker in this process and it has not yet
    /// taken, when the engine admits advances by it (``OrderFlowConfiguration/pushLagTarget``):
    /// the worker that this signal wakes says what each claim took.
    let pushLag: PushLag?

    init(pool: PostgresPool?, channel: String, interval: Duration, pushLag: PushLag? = nil) {
        self.pool = pool
        self.channel = channel
        self.interval = interval
        self.pushLag = pushLag
    }

    /// A stream that yields whenever this process commits work for workers. Buffers at most one
    /// pending signal: several commits before the worker looks count as one wake-up.
    public func wakeUps() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let subscription = subscribe { continuation.yield() }
        continuation.onTermination = { _ in subscription.cancel() }
        return stream
    }

    /// Calls `handler` in the committing task after every commit that enqueued commands, until
    /// the returned subscription is cancelled: no task hop between the commit and a worker's
    /// wake-up (a stream's consumer waits for a thread of the busy concurrency pool first).
    /// `handler` must return at once.
    func subscribe(_ handler: @escaping @Sendable () -> Void) -> Subscription {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.handlers[state.nextID] = handler
            return state.nextID
        }
        return Subscription { [weak self] in _ = self?.state.withLock { $0.handlers.removeValue(forKey: id) } }
    }

    /// Ends a ``subscribe(_:)`` when cancelled.
    struct Subscription: Sendable {
        let cancel: @Sendable () -> Void
    }

    /// Call after a commit that enqueued commands. Returns at once: the NOTIFY, when one is due,
    /// is sent by a task of its own, so that no caller's advance waits for a second round trip.
    func signal() {
        let now = ContinuousClock.now
        let interval = self.interval
        let (handlers, action) = state.withLock { state -> ([@Sendable () -> Void], NotifyAction) in
            let handlers = Array(state.handlers.values)
            guard let last = state.lastNotify, now - last < interval else {
                state.lastNotify = now
                return (handlers, .now)
            }
            if state.trailingScheduled { return (handlers, .none) }
            state.trailingScheduled = true
            return (handlers, .after(last + interval - now))
        }
        for handler in handlers { handler() }
        guard let pool else { return }
        switch action {
        case .none:
            return
        case .now:
            // Best effort: a lost wake-up only delays delivery until the worker's next poll.
            Task { [channel] in _ = try? await pool.notify(channel: channel) }
        case .after(let delay):
            // The trailing notify must not hold up the caller's advance; it is short-lived and
            // owns nothing but the pool reference.
            Task { [self] in
                try? await Task.sleep(for: delay)
                state.withLock { state in
                    state.trailingScheduled = false
                    state.lastNotify = .now
                }
                _ = try? await pool.notify(channel: channel)
            }
        }
    }

    private enum NotifyAction {
        case none
        case now
        case after(Duration)
    }
}
