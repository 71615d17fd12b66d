import Logging

/// The worker's periodic chores beside the claims: queueing the check of activities near the
/// 8-hour limit, sampling the queue depth for the metrics, and purging what is old enough.
struct WorkerHousekeeping: Sendable {
    let configuration: WorkerConfiguration
    let store: OutboxStore
    let retentionStore: RetentionStore
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

    /// Purges the worker's merchants' rows that ``WorkerConfiguration/retention`` says are old
    /// enough, at start and then every `interval` (`orderflow_purged_rows_total`, and
    /// `orderflow_purge_last_success_timestamp_seconds` after each complete run). Several
    /// workers purging at once share the work.
    func purge(every interval: Duration) async {
        var policy = configuration.retention
        policy.merchants = configuration.merchants
        let purger = Purger(store: retentionStore, policy: policy, logger: logger)
        while !Task.isCancelled {
            do {
                let purged = try await purger.run { metrics.recordPurged($0) }
                metrics.recordPurgeSucceeded()
                if purged.total > 0 {
                    logger.info("purged rows past their retention", metadata: [
                        "orderflow.purged": "\(purged.total)", "orderflow.orders": "\(purged[.orders])",
                        "orderflow.batches": "\(purged.batches)",
                    ])
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning("cannot purge rows past their retention; trying again at the next interval",
                               metadata: ["orderflow.error": "\(error)"])
            }
            do { try await Task.sleep(for: interval) } catch { return }
        }
    }
}
