import APNS
import ArgumentParser
import Crypto
import Foundation
import LocalPostgres
import Logging
import Metrics
import OrderFlow
import OrderFlowTesting
import PGKit
import ServiceLifecycle
import Synchronization
import WorkflowKit

/// `orderflow demo`: the whole path on this machine — PostgreSQL, the engine, a worker and a
/// local APNs stand-in — driven through three food orders and a ride, then each order's
/// timeline of transitions and the pushes they became.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run food orders and a ride end to end and show what each Lock Screen was sent.",
        discussion: """
            Starts (or reuses) the database, applies the shipped workflows for a fresh demo \
            merchant, starts a local APNs stand-in (TLS, HTTP/2, token auth; it records every \
            push) and a worker in this process, then drives three food orders and a ride. \
            Once the worker has sent everything, it prints each order's transitions with the \
            pushes they became, and stops what it started. Takes about 15 seconds; nothing is \
            sent to Apple.

            Example:
              orderflow demo
              ORDERFLOW_DATABASE_URL=postgresql://me@localhost/scratch orderflow demo
            """)

    func run() async throws {
        let context = CommandContext.current()
        let output = DemoOutput(terminal: context.terminal)
        output.intro()

        // The embedded cluster is stopped again at the end if this run is what started it.
        var startedHere: LocalPostgres?
        if case .embedded(let local) = context.databaseSource, try await local.runningConnectionString() == nil {
            startedHere = local
        }
        let report: DemoReport
        do {
            report = try await DemoSession(context: context, output: output, startsDatabase: startedHere != nil).run()
        } catch {
            if let startedHere { try? await startedHere.stop() }
            throw error
        }
        output.write(report.lines(output.terminal))
        if let startedHere {
            try await startedHere.stop()
            output.done("stopped the local PostgreSQL again (the demo had started it)")
        }
        if let problem = report.problem {
            throw CLIError(.internalError, problem)
        }
    }
}

// MARK: - Session

/// One run of the demo: database, workflows, APNs stand-in, worker, script, report.
private struct DemoSession: Sendable {
    let context: CommandContext
    let output: DemoOutput
    let startsDatabase: Bool

    static let bundleID = "com.example.orderflow.demo"
    static let keyID = "DEMOKEY001"
    static let teamID = "DEMOTEAM01"

    func run() async throws -> DemoReport {
        let began = ContinuousClock.now
        let (database, source) = try await context.databaseConfiguration()
        switch source {
        case .embedded(let local):
            let folder = Self.displayPath(local.folder, relativeTo: context.workingDirectory)
            output.done(startsDatabase
                ? "started the embedded PostgreSQL in \(folder) (stopped again at the end)"
                : "using the embedded PostgreSQL in \(folder) (already running; left running)")
        case .url(let url, let variable):
            output.done("using the database of \(variable): \(Formatting.maskedDatabaseURL(url))")
        }
        let migration = try await Schema.migrate(database)
        if !migration.applied.isEmpty {
            output.done("migrated the schema (\(Formatting.count(migration.applied.count, "migration")) applied)")
        }

        let merchantID = Self.freshMerchantID()
        let engine = OrderFlowEngine(
            configuration: OrderFlowConfiguration(database: database, merchantID: merchantID, maximumConnections: 12),
            logger: context.logger("orderflow.demo"))
        do {
            let report = try await run(engine: engine, merchantID: merchantID, began: began)
            await engine.shutdown()
            return report
        } catch {
            await engine.shutdown()
            throw error
        }
    }

