import AsyncHTTPClient
import Foundation
import LocalAPNS
import NIOCore
import NIOHTTP1
import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import TestTags
import Testing

/// A soak: the system as deployed — clients calling `orderflow serve` over HTTP, a separate
/// `orderflow worker run` — held at 80 % of the capacity measured at the start of the same run,
/// with the worker SIGKILLed and restarted at a fixed interval and the APNs stand-in failing
/// 5 % of requests (500, retried by the worker). Every second it samples the API calls
/// answered, the pushes accepted, the queue depth (commands not yet sent) and the resident
/// memory of the worker and the server.
///
/// CI runs it for 60 s with a kill every 15 s; `scripts/soak` runs it for 10 minutes with a kill
/// every minute and plots the samples (RELIABILITY.md). Settings, from the environment:
/// `ORDERFLOW_SOAK_SECONDS`, `ORDERFLOW_SOAK_KILL_EVERY` (seconds), `ORDERFLOW_SOAK_SAMPLES` (a
/// CSV file to write the samples to), `ORDERFLOW_SOAK_RETENTION` (seconds, e.g. 120: the
/// merchant's retention and the workers purging every 30 s, so that finished orders leave
/// within the run and the tables must stay flat).
@Suite("Reliability: soak", .tags(.reliability), .serialized)
struct ReliabilitySoakTests {
    static let clients = 8
    static let measureFor: Duration = .seconds(5)

    static func setting(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }

    struct Sample: Sendable {
        var second: Int
        var calls: Int
        var pushes: Int
        var queueDepth: Int
        var workerRSS: Double
        var serverRSS: Double
        var workerKilled: Bool
        var tablesMB: Double
        var orders: Int
    }

    /// The tables that grow with every order, and what the purge keeps them to.
    static let growingTables = ["orders", "order_transitions", "deliveries", "activities", "order_followers", "activity_commands"]

    /// Their size on disk (indexes and TOAST included) and the orders kept; nil when the
    /// database did not answer.
    static func tableSizes(_ setup: WorkerProcessSetup) async -> (megabytes: Double, orders: Int)? {
        try? await setup.engine.pool.withConnection { connection in
            let row = try await connection.query(PostgresQuery(
                "SELECT (SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest($1::text[]) AS t)::float8 AS bytes, (SELECT count(*) FROM orders) AS n",
                Self.growingTables)).single()
            return (try row.decode("bytes", as: Double.self) / 1_048_576, try row.decode("n", as: Int.self))
        }
    }

