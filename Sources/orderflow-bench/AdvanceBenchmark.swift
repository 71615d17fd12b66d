import ArgumentParser
import Foundation
import Logging
import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import WorkflowKit

/// Transitions per second through the engine, against pgbench running the same writes as one
/// SQL statement (update the order, insert history, insert the command): the raw limit.
struct AdvanceBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advance",
        abstract: "Engine advances/s vs the one-statement SQL transition under pgbench.",
        discussion: "Example: swift run -c release orderflow-bench advance --seconds 10")

    @Option(help: "Seconds each side runs.") var seconds = 10
    @Option(help: "Concurrent tasks (engine) and clients (pgbench).") var tasks = 8
    @Option(help: "PostgreSQL server URL (default: ORDERFLOW_DATABASE_URL, else a private cluster in .orderflow/).")
    var database: String?
    @Flag(help: "Do not send the coalesced worker wake-up NOTIFY (to measure what it costs).")
    var noNotify = false
    @Option(help: ArgumentHelp(
        "Orders the engine keeps in its in-process cache (default: every order the run prepares, as a backend that created its orders itself would; the library's default is 10000).",
        valueName: "n"))
    var cachedOrders: Int?

    func run() async throws {
        var logger = Logger(label: "orderflow.bench")
        logger.logLevel = .warning
        let bench = try await BenchDatabase.make(url: database)
        // Enough orders that no task runs out: each order takes four advances.
        let ordersNeeded = max(2_000, seconds * 12_000 / 4)
        var configuration = OrderFlowConfiguration(database: bench.configuration, maximumConnections: tasks)
        configuration.notifyWorkers = !noNotify
        configuration.cachedOrders = cachedOrders ?? ordersNeeded + 1
        let engine = OrderFlowEngine(configuration: configuration, logger: logger)
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        print("order cache: \(configuration.cachedOrders) orders")
        print("preparing \(ordersNeeded) orders for the engine and 10000 for pgbench…")
        try await createOrders(engine: engine, count: ordersNeeded)
        let sample = try await engine.advance("bench-0", to: "accept", input: ["eta": "+20m"])
        try await prepareRawOrders(engine: engine, count: 10_000)
        // Fresh tables have no statistics yet; both sides should run with the plans a live
        // database would use.
        try await engine.pool.query(PostgresQuery("ANALYZE"))

        try await engine.pool.query(PostgresQuery("CHECKPOINT"))
        print("pgbench: one-statement transition, \(tasks) clients, \(seconds) s…")
        let raw = try await runPgbench(url: bench.configuration.connectionString,
                                 script: rawScript, clients: tasks, seconds: seconds,
                                 variables: [
                                     "rendered": try PostgresJSON(encoding: sample.transition.rendered).text,
                                     "content": try PostgresJSON(encoding: sample.order.content).text,
                                     "input": try PostgresJSON(encoding: sample.transition.input).text,
                                 ])
        try await engine.pool.query(PostgresQuery("CHECKPOINT"))
        print("engine: advance through food-order, \(tasks) tasks, \(seconds) s…")
        let engineRate = try await runEngine(engine: engine, orders: ordersNeeded)
        let ratio = engineRate / raw
        print(String(format: "raw SQL (pgbench)      %8.0f transitions/s", raw))
        print(String(format: "engine advance         %8.0f transitions/s", engineRate))
        print(String(format: "ratio engine/raw       %8.2f   (target ≥ 0.70)", ratio))
        await engine.shutdown()
        await bench.drop()
    }

    private func createOrders(engine: OrderFlowEngine, count: Int) async throws {
        let tasks = self.tasks
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    for index in stride(from: task, to: count, by: tasks) {
                        _ = try await engine.createOrder(NewOrder(
                            orderID: "bench-\(index)", workflow: "food-order",
                            attributes: ["merchantName": "Bench Bistro", "orderNumber": .string("\(index)"), "itemCount": 2]))
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Orders of another merchant for pgbench to move, with the same workflow version.
    private func prepareRawOrders(engine: OrderFlowEngine, count: Int) async throws {
        try await engine.pool.query(PostgresQuery("""
            INSERT INTO workflow_versions (merchant_id, name, version, definition, source, checksum)
            SELECT 'raw', name, version, definition, source, checksum FROM workflow_versions WHERE merchant_id = 'default'
            """))
        try await engine.pool.query(PostgresQuery("""
            INSERT INTO orders (merchant_id, order_id, workflow_name, workflow_version, state, seq, attributes, content,
                                created_at, updated_at, state_entered_at)
            SELECT 'raw', 'raw-' || n, 'food-order', 1, 'received', 1, o.attributes, o.content, now(), now(), now()
            FROM generate_series(1, $1) AS n, (SELECT attributes, content FROM orders WHERE order_id = 'bench-1') AS o
            """, count))
    }

    /// The same writes as one engine advance, as one statement: the order's new content, the
    /// history row with its input and rendering, the command. The JSON values are those of a
    /// real first advance (accept with an ETA), bound as parameters (pgbench `-D`) as the
    /// engine binds them.
    private var rawScript: String {
        """
        \\set n random(1, 10000)
        WITH moved AS (UPDATE orders SET state = 'in_progress', seq = seq + 1, content = :content::jsonb, updated_at = now(), state_entered_at = now() WHERE merchant_id = 'raw' AND order_id = 'raw-' || :n RETURNING merchant_id, order_id, seq), history AS (INSERT INTO order_transitions (merchant_id, order_id, seq, from_state, to_state, event, input, rendered, actor, idempotency_key, occurred_at) SELECT merchant_id, order_id, seq, 'received', 'in_progress', 'accept', :input::jsonb, :rendered::jsonb, NULL, NULL, now() FROM moved), command AS (INSERT INTO activity_commands (merchant_id, order_id, seq, kind) SELECT merchant_id, order_id, seq, 'update' FROM moved) SELECT seq FROM moved;

        """
    }

    private func runEngine(engine: OrderFlowEngine, orders: Int) async throws -> Double {
        let steps: [(String, JSONValue)] = [
            ("accept", ["eta": "+20m"]), ("ready", [:]), ("dispatch", ["eta": "+15m", "driver": "Sam"]), ("deliver", [:]),
        ]
        let count = Counter()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(seconds)
        let started = clock.now
        let tasks = self.tasks
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    // bench-0 was advanced once already while preparing: skip it.
                    for index in stride(from: task == 0 ? tasks : task, to: orders, by: tasks) {
                        for (target, input) in steps {
                            guard clock.now < deadline else { return }
                            _ = try await engine.advance("bench-\(index)", to: target, input: input)
                            count.value.add(1, ordering: .relaxed)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Double(count.value.load(ordering: .relaxed)) / seconds
    }
}

/// Completed advances, counted from every task.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}
