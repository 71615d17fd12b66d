import CLibPQ
import Foundation
import Synchronization

/// One thread that waits, in `epoll`, for the sockets of every connection with a statement in
/// flight, and resumes the task waiting on each.
///
/// Hand-written because no library here watches a descriptor that someone else reads: NIO's
/// channels take the descriptor over and read it themselves, while libpq must do the reading;
/// a Dispatch read source delivers on a queue, one more hand-off before the task resumes.
/// With this, a statement costs its caller one thread hand-off (this thread resuming the task)
/// instead of two (to a connection's own thread and back), and the process needs one thread
/// for all its connections rather than one each.
///
/// The thread is also a `TaskExecutor`. A task that prefers it runs here between its waits:
/// the answer to its statement resumes it on the thread that saw the answer arrive, with no
/// hand-off to the concurrency pool at all — the way a single-threaded client such as pgbench
/// runs. Jobs run between two `epoll_wait`s, in the order they came.
final class SocketWaiter: TaskExecutor, Sendable {
    static let shared = SocketWaiter()

    private let epollFD: Int32
    /// An eventfd in the epoll set, rung when a job arrives while the thread sleeps in `epoll_wait`.
    private let doorbellFD: Int32
    /// At most one waiting task per descriptor: a connection has one statement in flight.
    private let waiting = Mutex<[Int32: UnsafeContinuation<Int32, Never>]>([:])
    /// Jobs of the tasks that prefer this executor, and whether the thread sleeps without a limit.
    private let jobs = Mutex<(queue: [UnownedJob], sleeping: Bool)>(([], false))
    /// Why `epoll_create1` failed, if it did (every wait then reports it).
    private let creationError: Int32

    private init() {
        epollFD = orderflow_epoll_create()
        creationError = epollFD >= 0 ? 0 : errno
        doorbellFD = epollFD >= 0 ? orderflow_epoll_add_doorbell(epollFD) : -1
        guard epollFD >= 0 else { return }  // every wait reports failure; jobs go to the pool
        Thread { [self] in self.run() }.start()
    }

    /// Suspends until `fd` is readable (or writable, when `writable`), has an error or was hung
    /// up, and returns 0; or returns the errno, at once, when the descriptor cannot be watched.
    /// Runs in the caller's isolation (the connection's actor): no hop before or after.
    func wait(for fd: Int32, writable: Bool = false, isolation: isolated (any Actor)? = #isolation) async -> Int32 {
        guard epollFD >= 0 else { return creationError }
        return await withUnsafeContinuation(isolation: isolation) { continuation in
            register(continuation, for: fd, writable: writable)
        }
    }

    /// Like `wait(for:)`, for a socket that may stay quiet for good (a LISTEN connection):
    /// also returns, with `ECANCELED`, as soon as the calling task is cancelled.
    func waitUntilReadableOrCancelled(_ fd: Int32, isolation: isolated (any Actor)? = #isolation) async -> Int32 {
        guard epollFD >= 0 else { return creationError }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: isolation) { continuation in
                register(continuation, for: fd, writable: false)
                // Cancelled before the registration: the handler found nobody to resume.
                if Task.isCancelled { resumeWaiter(of: fd, with: ECANCELED) }
            }
        } onCancel: {
            resumeWaiter(of: fd, with: ECANCELED)
        }
    }

    private func register(_ continuation: UnsafeContinuation<Int32, Never>, for fd: Int32, writable: Bool) {
        let replaced = waiting.withLock { $0.updateValue(continuation, forKey: fd) }
        precondition(replaced == nil, "two waits on one socket: a connection has one statement in flight")
        // Stored before arming: the event may fire before this call returns.
        let failure = orderflow_epoll_arm(epollFD, fd, writable ? 1 : 0)
        if failure != 0 { resumeWaiter(of: fd, with: failure) }
    }

    /// Whoever takes the continuation out of `waiting` resumes it: exactly once.
    private func resumeWaiter(of fd: Int32, with result: Int32) {
        waiting.withLock { $0.removeValue(forKey: fd) }?.resume(returning: result)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        guard epollFD >= 0 else {
            // No thread to run it (epoll could not be set up): the pool runs it instead.
            globalConcurrentExecutor.enqueue(job)
            return
        }
        let job = UnownedJob(job)
        let wasSleeping = jobs.withLock { state in
            state.queue.append(job)
            defer { state.sleeping = false }
            return state.sleeping
        }
        if wasSleeping { orderflow_doorbell_ring(doorbellFD) }
    }

    private func run() {
        nameCurrentThread("pg sockets")
        var ready = [Int32](repeating: 0, count: 64)
        var batch: [UnownedJob] = []
        while true {
            jobs.withLock { state in
                swap(&batch, &state.queue)
                // Sleep without a limit only when a job arriving meanwhile can ring the doorbell.
                state.sleeping = batch.isEmpty && doorbellFD >= 0
            }
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            // After jobs, only look at the sockets: more jobs may have come. Without a
            // doorbell (eventfd failed), look for jobs every millisecond.
            let timeout: Int32 = !batch.isEmpty ? 0 : doorbellFD >= 0 ? -1 : 1
            batch.removeAll(keepingCapacity: true)
            let count = orderflow_epoll_wait(epollFD, &ready, Int32(ready.count), timeout)
            guard count > 0 else { continue }  // EINTR, or nothing ready
            for fd in ready.prefix(Int(count)) {
                if fd == doorbellFD {
                    orderflow_doorbell_reset(fd)
                } else {
                    resumeWaiter(of: fd, with: 0)
                }
            }
        }
    }
}

extension PostgresConnection {
    /// The thread on which every connection's answers arrive, as a `TaskExecutor`.
    ///
    /// A task that mostly runs statements can prefer it — `withTaskExecutorPreference(_:)`, or
    /// `group.addTask(executorPreference:)` — and is then resumed on the thread that received
    /// the answer instead of being handed to the concurrency pool: one thread wake-up less per
    /// statement. Its code between statements runs on that one thread too, so keep long
    /// computations out of such tasks; tasks without the preference are unaffected.
    public static var socketExecutor: any TaskExecutor { SocketWaiter.shared }
}
