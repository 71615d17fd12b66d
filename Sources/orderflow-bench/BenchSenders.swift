import APNS

extension APNSClient {
    /// Sends `count` of `requests` (round and round) from `concurrency` tasks, each sending its
    /// next request as soon as the previous one was answered; returns how many sends failed.
    /// The timed loop of the delivery and broadcast benchmarks.
    func sendForBenchmark(_ requests: [APNSRequest], count: Int, concurrency: Int) async -> Int {
        let next = Counter()
        let failed = Counter()
        await withDiscardingTaskGroup { group in
            for _ in 0..<concurrency {
                group.addTask {
                    while true {
                        let index = next.value.add(1, ordering: .relaxed).oldValue
                        guard index < count else { return }
                        do {
                            _ = try await self.send(requests[index % requests.count])
                        } catch {
                            failed.value.add(1, ordering: .relaxed)
                        }
                    }
                }
            }
        }
        return failed.value.load(ordering: .relaxed)
    }
}
