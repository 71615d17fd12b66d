import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Synchronization
import TestTags
import Testing

/// Upgrade without a stop (docs/operations.md): the previous release's `serve` and `worker run`
/// hold HTTP load on a database it migrated; this build's `orderflow migrate` migrates the live
/// database under them, this build's `serve` and `worker run` start beside them, then the old
/// ones get SIGTERM. The load never stops. Nothing may be lost (every order's final push reaches
/// the APNs stand-in, every order ends delivered) and no call may be answered 5xx.
///
/// The previous release's binary comes from `scripts/build-previous-release` (scripts/test runs
/// it and passes the path in ORDERFLOW_UPGRADE_PREVIOUS_BINARY, "none" when there is no
/// previous release). The test knows no migration by number: it works whatever each side ships.
@Suite("Reliability: rolling upgrade", .tags(.reliability), .serialized)
struct ReliabilityUpgradeTests {
    static let clients = 6
    /// Calls a second in all: a steady load that leaves the shared CI cores room for four processes.
    static let rate = 40.0
    static let phase: Duration = .seconds(5)

    @Test(.timeLimit(.minutes(10)))
    func previousReleaseKeepsServingWhileThisOneMigratesAndTakesOver() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let previous = environment["ORDERFLOW_UPGRADE_PREVIOUS_BINARY"], !previous.isEmpty else {
            Issue.record("ORDERFLOW_UPGRADE_PREVIOUS_BINARY is not set: run `scripts/test` (it builds the previous release), or set it to the output of `scripts/build-previous-release`")
            return
        }
        guard previous != "none" else { return }  // the first release: nothing to upgrade from
        let release = environment["ORDERFLOW_UPGRADE_PREVIOUS_RELEASE"] ?? "the previous release"

        let database = try await TestDatabase.fresh(prefix: "upgrade")
        let old = try CLI(databaseURL: database.connectionString, binary: URL(fileURLWithPath: previous))
        let new = try CLI(databaseURL: database.connectionString)
        let migrated = try await old.run("migrate")
        try #require(migrated.status == 0, "\(release)'s migrate: \(migrated)")
        let setup = try await WorkerProcessSetup.make(database: database, cli: old, applyWorkflow: false)
        let oldSchema = try await Self.schemaVersion(setup)
        let added = try await old.run("merchant", "add", "upgrade", "--name", "Upgrade Kitchen")
        try #require(added.status == 0, "\(added)")
        let created = try await old.run("api-key", "create", "--merchant", "upgrade", "--name", "upgrade")
        let apiKey = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(created.status == 0 && apiKey.hasPrefix("of_live_"), "\(created)")

