import APNS
import Crypto
import Foundation
import LocalAPNS
import LocalPostgres
import Logging
import Metrics
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import TestTags
import Testing

/// PostgreSQL restarted (fast shutdown) in the middle of a load: while it is down the engine
/// answers with a clear, retryable error; the engine's pool, the worker's pool and the worker's
/// LISTEN connection come back by themselves; nothing committed is lost, and every order's
/// final state still reaches its device.
///
/// The server is a private cluster of this test (`LocalPostgres`), so that stopping it disturbs
/// no other test.
@Suite("Reliability: PostgreSQL restart", .tags(.reliability), .serialized)
struct ReliabilityPostgresTests {
    static let clients = 8
    static let ordersPerClient = 5

    @Test(.timeLimit(.minutes(3)))
    func restartDuringLoadLosesNothing() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-reliability-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o755)
        let server = LocalPostgres(folder: folder)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = try await server.start()
        do {
            try await scenario(server: server, url: url)
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    private func scenario(server: LocalPostgres, url: String) async throws {
        let database = try PostgresConfiguration(url)
        _ = try await Schema.migrate(database)
        let rig = try await PostgresFaultRig.start(database, workerID: "restart")
        let engine = rig.engine
        let orderIDs = (0..<Self.clients).flatMap { client in (0..<Self.ordersPerClient).map { "P\(client)-\($0)" } }
        let tokens = try await rig.createOrders(orderIDs, firstToken: 8000)

        // The load: eight clients, each taking its five orders through eleven steps, one step
        // every 60 ms, retrying with the same idempotency key while the database is away.
        let load = TickerLoad()
        let started = ContinuousClock.now
        let running = Task { try await load.run(engine, orders: orderIDs.chunks(of: Self.ordersPerClient)) }
        try await Task.sleep(for: .milliseconds(700))
        try await server.stop()
        let downAt = ContinuousClock.now
        try await Task.sleep(for: .seconds(2))
        let restartedURL = try await server.start()
        #expect(restartedURL == url, "the cluster came back on another port")
        let downFor = ContinuousClock.now - downAt
        try await running.value
        let loadSeconds = (ContinuousClock.now - started).inSeconds

        // Everything the clients were told is committed, is there: every order done, its
        // history gapless (create + 11 steps), every acknowledged sequence number present once.
        for orderID in orderIDs {
            let history = try await engine.history(orderID)
            #expect(history.order.state == "done", "\(orderID) is in \(history.order.state)")
            #expect(history.transitions.map(\.seq) == Array(1...12), "\(orderID): \(history.transitions.map(\.seq))")
            let seen = load.acknowledged.withLock { $0[orderID] ?? [] }
            #expect(seen == Array(2...12), "\(orderID) acknowledged \(seen)")
        }
        let seenErrors = load.errors.value
        #expect(!seenErrors.isEmpty, "no client ever saw the database down")

        try await rig.waitUntilDrained(timeout: .seconds(40))
        let deadLetters = try await rig.deadLetters()
        let audit = rig.audit(
            scenario: "PostgreSQL fast shutdown and restart",
            load: "\(Self.clients) clients, \(orderIDs.count) orders, \(orderIDs.count * 11) transitions in \(String(format: "%.1f", loadSeconds)) s",
            faults: "server down \(String(format: "%.1f", downFor.inSeconds)) s",
            tokens: tokens,
            notes: [
                "errors seen by clients while down \(seenErrors.values.reduce(0, +)), all retryable",
                "committed transitions lost 0", "dead letters \(deadLetters)",
            ])
        audit.report()
        #expect(audit.lost == 0, "\(audit)")
        #expect(deadLetters == 0)
        try await rig.shutdown()
    }
}
