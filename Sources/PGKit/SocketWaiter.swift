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
final class SocketWaiter: Sendable {
    static let shared = SocketWaiter()

    private let epollFD: Int32
    /// At most one waiting task per descriptor: a connection has one statement in flight.
    private let waiting = Mutex<[Int32: UnsafeContinuation<Int32, Never>]>([:])
    /// Why `epoll_create1` failed, if it did (every wait then reports it).
    private let creationError: Int32

    private init() {
        epollFD = orderflow_epoll_create()
        creationError = epollFD >= 0 ? 0 : errno
        guard epollFD >= 0 else { return }  // every wait then reports failure
        let thread = Thread { [self] in self.run() }
        thread.stackSize = 256 << 10
        thread.start()
    }

    /// Suspends until `fd` is readable (or writable, when `writable`), has an error or was hung
    /// up, and returns 0; or returns the errno, at once, when the descriptor cannot be watched.
    /// Runs in the caller's isolation (the connection's actor): no hop before or after.
    func wait(for fd: Int32, writable: Bool = false, isolation: isolated (any Actor)? = #isolation) async -> Int32 {
        guard epollFD >= 0 else { return creationError }
        return await withUnsafeContinuation(isolation: isolation) { continuation in
            let replaced = waiting.withLock { $0.updateValue(continuation, forKey: fd) }
            precondition(replaced == nil, "two waits on one socket: a connection has one statement in flight")
            // Stored before arming: the event may fire before this call returns.
            let failure = orderflow_epoll_arm(epollFD, fd, writable ? 1 : 0)
            if failure != 0 {
                waiting.withLock { $0.removeValue(forKey: fd) }?.resume(returning: failure)
            }
        }
    }

    private func run() {
        nameCurrentThread("pg sockets")
        var ready = [Int32](repeating: 0, count: 64)
        while true {
            let count = orderflow_epoll_wait(epollFD, &ready, Int32(ready.count))
            guard count > 0 else { continue }  // EINTR
            for fd in ready.prefix(Int(count)) {
                waiting.withLock { $0.removeValue(forKey: fd) }?.resume(returning: 0)
            }
        }
    }
}
