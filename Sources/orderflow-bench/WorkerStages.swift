import CoreMetrics
import Foundation
import Synchronization

/// The metrics of the worker in the benchmark's process, kept with when each came: its batches'
/// stage times (`orderflow_worker_stage_seconds{stage}`) and sizes (`orderflow_worker_batch_orders`),
/// so that a run whose queue grew shows which stage slowed, and when. Every other metric is dropped.
final class WorkerStageLog: MetricsFactory, Sendable {
    struct Sample: Sendable {
        var at: ContinuousClock.Instant
        var stage: String
        var value: Double
    }

    private let samples = Mutex<[Sample]>([])

    func add(_ stage: String, _ value: Double) {
        let sample = Sample(at: .now, stage: stage, value: value)
        samples.withLock { $0.append(sample) }
    }

    /// Forgets what came before a measurement.
    func reset() { samples.withLock { $0.removeAll(keepingCapacity: true) } }

    /// Per stage: batches, p50, p99, max; then a line a second from `start`: batches, orders,
    /// and each stage's mean.
    func report(from start: ContinuousClock.Instant) -> [String] {
        let all = samples.withLock { $0 }
        guard !all.isEmpty else { return ["worker stages: no batch recorded"] }
        var lines: [String] = []
        var summary = "worker stages per batch:"
        for stage in ["claim", "send", "record"] {
            let values = all.filter { $0.stage == stage }.map(\.value)
            summary += " \(stage) p50 \(Stats.ms(Stats.percentile(values, 0.5))) p99 \(Stats.ms(Stats.percentile(values, 0.99))) max \(Stats.ms(values.max() ?? 0));"
        }
        let sizes = all.filter { $0.stage == "orders" }.map(\.value)
        summary += String(format: " %ld batches, %.0f orders each on average", sizes.count, sizes.reduce(0, +) / Double(max(1, sizes.count)))
        lines.append(summary)
        var seconds: [Int: [String: [Double]]] = [:]
        for sample in all {
            let second = Int((sample.at - start).asSeconds.rounded(.down))
            seconds[second, default: [:]][sample.stage, default: []].append(sample.value)
        }
        lines.append("  second  batches  orders  claim ms  send ms  record ms")
        for second in seconds.keys.sorted() {
            let stages = seconds[second]!
            func mean(_ stage: String) -> String {
                guard let values = stages[stage], !values.isEmpty else { return "-" }
                return String(format: "%.1f", values.reduce(0, +) / Double(values.count) * 1000)
            }
            let orders = stages["orders"] ?? []
            lines.append(String(format: "  %6ld  %7ld  %6.0f", second, orders.count, orders.reduce(0, +))
                         + "  " + mean("claim").leftPadded(8) + "  " + mean("send").leftPadded(7) + "  " + mean("record").leftPadded(9))
        }
        return lines
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        guard label == "orderflow_worker_stage_seconds", let stage = dimensions.first(where: { $0.0 == "stage" })?.1 else {
            return NOOPMetricsHandler.instance
        }
        return StageTimer(log: self, stage: stage)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        label == "orderflow_worker_batch_orders" ? BatchSizes(log: self) : NOOPMetricsHandler.instance
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { NOOPMetricsHandler.instance }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    private final class StageTimer: TimerHandler, Sendable {
        let log: WorkerStageLog
        let stage: String
        init(log: WorkerStageLog, stage: String) { (self.log, self.stage) = (log, stage) }
        func recordNanoseconds(_ duration: Int64) { log.add(stage, Double(duration) / 1e9) }
    }

    private final class BatchSizes: RecorderHandler, Sendable {
        let log: WorkerStageLog
        init(log: WorkerStageLog) { self.log = log }
        func record(_ value: Int64) { log.add("orders", Double(value)) }
        func record(_ value: Double) { log.add("orders", value) }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
