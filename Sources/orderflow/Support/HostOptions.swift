import APNS
import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import Logging
import Metrics
import OrderFlow
import OrderFlowHTTP
import Prometheus
import ServiceLifecycle

/// The worker's settings, shared by `orderflow worker run` and `orderflow serve`.
struct HostOptions: ParsableArguments {
    @Option(name: .customLong("apns-key"), help: ArgumentHelp("The .p8 signing key file.", valueName: "file"))
    var apnsKey: String?

    @Option(name: .customLong("apns-key-id"), help: ArgumentHelp("The signing key's id.", valueName: "id"))
    var apnsKeyID: String?

    @Option(name: .customLong("apns-team-id"), help: ArgumentHelp("The Apple developer team id.", valueName: "id"))
    var apnsTeamID: String?

    @Option(name: .customLong("apns-topic"), help: ArgumentHelp("The app's bundle id.", valueName: "bundle-id"))
    var apnsTopic: String?

    @Option(name: .customLong("apns-env"), help: ArgumentHelp("production or sandbox.", valueName: "env"))
    var apnsEnvironment: String?

    @Option(name: .customLong("apns-url"), help: ArgumentHelp("Send to this endpoint instead of Apple's.", valueName: "url"))
    var apnsURL: String?

    @Option(name: .customLong("apns-ca"), help: ArgumentHelp("The custom endpoint's CA certificate (PEM).", valueName: "file"))
    var apnsCA: String?

    @Option(name: .customLong("fcm-url"), help: ArgumentHelp(
        "Send Android followers' FCM messages to this endpoint instead of FCM's (a local stand-in).", valueName: "url"))
    var fcmURL: String?

    @Option(name: .customLong("fcm-ca"), help: ArgumentHelp(
        "The FCM endpoint's CA certificate (PEM), trusted for the service accounts' token endpoint too.", valueName: "file"))
    var fcmCA: String?

    @Option(name: .customLong("merchant"), help: ArgumentHelp(
        "Serve only this merchant's pushes and timers (repeatable; default every merchant).", valueName: "id"))
    var merchants: [String] = []

    @Option(help: ArgumentHelp("Serve Prometheus metrics on this port (GET /metrics), on its own listener.", valueName: "port"))
    var metricsPort: Int?

    @Option(help: ArgumentHelp(
        "The address the metrics listener binds (default 127.0.0.1, this machine only: the metrics name every merchant).",
        valueName: "address"))
    var metricsHost: String = "127.0.0.1"

    @Option(help: ArgumentHelp("Orders claimed at once (default 100).", valueName: "n"))
    var batchSize: Int = 100

    @Option(help: ArgumentHelp("Pushes in flight at once per batch (default 64).", valueName: "n"))
    var concurrency: Int = 64

    @Option(help: ArgumentHelp(
        "Batches claimed and sent side by side: more keep pushes flowing while APNs answers slowly, and make each claim dearer for the database.",
        valueName: "n"))
    var claimLoops: Int = 4

    @Option(help: ArgumentHelp("Database connections (default 8).", valueName: "n"))
    var connections: Int = 8

    @Option(help: ArgumentHelp(
        "Orders whose state the engine remembers between advances, so that moving an order this process created or moved last costs one round trip instead of two (default 10000; 0 turns it off). Size it for the orders open at once.",
        valueName: "n"))
    var cachedOrders: Int = 10_000

    @Option(help: ArgumentHelp(
        "Milliseconds an advance should wait for its commit group under overload (default 50): while more advances come than the database commits, those it cannot commit within about this long are refused at once as busy, with a Retry-After, instead of queueing; 0 turns it off (advances then queue up to their connection wait).",
        valueName: "ms"))
    var queueTarget: Int = 50

    @Option(help: ArgumentHelp(
        "Milliseconds of this server's own worker's work an advance may find ahead of it (the advances admitted and not yet claimed, at the worker's pace); beyond that it is refused at once as busy, with a Retry-After (default 0: off). Under overload the advances admitted then reach the phones within about this long plus one send; workers in other processes do not count.",
        valueName: "ms"))
    var pushLagTarget: Int = 0

    @Option(help: ArgumentHelp("This worker's name in leases and logs (default host:pid:random).", valueName: "id"))
    var workerID: String?

    @Option(help: ArgumentHelp(
        "Seconds a claimed order stays this worker's (default 60); a worker that dies leaves its orders to others after this long.",
        valueName: "seconds"))
    var lease: Int = 60

    @Option(help: ArgumentHelp(
        "Purge finished orders past their retention, dead letters and tokenless devices this often (default 10m; off: never, `orderflow purge` instead).",
        valueName: "duration"))
    var purgeInterval: String = "10m"

