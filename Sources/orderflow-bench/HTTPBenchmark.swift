import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import WorkflowKit

/// Advances per second through the HTTP API (`orderflow serve` in a process of its own, called
/// over keep-alive connections) against the library called in this process, in the same run,
/// the two taking turns; the CPU per order created on each side (each creates the orders of its
/// turns); reads of an order (`GET /v1/orders/{id}` against `engine.order`, with wrk); then the
/// latency of advances sent at a fixed rate, and the server's memory.
///
/// Both sides use the same number of database connections and the same number of concurrent
/// callers. The fixed-rate phase schedules each request at its own instant and measures from
/// that instant, so a slow answer delays the measurement of those queued behind it instead of
/// hiding them (no coordinated omission).
struct HTTPBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "Advances/s through `orderflow serve` (full answers and Prefer: return=minimal) vs the library, reads of an order, p50/p99 at a fixed rate, server RSS.",
        discussion: "Example: swift run -c release orderflow-bench http --seconds 10 --rounds 3")

    @Option(help: "Seconds of each turn, and of the fixed-rate phase.") var seconds = 10
    @Option(help: "Rounds; in each, both sides have one turn, in an order that alternates.") var rounds = 3
    @Option(help: "Concurrent callers: keep-alive HTTP connections, or tasks calling the library.") var connections = 64
    @Option(help: "Database connections of the server and of the library's engine.") var databaseConnections = 8
    @Option(help: "Advances per second in the fixed-rate phase.") var rate = 1_000
    @Option(help: "PostgreSQL server URL (default: ORDERFLOW_DATABASE_URL, else a private cluster in .orderflow/).")
    var database: String?
    @Option(help: "What drives the HTTP turns: wrk (a C load generator, Debian's `wrk`; the default when it is installed) or ahc (AsyncHTTPClient in this process).")
    var client: Client?

    enum Client: String, ExpressibleByArgument { case wrk, ahc }

    enum Side: String { case library, http, minimal = "http-min" }

    static let steps: [(String, String)] = [
        ("accept", #"{"event": "accept", "input": {"eta": "+20m"}}"#), ("ready", #"{"to": "ready"}"#),
        ("dispatch", #"{"event": "dispatch", "input": {"eta": "+15m", "driver": "Sam"}}"#), ("deliver", #"{"event": "deliver"}"#),
    ]
    static let libraryInputs: [String: JSONValue] = ["accept": ["eta": "+20m"], "dispatch": ["eta": "+15m", "driver": "Sam"]]

    /// `wrk` when it is installed, else AsyncHTTPClient.
    var chosenClient: Client {
        client ?? (WrkRun.executable == nil ? .ahc : .wrk)
    }

    func validate() throws {
        if client == .wrk, WrkRun.executable == nil {
            throw ValidationError("--client wrk: wrk is not installed (apt-get install wrk)")
        }
        guard seconds >= 1, rounds >= 1, connections >= 1, databaseConnections >= 2, rate >= 1 else {
            throw ValidationError("--seconds, --rounds, --connections and --rate must be at least 1, --database-connections at least 2.")
        }
    }

    func run() async throws {
        try await BenchDatabase.with(url: database) { bench in try await measure(bench) }
    }

    private func measure(_ bench: BenchDatabase) async throws {
        var logger = Logger(label: "orderflow.bench")
        logger.logLevel = .warning
        // Enough orders that no turn walks one past its final state (4 steps each, at up to
        // 20,000 advances/s: advances wait for their group holding no connection, so the
        // library side runs far faster than the HTTP side and would otherwise run out early).
        let ordersPerTurn = max(2_000, seconds * 20_000 / 4)
        // Both engines remember the orders they created, as a backend's would: each side's
        // orders are created through that side (the library's by the library, the HTTP turns'
        // through the server), and both caches hold a turn's orders with room to spare.
        let cachedOrders = 4 * ordersPerTurn
        var engineConfiguration = OrderFlowConfiguration(database: bench.configuration, maximumConnections: databaseConnections)
        engineConfiguration.cachedOrders = cachedOrders
        let engine = OrderFlowEngine(configuration: engineConfiguration, logger: logger)
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        if try await !engine.merchants().contains(where: { $0.id == "default" }) { _ = try await engine.addMerchant("default") }
        let key = try await engine.createAPIKey(merchantID: "default", name: "bench").secret

        let server = try ServerProcess.start(databaseURL: bench.configuration.connectionString, connections: databaseConnections,
                                             cachedOrders: cachedOrders)
        defer { server.stop() }
        let port = try await server.port()
        let driver = chosenClient
        print("orderflow serve (pid \(server.pid)) on port \(port), \(databaseConnections) database connections; \(connections) keep-alive connections (\(driver == .wrk ? "wrk, 2 threads" : "AsyncHTTPClient in this process")) vs \(connections) tasks calling the library")
        let client = makeClient()
        let caller = Caller(client: client, base: "http://127.0.0.1:\(port)", key: key)

        var nextOrder = 0
        // CPU per order created, of the side doing the work (as for advances).
        var cpuPerCreate: (library: [Double], http: [Double]) = ([], [])
        func freshOrders(for side: Side) async throws -> Range<Int> {
            let orders = nextOrder..<(nextOrder + ordersPerTurn)
            nextOrder = orders.upperBound
            let cpuBefore = CPUUse.now(watching: server.pid)
            let started = ContinuousClock.now
            if side == .library {
                try await createOrders(engine: engine, orders: orders)
            } else {
                try await caller.createOrders(orders, prefix: "h-", concurrency: connections)
            }
            let rate = Double(orders.count) / (ContinuousClock.now - started).asSeconds
            if let cpuBefore, let cpuAfter = CPUUse.now(watching: server.pid) {
                let perCreate = cpuAfter.microsecondsPerTransition(since: cpuBefore, rate: rate)
                if side == .library { cpuPerCreate.library.append(perCreate.own) } else { cpuPerCreate.http.append(perCreate.other) }
            }
            return orders
        }
        // Warm both paths (connections, caches, the server's first requests).
        let warm = try await freshOrders(for: .http)
        _ = try await runHTTP(caller, orders: warm, seconds: 1, minimal: false)
        var rates: [Side: [Double]] = [:]
        // CPU per advance of the side doing the work: this process for the library, the server
        // for the HTTP turns (independent of where the client runs).
        var cpuPerAdvance: [Side: [Double]] = [:]
        // Every turn, and the fixed-rate phase, starts vacuumed, analyzed and from a checkpoint
        // (as in `advance`): none inherits the dead rows, dirty pages or autovacuum of the turns
        // before it (without this the fixed-rate phase's p99 depended on how much the turns
        // before it had written).
        for round in 0..<rounds {
            // Each side's turn moves one place later every round: none always runs first.
            let sides = [Side.library, .http, .minimal]
            for turn in 0..<sides.count {
                let side = sides[(turn + round) % sides.count]
                let orders = try await freshOrders(for: side)
                try await settle(engine.pool)
                let cpuBefore = CPUUse.now(watching: server.pid)
                let rate = switch side {
                case .library: try await runLibrary(engine, orders: orders, seconds: seconds)
                case .http, .minimal:
                    switch driver {
                    case .ahc: try await runHTTP(caller, orders: orders, seconds: seconds, minimal: side == .minimal)
                    case .wrk: try await WrkRun(port: port, key: key, connections: connections, seconds: seconds)
                        .advances(orders: orders, prefix: "h-", steps: Self.steps.map(\.1), minimal: side == .minimal)
                    }
                }
                rates[side, default: []].append(rate)
                print("  round \(round + 1)  \(side.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0))"
                      + String(format: "%8.0f advances/s", rate) + "   server RSS \(server.residentMegabytes()) MB")
                // Where the cores went: the library's side runs in this process, the HTTP side
                // in the server (wrk and PostgreSQL are "everything else").
                if let cpuBefore, let cpuAfter = CPUUse.now(watching: server.pid) {
                    print("           " + cpuAfter.summary(since: cpuBefore, rate: rate))
                    let perAdvance = cpuAfter.microsecondsPerTransition(since: cpuBefore, rate: rate)
                    cpuPerAdvance[side, default: []].append(side == .library ? perAdvance.own : perAdvance.other)
                }
            }
        }
        let library = rates[.library]!.reduce(0, +) / Double(rounds)
        let http = rates[.http]!.reduce(0, +) / Double(rounds)
        let minimal = rates[.minimal]!.reduce(0, +) / Double(rounds)
        func byRound(_ side: Side) -> String {
            zip(rates[side]!, rates[.library]!).map { String(format: "%.2f", $0 / $1) }.joined(separator: " / ")
        }
        print(String(format: "library  %8.0f advances/s (mean of %d turns)", library, rounds))
        print(String(format: "http     %8.0f advances/s (mean of %d turns; the order and transition as JSON)", http, rounds))
        print(String(format: "http-min %8.0f advances/s (mean of %d turns; Prefer: return=minimal, 204)", minimal, rounds))
        print(String(format: "ratio http/library      %.2f   (goal ≥ 0.80; round by round %@)", http / library, byRound(.http)))
        print(String(format: "ratio http-min/library  %.2f   (round by round %@)", minimal / library, byRound(.minimal)))
        // The HTTP layer's own cost per request, in the same run: requests the server answers
        // 401 before the engine, so that the goal line can be read as that floor plus the rest.
        var floor: Double?
        if driver == .wrk {
            let cpuBefore = CPUUse.now(watching: server.pid)
            let rate = try await WrkRun(port: port, key: key, connections: connections, seconds: seconds).unauthenticated()
            if let cpuBefore, let cpuAfter = CPUUse.now(watching: server.pid) {
                floor = cpuAfter.microsecondsPerTransition(since: cpuBefore, rate: rate).other
            }
        }
        printCPUGoal(cpuPerAdvance, floor: floor)
        if !cpuPerCreate.library.isEmpty, !cpuPerCreate.http.isEmpty {
            let library = cpuPerCreate.library.reduce(0, +) / Double(cpuPerCreate.library.count)
            let http = cpuPerCreate.http.reduce(0, +) / Double(cpuPerCreate.http.count)
            print(String(format: "creates: CPU per order created: server %.0f µs, library %.0f µs, %.2f×", http, library, http / library))
        }
        if driver == .wrk {
            try await measureReads(engine: engine, server: server, port: port, key: key, orders: warm)
        }

        let orders = try await freshOrders(for: .http)
        try await settle(engine.pool)
        let latencies = try await runFixedRate(caller, orders: orders, rate: rate, seconds: seconds)
        func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        print(String(format: "at %d advances/s for %d s: %d answered, p50 %.1f ms, p99 %.1f ms, max %.1f ms   (goal p99 ≤ 10 ms)",
                     rate, seconds, latencies.count, percentile(0.5), percentile(0.99), latencies.last ?? 0))
        print("server RSS after the run, cache of \(cachedOrders) orders: \(server.residentMegabytes()) MB (peak \(server.peakResidentMegabytes()) MB)")
        server.stop()
        if driver == .wrk {
            try await measureDefaultCacheMemory(bench, key: key, orders: nextOrder..<(nextOrder + ordersPerTurn))
        } else {
            print("server RSS with the default order cache: not measured (its turn needs wrk; see --client)")
        }

        try await client.shutdown()
        await engine.shutdown()
    }

    /// An HTTP/1.1 client keeping up to `connections` connections alive.
    private func makeClient() -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        configuration.httpVersion = .http1Only
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// The goal line: the server's CPU per advance (full answer) ÷ the library's, both measured
    /// in this run; the minimal answer's beside it, and what a request answered without the
    /// engine costs the server (`floor`, with wrk).
    private func printCPUGoal(_ cpu: [Side: [Double]], floor: Double?) {
        func mean(_ side: Side) -> Double? {
            guard let values = cpu[side], !values.isEmpty else { return nil }
            return values.reduce(0, +) / Double(values.count)
        }
        guard let library = mean(.library), library > 0, let http = mean(.http), let minimal = mean(.minimal) else {
            print("CPU per advance: not measured (no /proc)")
            return
        }
        print(String(format: "CPU per advance: server %.0f µs (http), %.0f µs (http-min); library %.0f µs", http, minimal, library))
        print(String(format: "ratio server CPU/library CPU per advance  %.2f×   (goal ≤ 2×; http-min %.2f×)", http / library, minimal / library))
        if let floor {
            print(String(format: "HTTP floor: a request answered 401 before the engine costs the server %.0f µs (%.2f× the library's advance); "
                         + "an advance costs it %.0f µs beyond that floor (%.2f× the library's)", floor, floor / library, http - floor, (http - floor) / library))
        }
    }

    /// Reads of the orders the warm-up made: `GET /v1/orders/{id}` by wrk against
    /// `engine.order(_:)` by as many tasks in this process, one turn each, and the CPU per read
    /// of the side doing the work (the server's, this process's).
    private func measureReads(engine: OrderFlowEngine, server: ServerProcess, port: Int, key: String, orders: Range<Int>) async throws {
        try await settle(engine.pool)
        var before = CPUUse.now(watching: server.pid)
        let libraryRate = try await runTurn(orders: orders, seconds: seconds, steps: 1, roundAndRound: true) { index, _ in
            _ = try await engine.order("h-\(index)")
        }
        let library = before.flatMap { start in CPUUse.now(watching: server.pid)?.microsecondsPerTransition(since: start, rate: libraryRate).own }
        try await settle(engine.pool)
        before = CPUUse.now(watching: server.pid)
        let httpRate = try await WrkRun(port: port, key: key, connections: connections, seconds: seconds).reads(orders: orders, prefix: "h-")
        let http = before.flatMap { start in CPUUse.now(watching: server.pid)?.microsecondsPerTransition(since: start, rate: httpRate).other }
        print(String(format: "reads: http %.0f /s, library %.0f /s (%.2f)", httpRate, libraryRate, httpRate / libraryRate)
              + (library.flatMap { library in http.map { String(format: "; CPU per read: server %.0f µs, library %.0f µs, %.2f×", $0, library, $0 / library) } } ?? ""))
    }

    /// A server with the default order cache (no `--cached-orders`), driven by wrk for one
    /// turn over `orders`, which it creates first: its RSS is what a deployment with the
    /// defaults uses.
    private func measureDefaultCacheMemory(_ bench: BenchDatabase, key: String, orders: Range<Int>) async throws {
        let server = try ServerProcess.start(databaseURL: bench.configuration.connectionString, connections: databaseConnections,
                                             cachedOrders: nil)
        defer { server.stop() }
        let port = try await server.port()
        let client = makeClient()
        try await Caller(client: client, base: "http://127.0.0.1:\(port)", key: key)
            .createOrders(orders, prefix: "h-", concurrency: connections)
        try await client.shutdown()
        let rate = try await WrkRun(port: port, key: key, connections: connections, seconds: seconds)
            .advances(orders: orders, prefix: "h-", steps: Self.steps.map(\.1), minimal: false)
        print(String(format: "server RSS with the default order cache, after %d orders and a %d s turn (%.0f advances/s): ", orders.count, seconds, rate)
              + "\(server.residentMegabytes()) MB (peak \(server.peakResidentMegabytes()) MB)   (goal ≤ 100 MB)")
    }

    private func createOrders(engine: OrderFlowEngine, orders: Range<Int>) async throws {
        try await createFoodOrders(engine: engine, prefix: "h-", range: orders, tasks: 8)
    }

    /// Each caller walks its share of the orders through the `steps` (the workflow's four) until
    /// time is up, or its orders run out; with `roundAndRound`, starting again at its first.
    private func runTurn(orders: Range<Int>, seconds: Int, steps: Int = Self.steps.count, roundAndRound: Bool = false,
                         _ call: @escaping @Sendable (Int, Int) async throws -> Void) async throws -> Double {
        let count = Counter()
        let clock = ContinuousClock()
        let started = clock.now
        let deadline = started + .seconds(seconds)
        let callers = connections
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<callers {
                group.addTask {
                    repeat {
                        for index in stride(from: orders.lowerBound + caller, to: orders.upperBound, by: callers) {
                            for step in 0..<steps {
                                guard clock.now < deadline else { return }
                                try await call(index, step)
                                count.value.add(1, ordering: .relaxed)
                            }
                        }
                    } while roundAndRound && clock.now < deadline
                }
            }
            try await group.waitForAll()
        }
        let elapsed = clock.now - started
        return Double(count.value.load(ordering: .relaxed)) / elapsed.asSeconds
    }

    private func runLibrary(_ engine: OrderFlowEngine, orders: Range<Int>, seconds: Int) async throws -> Double {
        try await runTurn(orders: orders, seconds: seconds) { index, step in
            let target = Self.steps[step].0
            _ = try await engine.advance("h-\(index)", to: target, input: Self.libraryInputs[target] ?? [:])
        }
    }

    private func runHTTP(_ caller: Caller, orders: Range<Int>, seconds: Int, minimal: Bool) async throws -> Double {
        try await runTurn(orders: orders, seconds: seconds) { index, step in
            try await caller.advance("h-\(index)", body: Self.steps[step].1, minimal: minimal)
        }
    }

    /// Sends `rate` advances per second, each at its own scheduled instant, for `seconds`;
    /// the latencies in milliseconds, sorted, from the scheduled instant to the answer.
    private func runFixedRate(_ caller: Caller, orders: Range<Int>, rate: Int, seconds: Int) async throws -> [Double] {
        let total = rate * seconds
        let clock = ContinuousClock()
        let start = clock.now + .milliseconds(100)
        let interval = Duration.seconds(1) / rate
        let results = Latencies()
        let orderCount = orders.count
        try await withThrowingTaskGroup(of: Void.self) { group in
            for request in 0..<total {
                let scheduled = start + interval * request
                try await clock.sleep(until: scheduled)
                // Request n advances order n mod count by step n / count: every order moves in step order.
                let index = orders.lowerBound + request % orderCount
                let step = (request / orderCount) % Self.steps.count
                group.addTask {
                    try await caller.advance("h-\(index)", body: Self.steps[step].1, minimal: false)
                    let elapsed = clock.now - scheduled
                    let milliseconds = Double(elapsed.components.seconds) * 1_000 + Double(elapsed.components.attoseconds) / 1e15
                    results.values.withLock { $0.append(milliseconds) }
                }
            }
            try await group.waitForAll()
        }
        return results.values.withLock { $0 }.sorted()
    }
}

