// The e2e benchmark's records and helpers: its transitions, each order's progress, the outbox
// sampler, the APNs stand-in it drives, and the statistics it prints.
import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import OrderFlow
import PGKit
import Synchronization

/// A transition: its order and its number in that order's history.
struct TransitionKey: Hashable {
    var orderID: String
    var seq: Int
}

/// One committed transition of the e2e run.
struct TransitionSample: Sendable {
    var token: String
    var status: String
    /// Its place in `EndToEndBenchmark.steps`.
    var step: Int
    var orderID: String
    var seq: Int
    var occurredAt: Date
    var returnedAt: Date
    var lag: Double
}

/// The transitions of a run, written from many tasks.
final class TransitionLog: Sendable {
    private let state: Mutex<(samples: [TransitionSample?], failures: [String])>

    init(count: Int) {
        state = Mutex((Array(repeating: nil, count: count), []))
    }

    func set(_ index: Int, _ sample: TransitionSample) { state.withLock { $0.samples[index] = sample } }
    func fail(_ error: any Error) { state.withLock { $0.failures.append(String(describing: error)) } }
    /// A busy refusal, answered `seconds` after the call started.
    func refuse(_ error: OrderFlowError, after seconds: Double) {
        refused.withLock {
            if $0.first == nil { $0.first = error.message }
            $0.times.append(seconds)
            $0.retryAfter.append(error.retryAfter?.asSeconds ?? 0)
        }
    }
    var refusals: (times: [Double], retryAfter: [Double], first: String?) { refused.withLock { $0 } }
    private let refused = Mutex<(times: [Double], retryAfter: [Double], first: String?)>(([], [], nil))
    var succeeded: [TransitionSample] { state.withLock { $0.samples.compactMap { $0 } } }
    var failures: [String] { state.withLock { $0.failures } }
}

/// Where each order of the e2e run is: its next step, and whether a step of it is running.
final class OrderProgress: Sendable {
    private let state: Mutex<(next: [UInt8], running: [Bool], stillRunning: Int, finished: Int)>
    private let steps: Int

    init(orders: Int, steps: Int) {
        self.steps = steps
        state = Mutex((Array(repeating: 0, count: orders), Array(repeating: false, count: orders), 0, 0))
    }

    /// The step an order's turn takes, or nil when the turn is skipped (its previous step is
    /// still running, or it has taken every step).
    func begin(_ order: Int) -> Int? {
        state.withLock { state in
            if state.running[order] { state.stillRunning += 1; return nil }
            guard Int(state.next[order]) < steps else { state.finished += 1; return nil }
            state.running[order] = true
            return Int(state.next[order])
        }
    }

    func end(_ order: Int, advanced: Bool) {
        state.withLock { state in
            state.running[order] = false
            if advanced { state.next[order] += 1 }
        }
    }

    var skipped: (stillRunning: Int, finished: Int) { state.withLock { ($0.stillRunning, $0.finished) } }
}

/// Every second on a connection of its own, until cancelled: `activity_commands`' depth, and
/// what the database's other sessions were doing (`pg_stat_activity`: active, or idle inside a
/// transaction, and what they waited for), to tell a worker starved of the database from one
/// starved of the processor.
struct QueueDepthSampler: Sendable {
    /// One sample of pg_stat_activity: sessions by what they were doing ("active", "active:Lock/tuple", …).
    typealias Activity = [String: Int]

    /// How often the outbox is counted.
    var interval: Duration = .seconds(1)
    /// Whether each sample also reads what the database's sessions are doing.
    var readsActivity = true

    func run(configuration: PostgresConfiguration) async -> ([Int], [Activity]) {
        (try? await PostgresConnection.withConnection(configuration) { connection in
            var depths: [Int] = []
            var activity: [Activity] = []
            let clock = ContinuousClock()
            var next = clock.now
            while !Task.isCancelled {
                if let rows = try? await connection.query(PostgresQuery("SELECT count(*)::bigint AS n FROM activity_commands")),
                   let depth = try? rows.single().decode("n", as: Int.self)
                {
                    depths.append(depth)
                }
                if readsActivity, let rows = try? await connection.query(PostgresQuery("""
                    SELECT state || coalesce(':' || wait_event_type || '/' || wait_event, '') AS what, count(*)::bigint AS n
                    FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')
                    GROUP BY 1
                    """)) {
                    var sample: Activity = [:]
                    for row in rows {
                        if let what = try? row.decode("what", as: String.self), let count = try? row.decode("n", as: Int.self) {
                            sample[what] = count
                        }
                    }
                    activity.append(sample)
                }
                next = next + interval
                try? await clock.sleep(until: next)
            }
            return (depths, activity)
        }) ?? ([], [])
    }

    /// Sessions busy per sample on average, and the most frequent things they were doing.
    static func describe(_ samples: [Activity]) -> String {
        guard !samples.isEmpty else { return "no samples" }
        var totals: [String: Int] = [:]
        for sample in samples { for (what, count) in sample { totals[what, default: 0] += count } }
        let busy = Double(totals.values.reduce(0, +)) / Double(samples.count)
        let top = totals.sorted { $0.value > $1.value }.prefix(6)
            .map { String(format: "%@ %.1f", $0.key, Double($0.value) / Double(samples.count)) }
        return String(format: "%.1f busy on average (%ld samples); ", busy, samples.count) + top.joined(separator: ", ")
    }
}

/// The local APNs stand-in with a signing key made for this run, and clients for it.
struct BenchAPNS: Sendable {
    static let bundleID = "com.example.orderflow.bench"
    static let keyID = "BENCHKEY01"
    static let teamID = "BENCHTEAM1"

    let server: LocalAPNSServer
    /// The signing key, PKCS#8 PEM (what an App Store Connect .p8 file holds).
    let keyPEM: String

    static func start(recordsPushes: Bool) async throws -> BenchAPNS {
        let key = P256.Signing.PrivateKey()
        let server = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: keyID, teamID: teamID, publicKey: key.publicKey)],
            acceptedBundleIDs: [bundleID], recordsPushes: recordsPushes))
        try await server.start()
        return BenchAPNS(server: server, keyPEM: key.pemRepresentation)
    }

    func makeClient(logger: Logger, maximumConcurrentRequests: Int = 1000) throws -> APNSClient {
        try APNSClient(
            configuration: APNSClientConfiguration(
                environment: .custom(baseURL: server.baseURL, trustRootsPEM: server.trustRootPEM),
                credentials: .init(key: .pem(keyPEM), keyID: Self.keyID, teamID: Self.teamID),
                maximumConcurrentRequests: maximumConcurrentRequests),
            logger: logger)
    }

    static func randomToken(_ length: Int) -> String {
        (0..<length / 2).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}

enum Stats {
    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let index = min(sorted.count - 1, max(0, Int((Double(sorted.count) * fraction).rounded(.up)) - 1))
        return sorted[index]
    }

    static func ms(_ seconds: Double) -> String { String(format: "%.1f ms", seconds * 1000) }
}

extension Duration {
    var asSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