    @Test(.timeLimit(.minutes(60)))
    func soakAtEightyPercentOfCapacityLosesNothing() async throws {
        let soakFor = Duration.seconds(Self.setting("ORDERFLOW_SOAK_SECONDS", 60))
        let killEvery = Duration.seconds(Self.setting("ORDERFLOW_SOAK_KILL_EVERY", 15))
        let retention = ProcessInfo.processInfo.environment["ORDERFLOW_SOAK_RETENTION"].flatMap(Int.init)
        let setup = try await WorkerProcessSetup.make(prefix: "soak")
        let added = try await setup.cli.run("merchant", "add", "soak", "--name", "Soak Kitchen")
        #expect(added.status == 0, "\(added)")
        let workerArguments = setup.workerArguments + (retention == nil ? [] : ["--purge-interval", "30s"])
        if let retention {
            let kept = try await setup.cli.run("merchant", "retention", "soak", "\(retention)s")
            try #require(kept.status == 0, "\(kept)")
        }
        let created = try await setup.cli.run("api-key", "create", "--merchant", "soak", "--name", "soak")
        let apiKey = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(created.status == 0 && apiKey.hasPrefix("of_live_"), "\(created)")

        let server = try setup.cli.start(["serve", "--port", "0", "--no-worker"])
        let api = SoakAPI(base: "http://127.0.0.1:\(try await Self.listeningPort(server))", key: apiKey)
        // Whatever fails below, the client is shut down first, so that the failure is reported
        // (an HTTPClient dropped unclosed stops the process with a fatal error of its own).
        do {
            let applied = try await api.call(.POST, "/v1/workflows", body: try EngineFixture.shippedWorkflow("food-order"), contentType: "application/yaml")
            #expect(applied == 200 || applied == 201, "applying the workflow answered \(applied)")
            setup.apns.injectFault(.internalServerError, fraction: 0.05)

            let worker = LockedValue<RunningCLI?>(try setup.cli.start(workerArguments))
            let load = SoakLoad(api: api, tokens: setup.tokens)

            // Capacity: the clients as fast as they go, the worker sending meanwhile.
            let measured = try await load.run(clients: Self.clients, for: Self.measureFor, rate: nil)
            let capacity = Double(measured) / Self.measureFor.inSeconds
            let rate = capacity * 0.8

            // The soak, sampled every second; the worker killed every `killEvery`.
            let started = ContinuousClock.now
            var samples: [Sample] = []
            let kills = LockedValue(0)
            let soak = Task { try await load.run(clients: Self.clients, for: soakFor, rate: rate) }
            let killer = Task {
                while ContinuousClock.now - started + killEvery < soakFor {
                    try await Task.sleep(for: killEvery)
                    let victim = worker.value
                    if let victim { kill(victim.process.processIdentifier, SIGKILL) }
                    _ = try await victim?.finish()
                    let next = try setup.cli.start(workerArguments)
                    worker.withLock { $0 = next }
                    kills.withLock { $0 += 1 }
                }
            }
            var lastCalls = load.calls.load(ordering: .relaxed)
            var lastPushes = setup.apns.acceptedCount
            var lastKills = 0
            for second in 1...Int(soakFor.components.seconds) {
                try await Task.sleep(until: started + .seconds(second))
                let calls = load.calls.load(ordering: .relaxed)
                let pushes = setup.apns.acceptedCount
                let killed = kills.value
                let depth: Int = (try? await setup.engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM activity_commands")).single().decode("n")) ?? -1
                let workerPID = worker.withLock { $0?.process.processIdentifier } ?? 0
                let sizes = await Self.tableSizes(setup)
                samples.append(Sample(
                    second: second, calls: calls - lastCalls, pushes: pushes - lastPushes, queueDepth: depth,
                    workerRSS: Self.residentMegabytes(workerPID), serverRSS: Self.residentMegabytes(server.process.processIdentifier),
                    workerKilled: killed != lastKills, tablesMB: sizes?.megabytes ?? -1, orders: sizes?.orders ?? -1))
                (lastCalls, lastPushes, lastKills) = (calls, pushes, killed)
            }
            let soaked = try await soak.value
            try await killer.value
            let drainStarted = ContinuousClock.now
            try await setup.waitUntilDrained(timeout: .seconds(120))
            let drainTime = ContinuousClock.now - drainStarted
            let last = worker.value
            last?.interrupt()
            let stopped = try await last?.finish()
            #expect(stopped?.status == 0, "the last worker did not stop cleanly: \(String(describing: stopped))")
            server.interrupt()
            let serverStopped = try await server.finish()
            #expect(serverStopped.status == 0, "\(serverStopped)")

            let rows = samples
            if let path = ProcessInfo.processInfo.environment["ORDERFLOW_SOAK_SAMPLES"], !path.isEmpty {
                let header = "second,calls,pushes,queue_depth,worker_rss_mb,server_rss_mb,worker_killed,tables_mb,orders\n"
                let lines = rows.map {
                    "\($0.second),\($0.calls),\($0.pushes),\($0.queueDepth),\(String(format: "%.1f", $0.workerRSS)),\(String(format: "%.1f", $0.serverRSS)),\($0.workerKilled ? 1 : 0),\(String(format: "%.2f", $0.tablesMB)),\($0.orders)"
                }
                try (header + lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            }

            // Flat memory and no growing queue: the second half against the first (after a
            // 10-second warm-up), for the server that lives throughout; for the worker, restarted at
            // every kill, the highest of each life.
            let warm = rows.filter { $0.second > 10 }
            let halves = (Array(warm.prefix(warm.count / 2)), Array(warm.suffix(warm.count - warm.count / 2)))
            func mean(_ rows: [Sample], _ value: (Sample) -> Double) -> Double { rows.isEmpty ? 0 : rows.map(value).reduce(0, +) / Double(rows.count) }
            let serverRSS = (mean(halves.0, \.serverRSS), mean(halves.1, \.serverRSS))
            let queue = (mean(halves.0) { Double($0.queueDepth) }, mean(halves.1) { Double($0.queueDepth) })
            let workerPeaks = rows.split(whereSeparator: \.workerKilled).map { $0.map(\.workerRSS).max() ?? 0 }.filter { $0 > 0 }
            let achieved = Double(soaked) / soakFor.inSeconds
            let deadLetters = try await setup.deadLetters()
            let failures = load.failures.withLock { $0 }
            // Once the first orders have finished, waited out their retention and met a purge,
            // the orders kept and the tables' size stop growing: the second half of what follows
            // against the first.
            var steadyHalves: (orders: (Double, Double), tables: (Double, Double))?
            if let retention {
                let steady = rows.filter { $0.second > retention + 60 + 60 && $0.orders >= 0 }
                if steady.count >= 120 {
                    let parts = (Array(steady.prefix(steady.count / 2)), Array(steady.suffix(steady.count - steady.count / 2)))
                    steadyHalves = ((mean(parts.0) { Double($0.orders) }, mean(parts.1) { Double($0.orders) }),
                                    (mean(parts.0, \.tablesMB), mean(parts.1, \.tablesMB)))
                } else {
                    Issue.record("a soak with a retention of \(retention) s needs at least \(retention + 240) s to show the tables flat")
                }
            }
            let retentionNotes = steadyHalves.map { halves in
                ["retention \(retention ?? 0) s, purge every 30 s: orders kept mean \(Int(halves.orders.0)) → \(Int(halves.orders.1)), tables \(String(format: "%.1f", halves.tables.0)) → \(String(format: "%.1f", halves.tables.1)) MB (steady state, first → second half)"]
            } ?? []
            let audit = DeliveryAudit(
                scenario: "soak at 80 % of measured capacity",
                load: "\(Self.clients) HTTP clients → `orderflow serve`, capacity \(Int(capacity)) calls/s measured over \(Self.measureFor); \(Int(soakFor.inSeconds)) s at \(Int(rate)) calls/s target, \(Int(achieved)) achieved (\(soaked) calls); \(setup.tokens.value.count) orders in all, each created, given its activity's token and taken through 4 steps",
                faults: "worker SIGKILLed every \(Int(killEvery.inSeconds)) s (\(kills.value) kills), APNs 500 for 5 % of requests (\(setup.apns.rejectedCount) answered so)",
                tokens: setup.tokens.value, pushes: setup.apns.pushes(),
                notes: [
                    "queue depth mean \(Int(queue.0)) → \(Int(queue.1)) (first → second half), max \(rows.map(\.queueDepth).max() ?? 0), drained \(DeliveryAudit.format(drainTime)) after the load",
                    "server RSS mean \(String(format: "%.1f", serverRSS.0)) → \(String(format: "%.1f", serverRSS.1)) MB",
                    "worker RSS peak per life \(workerPeaks.map { String(format: "%.0f", $0) }.joined(separator: ", ")) MB",
                    "API calls failed \(failures.values.reduce(0, +)), answered 503 and retried \(load.unavailable.load(ordering: .relaxed)), dead letters \(deadLetters)",
                ] + retentionNotes,
                isFinal: { $0.aps?["event"]?.stringValue == "end" && $0.aps?["content-state"]?["status"]?.stringValue == "delivered" })
            audit.report()
            #expect(audit.lost == 0, "\(audit)")
            #expect(failures.isEmpty, "API calls failed: \(failures)")
            #expect(deadLetters == 0)
            // The rate is 80 % of a capacity measured in 5 s on a machine shared with other suites:
            // a soak that fell far behind it would not have held the load it reports.
            #expect(achieved >= rate * 0.75, "the load fell behind its rate: \(achieved) of \(rate) calls/s")
            #expect(serverRSS.1 <= serverRSS.0 * 1.25 + 16, "the server's memory grew: \(serverRSS)")
            #expect(queue.1 <= queue.0 * 2 + 100, "the queue grew: \(queue)")
            if let halves = steadyHalves {
                #expect(halves.orders.1 <= halves.orders.0 * 1.2 + 50, "the orders kept grew past their retention: \(halves.orders)")
                #expect(halves.tables.1 <= halves.tables.0 * 1.25 + 4, "the tables grew past their retention: \(halves.tables) MB")
            }
        } catch {
            try? await api.http.shutdown()
            server.interrupt()
            _ = try? await server.finish()
            throw error
        }
        try await api.http.shutdown()
        try await setup.shutdown()
    }

    /// Where `orderflow serve --port 0` said it listens.
    static func listeningPort(_ server: RunningCLI) async throws -> String {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, server.process.isRunning {
            let said = (try? String(contentsOf: server.stderrURL, encoding: .utf8)) ?? ""
            if let range = said.range(of: "serving the API on http://127.0.0.1:") {
                return String(said[range.upperBound...].prefix { $0.isNumber })
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw SoakFailure(description: "orderflow serve never said where it listens")
    }

    /// Resident memory of a process, in MB (0 when it is gone).
    static func residentMegabytes(_ pid: Int32) -> Double {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }
}

struct SoakFailure: Error, CustomStringConvertible {
    var description: String
}

/// The HTTP API as the soak's clients call it.
struct SoakAPI: Sendable {
    /// The servers called, in turn (one, unless a test replaces servers under load).
    let servers: ServerRotation
    let key: String
    let http = HTTPClient(eventLoopGroupProvider: .singleton)

    init(base: String, key: String) {
        self.init(servers: ServerRotation([base]), key: key)
    }

    init(servers: ServerRotation, key: String) {
        self.servers = servers
        self.key = key
    }

    /// The answer's status; the body is read and dropped.
    func call(_ method: HTTPMethod, _ path: String, body: String? = nil, contentType: String = "application/json",
              idempotencyKey: String? = nil) async throws -> Int {
        let base = servers.next()
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        request.headers.add(name: "Content-Type", value: contentType)
        if let idempotencyKey { request.headers.add(name: "Idempotency-Key", value: idempotencyKey) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await http.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        if (200..<300).contains(response.status.code) { servers.recordAnswer(from: base) }
        return Int(response.status.code)
    }
}

/// Clients taking food orders from creation to delivered through the HTTP API, each call
/// paced to a common rate (or as fast as they go), retrying a 503 with the same key.
final class SoakLoad: Sendable {
    let api: SoakAPI
    let tokens: LockedValue<[String]>
    /// API calls answered with success.
    let calls = Atomic<Int>(0)
    /// Calls answered otherwise, by status (503 is retried, and counted apart).
    let failures = Mutex<[Int: Int]>([:])
    /// 503 answers (database unavailable), each retried with the same key.
    let unavailable = Atomic<Int>(0)
    private let nextOrder = Atomic<Int>(0)

    init(api: SoakAPI, tokens: LockedValue<[String]>) {
        self.api = api
        self.tokens = tokens
    }

    static let steps = [
        #"{"event": "accept"}"#, #"{"to": "ready"}"#, #"{"event": "dispatch", "input": {"eta": "+10m", "driver": "Kim"}}"#,
        #"{"event": "deliver"}"#,
    ]

    /// Runs `clients` clients for `duration`, at `rate` calls per second in all (nil: as fast as
    /// they go); returns the calls answered. Orders under way at the end are finished.
    func run(clients: Int, for duration: Duration, rate: Double?) async throws -> Int {
        let started = ContinuousClock.now
        let before = calls.load(ordering: .relaxed)
        let slots = LockedValue(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<clients {
                group.addTask {
                    while ContinuousClock.now - started < duration {
                        let number = self.nextOrder.add(1, ordering: .relaxed).newValue
                        let orderID = "soak-\(number)"
                        let token = EngineFixture.token(50_000 + number)
                        self.tokens.withLock { $0.append(token) }
                        let calls: [(HTTPMethod, String, String, String?)] = [
                            (.POST, "/v1/orders", #"{"id": "\#(orderID)", "workflow": "food-order", "attributes": {"merchantName": "Soak Kitchen", "orderNumber": "\#(number)", "itemCount": 2}}"#, "create-\(orderID)"),
                            (.PUT, "/v1/orders/\(orderID)/activities/phone/token", #"{"token": "\#(token)"}"#, nil),
                        ] + Self.steps.enumerated().map { (.POST, "/v1/orders/\(orderID)/advance", $1, "\(orderID)-\($0)") }
                        for (method, path, body, key) in calls {
                            if let rate {
                                let slot = slots.withLock { slot in
                                    slot += 1
                                    return slot
                                }
                                try await Task.sleep(until: started + .seconds(Double(slot) / rate))
                            }
                            try await self.call(method, path, body: body, key: key)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        return calls.load(ordering: .relaxed) - before
    }

    private func call(_ method: HTTPMethod, _ path: String, body: String, key: String?) async throws {
        for _ in 0..<50 {
            let status = try await api.call(method, path, body: body, idempotencyKey: key)
            if (200..<300).contains(status) {
                calls.add(1, ordering: .relaxed)
                return
            }
            guard status == 503 else {
                failures.withLock { $0[status, default: 0] += 1 }
                return
            }
            unavailable.add(1, ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

extension Duration {
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
