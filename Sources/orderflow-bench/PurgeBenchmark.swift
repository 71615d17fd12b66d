import ArgumentParser
import Foundation
import Logging
import OrderFlow
import OrderFlowTesting
import PGKit

/// The purge's rate (rows/s, WAL per row, its batches) on 40-day-old finished orders, and what
/// it costs the hot path: engine advances per second with and without a purge running beside
/// them, in turns of one run that alternate their order from round to round (the ratio is of
/// the turns' means, each side through the same drift of the tables).
struct PurgeBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Purged rows/s, and advances/s with and without a purge running beside them.",
        discussion: "Example: swift run -c release orderflow-bench purge --orders 20000 --seconds 10 --rounds 2")

    @Option(help: "Old finished orders purged alone first (17 rows each).") var orders = 20_000
    @Option(help: "Seconds of each advance turn.") var seconds = 10
    @Option(help: "Rounds; in each, advances alone and advances beside a purge, in an order that alternates.") var rounds = 2
    @Option(name: [.customLong("concurrency"), .customLong("tasks")], help: "Concurrent tasks advancing orders, and the engine's connections.")
    var tasks = 8
    @Option(help: "Orders per purge batch (the library's default: 100).") var batchSize = RetentionPolicy().batchSize
    @Option(help: "Milliseconds between purge batches (the library's default: 50).") var pauseMs = 50
    @Option(help: "PostgreSQL server URL (default: ORDERFLOW_DATABASE_URL, else a private cluster in .orderflow/).")
    var database: String?

    func validate() throws {
        guard orders >= 100, seconds >= 1, rounds >= 1, tasks >= 1, batchSize >= 1, pauseMs >= 0 else {
            throw ValidationError("--orders must be at least 100; --seconds, --rounds, --concurrency and --batch-size at least 1")
        }
    }

    func run() async throws {
        try await BenchDatabase.with(url: database) { bench in try await measure(bench) }
    }

    /// One purge's figures.
    struct PurgeRun {
        var rows = 0
        var orders = 0
        var seconds = 0.0
        var batches = 0
        /// The longest time from one batch's end to the next's, the pause included.
        var longestGap = 0.0
    }

    private func measure(_ bench: BenchDatabase) async throws {
        var logger = Logger(label: "orderflow.bench")
        logger.logLevel = .warning
        let engineConfiguration = OrderFlowConfiguration(database: bench.configuration, maximumConnections: tasks)
        let setup = OrderFlowEngine(configuration: engineConfiguration, logger: logger)
        _ = try await setup.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        let purger = OrderFlowEngine(configuration: OrderFlowConfiguration(database: bench.configuration, maximumConnections: 2), logger: logger)
        var policy = RetentionPolicy()
        policy.batchSize = batchSize
        policy.pause = .milliseconds(pauseMs)

        print("seeding \(orders) finished orders 40 days old (\(OldOrders.rowsPerOrder) rows each)…")
        try await OldOrders.seed(setup.pool, prefix: "old-alone-", count: orders)
        try await settle(setup.pool)
        let walBefore = try await OldOrders.walPosition(setup.pool)
        let alone = try await Self.timedPurge(purger, policy, until: nil)
        let walBytes = try await OldOrders.walPosition(setup.pool) - walBefore
        print(String(format: "purge alone: %d rows (%d orders) in %.1f s: %.0f rows/s, %.0f orders/s; %d batches of ≤ %d orders, longest gap between batches %.0f ms (pause %d ms); WAL %.1f MB, %.0f bytes per row, %.0f kB per batch",
                     alone.rows, alone.orders, alone.seconds, Double(alone.rows) / alone.seconds, Double(alone.orders) / alone.seconds,
                     alone.batches, batchSize, alone.longestGap * 1000, pauseMs, walBytes / 1e6, walBytes / Double(max(1, alone.rows)),
                     walBytes / Double(max(1, alone.batches)) / 1000))
        let ordersPerSecond = Double(alone.orders) / alone.seconds

        var quiet: [Double] = []
        var busy: [Double] = []
        var purgedBeside: [Double] = []
        var nextOrder = 0
        let ordersPerTurn = max(2_000, seconds * 16_000 / 4)
        for round in 0..<rounds {
            for besidePurge in round % 2 == 0 ? [false, true] : [true, false] {
                let engine = OrderFlowEngine(configuration: engineConfiguration, logger: logger)
                let range = nextOrder..<(nextOrder + ordersPerTurn)
                nextOrder = range.upperBound
                try await createFoodOrders(engine: engine, prefix: "live-", range: range, tasks: tasks)
                if besidePurge {
                    // More than the turn can purge, so that the purge runs through all of it.
                    let old = max(2_000, Int(ordersPerSecond * Double(seconds) * 1.5))
                    try await OldOrders.seed(setup.pool, prefix: "old-\(round)-", count: old)
                }
                try await settle(setup.pool)
                print("round \(round + 1): advances \(besidePurge ? "beside a purge" : "alone")…")
                let rate: Double
                if besidePurge {
                    let purge = Task { try await Self.timedPurge(purger, policy, until: .now + .seconds(seconds)) }
                    rate = try await advanceFoodOrders(engine: engine, prefix: "live-", orders: range, tasks: tasks, seconds: seconds)
                    let beside = try await purge.value
                    purgedBeside.append(Double(beside.rows) / beside.seconds)
                    print(String(format: "  round %d  advances beside a purge %8.0f advances/s; the purge %.0f rows/s meanwhile",
                                 round + 1, rate, Double(beside.rows) / beside.seconds))
                    _ = try await purger.purge(policy)  // what is left, unmeasured
                    busy.append(rate)
                } else {
                    rate = try await advanceFoodOrders(engine: engine, prefix: "live-", orders: range, tasks: tasks, seconds: seconds)
                    print(String(format: "  round %d  advances alone          %8.0f advances/s", round + 1, rate))
                    quiet.append(rate)
                }
                await engine.shutdown()
            }
        }
        func mean(_ values: [Double]) -> Double { values.reduce(0, +) / Double(values.count) }
        print(String(format: "advances alone                %8.0f advances/s  (mean of %d turns)", mean(quiet), quiet.count))
        print(String(format: "advances beside a purge       %8.0f advances/s  (mean of %d turns; the purge %.0f rows/s meanwhile)",
                     mean(busy), busy.count, mean(purgedBeside)))
        let byRound = zip(busy, quiet).map { String(format: "%.2f", $0 / $1) }.joined(separator: " / ")
        print(String(format: "ratio beside a purge/alone    %5.2f   (round by round %@)", mean(busy) / mean(quiet), byRound))
        await purger.shutdown()
        await setup.shutdown()
    }

    /// Purges with `policy`, timing its batches; with `deadline`, counts only what was purged by
    /// then and stops the purge there.
    static func timedPurge(_ engine: OrderFlowEngine, _ policy: RetentionPolicy, until deadline: ContinuousClock.Instant?) async throws -> PurgeRun {
        let clock = ContinuousClock()
        let started = clock.now
        let run = LockedValue((PurgeRun(), started))
        let purge = Task {
            try await engine.purge(policy) { counts in
                let now = clock.now
                run.withLock { state in
                    if let deadline, now > deadline { return }
                    state.0.rows += counts.values.reduce(0, +)
                    state.0.orders += counts[.orders] ?? 0
                    state.0.batches += 1
                    state.0.longestGap = max(state.0.longestGap, (now - state.1).asSeconds)
                    state.1 = now
                }
            }
        }
        if let deadline {
            try await clock.sleep(until: deadline)
            purge.cancel()
            _ = try? await purge.value
        } else {
            _ = try await purge.value
        }
        var result = run.value.0
        result.seconds = ((deadline.map { min($0, clock.now) } ?? clock.now) - started).asSeconds
        return result
    }
}