    private func run(engine: OrderFlowEngine, merchantID: String, began: ContinuousClock.Instant) async throws -> DemoReport {
        try await refuseOtherMerchantsPushes(engine.pool)
        let folder = try Self.workflowsFolder(workingDirectory: context.workingDirectory)
        var applied: [String] = []
        for name in ["food-order", "ride"] {
            let file = folder.appendingPathComponent("\(name).yaml")
            let yaml = try String(contentsOf: file, encoding: .utf8)
            let workflow = try await engine.applyWorkflow(yaml: yaml, file: "workflows/\(name).yaml")
            applied.append("\(workflow.name) v\(workflow.version)")
        }
        output.done("applied \(applied.joined(separator: " and ")) from \(Self.displayPath(folder, relativeTo: context.workingDirectory)) for merchant \(merchantID)")

        // The APNs stand-in trusts this run's signing key, made in memory.
        let signingKey = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: Self.keyID, teamID: Self.teamID, publicKey: signingKey.publicKey)],
            acceptedBundleIDs: [Self.bundleID]))
        try await apns.start()
        let client: APNSClient
        do {
            client = try APNSClient(
                configuration: APNSClientConfiguration(
                    environment: .custom(baseURL: apns.baseURL, trustRootsPEM: apns.trustRootPEM),
                    credentials: .init(key: .pem(signingKey.pemRepresentation), keyID: Self.keyID, teamID: Self.teamID)),
                logger: context.logger("orderflow.demo.apns"))
        } catch {
            try? await apns.stop()
            throw error
        }
        output.done("local APNs stand-in on \(apns.baseURL): TLS, HTTP/2, ES256 provider tokens; it checks and records every push")

        let outcome: Result<DemoReport, any Error>
        do {
            outcome = .success(try await drive(engine: engine, apns: apns, client: client, began: began))
        } catch {
            outcome = .failure(error)
        }
        try? await client.shutdown()
        try? await apns.stop()
        return try outcome.get()
    }

    /// Runs the worker and the script side by side in a service group: the script's end (or
    /// Ctrl-C) shuts the worker down gracefully.
    private func drive(engine: OrderFlowEngine, apns: LocalAPNSServer, client: APNSClient,
                       began: ContinuousClock.Instant) async throws -> DemoReport
    {
        var workerConfiguration = WorkerConfiguration(
            bundleID: Self.bundleID, workerID: "demo:\(ProcessInfo.processInfo.processIdentifier)",
            queueDepthSampleInterval: nil)
        workerConfiguration.shutdownGracePeriod = .seconds(5)
        let worker = OrderFlowWorker(
            configuration: workerConfiguration, pool: engine.pool, sender: client, wakeSignal: engine.wakeSignal,
            logger: context.logger("orderflow.demo.worker"), metricsFactory: NOOPMetricsHandler.instance)
        output.done("worker running in this process: woken by each commit, at most one push per second per activity")

        let script = DemoScript(
            engine: engine, apns: apns, cast: DemoCast(), merchantID: engine.configuration.merchantID, pause: .milliseconds(1200))
        let progress = output
        let driver = DemoDriver {
            progress.note("driving 3 food orders and a ride, a step every 1.2 s (about 8 s)…")
            try await script.perform()
            let drainStarted = ContinuousClock.now
            try await script.waitForDrain()
            let drained = ContinuousClock.now - drainStarted
            progress.done("the worker sent everything (\(DemoOutput.seconds(drained)) after the last step)")
            return try await script.report(elapsed: ContinuousClock.now - began)
        }
        let logger = context.logger("orderflow.demo")
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [
                .init(service: worker),
                .init(service: driver, successTerminationBehavior: .gracefullyShutdownGroup,
                      failureTerminationBehavior: .gracefullyShutdownGroup),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
        guard let result = driver.result else { throw CancellationError() }
        return try result.get()
    }

    /// The worker claims every merchant's commands: refuse to run where it would take real
    /// orders' pushes and send them to the stand-in instead of Apple.
    private func refuseOtherMerchantsPushes(_ pool: PostgresPool) async throws {
        let waiting = try await pool.query(PostgresQuery("""
            SELECT count(DISTINCT c.order_id) AS n FROM activity_commands c
            WHERE c.merchant_id NOT LIKE 'demo-%'
              AND EXISTS (SELECT 1 FROM order_followers f WHERE f.merchant_id = c.merchant_id AND f.order_id = c.order_id)
            """)).single().decode("n", as: Int.self)
        guard waiting == 0 else {
            throw CLIError(
                .conflict,
                "the database has \(Formatting.count(waiting, "order")) of other merchants with pushes waiting; the demo's worker would send them to its local APNs stand-in instead of Apple",
                remedy: "run the demo on a database of its own (ORDERFLOW_HOME=<an empty folder> for a private embedded one, or ORDERFLOW_DATABASE_URL)")
        }
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
    /// binary was built from.
    static func workflowsFolder(workingDirectory: URL) throws -> URL {
        let checkout = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [
            workingDirectory.appendingPathComponent("workflows", isDirectory: true),
            checkout.appendingPathComponent("workflows", isDirectory: true),
        ]
        let found = candidates.first { folder in
            ["food-order.yaml", "ride.yaml"].allSatisfy {
                FileManager.default.isReadableFile(atPath: folder.appendingPathComponent($0).path)
            }
        }
        guard let found else {
            throw CLIError(.notFound, "cannot find the shipped workflows (workflows/food-order.yaml and workflows/ride.yaml)",
                           remedy: "run the demo from the root of the OrderFlow checkout")
        }
        return found.standardizedFileURL
    }

    /// `path` relative to `base` when inside it (`.orderflow/postgres`), else absolute.
    static func displayPath(_ url: URL, relativeTo base: URL) -> String {
        let path = url.standardizedFileURL.path
        let prefix = base.standardizedFileURL.path.hasSuffix("/") ? base.standardizedFileURL.path : base.standardizedFileURL.path + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }
}

/// Runs the script as a service; keeps its result (or error) for after the group has stopped.
private final class DemoDriver: Service, Sendable {
    private let body: @Sendable () async throws -> DemoReport
    private let outcome = Mutex<Result<DemoReport, any Error>?>(nil)

    init(_ body: @escaping @Sendable () async throws -> DemoReport) {
        self.body = body
    }

    var result: Result<DemoReport, any Error>? { outcome.withLock { $0 } }

    func run() async throws {
        let body = self.body
        let result: Result<DemoReport, any Error>
        do {
            result = .success(try await cancelWhenGracefulShutdown { try await body() })
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
    }
}

// MARK: - Script

/// The people, devices and tokens of the demo. Tokens are random hex, as APNs issues them, and
/// are only ever shown masked.
private struct DemoCast: Sendable {
    struct Order: Sendable {
        var label: String
        var id: String
        var story: String
    }

    let orderA = Order(label: "A", id: "1042", story: "food order, a step every 1.2 s: each step is its own update")
    let orderB = Order(label: "B", id: "1043", story: "food order, accept, ready and dispatch within milliseconds")
    let orderC = Order(label: "C", id: "1044", story: "food order, cancelled by the restaurant")
    let ride = Order(label: "R", id: "R-2087", story: "ride, started by the app, driver details on the Lock Screen")
    var orders: [Order] { [orderA, orderB, orderC, ride] }

    /// Follows order A with a Live Activity started by push.
    let anna = "anna-iphone"
    /// Follows order A too, but registered no Live Activity token: ordinary alerts.
    let ben = "ben-iphone"
    let chloe = "chloe-iphone"
    let dan = "dan-iphone"
    let erin = "erin-iphone"

    let annaStart = Self.token(160)
    let annaActivity = Self.token(160)
    let benDevice = Self.token(64)
    let chloeStart = Self.token(160)
    let chloeActivity = Self.token(160)
    let danStart = Self.token(160)
    let danActivity = Self.token(160)
    let erinActivity = Self.token(160)

    /// Token → who holds it and what kind it is.
    var holders: [String: TokenHolder] {
        [
            annaStart: .init(device: anna, kind: "push-to-start"), annaActivity: .init(device: anna, kind: "activity"),
            benDevice: .init(device: ben, kind: "device"),
            chloeStart: .init(device: chloe, kind: "push-to-start"), chloeActivity: .init(device: chloe, kind: "activity"),
            danStart: .init(device: dan, kind: "push-to-start"), danActivity: .init(device: dan, kind: "activity"),
            erinActivity: .init(device: erin, kind: "activity"),
        ]
    }

    static func token(_ length: Int) -> String {
        (0..<length / 2).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}

/// Who holds a token, and which kind of APNs token it is.
private struct TokenHolder: Sendable {
    var device: String
    var kind: String
}

private struct DemoScript: Sendable {
    let engine: OrderFlowEngine
    let apns: LocalAPNSServer
    let cast: DemoCast
    let merchantID: String
    /// Between two steps of one order: over the worker's one-push-per-second pace, so each
    /// step becomes an update of its own.
    let pause: Duration

    static let actor = "demo"

    /// The four stories, side by side.
    func perform() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await orderA() }
            group.addTask { try await orderB() }
            group.addTask { try await orderC() }
            group.addTask { try await ride() }
            try await group.waitForAll()
        }
    }

    /// Push-to-start on creation; the app reports the activity's token; four steps 1.2 s apart.
    /// Ben follows the same order with only an ordinary device token.
    private func orderA() async throws {
        let id = cast.orderA.id
        try await engine.registerPushToStartToken(deviceID: cast.anna, attributesType: "FoodOrderAttributes", token: cast.annaStart)
        try await engine.registerDeviceToken(deviceID: cast.ben, token: cast.benDevice)
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": .string(id), "itemCount": 3],
            input: ["eta": "+35m"], actor: Self.actor))
        try await engine.follow(orderID: id, deviceID: cast.anna)
        try await engine.follow(orderID: id, deviceID: cast.ben)
        try await activityStarted(id, on: cast.anna)
        try await engine.registerActivityToken(orderID: id, deviceID: cast.anna, token: cast.annaActivity)
        let steps: [(String, JSONValue)] = [
            ("accept", ["eta": "+25m"]), ("ready", [:]), ("dispatch", ["eta": "+12m", "driver": "Sam"]), ("deliver", [:]),
        ]
        for (target, input) in steps {
            try await Task.sleep(for: pause)
            _ = try await engine.advance(id, to: target, input: input, actor: Self.actor)
        }
    }

    /// A burst: three steps within milliseconds of each other, less than a second after the
    /// start, reach the phone as one update.
    private func orderB() async throws {
        let id = cast.orderB.id
        try await engine.registerPushToStartToken(deviceID: cast.chloe, attributesType: "FoodOrderAttributes", token: cast.chloeStart)
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "food-order",
            attributes: ["merchantName": "Taqueria Sol", "orderNumber": .string(id), "itemCount": 2], actor: Self.actor))
        try await engine.follow(orderID: id, deviceID: cast.chloe)
        try await activityStarted(id, on: cast.chloe)
        try await engine.registerActivityToken(orderID: id, deviceID: cast.chloe, token: cast.chloeActivity)
        _ = try await engine.advance(id, to: "accept", input: ["eta": "+15m"], actor: Self.actor)
        _ = try await engine.advance(id, to: "ready", actor: Self.actor)
        _ = try await engine.advance(id, to: "dispatch", input: ["eta": "+9m", "driver": "Priya"], actor: Self.actor)
        try await Task.sleep(for: pause * 2)
        _ = try await engine.advance(id, to: "deliver", actor: Self.actor)
    }

    private func orderC() async throws {
        let id = cast.orderC.id
        try await engine.registerPushToStartToken(deviceID: cast.dan, attributesType: "FoodOrderAttributes", token: cast.danStart)
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "food-order",
            attributes: ["merchantName": "Noodle Bar", "orderNumber": .string(id), "itemCount": 1], actor: Self.actor))
        try await engine.follow(orderID: id, deviceID: cast.dan)
        try await activityStarted(id, on: cast.dan)
        try await engine.registerActivityToken(orderID: id, deviceID: cast.dan, token: cast.danActivity)
        try await Task.sleep(for: pause)
        _ = try await engine.cancel(id, reason: "the kitchen closed early", actor: Self.actor)
    }

    /// The ride workflow lets the app start the activity: the token arrives right after the
    /// order, and the first push brings the activity up to date.
    private func ride() async throws {
        let id = cast.ride.id
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "ride",
            attributes: ["pickupAddress": "1 Market St", "dropoffAddress": "Union Square"], actor: Self.actor))
        try await engine.registerActivityToken(orderID: id, deviceID: cast.erin, token: cast.erinActivity)
        let steps: [(String, JSONValue)] = [
            ("assign", ["driver": "Maria", "car": "blue Toyota Prius", "plate": "7ABC123", "eta": "+6m"]),
            ("arriving", ["eta": "+2m"]),
            ("driver_arrived", [:]),
            ("start_trip", ["eta": "+18m"]),
            ("drop_off", [:]),
        ]
        for (target, input) in steps {
            try await Task.sleep(for: pause)
            _ = try await engine.advance(id, to: target, input: input, actor: Self.actor)
        }
    }

    /// Waits until the worker has sent the push-to-start and recorded it.
    private func activityStarted(_ orderID: String, on device: String) async throws {
        try await waitUntil("the Live Activity of order \(orderID) starts on \(device)", timeout: .seconds(15)) {
            try await engine.order(orderID).activities.first { $0.deviceID == device }?.status == "starting"
        }
    }

    /// Every order's commands handled: nothing queued, nothing deferred.
    func waitForDrain() async throws {
        let ids = cast.orders.map(\.id)
        try await waitUntil("the worker has sent every push", timeout: .seconds(20)) {
            for id in ids {
                if try await engine.order(id).pendingCommands > 0 { return false }
            }
            return true
        }
    }

    private func waitUntil(_ what: String, timeout: Duration, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(try await condition()) {
            guard ContinuousClock.now < deadline else {
                throw CLIError(.internalError, "timed out after \(DemoOutput.seconds(timeout)) waiting until \(what)",
                               remedy: "run again with ORDERFLOW_LOG_LEVEL=info to see the worker's log")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// What happened, read back from the engine and the stand-in.
    func report(elapsed: Duration) async throws -> DemoReport {
        let holders = cast.holders
        let received = apns.pushes().filter { holders[$0.deviceToken] != nil }
        var orders: [DemoReport.Order] = []
        for order in cast.orders {
            let history = try await engine.history(order.id)
            let details = try await engine.order(order.id)
            orders.append(DemoReport.Order(
                label: order.label, story: order.story, history: history, activities: details.activities))
        }
        return DemoReport(orders: orders, pushes: received, holders: holders,
                          merchantID: merchantID, elapsed: elapsed)
    }
}

// MARK: - Report

/// The timelines and the summary, built after the worker drained.
private struct DemoReport: Sendable {
    struct Order: Sendable {
        var label: String
        var story: String
        var history: OrderHistory
        var activities: [ActivityInfo]
    }

    var orders: [Order]
    var pushes: [LocalAPNSPush]
    var holders: [String: TokenHolder]
    var merchantID: String
    var elapsed: Duration

    private var deliveriesByID: [UUID: DeliveryRecord] {
        var byID: [UUID: DeliveryRecord] = [:]
        for order in orders {
            for delivery in order.history.deliveries {
                if let id = delivery.apnsID { byID[id] = delivery }
            }
        }
        return byID
    }

    /// Pushes that failed for good (a retry that later succeeded is not a failure).
    private var failedDeliveries: [DeliveryRecord] {
        orders.flatMap(\.history.deliveries).filter(\.outcome.isFailure)
    }

    /// Why the run did not go as it should, if it did not.
    var problem: String? {
        let failed = failedDeliveries
        if !failed.isEmpty {
            let reasons = Set(failed.map { $0.reason ?? $0.outcome.rawValue }).sorted().joined(separator: ", ")
            return "\(Formatting.count(failed.count, "push", "pushes")) did not go through (\(reasons)); see the timelines above"
        }
        if pushes.isEmpty { return "the local APNs stand-in received no pushes" }
        return nil
    }

    func lines(_ terminal: Terminal) -> [String] {
        var lines: [String] = [""]
        let byID = deliveriesByID
        for order in orders {
            lines += orderLines(order, terminal: terminal, deliveries: byID)
            lines.append("")
        }
        lines += summary(terminal)
        return lines
    }

    private func orderLines(_ order: Order, terminal: Terminal, deliveries byID: [UUID: DeliveryRecord]) -> [String] {
        let snapshot = order.history.order
        var lines: [String] = []
        let title = "Order \(order.label) · \(snapshot.orderID)"
        lines.append(terminal.styled(title, .bold) + terminal.styled(" · \(snapshot.workflow) · \(attributesLine(snapshot.attributes))", .dim))
        lines.append("  " + order.story)
        for activity in order.activities {
            let tokens = holders.filter { $0.value.device == activity.deviceID }
                .sorted { $0.value.kind > $1.value.kind }
                .map { "\($0.value.kind) token \(Formatting.maskedToken($0.key))" }
            let how = activity.status == "alerts" ? "no Live Activity, ordinary alerts" : "Live Activity \(activity.status)"
            lines.append(terminal.styled("  \(activity.deviceID): \(how) (\(tokens.joined(separator: ", ")))", .dim))
        }

        // The pushes of this order, under the transition each one carries (its newest).
        var bySeq: [Int: [(LocalAPNSPush, DeliveryRecord)]] = [:]
        for push in pushes {
            guard let delivery = byID[push.apnsID], delivery.orderID == snapshot.orderID else { continue }
            bySeq[delivery.seq, default: []].append((push, delivery))
        }
        let orderPushes = bySeq.values.flatMap { $0 }.sorted { $0.0.receivedAt < $1.0.receivedAt }
        let rows = orderPushes.map { pushCells($0.0, $0.1, terminal: terminal) }
        let widths = (0..<5).map { column in rows.map { visibleWidth($0[column]) }.max() ?? 0 }

        for transition in order.history.transitions {
            let change = transition.from.map { "\($0) → \(transition.to)" } ?? "created in \(transition.to)"
            var line = "  " + terminal.styled(Self.clockTime(transition.occurredAt), .dim) + "  " + terminal.styled(change, .bold)
            if let event = transition.event { line += "  " + terminal.styled(event, .dim) }
            lines.append(line)
            let carried = (bySeq[transition.seq] ?? []).sorted { $0.0.receivedAt < $1.0.receivedAt }
            for (push, delivery) in carried {
                let cells = pushCells(push, delivery, terminal: terminal)
                var text = "      → " + zip(cells, widths).map { pad($0, $1) }.joined(separator: "  ")
                while text.hasSuffix(" ") { text.removeLast() }
                if delivery.merged > 1 && push.pushType == "liveactivity" {
                    text += "  " + terminal.styled("◀ \(delivery.merged) transitions in 1 update", .yellow, .bold)
                }
                lines.append(text)
            }
            if carried.isEmpty, let later = orderPushes.first(where: { covers($0.1, transition.seq) && $0.1.seq > transition.seq }) {
                let event = later.0.aps?["event"]?.stringValue ?? "push"
                lines.append(terminal.styled("      ⋯ merged into the \(event) at \(Self.clockTime(later.0.receivedAt))", .dim))
            }
        }
        return lines
    }

    /// Whether a Live Activity push folded the transition `seq` in.
    private func covers(_ delivery: DeliveryRecord, _ seq: Int) -> Bool {
        delivery.event != "alert" && delivery.merged > 1 && delivery.seq - delivery.merged < seq
    }

    /// event, device and token, priority, alert title, what the card shows (+ aps timestamp).
    private func pushCells(_ push: LocalAPNSPush, _ delivery: DeliveryRecord, terminal: Terminal) -> [String] {
        let aps = push.aps
        let event = push.pushType == "liveactivity" ? (aps?["event"]?.stringValue ?? "?") : "alert"
        let style: Terminal.Style = switch event {
        case "start": .green
        case "end": .magenta
        case "alert": .yellow
        default: .cyan
        }
        let who = (holders[push.deviceToken]?.device ?? "?") + " " + Formatting.maskedToken(push.deviceToken)
        let alert = aps?["alert"]?["title"]?.stringValue.map { "“\($0)”" } ?? terminal.styled("no alert", .dim)
        var shows = push.pushType == "liveactivity" ? Self.contentSummary(aps?["content-state"]) : "ordinary notification"
        if let timestamp = aps?["timestamp"]?.integerValue {
            shows += terminal.styled("  ts \(timestamp)", .dim)
        }
        return [terminal.styled(event, style, .bold), who, "prio \(push.priority)", alert, shows]
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - visibleWidth(text)))
    }

    private func attributesLine(_ attributes: JSONValue) -> String {
        guard case .object(let members) = attributes else { return "" }
        let order = ["merchantName", "itemCount", "pickupAddress", "dropoffAddress"]
        return order.compactMap { key -> String? in
            guard let value = members[key] else { return nil }
            switch (key, value) {
            case ("itemCount", .int(let count)): return Formatting.count(count, "item")
            case ("pickupAddress", .string(let text)): return "from \(text)"
            case ("dropoffAddress", .string(let text)): return "to \(text)"
            case (_, .string(let text)): return text
            default: return nil
            }
        }.joined(separator: " · ")
    }

    /// `preparing · eta 14:28 · Sam`: the fields a glance at the Lock Screen shows.
    static func contentSummary(_ content: LocalAPNSJSON?) -> String {
        guard let content else { return "-" }
        var parts: [String] = []
        for key in ["status", "phase"] { if let value = content[key]?.stringValue { parts.append(value) } }
        if let driver = content["driverName"]?.stringValue { parts.append(driver) }
        if let car = content["car"]?.stringValue { parts.append(car) }
        if let plate = content["plate"]?.stringValue { parts.append(plate) }
        if let eta = content["eta"]?.doubleValue {
            // Dates in the app's JSON count from 2001-01-01, as Swift's `Date` decodes them.
            parts.append("eta " + Self.hourMinute(Date(timeIntervalSinceReferenceDate: eta)))
        }
        return parts.isEmpty ? "-" : parts.joined(separator: " · ")
    }

    private func summary(_ terminal: Terminal) -> [String] {
        let transitions = orders.reduce(0) { $0 + $1.history.transitions.count }
        let liveActivity = pushes.filter { $0.pushType == "liveactivity" }.count
        let alerts = pushes.count - liveActivity
        var line = "\(Formatting.count(transitions, "transition")) → \(Formatting.count(pushes.count, "push", "pushes"))"
        line += " (\(liveActivity) Live Activity, \(Formatting.count(alerts, "ordinary alert")))"
        let burst = orders.compactMap { order -> (String, Int)? in
            let merged = order.history.deliveries.filter { $0.event != "alert" }.map(\.merged).max() ?? 0
            return merged > 1 ? (order.label, merged) : nil
        }.max { $0.1 < $1.1 }
        if let (label, merged) = burst {
            line += ": order \(label)'s \(merged) quick steps arrived as 1 update"
        }
        var lines = [terminal.styled(line, .bold, .green)]
        let people = Set(pushes.filter { $0.pushType == "liveactivity" }.compactMap { holders[$0.deviceToken]?.device }).count
        lines.append("Each of the \(people) phones with a Live Activity kept one card that changed in place, from start to end:")
        lines.append("one continuous activity per order instead of a string of separate notifications.")
        if alerts > 0 {
            lines.append("Only the phone without a Live Activity got ordinary alerts, for the steps that carry one.")
        }
        lines.append(terminal.styled(
            "(\(DemoOutput.seconds(elapsed)) in all. Look again: ORDERFLOW_MERCHANT=\(merchantID) orderflow show \(orders[0].history.order.orderID))",
            .dim))
        return lines
    }

    static func clockTime(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        formatter.dateFormat = "HH:mm:ss.SSS"
        return formatter.string(from: date)
    }

    static func hourMinute(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        formatter.dateFormat = "HH:mm"
        return formatter.string(from: date)
    }
}

// MARK: - Output

/// Progress lines while the demo runs, coloured on a terminal.
private struct DemoOutput: Sendable {
    let terminal: Terminal

    func intro() {
        terminal.write(terminal.styled("OrderFlow demo: one Live Activity per order, updated in place", .bold))
        terminal.write("""
            A customer should see one Lock Screen card that follows the order, not a string of \
            separate notifications.
            This runs the whole path here: PostgreSQL → engine → worker → APNs (a local stand-in; \
            nothing goes to Apple).
            """)
        terminal.write()
    }

    func done(_ text: String) {
        terminal.write(terminal.styled("✓ ", .green) + text)
    }

    func note(_ text: String) {
        terminal.write(terminal.styled("… ", .dim) + text)
    }

    func write(_ lines: [String]) {
        for line in lines { terminal.write(line) }
    }

    /// `1.2 s`.
    static func seconds(_ duration: Duration) -> String {
        let parts = duration.components
        let seconds = Double(parts.seconds) + Double(parts.attoseconds) / 1e18
        return String(format: "%.1f s", seconds)
    }
}
