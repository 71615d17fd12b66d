import CLibPQ
import Foundation
import Synchronization

/// Runs blocking `work` on a new thread and returns its result without blocking the caller's.
func onThreadOfItsOwn<T: Sendable>(named name: String, _ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread {
            nameCurrentThread(name)
            continuation.resume(returning: work())
        }
        thread.stackSize = 512 << 10
        thread.start()
    }
}

/// Like `onThreadOfItsOwn`, but returns nil as soon as the calling task is cancelled; the
/// thread then finishes on its own and drops its result (a `NativeConnection` closes itself).
func onThreadOfItsOwnUnlessCancelled<T: Sendable>(named name: String, _ work: @escaping @Sendable () -> T) async -> T? {
    let handoff = Handoff<T>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            guard handoff.wait(continuation) else { return }
            let thread = Thread {
                nameCurrentThread(name)
                handoff.deliver(work())
            }
            thread.stackSize = 512 << 10
            thread.start()
        }
    } onCancel: {
        handoff.deliver(nil)
    }
}

/// One result, from a thread or from cancellation, whichever comes first; the second is dropped.
private final class Handoff<T: Sendable>: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<T?, Never>?, delivered: Bool)>((nil, false))

    /// Stores the continuation; false (and resumed with nil) when cancellation came first.
    func wait(_ continuation: CheckedContinuation<T?, Never>) -> Bool {
        let cancelled = state.withLock { state in
            if !state.delivered { state.continuation = continuation }
            return state.delivered
        }
        if cancelled { continuation.resume(returning: nil) }
        return !cancelled
    }

    func deliver(_ value: T?) {
        let continuation = state.withLock { state in
            defer { state = (nil, true) }
            return state.continuation
        }
        continuation?.resume(returning: value)
    }
}

/// Names the calling thread as `top -H`, `ps -T` and `perf` show it (Linux keeps 15 bytes).
/// Foundation's `Thread.name` is not passed on to the system on Linux: threads showed the
/// name of the concurrency-pool thread that created them.
func nameCurrentThread(_ name: String) {
    var bytes = Array(name.utf8.prefix(15))
    while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }  // whole characters only
    orderflow_name_thread(String(decoding: bytes, as: UTF8.self))
}

/// The calling thread's name as the system knows it (see `nameCurrentThread`).
func currentThreadName() -> String {
    var buffer = [CChar](repeating: 0, count: 16)
    orderflow_thread_name(&buffer)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
