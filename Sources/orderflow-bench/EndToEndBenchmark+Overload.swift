import Foundation
import OrderFlow
import PGKit
import Synchronization

/// `e2e --overload`: how the system behaves when asked for more than it can do.
///
/// After a warm-up of 4 s that is not counted (see `OrderSupply`),
/// 1×: `--connections` tasks advance back to back for `--seconds` (closed loop): the capacity C,
/// with the worker delivering (in this process, or in its own with `--separate-worker`). Then
/// open loop at 2 C and at 4 C for `--seconds` each: advances due at a fixed rate whether or not
/// earlier ones finished; then 1× again. Each phase reports what committed, what was refused as
/// busy and how fast, other failures, the outbox's growth (sampled every 0.5 s) and how long it
/// took to drain after the phase, the engine pool's waiting callers and its reading of its pace
/// beside the pace measured (every 0.5 s), and where the CPU went per committed advance.
///
/// Each counted phase starts vacuumed, analyzed and from a checkpoint (`settle`), as the turns of
/// `advance` and `http` do: none inherits the dead rows and dirty pages of the phase before it,
/// or the autovacuum they set off (a run started right after preparing its orders measures a
/// capacity of about half, with the worker falling behind).
///
/// Orders come from a shared supply: an advance takes an order not in flight, and gives it
/// back with its next step (or the same step, when refused), ready a second later; an order
/// that reached its last step leaves the supply. So a refusal never leaves an order out of
/// step, and no two advances of one order race; each phase prints the mix of steps it committed.
/// Steps of one order come about a second apart, so the worker may merge some pushes: this
/// mode measures committing and draining, not per-push latency.
extension EndToEndBenchmark {
    func measureOverload(engine: OrderFlowEngine, apns: BenchAPNS, bench: BenchDatabase, worker: SeparateWorker?) async throws {
        let orderCount = overloadOrders
        print("preparing \(orderCount) orders, each followed by a device with an activity token…")
        let prepared = ContinuousClock.now
        let tokens = (0..<orderCount).map { _ in BenchAPNS.randomToken(160) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            let tasks = 8
            for task in 0..<tasks {
                group.addTask {
                    for index in stride(from: task, to: orderCount, by: tasks) {
                        _ = try await engine.createOrder(NewOrder(
                            orderID: "ov-\(index)", workflow: "food-order",
                            attributes: ["merchantName": "Bench Bistro", "orderNumber": .string("\(index)"), "itemCount": 2]))
                        try await engine.registerActivityToken(orderID: "ov-\(index)", deviceID: "phone-\(index)", token: tokens[index])
                    }
                }
            }
            try await group.waitForAll()
        }
        try await engine.pool.query(PostgresQuery("ANALYZE"))
        _ = try await drainTime(engine: engine)
        try await settle(engine.pool)
        print(String(format: "prepared in %.1f s", (ContinuousClock.now - prepared).asSeconds))
        apns.server.reset()

        let supply = OrderSupply(count: orderCount, steps: Self.steps.count)
        // Until the orders' later steps come round (a second after their earlier ones), the
        // supply has only first steps: this warm-up, not counted, brings every step in.
        let warmUp = 4
        print("warm-up: \(connections) tasks back to back for \(warmUp) s (not counted)…")
        let warm = try await runPhase(label: "warm-up", engine: engine, bench: bench, worker: worker) { tally in
            await closedLoop(engine: engine, supply: supply, tally: tally, seconds: warmUp)
        }
        print(String(format: "warm-up: %.0f advances/s, steps %@", warm.committedPerSecond, warm.stepMix))
        var phases: [OverloadPhase] = []
        print("1×: \(connections) tasks back to back for \(seconds) s…")
        try await settle(engine.pool)
        let capacity = try await runPhase(label: "1× (closed loop)", engine: engine, bench: bench, worker: worker) { tally in
            await closedLoop(engine: engine, supply: supply, tally: tally, seconds: seconds)
        }
        phases.append(capacity)
        let capacityRate = capacity.committedPerSecond
        print(String(format: "capacity C = %.0f advances/s", capacityRate))
        for multiple in [2, 4] {
            let rate = max(1, Int((capacityRate * Double(multiple)).rounded()))
            print("\(multiple)×: open loop at \(rate)/s for \(seconds) s…")
            try await settle(engine.pool)
            phases.append(try await runPhase(label: "\(multiple)× (\(rate)/s offered)", engine: engine, bench: bench, worker: worker) { tally in
                await openLoop(engine: engine, supply: supply, tally: tally, rate: rate)
            })
        }
        // This machine's speed drifts by tens of per cent from one minute to the next (other
        // virtual machines on the host): the capacity measured again after the overload tells
        // a drift from a system the overload left slower.
        print("1× again: \(connections) tasks back to back for \(seconds) s…")
        try await settle(engine.pool)
        phases.append(try await runPhase(label: "1× again", engine: engine, bench: bench, worker: worker) { tally in
            await closedLoop(engine: engine, supply: supply, tally: tally, seconds: seconds)
        })

        print("")
        print("e2e --overload: \(seconds) s a phase, engine pool \(connections) connections (callers wait at most \(acquireTimeout) s), "
              + (worker == nil ? "worker in process (pool of 6)" : "worker in its own process (orderflow worker run)") + ", local APNs")
        print("phase (driven s)          committed   /s      vs C   refused busy (p50 / p99 to refusal)                 other failures   advance p50 / p99    outbox max   drain")
        for phase in phases {
            print(phase.line(capacity: capacityRate))
        }
        for phase in phases where !phase.otherFailures.isEmpty {
            print("  \(phase.label): first other failure: \(phase.otherFailures[0])")
        }
        for phase in phases where phase.starved > 0 {
            print("  \(phase.label): \(phase.starved) due advances found no order free (raise --overload-orders)")
        }
        for phase in phases {
            if let cpu = phase.cpu { print("  \(phase.label) \(cpu)") }
            print("  \(phase.label) steps committed (\(Self.steps.map(\.0).joined(separator: "/"))): \(phase.stepMix)")
            print("  \(phase.label) outbox every 0.5 s: \(phase.depths.map { String($0) }.joined(separator: " "))")
            print("  \(phase.label) engine pool every 0.5 s (idle connections/waiting callers/committed in the half second, "
                  + "and while callers wait (the pool's pace|the pace measured) in ms per caller): "
                  + phase.pool.map(\.text).joined(separator: " "))
        }
        print("pushes accepted by the stand-in: \(apns.server.acceptedCount) (\(apns.server.rejectedCount) refused); process peak RSS \(peakRSSMegabytes()) MB")
        if let busy = phases.compactMap(\.firstBusy).first { print("a busy refusal reads: \(busy)") }
    }

