import CLibPQ
import Foundation

/// A serial executor backed by one dedicated OS thread.
///
/// libpq's calls block. Running them on the Swift concurrency pool (two threads on our machines)
/// would stall every other task, so each connection actor runs on a thread of its own — the
/// pattern GRDB uses with its `DispatchQueueActor`. No library offers a thread-backed
/// `SerialExecutor` on Linux (`DispatchSerialQueue` is not one there), hence this small type.
final class ThreadExecutor: SerialExecutor, @unchecked Sendable {
    // All mutable state is guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false
    private let name: String

    init(name: String) {
        self.name = name
        let thread = Thread { [self] in self.runLoop() }
        thread.stackSize = 1 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Lets the thread exit once every job already enqueued has run.
    func shutdown() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func runLoop() {
        nameCurrentThread(name)
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty && stopping {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch {
                job.runSynchronously(on: asUnownedSerialExecutor())
            }
        }
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
