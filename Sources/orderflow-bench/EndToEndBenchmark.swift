import APNS
import ArgumentParser
import Crypto
import Foundation
import LocalAPNS
import Logging
import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import WorkflowKit

/// Transitions driven at a fixed rate through the engine, a worker in the same process (woken by
/// `engine.wakeSignal`) and the local APNs stand-in: the latency from each transition's commit to
/// the push reaching the stand-in, and whether the outbox stays flat.
struct EndToEndBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "Commit-to-push latency at a fixed transition rate (engine + worker + local APNs).",
        discussion: """
            Open loop: transition j is due at start + j/rate, whether or not earlier ones have \
            finished. Each order is advanced at most once per --spacing seconds (over the 1 push/s \
            per-activity limit), so many orders are in rotation; every order has an activity token, \
            so every transition becomes one push. Latency is measured to the stand-in's \
            receivedAt from the transition's occurred_at (database clock, start of its \
            transaction), from its commit (pg_xact_commit_timestamp, when the server runs with \
            track_commit_timestamp = on) and from the moment advance returned.

            With --overload: the capacity C at 1× (--connections tasks back to back), then open \
            loop at 2 C and 4 C, and 1× again, --seconds each: committed, refused as busy (and how \
            fast), the outbox's growth and its drain time after each phase, the pool's pace \
            beside the one measured, and the CPU per committed advance.

            Example: swift run -c release orderflow-bench e2e --rate 1000 --seconds 20
            Example: swift run -c release orderflow-bench e2e --overload --seconds 10
            """)

    @Option(help: "Transitions per second (scheduled by the clock).") var rate = 1000
    @Option(help: "Seconds of driving.") var seconds = 60
    @Option(help: "Seconds between two steps of one order.") var spacing = 1.5
    @Option(help: "Connections of the engine's pool (the worker has its own pool of 6).") var connections = 8
    @Option(help: "PostgreSQL server URL (default: ORDERFLOW_DATABASE_URL, else a private cluster in .orderflow/).")
    var database: String?
    @Flag(help: "Measure overload instead: capacity at 1×, then 2× and 4× of it (--rate and --spacing are not used).")
    var overload = false
    @Option(help: "Orders prepared for --overload (each takes four advances).") var overloadOrders = 40_000
    @Option(help: "Seconds a caller may wait for a pooled connection (the engine's acquireTimeout).") var acquireTimeout = 10.0
    @Flag(help: "Run the worker in its own process as operators do (`orderflow worker run`, woken through LISTEN/NOTIFY), not in this one.")
    var separateWorker = false
    @Option(help: "The orderflow executable for --separate-worker (default: the one beside this program).")
    var workerExecutable: String?
    @Option(help: "Milliseconds between two NOTIFYs of the engine (its notifyInterval; default: the engine's).")
    var notifyInterval: Int?
    @Option(help: "Claim loops of the worker in this process (its concurrentBatches; default: the worker's).")
    var lanes: Int?
    @Option(help: "Orders the engine keeps in memory (its cachedOrders; default: the engine's, or every order of --overload, or twice the orders in rotation when that is more).")
    var cachedOrders: Int?
    @Option(help: "Milliseconds an advance should wait for its commit group under overload (the engine's queueTarget; default: the engine's; 0: off).")
    var queueTarget: Int?
    @Option(help: "Milliseconds the in-process worker's pushes may run behind before advances are refused (the engine's pushLagTarget; default: off).")
    var pushLagTarget: Int?

    static let steps: [(String, JSONValue)] = [
        ("accept", ["eta": "+20m"]), ("ready", [:]), ("dispatch", ["eta": "+15m", "driver": "Sam"]), ("deliver", [:]),
    ]

    func run() async throws {
        guard rate > 0, seconds > 0, spacing >= 1.0, acquireTimeout > 0 else {
            throw BenchError("--rate, --seconds and --acquire-timeout must be positive, --spacing at least 1")
        }
        var logger = Logger(label: "orderflow.bench")
        logger.logLevel = .warning
        let bench = try await BenchDatabase.make(url: database)
        let apns = try await BenchAPNS.start(recordsPushes: true)
        let outcome: Result<Void, any Error>
        do {
            if separateWorker {
                try await runWithSeparateWorker(apns: apns, bench: bench, logger: logger)
            } else {
                var configuration = apns.hostConfiguration(database: bench.configuration, connections: connections, workerID: "bench-e2e")
                configuration.engine.cachedOrders = engineCachedOrders(default: configuration.engine.cachedOrders)
                configuration.engine.acquireTimeout = .milliseconds(Int64(acquireTimeout * 1000))
                if let lanes { configuration.worker.concurrentBatches = lanes }
                if let queueTarget { configuration.engine.queueTarget = queueTarget > 0 ? .milliseconds(queueTarget) : nil }
                if let pushLagTarget { configuration.engine.pushLagTarget = .milliseconds(pushLagTarget) }
                let stages = WorkerStageLog()
                let host = try OrderFlowHost(configuration: configuration, logger: logger, metricsFactory: stages)
                do {
                    _ = try await host.engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
                } catch {
                    await host.shutdown()
                    throw error
                }
                try await whileRunning(host, logger: logger) {
                    try await drive(engine: host.engine, apns: apns, bench: bench, worker: nil, stages: stages)
                }
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        try? await apns.server.stop()
        await bench.finish()
        try outcome.get()
    }

    private func drive(engine: OrderFlowEngine, apns: BenchAPNS, bench: BenchDatabase, worker: SeparateWorker?,
                       stages: WorkerStageLog? = nil) async throws {
        if overload {
            try await measureOverload(engine: engine, apns: apns, bench: bench, worker: worker)
        } else {
            try await measure(engine: engine, apns: apns, bench: bench, worker: worker, stages: stages)
        }
    }

    /// The engine alone in this process (its commits NOTIFY, coalesced as configured), and
    /// `orderflow worker run` beside it with its defaults, as operators run it.
    private func runWithSeparateWorker(apns: BenchAPNS, bench: BenchDatabase, logger: Logger) async throws {
        var configuration = OrderFlowConfiguration(database: bench.configuration, maximumConnections: connections)
        configuration.cachedOrders = engineCachedOrders(default: configuration.cachedOrders)
        configuration.acquireTimeout = .milliseconds(Int64(acquireTimeout * 1000))
        if let notifyInterval { configuration.notifyInterval = .milliseconds(notifyInterval) }
        if let queueTarget { configuration.queueTarget = queueTarget > 0 ? .milliseconds(queueTarget) : nil }
        let engine = OrderFlowEngine(configuration: configuration, logger: logger)
        let executable = workerExecutable ?? URL(fileURLWithPath: CommandLine.arguments[0])
            .deletingLastPathComponent().appendingPathComponent("orderflow").path
        let result: Result<Void, any Error>
        var worker: SeparateWorker?
        do {
            _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
            let started = try await SeparateWorker(executable: executable, databaseURL: bench.url, apns: apns)
            worker = started
            print("worker: \(executable) worker run, process of its own (log \(started.logPath))")
            try await drive(engine: engine, apns: apns, bench: bench, worker: started)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        if let worker {
            let status = try? await worker.stop()
            print(worker.rssSummary())
            if status != 0 {
                print("the worker exited with status \(status.map(String.init) ?? "unknown"); its last lines:\n\(worker.logTail())")
            }
            worker.removeFiles()
        }
        await engine.shutdown()
        try result.get()
    }

    /// Orders in rotation: each is advanced every `spacing` seconds.
    private var rotation: Int { max(1, Int((Double(rate) * spacing).rounded(.up))) }

    /// The engine's order cache: as asked; else every order of --overload; else big enough that
    /// every order the run creates stays known from its creation to its last step (the cache
    /// keeps an order touched within the last half of its capacity, and the orders of the
    /// run's later turns were created before the first turn's were advanced), so that runs at
    /// 1× and 4× differ in their load only, not in whether each advance must read its order first.
    private func engineCachedOrders(default engineDefault: Int) -> Int {
        if let cachedOrders { return cachedOrders }
        if overload { return overloadOrders + 1 }
        return max(engineDefault, 2 * orderCount + 2)
    }

    /// Orders the run creates: enough for `rate × seconds` transitions of `steps.count` each,
    /// in whole turns of `rotation` orders.
    private var orderCount: Int {
        let perTurn = Self.steps.count * rotation
        return ((rate * seconds + perTurn - 1) / perTurn) * rotation
    }

    private func measure(engine: OrderFlowEngine, apns: BenchAPNS, bench: BenchDatabase, worker: SeparateWorker?,
                         stages: WorkerStageLog?) async throws {
        let rate = self.rate
        let window = rotation
        let total = rate * seconds
        let roundsPerOrder = Self.steps.count
        let orderCount = self.orderCount
        let tokens = (0..<orderCount).map { _ in BenchAPNS.randomToken(160) }

        print("preparing \(orderCount) orders, each followed by a device with an activity token…")
        let prepared = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            let tasks = 8
            for task in 0..<tasks {
                group.addTask {
                    for index in stride(from: task, to: orderCount, by: tasks) {
                        _ = try await engine.createOrder(NewOrder(
                            orderID: "e2e-\(index)", workflow: "food-order",
                            attributes: ["merchantName": "Bench Bistro", "orderNumber": .string("\(index)"), "itemCount": 2]))
                        try await engine.registerActivityToken(orderID: "e2e-\(index)", deviceID: "phone-\(index)", token: tokens[index])
                    }
                }
            }
            try await group.waitForAll()
        }
        try await engine.pool.query(PostgresQuery("ANALYZE"))
        // Registering a token sends the order's current state: let the worker send those first.
        let initialDrain = try await waitForEmptyQueue(engine: engine, apns: apns, expectedPushes: orderCount, timeout: .seconds(120))
        print(String(format: "prepared in %.1f s; %ld initial pushes sent", (ContinuousClock.now - prepared).asSeconds, initialDrain))
        // The initial pushes deleted as many commands as there are orders: their dead rows and
        // dirty pages are vacuumed and checkpointed away before the measurement, not in it.
        try await settle(engine.pool)
        try await Task.sleep(for: .milliseconds(1500))  // past the 1 push/s limit of the last initial pushes
        apns.server.reset()

        let records = TransitionLog(count: total)
        let progress = OrderProgress(orders: orderCount, steps: roundsPerOrder)
        let sampler = QueueDepthSampler()
        let samplerTask = Task { await sampler.run(configuration: bench.configuration) }

        print("driving \(total) transitions at \(rate)/s for \(seconds) s over \(window) orders in rotation (each advanced every \(spacing) s; "
              + "the engine keeps \(engine.configuration.cachedOrders) orders in memory)…")
        let clock = ContinuousClock()
        let wakeWatch = worker == nil ? nil : WakeWatch(configuration: bench.configuration)
        let commitsBefore = try? await Self.databaseCommits(engine: engine)
        let statementsBefore = await StatementTime.read(engine.pool)
        let start = clock.now
        stages?.reset()
        await runOpenLoop(count: total, rate: rate) { j, due in
            let lag = (clock.now - due).asSeconds
            let slot = j % window, round = j / window
            let order = (round / roundsPerOrder) * window + slot
            // The order's next step, not the schedule's: a refused step is taken again at the
            // order's next turn (as a caller told `busy` retries), so one refusal does not turn
            // the order's later steps into invalid transitions.
            guard let step = progress.begin(order) else { return }
            let (target, input) = Self.steps[step]
            do {
                let result = try await engine.advance("e2e-\(order)", to: target, input: input)
                progress.end(order, advanced: true)
                let returned = Date()
                var status = ""
                if case .object(let content) = result.transition.rendered.content, case .string(let value)? = content["status"] {
                    status = value
                }
                records.set(j, .init(token: tokens[order], status: status, step: step, orderID: "e2e-\(order)", seq: result.transition.seq,
                                     occurredAt: result.transition.occurredAt, returnedAt: returned, lag: lag))
            } catch let error as OrderFlowError where error.isBusy {
                progress.end(order, advanced: false)
                records.refuse(error, after: (clock.now - due).asSeconds - lag)
            } catch {
                progress.end(order, advanced: false)
                records.fail(error)
            }
        }
        let driven = (clock.now - start).asSeconds
        let commitsAfter = try? await Self.databaseCommits(engine: engine)
        let statementsAfter = await StatementTime.read(engine.pool)
        let succeeded = records.succeeded
        print(String(format: "driven in %.1f s: %ld advances committed (%.0f/s), %ld failed", driven, succeeded.count,
                     Double(succeeded.count) / driven, records.failures.count))
        if let first = records.failures.first { print("  first failure: \(first)") }
        let (stillRunning, finished) = progress.skipped
        if stillRunning + finished > 0 {
            print("turns not taken         \(stillRunning) (the order's previous step still running), \(finished) (the order already delivered)")
        }
        let refusals = records.refusals
        if !refusals.times.isEmpty {
            print("refused busy            \(refusals.times.count) (\(refusals.times.count * 100 / max(1, total)) %), answered after p50 "
                  + "\(Stats.ms(Stats.percentile(refusals.times, 0.5))) p99 \(Stats.ms(Stats.percentile(refusals.times, 0.99))); "
                  + "Retry-After p50 \(Stats.ms(Stats.percentile(refusals.retryAfter, 0.5))); the first: \(refusals.first ?? "")")
        }

        // Everything committed should arrive, several transitions of an order in one push when
        // the worker found them waiting together: wait until the outbox is empty, or until
        // nothing more arrives for 15 s.
        let drainStart = clock.now
        var last = apns.server.acceptedCount
        var lastProgress = clock.now
        while clock.now - lastProgress < .seconds(15) {
            let empty = try await engine.pool.query(PostgresQuery("SELECT NOT EXISTS (SELECT FROM activity_commands) AS empty"))
                .single().decode("empty", as: Bool.self)
            if empty { break }
            try await Task.sleep(for: .milliseconds(100))
            let now = apns.server.acceptedCount
            if now != last { last = now; lastProgress = clock.now }
        }
        let drained = (clock.now - drainStart).asSeconds
        try await Task.sleep(for: .seconds(1))
        samplerTask.cancel()
        let (depths, activity) = await samplerTask.value
        let wakeArrivals = await wakeWatch?.stop()

        // Each transition is shown by the first push to its activity that carries its step or a
        // later one (a push merging several transitions carries the newest).
        var stepOfStatus: [String: Int] = [:]
        for record in succeeded { stepOfStatus[record.status] = record.step }
        var pushesByToken: [String: [(at: Date, step: Int)]] = [:]
        var unmatchedPushes = 0
        for push in apns.server.pushes() {
            guard let step = stepOfStatus[push.aps?["content-state"]?["status"]?.stringValue ?? ""] else { unmatchedPushes += 1; continue }
            pushesByToken[push.deviceToken, default: []].append((push.receivedAt, step))
        }
        for token in pushesByToken.keys { pushesByToken[token]!.sort { $0.at < $1.at } }
        let commitTimes = try await Self.commitTimestamps(engine: engine)
        var fromCommit: [Double] = []
        var fromCommitTimestamp: [Double] = []
        var fromReturn: [Double] = []
        var lags: [Double] = []
        var commitsWithPush: [Double] = []
        var pushesAfterCommit: [Double] = []
        var missing = 0, merged = 0
        for record in succeeded {
            lags.append(record.lag)
            guard let push = pushesByToken[record.token]?.first(where: { $0.step >= record.step }) else { missing += 1; continue }
            if push.step > record.step { merged += 1 }
            let at = push.at
            fromCommit.append(at.timeIntervalSince(record.occurredAt))
            if let committed = commitTimes?[TransitionKey(orderID: record.orderID, seq: record.seq)] {
                fromCommitTimestamp.append(at.timeIntervalSince1970 - committed)
                commitsWithPush.append(committed)
                pushesAfterCommit.append(at.timeIntervalSince1970)
            }
            fromReturn.append(at.timeIntervalSince(record.returnedAt))
        }

        print("")
        print("e2e: rate \(rate)/s for \(seconds) s, \(window) orders in rotation, "
              + (worker == nil ? "worker in process (wake signal)" : "worker in its own process (LISTEN/NOTIFY)") + ", local APNs")
        print(String(format: "advances committed      %8d  (%.0f/s achieved)", succeeded.count, Double(succeeded.count) / driven)
              + "; start lag behind schedule p50 \(Stats.ms(Stats.percentile(lags, 0.5))) p99 \(Stats.ms(Stats.percentile(lags, 0.99))) max \(Stats.ms(lags.max() ?? 0))")
        print("pushes delivered        \(apns.server.acceptedCount) for \(succeeded.count) transitions"
              + "  (\(merged) shown by a later push that merged them, \(missing) never shown, \(unmatchedPushes) pushes not matched, "
              + "\(apns.server.rejectedCount) refused)")
        print(String(format: "drain after last step   %.2f s (until the outbox was empty)", drained))
        if let commitsBefore, let commitsAfter, !succeeded.isEmpty {
            // Everyone's transactions (advances, the worker's claims and completions, NOTIFYs):
            // what the database was asked to commit per advance.
            print(String(format: "database commits while driving %ld (%.2f per advance; pg_stat_database, flushed about once a second)",
                         commitsAfter - commitsBefore, Double(commitsAfter - commitsBefore) / Double(succeeded.count)))
        }
        switch (statementsBefore, statementsAfter) {
        case (.success(let before), .success(let after)):
            for line in StatementTime.report(after.since(before), over: driven) { print(line) }
        case (.failure(let reason), _), (_, .failure(let reason)):
            print("database execution time while driving: not measured (\(reason))")
        }
        print("latency occurred_at → push received:  p50 \(Stats.ms(Stats.percentile(fromCommit, 0.5)))  p99 \(Stats.ms(Stats.percentile(fromCommit, 0.99)))  max \(Stats.ms(fromCommit.max() ?? 0))")
        if commitTimes == nil {
            print("latency commit → push received:       not measured (turn on the server's track_commit_timestamp to measure it)")
        } else {
            print("latency commit → push received:       p50 \(Stats.ms(Stats.percentile(fromCommitTimestamp, 0.5)))  p99 \(Stats.ms(Stats.percentile(fromCommitTimestamp, 0.99)))  max \(Stats.ms(fromCommitTimestamp.max() ?? 0))"
                  + "  (\(fromCommitTimestamp.count) transitions; pg_xact_commit_timestamp)")
        }
        if let wakeArrivals, !commitsWithPush.isEmpty {
            // The wake path alone: commit → the first NOTIFY a listener received after it; and
            // what follows it (the worker's claim, read and send, or a poll that came first).
            let found = zip(zip(commitsWithPush, pushesAfterCommit), WakeWatch.waits(commits: commitsWithPush, arrivals: wakeArrivals))
                .compactMap { pair, wait in wait.map { (wait: $0, rest: pair.1 - pair.0 - $0) } }
            let waits = found.map(\.wait), rest = found.map(\.rest)
            print("  of which commit → first NOTIFY received after it: p50 \(Stats.ms(Stats.percentile(waits, 0.5)))  p99 \(Stats.ms(Stats.percentile(waits, 0.99)))"
                  + "; that NOTIFY → push received: p50 \(Stats.ms(Stats.percentile(rest, 0.5)))  p99 \(Stats.ms(Stats.percentile(rest, 0.99)))"
                  + String(format: "  (%ld NOTIFYs received, %.0f/s)", wakeArrivals.count, Double(wakeArrivals.count) / max(driven, 1)))
        }
        print("latency advance returned → received:  p50 \(Stats.ms(Stats.percentile(fromReturn, 0.5)))  p99 \(Stats.ms(Stats.percentile(fromReturn, 0.99)))  max \(Stats.ms(fromReturn.max() ?? 0))")
        if depths.isEmpty {
            print("queue depth: no samples")
        } else {
            print("queue depth (activity_commands, every 1 s, \(depths.count) samples): first \(depths.first!)  last \(depths.last!)  max \(depths.max()!)  p50 \(Int(Stats.percentile(depths.map { Double($0) }, 0.5)))")
            print("  samples: \(depths.map { String($0) }.joined(separator: " "))")
        }
        print("database sessions (pg_stat_activity, every 1 s): " + QueueDepthSampler.describe(activity))
        if let stages {
            for line in stages.report(from: start) { print(line) }
        }
    }

    /// When each transition's transaction committed (seconds since 1970, the database's clock),
    /// from `pg_xact_commit_timestamp` of its row (`order_transitions` is append-only, so a
    /// row's `xmin` is the transaction that made the transition); nil when the server does not
    /// record commit times (`track_commit_timestamp = off`, its default).
    static func commitTimestamps(engine: OrderFlowEngine) async throws -> [TransitionKey: Double]? {
        let setting = try await engine.pool.query(PostgresQuery("SELECT current_setting('track_commit_timestamp') AS on"))
            .single().decode("on", as: String.self)
        guard setting == "on" else { return nil }
        let rows = try await engine.pool.query(PostgresQuery("""
            SELECT order_id, seq, extract(epoch FROM pg_xact_commit_timestamp(xmin))::float8 AS committed
            FROM order_transitions WHERE pg_xact_commit_timestamp(xmin) IS NOT NULL
            """))
        var times: [TransitionKey: Double] = [:]
        for row in rows {
            times[TransitionKey(orderID: try row.decode("order_id"), seq: try row.decode("seq"))] = try row.decode("committed", as: Double.self)
        }
        return times
    }

    /// Transactions committed in the benchmark's database so far.
    static func databaseCommits(engine: OrderFlowEngine) async throws -> Int {
        try await engine.pool.query(PostgresQuery(
            "SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()")).single().decode("n", as: Int.self)
    }

    /// Waits until `activity_commands` is empty and the stand-in accepted at least `expectedPushes`.
    private func waitForEmptyQueue(engine: OrderFlowEngine, apns: BenchAPNS, expectedPushes: Int, timeout: Duration) async throws -> Int {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let depth = try await engine.pool.query(PostgresQuery("SELECT count(*)::bigint AS n FROM activity_commands"))
                .single().decode("n", as: Int.self)
            if depth == 0 && apns.server.acceptedCount >= expectedPushes { return apns.server.acceptedCount }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw BenchError("the worker did not drain the initial pushes within \(timeout) (accepted \(apns.server.acceptedCount) of \(expectedPushes))")
    }
}
