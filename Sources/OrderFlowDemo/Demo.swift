import APNS
import ConsoleOutput
import Crypto
import Foundation
import LocalAPNS
import Logging
import Metrics
import OrderFlow
import ServiceLifecycle

/// The demo: the whole path on this machine — PostgreSQL, the engine, a worker and a local
/// APNs stand-in, in one ``OrderFlowHost`` — driven through three food orders and a ride, then
/// each order's timeline of transitions and the pushes they became.
///
/// It uses only the library's public API. The caller (the `orderflow-demo` program) chooses the
/// database and says where it came from:
///
/// ```swift
/// let demo = Demo(terminal: terminal, logger: logger)
/// demo.introduce()
/// try await demo.run(database: configuration, databaseLine: "using the database of DATABASE_URL")
/// ```
public struct Demo: Sendable {
    let output: DemoOutput
    let logger: Logger
    /// Between two steps of one order: over the worker's one-push-per-second pace, so each
    /// step becomes an update of its own.
    let pause: Duration
    /// Seals the demo merchant's Firebase project; nil: a key of this run's own.
    let masterKey: MasterKey?

    /// - Parameters:
    ///   - terminal: Where the demo's report goes.
    ///   - logger: The demo's log.
    ///   - masterKey: The master key the database's stored keys are sealed with, when it holds
    ///     any (one master key opens them all); nil: the demo seals under a key of its own.
    public init(terminal: Terminal, logger: Logger, masterKey: MasterKey? = nil) {
        self.output = DemoOutput(terminal: terminal)
        self.logger = logger
        self.pause = .milliseconds(1200)
        self.masterKey = masterKey
    }

    static let bundleID = "com.example.orderflow.demo"
    static let keyID = "DEMOKEY001"
    static let teamID = "DEMOTEAM01"
    /// The shipped workflows the demo applies, by name.
    static let workflowNames = ["food-order", "ride", "f1-race"]

    /// What the demo is about, before anything starts.
    public func introduce() {
        output.intro()
    }

