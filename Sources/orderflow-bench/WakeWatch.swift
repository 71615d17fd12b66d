import Foundation
import OrderFlow
import PGKit
import OrderFlowTesting

/// The benchmark's own LISTEN on the engine's wake channel, beside the separate worker's: when
/// each NOTIFY reached a listener. With the commit times it splits commit → push into the wake
/// path (commit → the first NOTIFY received after it, which the worker got at the same moment)
/// and the rest (claim, read, send), so a miss of the latency goal points at one of them.
final class WakeWatch: Sendable {
    private let arrivals = LockedValue<[Double]>([])
    private let task: Task<Void, Never>

    init(configuration: PostgresConfiguration) {
        let listener = PostgresListener(configuration: configuration, channels: [OrderFlowEngine.wakeChannel])
        let arrivals = self.arrivals
        task = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await listener.run() }
                group.addTask {
                    for await event in listener.events {
                        if case .notification = event {
                            let now = Date().timeIntervalSince1970
                            arrivals.withLock { $0.append(now) }
                        }
                    }
                }
            }
        }
    }

    /// Stops listening; the arrival times so far (seconds since 1970, ascending).
    func stop() async -> [Double] {
        task.cancel()
        await task.value
        return arrivals.value
    }

    /// For each commit time, the wait until the first arrival at or after it (nil when none came
    /// after it).
    static func waits(commits: [Double], arrivals: [Double]) -> [Double?] {
        commits.map { committed in
            var low = 0, high = arrivals.count
            while low < high {
                let middle = (low + high) / 2
                if arrivals[middle] < committed { low = middle + 1 } else { high = middle }
            }
            return low < arrivals.count ? arrivals[low] - committed : nil
        }
    }
}