    /// Runs one phase's driving, samples the outbox meanwhile, then waits for it to drain.
    private func runPhase(
        label: String, engine: OrderFlowEngine, bench: BenchDatabase, worker: SeparateWorker?,
        drive: (OverloadTally) async -> Void
    ) async throws -> OverloadPhase {
        let tally = OverloadTally()
        let sampler = Task {
            await QueueDepthSampler(interval: PoolSample.interval, readsActivity: false).run(configuration: bench.configuration).0
        }
        let poolSampler = Task { await samplePool(engine: engine, tally: tally) }
        let cpuStart = CPUUse.now(watching: worker?.pid)
        let start = ContinuousClock.now
        await drive(tally)
        let driven = (ContinuousClock.now - start).asSeconds
        let cpuEnd = CPUUse.now(watching: worker?.pid)
        poolSampler.cancel()
        let drained = try await drainTime(engine: engine)
        sampler.cancel()
        let depths = await sampler.value
        var phase = tally.phase(label: label, seconds: driven, drain: drained, depths: depths)
        phase.pool = await poolSampler.value
        if let cpuStart, let cpuEnd {
            phase.cpu = cpuEnd.summary(since: cpuStart, rate: phase.committedPerSecond, otherName: "the worker")
        }
        return phase
    }

    /// Every `PoolSample.interval` while the phase is driven: the engine pool's idle
    /// connections and waiting callers, and the advances committed since the last sample —
    /// whether the pool ever ran dry (connections idle while callers were refused) when the
    /// goodput fell.
    private func samplePool(engine: OrderFlowEngine, tally: OverloadTally) async -> [PoolSample] {
        var samples: [PoolSample] = []
        var committedBefore = tally.committedCount
        var next = ContinuousClock.now
        while !Task.isCancelled {
            next = next + PoolSample.interval
            try? await Task.sleep(until: next)
            if Task.isCancelled { break }
            let statistics = await engine.pool.statistics
            let committed = tally.committedCount
            samples.append(PoolSample(idle: statistics.idle, waiting: statistics.waiting, committed: committed - committedBefore,
                                      pace: engine.pool.servingInterval?.asSeconds))
            committedBefore = committed
        }
        return samples
    }