    /// Runs the demo on `database` and prints its report.
    ///
    /// - Parameters:
    ///   - databaseLine: where the database came from, said first (`started the embedded
    ///     PostgreSQL in .orderflow/postgres`).
    ///   - workflowsFolder: where `food-order.yaml` and `ride.yaml` are; by default `workflows/`
    ///     under the working directory, else in the checkout this module was built from.
    /// - Throws: ``DemoError`` when the run did not go as it should; the engine's errors.
    ///   - keepServing: when given, after the report the demo's worker (and the stand-in) run on,
    ///     beside the services it returns for the demo's engine, until Ctrl-C: `scripts/demo
    ///     --board` serves the counter board there.
    public func run(database: DatabaseConfiguration, databaseLine: String, workflowsFolder: URL? = nil,
                    keepServing: (@Sendable (OrderFlowEngine) async throws -> [any Service])? = nil) async throws {
        let began = ContinuousClock.now
        output.done(databaseLine)
        let migration = try await Schema.migrate(database)
        if !migration.applied.isEmpty {
            output.done("migrated the schema (\(Formatting.count(migration.applied.count, "migration")) applied)")
        }
        let folder = try workflowsFolder ?? Self.shippedWorkflowsFolder()

        let merchantID = Self.freshMerchantID()
        let standIns = try await DemoStandIns.start(masterKey: masterKey)
        let host: OrderFlowHost
        do {
            host = try makeHost(database: database, merchantID: merchantID, standIns: standIns)
        } catch {
            await standIns.finish(database: nil, merchantID: merchantID)
            throw error
        }
        let report: DemoReport
        do {
            try await applyWorkflows(folder, on: host.engine, merchantID: merchantID)
            try await standIns.giveFirebaseProject(engine: host.engine, merchantID: merchantID)
            output.done("local APNs stand-in on \(standIns.apns.baseURL): TLS, HTTP/2, ES256 provider tokens; it checks and records every push")
            output.done("local FCM stand-in on \(standIns.fcm.baseURL): OAuth service account of Firebase project \(DemoStandIns.projectID), HTTP v1 messages; it checks and records each one")
            report = try await drive(host: host, standIns: standIns, merchantID: merchantID, began: began)
        } catch {
            await host.shutdown()
            await standIns.finish(database: database, merchantID: merchantID)
            throw error
        }
        output.write(report.lines(output.terminal))
        if let problem = report.problem {
            await standIns.finish(database: database, merchantID: merchantID)
            throw DemoError(.failed, problem)
        }
        if let keepServing {
            do {
                let host = try makeHost(database: database, merchantID: merchantID, standIns: standIns)
                let services = try await keepServing(host.engine)
                let group = ServiceGroup(services: [host] + services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
                try await group.run()
            } catch {
                await standIns.finish(database: database, merchantID: merchantID)
                throw error
            }
        }
        await standIns.finish(database: database, merchantID: merchantID)
    }

    /// The host with the stand-ins as its APNs and FCM endpoints, serving the demo's merchant
    /// alone: other merchants' pushes in the same database are never sent to the stand-ins.
    private func makeHost(database: DatabaseConfiguration, merchantID: String, standIns: DemoStandIns) throws -> OrderFlowHost {
        let apns = standIns.apns
        var worker = WorkerConfiguration(
            bundleID: Self.bundleID, workerID: "demo:\(ProcessInfo.processInfo.processIdentifier)",
            queueDepthSampleInterval: nil, merchants: .only([merchantID]))
        worker.shutdownGracePeriod = .seconds(5)
        worker.fcmBaseURL = standIns.fcm.baseURL
        worker.fcmTrustRootsPEM = standIns.fcm.trustRootPEM
        let configuration = OrderFlowHostConfiguration(
            engine: OrderFlowConfiguration(database: database, merchantID: merchantID, maximumConnections: 12),
            apns: APNSClientConfiguration(
                environment: .custom(baseURL: apns.baseURL, trustRootsPEM: apns.trustRootPEM),
                credentials: .init(key: .pem(standIns.signingKey.pemRepresentation), keyID: Self.keyID, teamID: Self.teamID)),
            worker: worker, timerInterval: nil, listensForOtherProcesses: false, masterKey: standIns.masterKey)
        return try OrderFlowHost(configuration: configuration, logger: logger, metricsFactory: NOOPMetricsHandler.instance)
    }

    private func applyWorkflows(_ folder: URL, on engine: OrderFlowEngine, merchantID: String) async throws {
        var applied: [String] = []
        for name in Self.workflowNames {
            let yaml = try String(contentsOf: folder.appendingPathComponent("\(name).yaml"), encoding: .utf8)
            let workflow = try await engine.applyWorkflow(yaml: yaml, file: "workflows/\(name).yaml")
            applied.append("\(workflow.name) v\(workflow.version)")
        }
        // Names, not the folder's path: where the checkout lives is nobody's business here.
        output.done("applied the shipped workflows \(applied.joined(separator: " and ")) for merchant \(merchantID)")
    }

    /// Runs the host and the script side by side in a service group: the script's end (or
    /// Ctrl-C) shuts the host down gracefully.
    private func drive(host: OrderFlowHost, standIns: DemoStandIns, merchantID: String,
                       began: ContinuousClock.Instant) async throws -> DemoReport
    {
        output.done("worker running in this process: woken by each commit, at most one push per second per activity")
        let script = DemoScript(engine: host.engine, apns: standIns.apns, fcm: standIns.fcm, cast: DemoCast(), merchantID: merchantID, pause: pause)
        let progress = output
        let driver = DemoDriver {
            progress.note("driving 3 food orders, a ride and a race followed through one broadcast channel, a step every 1.2 s (about 8 s)…")
            try await script.perform()
            let drainStarted = ContinuousClock.now
            try await script.waitForDrain()
            let drained = ContinuousClock.now - drainStarted
            progress.done("the worker sent everything (\(DemoOutput.seconds(drained)) after the last step)")
            return try await script.report(elapsed: ContinuousClock.now - began)
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [
                .init(service: host),
                .init(service: driver, successTerminationBehavior: .gracefullyShutdownGroup,
                      failureTerminationBehavior: .gracefullyShutdownGroup),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
        guard let result = driver.result else { throw CancellationError() }
        return try result.get()
    }

    /// `demo-20250501-140312-x7k2`: new for every run, so reruns never meet old demo orders.
    static func freshMerchantID() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let suffix = String(UInt32.random(in: 0...UInt32.max) % 1_679_616, radix: 36)
        return "demo-\(formatter.string(from: Date()))-\(suffix)"
    }

    /// The shipped `workflows/` folder: under the working directory, else in the checkout this
    /// module was built from.
    static func shippedWorkflowsFolder() throws -> URL {
        let checkout = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
                .appendingPathComponent("workflows", isDirectory: true),
            checkout.appendingPathComponent("workflows", isDirectory: true),
        ]
        let found = candidates.first { folder in
            workflowNames.allSatisfy { FileManager.default.isReadableFile(atPath: folder.appendingPathComponent("\($0).yaml").path) }
        }
        guard let found else {
            throw DemoError(.workflowsMissing, "cannot find the shipped workflows (workflows/food-order.yaml and workflows/ride.yaml)",
                            remedy: "run the demo from the root of the OrderFlow checkout")
        }
        return found.standardizedFileURL
    }
}

/// Why the demo did not run as it should: what went wrong and what to do.
public struct DemoError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// The shipped workflow files are not where the demo looks.
        case workflowsMissing
        /// A step timed out or a push did not go through.
        case failed
    }

    public var kind: Kind
    public var problem: String
    public var remedy: String?

    init(_ kind: Kind, _ problem: String, remedy: String? = nil) {
        self.kind = kind
        self.problem = problem
        self.remedy = remedy
    }

    public var description: String { remedy.map { "\(problem); \($0)" } ?? problem }
}
