import Crypto
import APNSCore
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// What the stand-in accepted, and waiting for a number of accepted pushes.
extension LocalAPNSCore {
    struct Waiter {
        var count: Int
        var continuation: CheckedContinuation<[LocalAPNSPush], any Error>
    }

    struct RecordState {
        var pushes: [LocalAPNSPush] = []
        var acceptedCount = 0
        var rejections: [LocalAPNSRejection] = []
        var rejectedCount = 0
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiterID: UInt64 = 0
    }

    func recordAccepted(_ push: LocalAPNSPush?) {
        // A push-to-start with `input-push-channel` subscribes the device (named by its token)
        // to the channel, as iOS 18 does with the activity it starts.
        if let push, push.aps?["event"]?.stringValue == "start", let channel = push.aps?["input-push-channel"]?.stringValue {
            _ = self.broadcastState.withLock { $0.subscribers[channel, default: []].insert(push.deviceToken) }
        }
        let ready: [(CheckedContinuation<[LocalAPNSPush], any Error>, [LocalAPNSPush])] = self.records.withLock { state in
            if let push { state.pushes.append(push) }
            state.acceptedCount += 1
            guard !state.waiters.isEmpty else { return [] }
            var ready: [(CheckedContinuation<[LocalAPNSPush], any Error>, [LocalAPNSPush])] = []
            for (id, waiter) in state.waiters where waiter.count <= state.acceptedCount {
                state.waiters.removeValue(forKey: id)
                ready.append((waiter.continuation, state.pushes))
            }
            return ready
        }
        for (continuation, pushes) in ready {
            continuation.resume(returning: pushes)
        }
    }

    func recordRejection(_ rejection: LocalAPNSRejection) {
        self.records.withLock { state in
            state.rejectedCount += 1
            if self.configuration.recordsPushes || state.rejections.count < 10_000 {
                state.rejections.append(rejection)
            }
        }
    }

    var pushes: [LocalAPNSPush] { self.records.withLock { $0.pushes } }
    var acceptedCount: Int { self.records.withLock { $0.acceptedCount } }
    var rejections: [LocalAPNSRejection] { self.records.withLock { $0.rejections } }
    var rejectedCount: Int { self.records.withLock { $0.rejectedCount } }

    func resetRecords() {
        self.records.withLock { state in
            state.pushes.removeAll()
            state.acceptedCount = 0
            state.rejections.removeAll()
            state.rejectedCount = 0
        }
    }

    /// Returns the recorded pushes once at least `count` requests were accepted since the last reset.
    func waitForAccepted(count: Int) async throws -> [LocalAPNSPush] {
        let id: UInt64 = self.records.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[LocalAPNSPush], any Error>) in
                let immediate: Result<[LocalAPNSPush], any Error>? = self.records.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.acceptedCount >= count { return .success(state.pushes) }
                    state.waiters[id] = Waiter(count: count, continuation: continuation)
                    return nil
                }
                if let immediate {
                    continuation.resume(with: immediate)
                }
            }
        } onCancel: {
            let waiter = self.records.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }
}
