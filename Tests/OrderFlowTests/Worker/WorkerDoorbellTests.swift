import Foundation
@testable import OrderFlow
import Synchronization
import Testing

/// The worker's doorbell: one ring, one claim; no ring lost while every loop is busy.
@Suite("Worker: doorbell")
struct WorkerDoorbellTests {
    @Test func aRingWakesOneWaitingLoopNotAll() async throws {
        let bell = WorkerDoorbell()
        let woken = Count()
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    // Long enough that a loaded machine's late wake-ups are not timeouts.
                    let rung = await bell.waitForWork(timeout: .seconds(30))
                    if rung { woken.value.withLock { $0 += 1 } }
                    return rung
                }
            }
            try await Task.sleep(for: .milliseconds(200))  // all three wait
            bell.ring()
            let first = try await group.next()
            #expect(first == true, "the ring woke a loop before any timeout")
            try await Task.sleep(for: .milliseconds(200))
            #expect(woken.value.withLock { $0 } == 1, "one ring, one loop")
            bell.ringAll()
            var results = [first]
            for try await result in group { results.append(result) }
            #expect(results.allSatisfy { $0 == true }, "shutdown wakes every loop: \(results)")
        }
    }

    @Test func aRingWhileEveryLoopIsBusyIsAnsweredByTheNextWaitOnce() async {
        let bell = WorkerDoorbell()
        bell.ring()  // no loop waits: a commit made while the loops claimed
        let clock = ContinuousClock()
        let start = clock.now
        #expect(await bell.waitForWork(timeout: .seconds(5)), "the pending ring is answered at once")
        #expect(clock.now - start < .seconds(1))
        #expect(await bell.waitForWork(timeout: .milliseconds(50)) == false, "and only once: the next wait times out")
    }

    @Test func aTimeoutIsNotARing() async {
        let bell = WorkerDoorbell()
        #expect(await bell.waitForWork(timeout: .milliseconds(20)) == false)
    }

    @Test func theStopLatchReachesEveryWaiterAndStaysSet() async {
        let latch = StopLatch()
        #expect(!latch.isSet)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 { group.addTask { await latch.wait() } }
            try? await Task.sleep(for: .milliseconds(100))
            latch.set()
            await group.waitForAll()
        }
        #expect(latch.isSet)
        await latch.wait(timeout: .seconds(5))  // returns at once once set
    }
}

private final class Count: Sendable {
    let value = Mutex(0)
}