/// Latencies collected from every task.
private final class Latencies: Sendable {
    let values = Mutex<[Double]>([])
}

/// Advances orders over HTTP.
private struct Caller: Sendable {
    let client: HTTPClient
    let base: String
    let key: String

    /// Creates the food orders `prefix` + each index through `POST /v1/orders`.
    func createOrders(_ orders: Range<Int>, prefix: String, concurrency: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<concurrency {
                group.addTask {
                    for index in stride(from: orders.lowerBound + task, to: orders.upperBound, by: concurrency) {
                        var request = HTTPClientRequest(url: "\(base)/v1/orders")
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: "Bearer \(key)")
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.headers.add(name: "Prefer", value: "return=minimal")
                        request.body = .bytes(ByteBuffer(string: #"{"id": "\#(prefix)\#(index)", "workflow": "food-order", "attributes": {"merchantName": "Bench Bistro", "orderNumber": "\#(index)", "itemCount": 2}}"#))
                        let response = try await client.execute(request, timeout: .seconds(30))
                        let answer = try await response.body.collect(upTo: 1 << 20)
                        guard response.status == .created || response.status == .ok || response.status == .noContent else {
                            throw BenchError("creating \(prefix)\(index) answered \(response.status.code): \(String(buffer: answer).prefix(300))")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// `minimal`: with `Prefer: return=minimal` (a 204 without body).
    func advance(_ orderID: String, body: String, minimal: Bool) async throws {
        var request = HTTPClientRequest(url: "\(base)/v1/orders/\(orderID)/advance")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        request.headers.add(name: "Content-Type", value: "application/json")
        if minimal { request.headers.add(name: "Prefer", value: "return=minimal") }
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await client.execute(request, timeout: .seconds(30))
        let answer = try await response.body.collect(upTo: 1 << 20)
        guard response.status == (minimal ? .noContent : .ok) else {
            throw BenchError("advance \(orderID) answered \(response.status.code): \(String(buffer: answer).prefix(300))")
        }
    }
}

/// `orderflow serve --no-worker` in a process of its own (the binary beside this one).
private final class ServerProcess: Sendable {
    private let process: UncheckedProcess
    private let log: URL
    let pid: Int32

    struct UncheckedProcess: @unchecked Sendable { let process: Process }

    /// `cachedOrders`: nil leaves the server's default.
    static func start(databaseURL: String, connections: Int, cachedOrders: Int?) throws -> ServerProcess {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("orderflow")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw BenchError("\(binary.path) is missing; build it beside orderflow-bench (swift build -c release --product orderflow)")
        }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-bench-serve-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = Process()
        process.executableURL = binary
        process.arguments = ["serve", "--port", "0", "--no-worker", "--connections", "\(connections)"]
            + (cachedOrders.map { ["--cached-orders", "\($0)"] } ?? [])
        var environment = ProcessInfo.processInfo.environment
        environment["ORDERFLOW_DATABASE_URL"] = databaseURL
        environment["ORDERFLOW_LOG_LEVEL"] = "warning"
        process.environment = environment
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return ServerProcess(process: UncheckedProcess(process: process), log: log, pid: process.processIdentifier)
    }

    private init(process: UncheckedProcess, log: URL, pid: Int32) {
        self.process = process
        self.log = log
        self.pid = pid
    }

    func port() async throws -> Int {
        for _ in 0..<300 {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: "serving the API on http://127.0.0.1:"),
               let port = Int(text[range.upperBound...].prefix { $0.isNumber }) {
                return port
            }
            guard process.process.isRunning else { throw BenchError("orderflow serve exited: \(text.suffix(500))") }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchError("orderflow serve did not start within 30 s")
    }

    /// VmRSS / VmHWM of the server, in MB.
    func residentMegabytes() -> Int { Int(procStatusMegabytes(pid: pid, field: "VmRSS:") ?? 0) }
    func peakResidentMegabytes() -> Int { Int(procStatusMegabytes(pid: pid, field: "VmHWM:") ?? 0) }

    func stop() {
        guard process.process.isRunning else { return }
        process.process.terminate()
        process.process.waitUntilExit()
        try? FileManager.default.removeItem(at: log)
    }
}