        let oldServer = try old.start(["serve", "--port", "0", "--no-worker"])
        let oldWorker = try old.start(setup.workerArguments)
        let oldBase = "http://127.0.0.1:\(try await ReliabilitySoakTests.listeningPort(oldServer))"
        let servers = ServerRotation([oldBase])
        let api = SoakAPI(servers: servers, key: apiKey)
        var newServer: RunningCLI?
        var newWorker: RunningCLI?
        do {
            // The food order the previous release ships (its sources sit above its binary,
            // .build-previous-release/vX.Y.Z/.build/debug/orderflow): this checkout's may use a
            // field type that release does not know yet (`daterange`), and a workflow is applied
            // through the running release, as an operator upgrading would.
            let releaseWorkflow = URL(fileURLWithPath: previous).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("workflows/food-order.yaml")
            let foodOrder = try (try? String(contentsOf: releaseWorkflow, encoding: .utf8)) ?? EngineFixture.shippedWorkflow("food-order")
            let applied = try await api.call(.POST, "/v1/workflows", body: foodOrder, contentType: "application/yaml")
            try #require(applied == 200 || applied == 201, "applying the workflow through \(release) answered \(applied)")
            let load = SoakLoad(api: api, tokens: setup.tokens)
            let started = ContinuousClock.now
            let loadFor = Self.phase * 5
            let running = Task { try await load.run(clients: Self.clients, for: loadFor, rate: Self.rate) }

            // 1. The old release alone; then this build migrates the live database under it.
            try await Task.sleep(for: Self.phase)
            let migration = try await new.run("migrate")
            #expect(migration.status == 0, "this build's migrate on the live database: \(migration)")
            let newSchema = try await Self.schemaVersion(setup)
            let oldAnsweredBefore = servers.answers(from: oldBase)
            // 2. The old processes alone on the new schema.
            try await Task.sleep(for: Self.phase)
            let oldAnsweredOnNewSchema = servers.answers(from: oldBase) - oldAnsweredBefore
            // 3. The new ones start beside them; both serve, in turn, and both workers claim.
            newWorker = try new.start(setup.workerArguments)
            let server = try new.start(["serve", "--port", "0", "--no-worker"])
            newServer = server
            let newBase = "http://127.0.0.1:\(try await ReliabilitySoakTests.listeningPort(server))"
            servers.add(newBase)
            try await Task.sleep(for: Self.phase)
            // 4. The old server leaves the rotation (as a balancer drains it), then both old
            //    processes get SIGTERM and must stop cleanly; the new ones carry the load on.
            servers.remove(oldBase)
            try await Task.sleep(for: .seconds(1))
            kill(oldServer.process.processIdentifier, SIGTERM)
            kill(oldWorker.process.processIdentifier, SIGTERM)
            let oldServerStopped = try await oldServer.finish()
            let oldWorkerStopped = try await oldWorker.finish()
            #expect(oldServerStopped.status == 0, "\(release)'s serve at SIGTERM: \(oldServerStopped)")
            #expect(oldWorkerStopped.status == 0, "\(release)'s worker at SIGTERM: \(oldWorkerStopped)")
            let calls = try await running.value
            let loadTime = ContinuousClock.now - started
            try await setup.waitUntilDrained(timeout: .seconds(120))

            let failures = load.failures.withLock { $0 }
            let unavailable = load.unavailable.load(ordering: .relaxed)
            let deadLetters = try await setup.deadLetters()
            let unfinished: Int = try await setup.engine.pool.query(PostgresQuery(
                "SELECT count(*) AS n FROM orders WHERE merchant_id = 'upgrade' AND state <> 'delivered'")).single().decode("n")
            let orders: Int = try await setup.engine.pool.query(PostgresQuery(
                "SELECT count(*) AS n FROM orders WHERE merchant_id = 'upgrade'")).single().decode("n")
            let serverErrors = failures.filter { $0.key >= 500 }.values.reduce(0, +) + unavailable
            let audit = DeliveryAudit(
                scenario: "rolling upgrade from \(release)",
                load: "\(Self.clients) HTTP clients at \(Int(Self.rate)) calls/s for \(DeliveryAudit.format(loadTime)), \(calls) calls, \(orders) orders",
                faults: "schema \(oldSchema) → \(newSchema) migrated live; old serve and worker SIGTERMed after the new ones started",
                tokens: setup.tokens.value, pushes: setup.apns.pushes(),
                notes: ["the old server answered \(oldAnsweredOnNewSchema) calls with success on the new schema"],
                isFinal: { $0.aps?["event"]?.stringValue == "end" && $0.aps?["content-state"]?["status"]?.stringValue == "delivered" })
            let otherFailures = failures.filter { $0.key < 500 }.values.reduce(0, +)
            let pushes = setup.apns.acceptedCount
            let schemas = "schema \(oldSchema) → \(newSchema) under load"
            let traffic = "\(orders) orders, \(calls) calls (old server \(oldAnsweredOnNewSchema) on the new schema), \(pushes) pushes"
            let outcome = "lost \(audit.lost), unfinished \(unfinished), 5xx \(serverErrors), other failures \(otherFailures), dead letters \(deadLetters)"
            print("upgrade \(release) → \(OrderFlowVersion.current): \(schemas); \(traffic); \(outcome)")
            #expect(audit.lost == 0, "\(audit)")
            #expect(unfinished == 0, "orders not delivered at the end")
            #expect(failures.isEmpty && unavailable == 0, "calls answered otherwise than 2xx: \(failures), 503 \(unavailable)")
            #expect(deadLetters == 0)
            #expect(oldAnsweredOnNewSchema > 0, "\(release)'s server answered nothing on the new schema")
            #expect(orders > 0)
        } catch {
            try? await api.http.shutdown()
            for process in [oldServer, oldWorker, newServer, newWorker].compactMap({ $0 }) where process.process.isRunning {
                process.interrupt()
                _ = try? await process.finish()
            }
            throw error
        }
        for process in [newServer, newWorker].compactMap({ $0 }) {
            kill(process.process.processIdentifier, SIGTERM)
            let stopped = try await process.finish()
            #expect(stopped.status == 0, "this build at SIGTERM: \(stopped)")
        }
        try await api.http.shutdown()
        try await setup.shutdown()
    }

    static func schemaVersion(_ setup: WorkerProcessSetup) async throws -> Int {
        try await Migrator.appliedVersion(on: setup.engine.pool)
    }
}

/// The servers a test's clients call, in turn, like a balancer: servers join and leave under
/// load, and each one's successful (2xx) answers are counted.
final class ServerRotation: Sendable {
    private let state: Mutex<(servers: [String], turn: Int, answered: [String: Int])>

    init(_ servers: [String]) {
        state = Mutex((servers, 0, [:]))
    }

    func next() -> String {
        state.withLock { state in
            state.turn += 1
            return state.servers[state.turn % state.servers.count]
        }
    }

    func add(_ server: String) {
        state.withLock { $0.servers.append(server) }
    }

    func remove(_ server: String) {
        state.withLock { $0.servers.removeAll { $0 == server } }
    }

    func recordAnswer(from server: String) {
        state.withLock { $0.answered[server, default: 0] += 1 }
    }

    func answers(from server: String) -> Int {
        state.withLock { $0.answered[server, default: 0] }
    }
}
