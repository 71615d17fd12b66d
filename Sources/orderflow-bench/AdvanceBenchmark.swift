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
///
/// Three sides take turns on one database: pgbench; the engine called from tasks that prefer
/// its executor (`OrderFlowEngine.preferredExecutor`, resumed where PostgreSQL's answers
/// arrive); the engine called from plain tasks on the concurrency pool. The order of the sides
/// rotates from round to round, and each ratio is taken of the sides' mean rates: pgbench alone
/// swings ±10 % from one 10-second run to the next and the tables grow as a run goes on, so
/// every side goes through the same drift instead of one side getting the fresher database.
struct AdvanceBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advance",
        abstract: "Engine advances/s vs the one-statement SQL transition under pgbench.",
        discussion: "Example: swift run -c release orderflow-bench advance --seconds 10 --rounds 3")

    @Option(help: "Seconds of each turn of each side.") var seconds = 10
    @Option(help: "Rounds; in each, every side has one turn, in an order that rotates.") var rounds = 3
    @Option(name: [.customLong("concurrency"), .customLong("tasks")], help: "Concurrent tasks (engine) and clients (pgbench), and the engine's connections.")
    var tasks = 8
    @Option(help: ArgumentHelp(
        "Groups of advances the engine writes at once; advances that come meanwhile are committed together in the next (default: the library's, 2; 0: every advance alone).",
        valueName: "n"))
    var commitGroups: Int?
    @Option(help: "PostgreSQL server URL (default: ORDERFLOW_DATABASE_URL, else a private cluster in .orderflow/).")
    var database: String?
    @Flag(help: "Do not send the coalesced worker wake-up NOTIFY (to measure what it costs).")
    var noNotify = false
    @Option(help: ArgumentHelp(
        "Orders the engine keeps in its in-process cache (default: twice a turn's orders, so that it remembers every order of a turn, which are created just before it, as a backend that created its orders itself would; the library's default is 10000).",
        valueName: "n"))
    var cachedOrders: Int?

    enum Side: CaseIterable {
        case raw, preferredExecutor, pool

        var label: String {
            switch self {
            case .raw: "raw SQL (pgbench)"
            case .preferredExecutor: "engine, tasks preferring its executor"
            case .pool: "engine, tasks on the pool"
            }
        }
    }

    func validate() throws {
        guard seconds >= 1, rounds >= 1, tasks >= 1 else {
            throw ValidationError("--seconds, --rounds and --concurrency must each be at least 1.")
        }
    }

    func run() async throws {
        try await BenchDatabase.with(url: database) { bench in try await measure(bench) }
    }

    private func measure(_ bench: BenchDatabase) async throws {
        var logger = Logger(label: "orderflow.bench")
        logger.logLevel = .warning
        // Enough orders that no task runs out in a turn: each order takes four advances.
        let ordersPerTurn = max(2_000, seconds * 16_000 / 4)
        var configuration = OrderFlowConfiguration(database: bench.configuration, maximumConnections: tasks)
        configuration.notifyWorkers = !noNotify
        if let commitGroups { configuration.commitGroups = commitGroups }
        // The cache keeps an order touched within its last `capacity / 2` orders (two generations):
        // twice a turn's orders, so that every order of the turn is still known at its first
        // advance (with a turn's orders + 1, the first half of them were dropped by the time
        // they were advanced, and a quarter of all advances read their order first).
        configuration.cachedOrders = cachedOrders ?? 2 * ordersPerTurn
        // Sets the database up and runs the maintenance between turns; each engine turn gets an
        // engine of its own, which creates the turn's orders just before it (and so knows them,
        // as a backend that created its orders itself would).
        let setup = OrderFlowEngine(configuration: configuration, logger: logger)
        _ = try await setup.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        print("order cache: \(configuration.cachedOrders) orders; commit groups: \(configuration.commitGroups)")
        print("preparing 10000 orders for pgbench, and \(ordersPerTurn) for each turn of the engine just before it…")
        let rawTransition = try await RawTransition.prepare(engine: setup, orders: 10_000)

        print("\(rounds) rounds, each side \(seconds) s per round; \(tasks) pgbench clients running the one-statement transition, \(tasks) tasks advancing orders through food-order")
        var rates: [Side: [Double]] = [:]
        var nextOrder = 0
        for round in 0..<rounds {
            let sides = Side.allCases
            for position in 0..<sides.count {
                let side = sides[(position + round) % sides.count]  // R P E | P E R | E R P | …
                // Each turn starts vacuumed, analyzed and from a checkpoint: no turn inherits
                // another's dead rows or dirty pages, and autovacuum (woken by the orders just
                // created) does not run inside one side's turn only. A line as each turn starts,
                // for scripts that sample the process during one.
                func startTurn() async throws {
                    try await settle(setup.pool)
                    print("round \(round + 1): \(side)…")
                }
                let rate: Double
                let detail: String
                if side == .raw {
                    try await startTurn()
                    let cpuBefore = CPUUse.now()
                    let walBefore = await WALFlushes.read(setup.pool)
                    rate = try await rawTransition.run(url: bench.configuration.connectionString, clients: tasks, seconds: seconds)
                    detail = cpuDetail(from: cpuBefore, rate: rate) + "\n" + WALFlushes.summary(from: walBefore, to: await WALFlushes.read(setup.pool), rate: rate)
                } else {
                    let engine = OrderFlowEngine(configuration: configuration, logger: logger)
                    let orders = nextOrder..<(nextOrder + ordersPerTurn)
                    nextOrder = orders.upperBound
                    try await createOrders(engine: engine, range: orders)
                    try await startTurn()
                    let cpuBefore = CPUUse.now()
                    let walBefore = await WALFlushes.read(setup.pool)
                    rate = try await runEngine(
                        engine: engine, orders: orders, executor: side == .preferredExecutor ? engine.preferredExecutor : nil)
                    detail = cpuDetail(from: cpuBefore, rate: rate) + "\n" + groupDetail(engine.pool.groupStatistics, since: cpuBefore)
                        + "\n" + WALFlushes.summary(from: walBefore, to: await WALFlushes.read(setup.pool), rate: rate)
                    await engine.shutdown()
                }
                rates[side, default: []].append(rate)
                print("  round \(round + 1)  " + side.label.padding(toLength: 38, withPad: " ", startingAt: 0)
                      + String(format: "%8.0f transitions/s", rate))
                if !detail.isEmpty { print(detail.split(separator: "\n").map { "           " + $0 }.joined(separator: "\n")) }
            }
        }
        func mean(_ side: Side) -> Double { rates[side]!.reduce(0, +) / Double(rounds) }
        let rawRate = mean(.raw)
        for side in Side.allCases {
            print(side.label.padding(toLength: 40, withPad: " ", startingAt: 0)
                  + String(format: "%8.0f transitions/s  (mean of %d turns)", mean(side), rounds))
        }
        // The goals: callers should not need to know about the preferred executor to be fast.
        for (side, target) in [(Side.preferredExecutor, 0.9), (.pool, 0.85)] {
            let byRound = zip(rates[side]!, rates[.raw]!).map { String(format: "%.2f", $0 / $1) }.joined(separator: " / ")
            print(("ratio " + side.label + "/raw").padding(toLength: 52, withPad: " ", startingAt: 0)
                  + String(format: "%5.2f", mean(side) / rawRate) + String(format: "   (target ≥ %.2f; round by round ", target) + byRound + ")")
        }
        await setup.shutdown()
    }

    /// The turn's CPU split (see `CPUUse`); empty without `/proc`.
    private func cpuDetail(from start: CPUUse?, rate: Double) -> String {
        guard let start, let end = CPUUse.now() else { return "" }
        return end.summary(since: start, rate: rate)
    }

    /// The server's WAL flushes (`pg_stat_wal`), read before and after a turn: both sides of
    /// the benchmark wait for them, so transitions per flush is what a commit group must raise
    /// (pgbench's own transactions per flush is the figure to beat).
    private struct WALFlushes {
        var flushes: Double
        var bytes: Double
        var taken: ContinuousClock.Instant

        /// Nil when the server does not say (`pg_stat_wal` is PostgreSQL 14 and later).
        static func read(_ pool: PostgresPool) async -> WALFlushes? {
            guard let row = try? await pool.query(PostgresQuery("SELECT wal_sync, wal_bytes::float8 AS wal_bytes FROM pg_stat_wal")).first,
                  let flushes = try? row.decode("wal_sync", as: Int64.self), let bytes = try? row.decode("wal_bytes", as: Double.self)
            else { return nil }
            return WALFlushes(flushes: Double(flushes), bytes: bytes, taken: .now)
        }

        static func summary(from start: WALFlushes?, to end: WALFlushes?, rate: Double) -> String {
            guard let start, let end, end.flushes > start.flushes else { return "WAL flushes: not measured (pg_stat_wal not readable)" }
            let elapsed = end.taken - start.taken
            let seconds = elapsed.asSeconds
            let (flushes, transitions) = (end.flushes - start.flushes, rate * seconds)
            return String(format: "WAL: %.0f flushes/s, %.2f transitions per flush, %.0f bytes per transition",
                          flushes / seconds, transitions / flushes, (end.bytes - start.bytes) / max(1, transitions))
        }
    }

    /// How the turn's advances were committed together.
    private func groupDetail(_ statistics: PostgresPool.GroupStatistics, since start: CPUUse?) -> String {
        guard statistics.groups > 0 else { return "commit groups: none (every advance written alone)" }
        let inFlight = statistics.inFlight.asSeconds
        let turn = start.flatMap { start in CPUUse.now().map { $0.seconds(since: start) } } ?? Double(seconds)
        return String(format: "commit groups: %d, %.1f advances each on average, %.2f in flight on average, %.0f µs each; %d ran as one statement, %d tried to and failed",
                      statistics.groups, Double(statistics.statements) / Double(statistics.groups),
                      inFlight / turn, inFlight / Double(statistics.groups) * 1e6, statistics.batches, statistics.failedBatches)
    }

    private func createOrders(engine: OrderFlowEngine, range: Range<Int>) async throws {
        try await createFoodOrders(engine: engine, prefix: "bench-", range: range, tasks: tasks)
    }

    private func runEngine(engine: OrderFlowEngine, orders: Range<Int>, executor: (any TaskExecutor)?) async throws -> Double {
        try await advanceFoodOrders(engine: engine, prefix: "bench-", orders: orders, tasks: tasks, seconds: seconds, executor: executor)
    }
}

/// Moves food orders `<prefix><n>` of `orders` through accept, ready, dispatch and deliver from
/// `tasks` concurrent tasks for `seconds`: advances per second.
func advanceFoodOrders(
    engine: OrderFlowEngine, prefix: String, orders: Range<Int>, tasks: Int, seconds: Int, executor: (any TaskExecutor)? = nil
) async throws -> Double {
    let steps: [(String, JSONValue)] = [
        ("accept", ["eta": "+20m"]), ("ready", [:]), ("dispatch", ["eta": "+15m", "driver": "Sam"]), ("deliver", [:]),
    ]
    let count = Counter()
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(seconds)
    let started = clock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for task in 0..<tasks {
            group.addTask(executorPreference: executor) {
                for index in stride(from: orders.lowerBound + task, to: orders.upperBound, by: tasks) {
                    for (target, input) in steps {
                        guard clock.now < deadline else { return }
                        _ = try await engine.advance("\(prefix)\(index)", to: target, input: input)
                        count.value.add(1, ordering: .relaxed)
                    }
                }
            }
        }
        try await group.waitForAll()
    }
    return Double(count.value.load(ordering: .relaxed)) / (clock.now - started).asSeconds
}

/// Completed advances, counted from every task.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}
