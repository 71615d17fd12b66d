import Foundation
import Logging
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Prometheus
import Testing

/// The worker's housekeeping purges what it sent once it is old enough, and counts the rows.
@Suite("Retention: the worker's purge", .serialized)
struct RetentionWorkerTests {
    @Test("an order the worker finished sending goes at the next purge once past its retention; the metric counts it",
          .timeLimit(.minutes(2)))
    func workerPurges() async throws {
        let h = try await WorkerHarness.make()
        let token = EngineFixture.token(41)
        try await h.createFoodOrder("W1")
        try await h.engine.registerActivityToken(orderID: "W1", deviceID: "phone", token: token)
        _ = try await h.engine.cancel("W1")
        try await h.createFoodOrder("W2")  // unfinished: stays

        let registry = PrometheusCollectorRegistry()
        let worker = OrderFlowWorker(
            configuration: h.configuration("purger") { $0.purgeInterval = .milliseconds(100) }, pool: h.pool, sender: h.client,
            wakeSignal: h.engine.wakeSignal, logger: h.logs.logger(label: "worker.purger"),
            metricsFactory: PrometheusMetricsFactory(registry: registry))
        let running = RunningWorker(worker, listener: nil)
        try await eventually("the end is sent and the commands handled") {
            guard h.pushes(token).contains(where: { $0.event == "end" }) else { return false }
            return try await h.pendingCommands("W1") == 0
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await h.engine.order("W1").order.state == "cancelled", "a recent finished order stays")

        try await h.pool.query(PostgresQuery(
            "UPDATE orders SET state_entered_at = now() - interval '31 days' WHERE order_id IN ('W1', 'W2')"))
        try await eventually("the worker purges W1") {
            try await h.pool.query(PostgresQuery("SELECT count(*) AS n FROM orders WHERE order_id = 'W1'")).single()
                .decode("n", as: Int.self) == 0
        }
        for table in ["order_transitions", "deliveries", "activities", "order_followers", "activity_commands"] {
            let rows = try await TableContents.read(h.fixture.database)[table] ?? ""
            #expect(!rows.contains(",W1,"), "W1 survives in \(table): \(rows)")
        }
        #expect(try await h.engine.order("W2").order.state == "received")
        let metrics = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        #expect(metrics.contains("orderflow_purged_rows_total{kind=\"orders\"} 1"), "\(metrics)")
        #expect(metrics.contains("orderflow_purged_rows_total{kind=\"transitions\"} 2"), "\(metrics)")
        try await running.stop()
        await h.shutdown()
    }
}
