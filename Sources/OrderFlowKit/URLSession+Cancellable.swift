import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSession {
    /// One request; cancelling the calling task ends the wait without blocking any thread.
    ///
    /// Apple's URLSession: its own `data(for:)`. swift-corelibs-foundation's (Linux) `data(for:)`
    /// deadlocks when a cancellation meets the answer: the cancelling thread holds the task's
    /// status lock while the cancellation handler waits (`DispatchQueue.sync`) for URLSession's
    /// work queue, and that queue, delivering the answer, waits for the same lock to resume the
    /// task. The cancelling thread is a thread of the cooperative pool, which then is one thread
    /// short for good. Calling `URLSessionTask.cancel()` as the answer arrives crashes it
    /// instead ("a task that is not in the registry"). So on Linux the callback API is wrapped,
    /// and a cancellation only wakes the caller: the URLSession task is left to end by itself
    /// (its answer, or the request's timeout) and its answer is dropped.
    func kitData(for request: URLRequest) async throws -> (Data, URLResponse) {
        #if canImport(FoundationNetworking)
        let call = CancellableRequest()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = dataTask(with: request) { data, response, error in
                    if let data, let response {
                        call.finish(.success((data, response)))
                    } else {
                        call.finish(.failure(error ?? URLError(.badServerResponse)))
                    }
                }
                call.start(task, continuation: continuation)
            }
        } onCancel: {
            // Never wait here: the runtime holds the task's status lock while this runs.
            DispatchQueue.global().async { call.cancel() }
        }
        #else
        return try await data(for: request)
        #endif
    }
}

#if canImport(FoundationNetworking)
/// One request's continuation, resumed once: by the answer or by the cancellation, whichever
/// comes first. The lock is never held while resuming.
private final class CancellableRequest: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<(Data, URLResponse), any Error>?
    private var cancelled = false

    func start(_ task: URLSessionDataTask, continuation: CheckedContinuation<(Data, URLResponse), any Error>) {
        lock.lock()
        if cancelled {
            lock.unlock()
            continuation.resume(throwing: URLError(.cancelled))
            return
        }
        self.continuation = continuation
        lock.unlock()
        task.resume()
    }

    func finish(_ result: Result<(Data, URLResponse), any Error>) {
        lock.lock()
        let waiting = continuation
        continuation = nil
        lock.unlock()
        waiting?.resume(with: result)
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let waiting = continuation
        continuation = nil
        lock.unlock()
        waiting?.resume(throwing: URLError(.cancelled))
    }
}
#endif
