import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import Metrics
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// The running system of the PostgreSQL fault scenarios, in this process: an engine with the
/// `ticker` workflow (eleven steps), the APNs stand-in, and a worker as in production, with a
/// pool and a LISTEN connection of its own, all on one database URL.
struct PostgresFaultRig: Sendable {
    let engine: OrderFlowEngine
    let apns: LocalAPNSServer
    let client: APNSClient
    let workerPool: PostgresPool
    let worker: RunningWorker

    /// `database` must be migrated. The engine's callers wait at most 2 s for a connection.
    static func start(_ database: PostgresConfiguration, workerID: String) async throws -> PostgresFaultRig {
        var engineConfiguration = OrderFlowConfiguration(database: database, maximumConnections: 8)
        engineConfiguration.acquireTimeout = .seconds(2)
        let engine = OrderFlowEngine(configuration: engineConfiguration)
        _ = try await engine.applyWorkflow(yaml: WorkerHarness.tickerWorkflow, file: "ticker.yaml")

        let key = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: WorkerHarness.keyID, teamID: WorkerHarness.teamID, publicKey: key.publicKey)]))
        try await apns.start()
        let client = try APNSClient(
            configuration: APNSClientConfiguration(
                environment: .custom(baseURL: apns.baseURL, trustRootsPEM: apns.trustRootPEM),
                credentials: .init(key: .pem(key.pemRepresentation), keyID: WorkerHarness.keyID, teamID: WorkerHarness.teamID)),
            logger: Logger(label: "apns", factory: { _ in SwiftLogNoOpLogHandler() }))

        let workerPool = PostgresPool(.init(connection: database, maximumConnections: 4, acquireTimeout: .seconds(2)))
        let listener = PostgresListener(
            configuration: database, channels: [OrderFlowEngine.wakeChannel],
            logger: Logger(label: "listen", factory: { _ in SwiftLogNoOpLogHandler() }))
        let worker = RunningWorker(OrderFlowWorker(
            configuration: WorkerConfiguration(
                bundleID: WorkerHarness.bundleID, workerID: workerID, lease: .seconds(5),
                minimumPushInterval: .milliseconds(100), maximumAttempts: 8,
                backoffBase: .milliseconds(50), backoffCap: .milliseconds(500), queueDepthSampleInterval: nil),
            pool: workerPool, sender: client, listener: listener,
            logger: Logger(label: "worker", factory: { _ in SwiftLogNoOpLogHandler() }),
            metricsFactory: NOOPMetricsHandler.instance), listener: listener)
        return PostgresFaultRig(engine: engine, apns: apns, client: client, workerPool: workerPool, worker: worker)
    }

    /// Creates ticker orders whose app registered its activity's token; returns the tokens.
    func createOrders(_ orderIDs: [String], firstToken: Int) async throws -> [String] {
        var tokens: [String] = []
        for (index, orderID) in orderIDs.enumerated() {
            let token = EngineFixture.token(firstToken + index)
            _ = try await engine.createOrder(NewOrder(orderID: orderID, workflow: "ticker", attributes: ["label": .string(orderID)]))
            try await engine.registerActivityToken(orderID: orderID, deviceID: "phone", token: token)
            tokens.append(token)
        }
        return tokens
    }

    func waitUntilDrained(timeout: Duration) async throws {
        try await eventually("the worker drains the queue", timeout: timeout) {
            try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM activity_commands")).single().decode("n", as: Int.self) == 0
        }
    }

    func deadLetters() async throws -> Int {
        try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM deliveries WHERE outcome = 'dead'")).single().decode("n")
    }

    /// The audit of a ticker scenario: every token's final push is the `end` of step 11.
    func audit(scenario: String, load: String, faults: String, tokens: [String], notes: [String]) -> DeliveryAudit {
        DeliveryAudit(
            scenario: scenario, load: load, faults: faults, tokens: tokens, pushes: apns.pushes(), notes: notes,
            isFinal: { $0.event == "end" && $0.content?["step"]?.integerValue == 11 })
    }

    func shutdown() async throws {
        try await worker.stop()
        try? await client.shutdown()
        try? await apns.stop()
        await workerPool.close()
        await engine.shutdown()
    }
}

/// Clients taking ticker orders through their eleven steps, one step every 60 ms, each advance
/// with an idempotency key and retried while the database is unavailable; what they were told
/// and what they saw.
final class TickerLoad: Sendable {
    /// Errors seen, by the start of their message.
    let errors = LockedValue<[String: Int]>([:])
    /// The longest a call took to fail.
    let slowestError = LockedValue<Duration>(.zero)
    /// The sequence numbers acknowledged, by order.
    let acknowledged = LockedValue<[String: [Int]]>([:])
    /// When each acknowledgement came.
    let acknowledgedAt = LockedValue<[ContinuousClock.Instant]>([])

    /// One client per element of `orders`, taking its orders a step further in turn.
    func run(_ engine: OrderFlowEngine, orders: [[String]]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for mine in orders {
                group.addTask {
                    for step in 1...11 {
                        for orderID in mine {
                            let result = try await Self.advanceRetrying(
                                engine, orderID, step: step, errors: self.errors, slowest: self.slowestError)
                            self.acknowledged.withLock { $0[orderID, default: []].append(result.transition.seq) }
                            self.acknowledgedAt.withLock { $0.append(.now) }
                        }
                        try await Task.sleep(for: .milliseconds(60))
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Advances with an idempotency key, retrying while the database is unavailable; any other
    /// error fails the test. The message must say what happened and that a retry is safe, and
    /// it must come within the pool's acquire timeout (2 s; `slowest` keeps the longest wait).
    static func advanceRetrying(
        _ engine: OrderFlowEngine, _ orderID: String, step: Int, errors: LockedValue<[String: Int]>, key: String? = nil,
        slowest: LockedValue<Duration>? = nil
    ) async throws -> AdvanceResult {
        let key = key ?? "\(orderID)-step-\(step)"
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let called = ContinuousClock.now
            do {
                return try await engine.advance(orderID, to: step == 11 ? "done" : "s\(step)", idempotencyKey: key)
            } catch let error as OrderFlowError where error.code == .databaseUnavailable || error.code == .busy {
                let waited = ContinuousClock.now - called
                slowest?.withLock { $0 = max($0, waited) }
                // 2 s, and some slack for a loaded two-core machine.
                #expect(waited < .seconds(4), "the error came after \(waited): \(error.message)")
                #expect(error.message.contains("retry"), "not a clear retryable error: \(error.message)")
                #expect(!error.message.contains("password"), "\(error.message)")
                errors.withLock { $0[String(error.message.prefix(60)), default: 0] += 1 }
                guard ContinuousClock.now < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}

extension Array {
    /// Consecutive pieces of `size` elements (the last may be shorter).
    func chunks(of size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
