import Logging

/// The worker's periodic chores beside the claims: queueing the check of activities near the
/// 8-hour limit, and sampling the queue depth for the metrics.
struct WorkerHousekeeping: Sendable {
    let configuration: WorkerConfiguration
    let store: OutboxStore
    let doorbell: WorkerDoorbell
    let metrics: WorkerMetrics
    let logger: Logger

    /// Periodically queues a check of activities near the 8-hour limit.
    func checkTimeLimits() async {
        while !Task.isCancelled {
            do {
                let queued = try await store.queueTimeLimitChecks(
                    age: configuration.timeLimitAge, maximumAttempts: configuration.maximumAttempts,
                    merchants: configuration.merchants)
                if queued > 0 {
                    logger.debug("activities near the time limit queued", metadata: ["orderflow.activities": "\(queued)"])
                    doorbell.ring()
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning("cannot look for activities near the time limit", metadata: ["orderflow.error": "\(error)"])
            }
            do { try await Task.sleep(for: configuration.timeLimitCheckInterval) } catch { return }
        }
    }

    /// Periodically records each merchant's queue depth (`orderflow_queue_depth`).
    func sampleQueueDepth(every interval: Duration) async {
        while !Task.isCancelled {
            do {
                metrics.recordQueueDepth(try await store.queueDepth(merchants: configuration.merchants))
                metrics.recordDatabaseReachable(true)
            } catch {
                metrics.recordDatabaseReachable(false)
            }
            do { try await Task.sleep(for: interval) } catch { return }
        }
    }
}
