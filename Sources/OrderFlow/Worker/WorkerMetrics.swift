import Metrics

/// The worker's metrics (swift-metrics; the process chooses the backend, e.g. Prometheus).
///
/// - `orderflow_pushes_total{outcome}`: push attempts by outcome (`sent`, `retry`, `dead`,
///   `token_dead`, `rejected`).
/// - `orderflow_merged_transitions_total`: transitions delivered; above the number of sent
///   pushes by however many the merge folded together.
/// - `orderflow_push_latency_seconds`: transition commit to APNs' answer, per sent push.
/// - `orderflow_queue_depth`: `activity_commands` rows, sampled periodically.
struct WorkerMetrics: Sendable {
    private let pushes: [DeliveryOutcome: Counter]
    private let mergedTransitions: Counter
    private let latency: Timer
    private let queueDepth: Gauge

    init(factory: any MetricsFactory) {
        var pushes: [DeliveryOutcome: Counter] = [:]
        for outcome in DeliveryOutcome.allCases {
            pushes[outcome] = Counter(label: "orderflow_pushes_total", dimensions: [("outcome", outcome.rawValue)], factory: factory)
        }
        self.pushes = pushes
        mergedTransitions = Counter(label: "orderflow_merged_transitions_total", factory: factory)
        latency = Timer(label: "orderflow_push_latency_seconds", factory: factory)
        queueDepth = Gauge(label: "orderflow_queue_depth", factory: factory)
    }

    func record(_ delivery: DeliveryRow) {
        pushes[delivery.outcome]?.increment()
        guard delivery.outcome == .sent else { return }
        mergedTransitions.increment(by: delivery.merged)
        if let latency = delivery.latencyMs {
            self.latency.recordNanoseconds(Int64(latency * 1_000_000))
        }
    }

    func recordQueueDepth(_ depth: Int) {
        queueDepth.record(depth)
    }
}