    private func closedLoop(engine: OrderFlowEngine, supply: OrderSupply, tally: OverloadTally, seconds: Int) async {
        let end = ContinuousClock.now + .seconds(seconds)
        await withDiscardingTaskGroup { group in
            for _ in 0..<connections {
                group.addTask {
                    while ContinuousClock.now < end {
                        guard await advanceOne(engine: engine, supply: supply, tally: tally) else { return }
                    }
                }
            }
        }
    }

    private func openLoop(engine: OrderFlowEngine, supply: OrderSupply, tally: OverloadTally, rate: Int) async {
        await runOpenLoop(count: rate * seconds, rate: rate) { _, _ in
            _ = await advanceOne(engine: engine, supply: supply, tally: tally)
        }
    }

    /// One advance of a free order; false when no order was free.
    private func advanceOne(engine: OrderFlowEngine, supply: OrderSupply, tally: OverloadTally) async -> Bool {
        guard let (order, step) = supply.take() else {
            tally.starve()
            return false
        }
        let (target, input) = Self.steps[step]
        let asked = ContinuousClock.now
        do {
            _ = try await engine.advance("ov-\(order)", to: target, input: input)
            tally.commit(step: step, after: ContinuousClock.now - asked)
            supply.give(order, step: step + 1)
        } catch let error as OrderFlowError where error.isBusy {
            tally.refuse(after: ContinuousClock.now - asked, error)
            supply.give(order, step: step)
        } catch {
            tally.fail(error)
            // Out of step or worse: leave the order out of the run.
        }
        return true
    }

    /// Seconds until `activity_commands` is empty (polled every 50 ms; at most 120 s).
    private func drainTime(engine: OrderFlowEngine) async throws -> Double {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(120) {
            let depth = try await engine.pool.query(PostgresQuery("SELECT count(*)::bigint AS n FROM activity_commands"))
                .single().decode("n", as: Int.self)
            if depth == 0 { return (ContinuousClock.now - start).asSeconds }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchError("the outbox did not drain within 120 s")
    }

    private func peakRSSMegabytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }
}

/// Orders not in flight, one first-in-first-out queue per step, taken in turn: step 0, 1, 2, 3,
/// 0, … (a step whose queue has no order ready is passed over). An order given back (its next
/// step, or the same after a refusal) is ready again a second later, as a real order's next
/// step comes seconds later. So after a few seconds a closed loop advances the four steps in
/// equal parts (with one queue, 1× advanced only first steps and 4× mostly later ones: not the
/// same work). Under overload the mix still leans to first steps: the waiting callers hold
/// orders, so later steps come round more slowly than calls are offered.
final class OrderSupply: Sendable {
    private struct Queue {
        var items: [(order: Int, ready: ContinuousClock.Instant)] = []
        var head = 0

        mutating func pop(readyBy now: ContinuousClock.Instant) -> Int? {
            guard head < items.count, items[head].ready <= now else { return nil }
            defer {
                head += 1
                if head > 4096 {
                    items.removeFirst(head)
                    head = 0
                }
            }
            return items[head].order
        }
    }

    private let state: Mutex<(queues: [Queue], next: Int)>
    private let steps: Int
    private let spacing: Duration = .seconds(1)

    init(count: Int, steps: Int) {
        self.steps = steps
        var queues = Array(repeating: Queue(), count: steps)
        let now = ContinuousClock.now
        queues[0].items = (0..<count).map { ($0, now) }
        state = Mutex((queues, 0))
    }

    func take() -> (Int, Int)? {
        let now = ContinuousClock.now
        return state.withLock { state in
            for offset in 0..<steps {
                let step = (state.next + offset) % steps
                if let order = state.queues[step].pop(readyBy: now) {
                    state.next = (step + 1) % steps
                    return (order, step)
                }
            }
            return nil
        }
    }

    func give(_ order: Int, step: Int) {
        guard step < steps else { return }
        let ready = ContinuousClock.now + spacing
        state.withLock { $0.queues[step].items.append((order, ready)) }
    }
}

/// What happened in one phase, written from many tasks.
final class OverloadTally: Sendable {
    private struct State {
        var committed: [Double] = []
        var committedSteps: [Int] = []
        var refused: [Double] = []
        /// Refusals that were the pool's timeout (admitted, then not served in time).
        var deadlines = 0
        var firstBusy: String?
        var otherFailures: [String] = []
        var starved = 0
    }

    private let state = Mutex(State())