    /// --purge-interval as the worker takes it: nil for `off`.
    func purgeIntervalDuration() throws -> Duration? {
        if purgeInterval.lowercased() == "off" { return nil }
        return try DurationArgument.parse(purgeInterval, option: "--purge-interval")
    }

    func validate() throws {
        do { _ = try purgeIntervalDuration() } catch let error as CLIError { throw ValidationError(error.description) }
        if let metricsPort, !(1...65535).contains(metricsPort) {
            throw ValidationError("--metrics-port must be between 1 and 65535")
        }
        guard lease >= 1 else { throw ValidationError("--lease must be at least 1 second") }
        guard queueTarget >= 0 else { throw ValidationError("--queue-target must be 0 (off) or more milliseconds") }
        guard pushLagTarget >= 0 else { throw ValidationError("--push-lag-target must be 0 (off) or more milliseconds") }
        guard cachedOrders >= 0 else { throw ValidationError("--cached-orders must be 0 (no cache) or more") }
        guard batchSize > 0, concurrency > 0, connections > 1 else {
            throw ValidationError("--batch-size and --concurrency must be at least 1, --connections at least 2")
        }
        // Past a few dozen, claims only walk past each other's locked orders.
        guard (1...32).contains(claimLoops) else {
            throw ValidationError("--claim-loops must be between 1 and 32 (default 4), not \(claimLoops)")
        }
    }

    /// The metrics listener asked for, if any.
    var metricsListener: MetricsListener.Configuration? {
        metricsPort.map { MetricsListener.Configuration(host: metricsHost, port: $0) }
    }

    /// The metrics listener asked for, showing `registry`, as services to run (none or one).
    func metricsListener(registry: PrometheusCollectorRegistry, logger: Logger) -> [any Service] {
        metricsListener.map { [MetricsListener(configuration: $0, registry: registry, logger: logger)] } ?? []
    }

    /// The running system these options describe: engine, APNs, worker, timers; the worker's
    /// metrics go to `metricsFactory` (by default the process's `MetricsSystem`).
    func makeHost(context: CommandContext, logger: Logger, deviceCredentials: DeviceCredentialPolicy = .required,
                  metricsFactory: (any MetricsFactory)? = nil) async throws -> OrderFlowHost {
        let apns = try APNSSettings(flags: self, environment: context.environment)
        var fcm = WorkerConfiguration(bundleID: apns.bundleID)
        try FCMSettings.apply(flags: self, environment: context.environment, to: &fcm)
        let merchantID = try context.checkedMerchantID()
        // Opens the merchants' own APNs keys; without it they wait (the log says so).
        let masterKey = try MasterKeySetting.optional(context.environment)
        // Checked before any connection to the database, in the words of the setting: the
        // host loads the key when it is made, below.
        try apns.check()
        // Once, at start, on stderr whatever the log level, and only about a key that works (an
        // unusable one gets one error line, not two): the worker runs on regardless.
        if let warning = apns.keyPermissionWarning { Terminal.writeError("orderflow: warning: \(warning)") }

        let (database, source) = try await context.databaseConfiguration()
        try await Schema.checkSessionsAreKept(database)
        var engine = OrderFlowConfiguration(database: database, merchantID: merchantID, maximumConnections: connections)
        engine.acquireTimeout = .seconds(30)
        engine.cachedOrders = cachedOrders
        engine.queueTarget = queueTarget > 0 ? .milliseconds(queueTarget) : nil
        engine.pushLagTarget = pushLagTarget > 0 ? .milliseconds(pushLagTarget) : nil
        engine.deviceCredentials = deviceCredentials
        engine.masterKey = masterKey
        var schemaCheck = engine
        schemaCheck.maximumConnections = 1
        try await context.withEngine(schemaCheck, source: source) { _ in }  // the schema is current, or made so

        for merchant in merchants {
            do {
                try OrderFlowConfiguration.validate(merchantID: merchant)
            } catch let error as OrderFlowError {
                throw CLIError(.usage, "--merchant: \(error.message)")
            }
        }
        var worker = WorkerConfiguration(
            bundleID: apns.bundleID, batchSize: batchSize, concurrentBatches: claimLoops, concurrentSends: concurrency,
            merchants: merchants.isEmpty ? .all : .only(Set(merchants)))
        if let workerID { worker.workerID = workerID }
        worker.lease = .seconds(lease)
        worker.purgeInterval = try purgeIntervalDuration()
        worker.fcmBaseURL = fcm.fcmBaseURL
        worker.fcmTrustRootsPEM = fcm.fcmTrustRootsPEM
        return try apns.makingHost(OrderFlowHostConfiguration(
            engine: engine, apns: apns.client, worker: worker, masterKey: masterKey),
            logger: logger, metricsFactory: metricsFactory)
    }
}
