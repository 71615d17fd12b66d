import APNS
import FCM

/// Sends requests `0..<count` from `concurrency` tasks, each sending its next request as soon as
/// the previous one was answered; returns how many sends failed. The timed loop of the delivery
/// and broadcast benchmarks, whatever the client.
func sendRoundRobin(count: Int, concurrency: Int, _ send: @escaping @Sendable (Int) async throws -> Void) async -> Int {
    let next = Counter()
    let failed = Counter()
    await withDiscardingTaskGroup { group in
        for _ in 0..<concurrency {
            group.addTask {
                while true {
                    let index = next.value.add(1, ordering: .relaxed).oldValue
                    guard index < count else { return }
                    do {
                        try await send(index)
                    } catch {
                        failed.value.add(1, ordering: .relaxed)
                    }
                }
            }
        }
    }
    return failed.value.load(ordering: .relaxed)
}

extension APNSClient {
    /// Sends `count` of `requests` (round and round) from `concurrency` tasks; returns how many failed.
    func sendForBenchmark(_ requests: [APNSRequest], count: Int, concurrency: Int) async -> Int {
        await sendRoundRobin(count: count, concurrency: concurrency) { index in
            _ = try await self.send(requests[index % requests.count])
        }
    }
}

extension FCMClient {
    /// Sends `count` of `messages` (round and round) from `concurrency` tasks; returns how many failed.
    func sendForBenchmark(_ messages: [FCMMessage], count: Int, concurrency: Int) async -> Int {
        await sendRoundRobin(count: count, concurrency: concurrency) { index in
            try await self.send(messages[index % messages.count])
        }
    }
}