    func commit(step: Int, after duration: Duration) {
        state.withLock { state in
            state.committed.append(duration.asSeconds)
            while state.committedSteps.count <= step { state.committedSteps.append(0) }
            state.committedSteps[step] += 1
        }
    }
    func refuse(after duration: Duration, _ error: OrderFlowError) {
        state.withLock { state in
            state.refused.append(duration.asSeconds)
            if error.message.contains("none became free") { state.deadlines += 1 }
            if state.firstBusy == nil {
                state.firstBusy = error.message + (error.retryAfter.map { " (retryAfter \(Stats.ms($0.asSeconds)))" } ?? "")
            }
        }
    }
    func fail(_ error: any Error) { state.withLock { $0.otherFailures.append(String(describing: error)) } }
    func starve() { state.withLock { $0.starved += 1 } }
    var committedCount: Int { state.withLock { $0.committed.count } }

    func phase(label: String, seconds: Double, drain: Double, depths: [Int]) -> OverloadPhase {
        state.withLock { state in
            OverloadPhase(
                label: label, seconds: seconds, committed: state.committed, refused: state.refused, deadlines: state.deadlines,
                firstBusy: state.firstBusy,
                otherFailures: state.otherFailures, starved: state.starved, drain: drain, depths: depths,
                committedSteps: state.committedSteps)
        }
    }
}

struct PoolSample: Sendable {
    /// How often the outbox and the engine pool are sampled while a phase is driven.
    static let interval: Duration = .milliseconds(500)

    var idle: Int
    var waiting: Int
    var committed: Int
    /// The pool's own reading of its pace (`servingInterval`), in seconds.
    var pace: Double?

    /// `idle/waiting/committed`, and while callers wait, the pace the pool reckons with
    /// beside the one measured (half a second over the commits in it), in ms per caller.
    var text: String {
        var text = "\(idle)/\(waiting)/\(committed)"
        if waiting > 0, let pace {
            let milliseconds = Self.interval / .milliseconds(1)
            text += String(format: " (%.2f|%.2f)", pace * 1000, committed > 0 ? milliseconds / Double(committed) : .infinity)
        }
        return text
    }
}

struct OverloadPhase: Sendable {
    var pool: [PoolSample] = []
    /// Where the CPU went while the phase was driven, per committed advance (`CPUUse`).
    var cpu: String?
    var label: String
    var seconds: Double
    var committed: [Double]
    var refused: [Double]
    var deadlines: Int
    var firstBusy: String?
    var otherFailures: [String]
    var starved: Int
    var drain: Double
    var depths: [Int]
    /// Advances committed at each step of the workflow.
    var committedSteps: [Int]

    /// The share of each step in what committed, "25/25/25/25 %".
    var stepMix: String {
        let total = max(1, committedSteps.reduce(0, +))
        return committedSteps.map { String(Int((100 * Double($0) / Double(total)).rounded())) }.joined(separator: "/") + " %"
    }

    var committedPerSecond: Double { Double(committed.count) / seconds }
    /// Busy answers that came after a wait (the acquire timeout), not at once: callers the
    /// admission control let in and the pool could not serve in time.
    var timedOut: Int { refused.count(where: { $0 >= 1 }) }

    func line(capacity: Double) -> String {
        let refusedText = refused.isEmpty
            ? "0"
            : "\(refused.count) (\(Stats.ms(Stats.percentile(refused, 0.5))) / \(Stats.ms(Stats.percentile(refused, 0.99))))"
                + (timedOut > 0 ? ", \(timedOut) after ≥ 1 s (\(deadlines) at the deadline)" : "")
        return "\(label) \(String(format: "%.1f", seconds))".padding(toLength: 26, withPad: " ", startingAt: 0)
            + String(format: "%9d  %6.0f  %5.2f   ", committed.count, committedPerSecond, capacity > 0 ? committedPerSecond / capacity : 0)
            + refusedText.column(52)
            + "\(otherFailures.count)".padding(toLength: 17, withPad: " ", startingAt: 0)
            + "\(Stats.ms(Stats.percentile(committed, 0.5))) / \(Stats.ms(Stats.percentile(committed, 0.99)))".column(21)
            + "\(depths.max() ?? 0)".padding(toLength: 13, withPad: " ", startingAt: 0)
            + String(format: "%.2f s", drain)
    }
}

private extension String {
    /// Padded to `width`, or whole and followed by a space when longer: a long cell pushes the
    /// row's next cells right instead of losing its end (`padding(toLength:)` cuts it).
    func column(_ width: Int) -> String {
        count < width ? padding(toLength: width, withPad: " ", startingAt: 0) : self + " "
    }
}
