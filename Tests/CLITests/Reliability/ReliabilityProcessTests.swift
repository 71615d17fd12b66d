import Crypto
import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Synchronization
import TestTags
import Testing
import WorkflowKit

/// Real `orderflow` processes under faults: workers killed with SIGKILL at random moments of a
/// sustained load and restarted; and two migrates, two workers and dozens of CLI users at once.
@Suite("Reliability: processes", .tags(.reliability), .serialized)
struct ReliabilityProcessTests {

    /// Seeded, so that a failing run can be repeated (`ORDERFLOW_RELIABILITY_SEED`).
    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["ORDERFLOW_RELIABILITY_SEED"].flatMap(UInt64.init) ?? 20261122
    }

    @Test(.timeLimit(.minutes(4)))
    func workersKilledAtRandomLoseNothing() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "kills")
        let engine = setup.engine
        setup.apns.setResponseDelay(.milliseconds(30))  // keeps sends in flight when a kill lands

        // The load: four clients for eight seconds, each creating orders and taking every one
        // through its four steps to delivered, with a short pause between steps.
        let loadFor: Duration = .seconds(8)
        let created = LockedValue<[String]>([])
        let transitions = LockedValue(0)
        let started = ContinuousClock.now
        let load = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<4 {
                    group.addTask {
                        var number = 0
                        while ContinuousClock.now - started < loadFor {
                            let orderID = "K\(client)-\(number)"
                            number += 1
                            try await setup.createOrder(orderID, token: EngineFixture.token(client * 10_000 + number))
                            created.withLock { $0.append(orderID) }
                            for (target, input) in WorkerProcessSetup.steps {
                                _ = try await engine.advance(orderID, to: target, input: input)
                                transitions.withLock { $0 += 1 }
                                try await Task.sleep(for: .milliseconds(40))
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }

        // The faults: a worker runs a random 0.3–1.5 s, is killed with SIGKILL, and the next
        // one starts at once — as a supervisor would restart it.
        var generator = SeededGenerator(seed: Self.seed)
        var kills = 0
        var killedHoldingLeases = 0
        while ContinuousClock.now - started < loadFor {
            let worker = try setup.cli.start(setup.workerArguments)
            try await Task.sleep(for: .milliseconds(Int.random(in: 300...1500, using: &generator)))
            kill(worker.process.processIdentifier, SIGKILL)
            _ = try await worker.finish()
            kills += 1
            if try await setup.leasedOrders() > 0 { killedHoldingLeases += 1 }
        }
        try await load.value
        let loadTime = DeliveryAudit.format(ContinuousClock.now - started)

        // A last worker drains what is left once the dead workers' leases (2 s) run out.
        let last = try setup.cli.start(setup.workerArguments)
        try await setup.waitUntilDrained(timeout: .seconds(90))
        last.interrupt()
        let stopped = try await last.finish()
        #expect(stopped.status == 0, "\(stopped)")

        let orders = created.value
        let audit = DeliveryAudit(
            scenario: "worker SIGKILLed at random and restarted",
            load: "4 clients, \(orders.count) orders, \(transitions.value) transitions in \(loadTime)",
            faults: "\(kills) SIGKILLs after 0.3–1.5 s each (\(killedHoldingLeases) with leases held), seed \(Self.seed)",
            tokens: setup.tokens.value, pushes: setup.apns.pushes(),
            notes: ["dead letters \(try await setup.deadLetters())"],
            isFinal: { $0.aps?["event"]?.stringValue == "end" && $0.aps?["content-state"]?["status"]?.stringValue == "delivered" })
        audit.report()
        #expect(kills >= 4)
        #expect(killedHoldingLeases >= 1, "no kill landed while the worker held orders")
        #expect(audit.expected == orders.count)
        #expect(audit.lost == 0, "\(audit)")
        #expect(try await setup.deadLetters() == 0)
        try await setup.shutdown()
    }

    @Test(.timeLimit(.minutes(4)))
    func manyProcessesAtOnceCorruptNothing() async throws {
        // Two migrates on an empty database, at once.
        let database = try await TestDatabase.fresh(prefix: "crowd")
        let cli = try CLI(databaseURL: database.connectionString)
        async let firstMigrate = cli.run("migrate")
        async let secondMigrate = cli.run("migrate")
        let migrates = try await [firstMigrate, secondMigrate]
        for result in migrates { #expect(result.status == 0, "\(result)") }
        // Two applies of the same workflow, at once: one version.
        async let firstApply = cli.run("workflow", "apply", Fixtures.foodOrder)
        async let secondApply = cli.run("workflow", "apply", Fixtures.foodOrder)
        for result in try await [firstApply, secondApply] { #expect(result.status == 0, "\(result)") }

        // No worker dies here, so the lease is a production-like 30 s: two live workers must never
        // send the same push, also when 30 processes starting at once stall one for seconds
        // (with 2 s leases a stalled batch was once claimed and sent again by the other worker).
        let setup = try await WorkerProcessSetup.make(database: database, cli: cli, applyWorkflow: false, lease: 30)
        let versions: Int = try await setup.engine.pool.query(PostgresQuery(
            "SELECT count(*) AS n FROM workflow_versions WHERE name = 'food-order'")).single().decode("n")
        #expect(versions == 1)
        let orders = (0..<10).map { "C\($0)" }
        for (index, order) in orders.enumerated() {
            try await setup.createOrder(order, token: EngineFixture.token(30_000 + index))
        }

        // Two workers, and for every step of every order three staff members racing the same
        // `orderflow advance` (30 processes at once): exactly one wins each race.
        let workers = [try setup.cli.start(setup.workerArguments), try setup.cli.start(setup.workerArguments)]
        var losers = 0
        var processes = 0
        for (target, input) in WorkerProcessSetup.steps {
            var arguments = ["advance", "", target]
            if let eta = input["eta"]?.stringValue { arguments += ["--eta", eta] }
            if let driver = input["driver"]?.stringValue { arguments += ["--driver", driver] }
            let results = try await withThrowingTaskGroup(of: (String, CLI.Result).self) { group in
                for order in orders {
                    for _ in 0..<3 {
                        var mine = arguments
                        mine[1] = order
                        group.addTask { (order, try await setup.cli.run(mine)) }
                    }
                }
                var all: [(String, CLI.Result)] = []
                for try await result in group { all.append(result) }
                return all
            }
            processes += results.count
            for order in orders {
                let mine = results.filter { $0.0 == order }.map(\.1)
                let winners = mine.filter { $0.status == 0 }
                #expect(winners.count == 1, "\(order) → \(target): \(mine)")
                for loser in mine where loser.status != 0 {
                    losers += 1
                    // A loser hears why, in one line, with the order's state now.
                    #expect([67, 68].contains(loser.status), "\(loser)")
                    #expect(loser.stderr.split(separator: "\n").count <= 2, "\(loser)")
                }
            }
        }
        try await setup.waitUntilDrained(timeout: .seconds(60))
        for worker in workers { worker.interrupt() }
        for worker in workers {
            let stopped = try await worker.finish()
            #expect(stopped.status == 0, "\(stopped)")
        }

        // No corruption: every history gapless with exactly its five transitions; nothing left
        // locked or open in a transaction.
        for order in orders {
            let history = try await setup.engine.history(order)
            #expect(history.transitions.map(\.seq) == [1, 2, 3, 4, 5], "\(order): \(history.transitions.map(\.seq))")
            #expect(history.order.state == "delivered")
        }
        let leftovers = try await setup.engine.pool.query(PostgresQuery("""
            SELECT (SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                    WHERE d.datname = current_database() AND (NOT l.granted OR l.locktype = 'advisory')) AS locks,
                   (SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND state LIKE 'idle in transaction%') AS open_transactions,
                   (SELECT count(*) FROM orders WHERE dispatch_owner IS NOT NULL) AS leased
            """)).single()
        #expect(try leftovers.decode("locks", as: Int.self) == 0)
        #expect(try leftovers.decode("open_transactions", as: Int.self) == 0)
        #expect(try leftovers.decode("leased", as: Int.self) == 0)

        let audit = DeliveryAudit(
            scenario: "two migrates, two applies, two workers, 120 racing CLI advances",
            load: "\(orders.count) orders, \(processes) `orderflow advance` processes (3 per step, at once)",
            faults: "concurrency only; \(losers) losing advances refused with exit 67/68",
            tokens: setup.tokens.value, pushes: setup.apns.pushes(),
            notes: ["dead letters \(try await setup.deadLetters())", "locks and open transactions left 0"],
            isFinal: { $0.aps?["event"]?.stringValue == "end" && $0.aps?["content-state"]?["status"]?.stringValue == "delivered" })
        audit.report()
        #expect(audit.lost == 0, "\(audit)")
        #expect(audit.duplicated == 0, "two live workers must never send the same push twice: \(audit)")
        try await setup.shutdown()
    }
}
