import Crypto
import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing
import WorkflowKit

/// `orderflow worker run` as operators run it: killed with SIGKILL in the middle of the work (a
/// second worker re-claims the leased orders after the lease and nothing is lost), and its
/// claim loops as `--claim-loops` sets them.
@Suite("orderflow worker run, a process of its own")
struct WorkerProcessTests {

    @Test(.timeLimit(.minutes(3)))
    func aKilledWorkerLosesNothing() async throws {
        // A database with food-order, the APNs stand-in and the worker's key, CA and arguments.
        let setup = try await WorkerProcessSetup.make(prefix: "kill")
        let (engine, apns, cli, arguments) = (setup.engine, setup.apns, setup.cli, setup.workerArguments)

        // Orders whose every transition becomes a push to an app-registered activity.
        let orders = (0..<24).map { "K\($0)" }
        for (index, order) in orders.enumerated() {
            _ = try await engine.createOrder(NewOrder(orderID: order, workflow: "food-order",
                attributes: ["merchantName": "Kill Kitchen", "orderNumber": .string(order), "itemCount": 1]))
            try await engine.registerActivityToken(orderID: order, deviceID: "phone-\(index)", token: EngineFixture.token(index))
        }

        // Slow answers keep the first worker's batches in flight, so the kill lands mid-send.
        apns.setResponseDelay(.milliseconds(400))
        let first = try cli.start(arguments)
        // Drive every order to delivered while the first worker runs, then kill it mid-stream.
        var leftLeased = 0
        for (stepIndex, (target, input)) in WorkerProcessSetup.steps.enumerated() {
            for order in orders { _ = try await engine.advance(order, to: target, input: input) }
            if stepIndex == 1 {
                // Wait until the worker holds leases, then kill it without warning.
                let leased = try await waitForLeases(setup)
                #expect(leased > 0, "the first worker never claimed anything; its log:\n\(Self.tail(of: first.stderrURL))")
                kill(first.process.processIdentifier, SIGKILL)
                // Counted at once: the leases last 2 s, and the advances still to come can take
                // longer than that on a loaded machine (CI once saw them all expired).
                leftLeased = try await setup.leasedOrders()
            }
        }
        let killed = try await first.finish()
        #expect(killed.status == SIGKILL || killed.status == 128 + SIGKILL || killed.status == 9, "\(killed)")
        #expect(leftLeased > 0, "the killed worker should have left leased orders behind")
        apns.setResponseDelay(nil)
        let second = try cli.start(arguments)
        let deadline = ContinuousClock.now + .seconds(60)
        var pending = Int.max
        while ContinuousClock.now < deadline {
            pending = 0
            for order in orders { pending += try await engine.order(order).pendingCommands }
            if pending == 0 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(pending == 0, "commands left unsent")
        second.interrupt()
        let stopped = try await second.finish()
        #expect(stopped.status == 0, "\(stopped)")

        // Every order's final state reached its device, as the activity's end.
        var duplicates = 0
        for (index, order) in orders.enumerated() {
            let pushes = apns.pushes(forToken: EngineFixture.token(index))
            let ends = pushes.filter { $0.payload["aps"]?["event"]?.stringValue == "end" }
            #expect(ends.count >= 1, "order \(order) never got its end")
            #expect(ends.last?.payload["aps"]?["content-state"]?["status"]?.stringValue == "delivered")
            duplicates += max(0, ends.count - 1)
        }
        print("killed worker: \(leftLeased) orders left leased, all \(orders.count) delivered, \(duplicates) ends sent twice")
        try await setup.shutdown()
    }

    @Test("--claim-loops: that many batches in flight at once and no more; a count out of range is refused before anything is claimed",
          .timeLimit(.minutes(3)))
    func claimLoopsBoundTheBatchesInFlight() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "loops")
        let (engine, apns, cli) = (setup.engine, setup.apns, setup.cli)
        // Slow answers keep each batch in flight long enough to be seen leased.
        apns.setResponseDelay(.milliseconds(300))
        for loops in [1, 3] {
            // Each registered activity token queues its first push: 12 orders, batches of 2.
            for index in 0..<12 {
                let order = "L\(loops)-\(index)"
                _ = try await engine.createOrder(NewOrder(orderID: order, workflow: "food-order",
                    attributes: ["merchantName": "Loop Kitchen", "orderNumber": .string(order), "itemCount": 1]))
                try await engine.registerActivityToken(orderID: order, deviceID: "phone-\(order)", token: EngineFixture.token(100 * loops + index))
            }
            if loops == 1 {
                for value in ["0", "33", "-2", "many"] {
                    let refused = try await cli.run(setup.workerArguments + ["--claim-loops", value])
                    #expect(refused.status == 64, "--claim-loops \(value): \(refused)")
                    #expect(refused.stderr.contains("--claim-loops"), "--claim-loops \(value): \(refused)")
                }
                #expect(try await setup.leasedOrders() == 0, "a refused worker claimed orders")
                #expect(apns.pushes().isEmpty, "a refused worker sent pushes")
            }
            let worker = try cli.start(setup.workerArguments + ["--batch-size", "2", "--claim-loops", "\(loops)"])
            var mostLeased = 0
            var pending = Int.max
            let deadline = ContinuousClock.now + .seconds(60)
            while pending > 0, ContinuousClock.now < deadline {
                mostLeased = max(mostLeased, try await setup.leasedOrders())
                pending = try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM activity_commands")).single().decode("n")
                try await Task.sleep(for: .milliseconds(20))
            }
            worker.interrupt()
            let stopped = try await worker.finish()
            #expect(stopped.status == 0, "\(stopped)")
            #expect(pending == 0, "\(loops) claim loop(s) left commands unsent")
            #expect(mostLeased <= 2 * loops, "\(loops) claim loop(s) of 2 orders held \(mostLeased) orders at once")
            if loops > 1 {
                #expect(mostLeased > 2, "\(loops) claim loops never had more than one batch in flight (\(mostLeased) orders leased at most)")
            }
            print("--claim-loops \(loops), batches of 2: at most \(mostLeased) orders leased at once")
        }
        #expect(apns.pushes().count == 24, "one first push per order: \(apns.pushes().count)")
        try await setup.shutdown()
    }

    /// The orders the first worker holds leases on, once it holds some; 0 after 30 s without
    /// (a process starting at the busy start of the full suite has taken more than 5 s).
    private func waitForLeases(_ setup: WorkerProcessSetup) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let leased = try await setup.leasedOrders()
            if leased > 0 { return leased }
            try await Task.sleep(for: .milliseconds(25))
        }
        return 0
    }

    /// The last lines a process wrote to `url`.
    private static func tail(of url: URL) -> String {
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(20).joined(separator: "\n")
    }
}
