import Foundation
import Metrics
import Synchronization

/// The worker's metrics (swift-metrics; the process chooses the backend, e.g. Prometheus),
/// each labelled with the merchant (`merchant`), so that one merchant's trouble shows as its own,
/// and the push metrics with the platform (`platform`: `ios` through APNs, `android` through FCM).
///
/// - `orderflow_pushes_total{merchant,platform,outcome}`: push attempts by outcome (`sent`,
///   `retry`, `dead`, `token_dead`, `rejected`).
/// - `orderflow_merged_transitions_total{merchant,platform}`: transitions delivered; above the
///   number of sent pushes by however many the merge folded together.
/// - `orderflow_push_latency_seconds{merchant,platform}`: transition commit to APNs' (or FCM's)
///   answer, per sent push.
/// - `orderflow_queue_depth{merchant}`: `activity_commands` rows, sampled periodically.
/// - `orderflow_purged_rows_total{kind}`: rows the housekeeping's purge deleted, by kind
///   (`orders`, `transitions`, `deliveries`, `dead_letters`, `devices`, … as `PurgedRows.Kind`).
/// - `orderflow_purge_last_success_timestamp_seconds`: when the purge last ran to its end (Unix
///   time), whether or not anything was due: a quiet shop purges nothing, a stuck purge stops this.
///
/// And of the worker's claim loops, to see where a batch's time goes when the queue grows:
///
/// - `orderflow_worker_stage_seconds{stage}`: per batch, how long its `claim` (lease and read the
///   orders), `send` (merge and send every push) and `record` (one statement for the outcomes)
///   took.
/// - `orderflow_worker_batch_orders`: orders per claimed batch (a batch as large as `batchSize`
///   means more was waiting).
///
/// And two of the worker as a whole, for alerts (deploy/prometheus/alerts.yml):
///
/// - `orderflow_database_reachable`: 1 when the last queue-depth sample read the database, 0
///   when it failed.
/// - `orderflow_sending_paused{app}`: 1 while APNs refused an app's credentials or topic and its
///   merchants' pushes wait (`default`, `merchant:<id>`), 0 once a push went out through it.
final class WorkerMetrics: Sendable {
    private let factory: any MetricsFactory
    private let merchants = Mutex([String: MerchantMetrics]())
    private let purged = Mutex([PurgedRows.Kind: Counter]())
    private let databaseReachable: Gauge
    private let purgeSucceeded: Gauge
    private let pauses = Mutex(Pauses())
    private let stages: [WorkerStage: Timer]
    private let batchOrders: Recorder

    private struct Pauses {
        var gauges: [String: Gauge] = [:]
        var paused: Set<String> = []
    }

    private struct MerchantMetrics: Sendable {
        var platforms: [DeliveryPlatform: PlatformMetrics]
        var queueDepth: Gauge
    }

    private struct PlatformMetrics: Sendable {
        var pushes: [DeliveryOutcome: Counter]
        var mergedTransitions: Counter
        var latency: Timer
    }

    init(factory: any MetricsFactory) {
        self.factory = factory
        databaseReachable = Gauge(label: "orderflow_database_reachable", factory: factory)
        purgeSucceeded = Gauge(label: "orderflow_purge_last_success_timestamp_seconds", factory: factory)
        stages = Dictionary(uniqueKeysWithValues: WorkerStage.allCases.map {
            ($0, Timer(label: "orderflow_worker_stage_seconds", dimensions: [("stage", $0.rawValue)], factory: factory))
        })
        batchOrders = Recorder(label: "orderflow_worker_batch_orders", factory: factory)
    }

    /// A stage of a batch took `duration`.
    func record(_ stage: WorkerStage, _ duration: Duration) {
        stages[stage]?.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// A claim leased `orders` orders (not counted: claims that found nothing).
    func recordBatch(orders: Int) {
        batchOrders.record(orders)
    }

    func recordDatabaseReachable(_ reachable: Bool) {
        databaseReachable.record(reachable ? 1 : 0)
    }

    /// An app's sending paused: its gauge 1 until ``recordSendingResumed(app:)``. Labelled by
    /// the app without its revision (`merchant:<id>`), so that the merchant's next revision
    /// sending again clears the pause of the one it replaced.
    func recordSendingPaused(app: String) {
        let label = Self.pauseLabel(app)
        let gauge = pauses.withLock { pauses in
            pauses.paused.insert(label)
            if let gauge = pauses.gauges[label] { return gauge }
            let made = Gauge(label: "orderflow_sending_paused", dimensions: [("app", label)], factory: factory)
            pauses.gauges[label] = made
            return made
        }
        gauge.record(1)
    }

    /// A push went out through `app`: its pause, if any, is over. Cheap when nothing is paused.
    func recordSendingResumed(app: String) {
        let gauge = pauses.withLock { pauses -> Gauge? in
            guard !pauses.paused.isEmpty, pauses.paused.remove(Self.pauseLabel(app)) != nil else { return nil }
            return pauses.gauges[Self.pauseLabel(app)]
        }
        gauge?.record(0)
    }

    private static func pauseLabel(_ app: String) -> String {
        app.firstIndex(of: "#").map { String(app[..<$0]) } ?? app
    }

    private func metrics(of merchantID: String) -> MerchantMetrics {
        merchants.withLock { known in
            if let metrics = known[merchantID] { return metrics }
            let label = ("merchant", merchantID)
            var platforms: [DeliveryPlatform: PlatformMetrics] = [:]
            for platform in DeliveryPlatform.allCases {
                let labels = [label, ("platform", platform.rawValue)]
                var pushes: [DeliveryOutcome: Counter] = [:]
                for outcome in DeliveryOutcome.allCases {
                    pushes[outcome] = Counter(label: "orderflow_pushes_total", dimensions: labels + [("outcome", outcome.rawValue)], factory: factory)
                }
                platforms[platform] = PlatformMetrics(
                    pushes: pushes,
                    mergedTransitions: Counter(label: "orderflow_merged_transitions_total", dimensions: labels, factory: factory),
                    latency: Timer(label: "orderflow_push_latency_seconds", dimensions: labels, factory: factory))
            }
            let made = MerchantMetrics(
                platforms: platforms,
                queueDepth: Gauge(label: "orderflow_queue_depth", dimensions: [label], factory: factory))
            known[merchantID] = made
            return made
        }
    }

    func record(_ delivery: DeliveryRow) {
        guard let metrics = metrics(of: delivery.merchantID).platforms[delivery.platform] else { return }
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

    func recordPurgeSucceeded(at date: Date = Date()) {
        purgeSucceeded.record(date.timeIntervalSince1970)
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

/// The stages of one batch of the worker (`orderflow_worker_stage_seconds`).
enum WorkerStage: String, CaseIterable, Sendable {
    case claim, send, record
}
