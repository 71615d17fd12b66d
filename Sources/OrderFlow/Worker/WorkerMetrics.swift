import Metrics
import Synchronization

/// The worker's metrics (swift-metrics; the process chooses the backend, e.g. Prometheus),
/// each labelled with the merchant (`merchant`), so that one merchant's trouble shows as its own.
///
/// - `orderflow_pushes_total{merchant,outcome}`: push attempts by outcome (`sent`, `retry`,
///   `dead`, `token_dead`, `rejected`).
/// - `orderflow_merged_transitions_total{merchant}`: transitions delivered; above the number of
///   sent pushes by however many the merge folded together.
/// - `orderflow_push_latency_seconds{merchant}`: transition commit to APNs' answer, per sent push.
/// - `orderflow_queue_depth{merchant}`: `activity_commands` rows, sampled periodically.
/// - `orderflow_purged_rows_total{kind}`: rows the housekeeping's purge deleted, by kind
///   (`orders`, `transitions`, `deliveries`, `dead_letters`, `devices`, … as `PurgedRows.Kind`).
final class WorkerMetrics: Sendable {
    private let factory: any MetricsFactory
    private let merchants = Mutex([String: MerchantMetrics]())
    private let purged = Mutex([PurgedRows.Kind: Counter]())

    private struct MerchantMetrics: Sendable {
        var pushes: [DeliveryOutcome: Counter]
        var mergedTransitions: Counter
        var latency: Timer
        var queueDepth: Gauge
    }

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    private func metrics(of merchantID: String) -> MerchantMetrics {
        merchants.withLock { known in
            if let metrics = known[merchantID] { return metrics }
            let label = ("merchant", merchantID)
            var pushes: [DeliveryOutcome: Counter] = [:]
            for outcome in DeliveryOutcome.allCases {
                pushes[outcome] = Counter(label: "orderflow_pushes_total", dimensions: [label, ("outcome", outcome.rawValue)], factory: factory)
            }
            let made = MerchantMetrics(
                pushes: pushes,
                mergedTransitions: Counter(label: "orderflow_merged_transitions_total", dimensions: [label], factory: factory),
                latency: Timer(label: "orderflow_push_latency_seconds", dimensions: [label], factory: factory),
                queueDepth: Gauge(label: "orderflow_queue_depth", dimensions: [label], factory: factory))
            known[merchantID] = made
            return made
        }
    }

    func record(_ delivery: DeliveryRow) {
        let metrics = metrics(of: delivery.merchantID)
        metrics.pushes[delivery.outcome]?.increment()
        guard delivery.outcome == .sent else { return }
        metrics.mergedTransitions.increment(by: delivery.merged)
        if let latency = delivery.latencyMs {
            metrics.latency.recordNanoseconds(Int64(latency * 1_000_000))
        }
    }

    /// Per merchant; a merchant seen before and absent now has an empty queue.
    func recordQueueDepth(_ depths: [String: Int]) {
        let known = merchants.withLock { Array($0.keys) }
        for merchant in Set(known).union(depths.keys) {
            metrics(of: merchant).queueDepth.record(depths[merchant] ?? 0)
        }
    }

    func recordPurged(_ counts: [PurgedRows.Kind: Int]) {
        for (kind, count) in counts where count > 0 {
            let counter = purged.withLock { known in
                if let counter = known[kind] { return counter }
                let made = Counter(label: "orderflow_purged_rows_total", dimensions: [("kind", kind.rawValue)], factory: factory)
                known[kind] = made
                return made
            }
            counter.increment(by: count)
        }
    }
}
