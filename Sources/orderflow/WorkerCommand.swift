import APNS
import ArgumentParser
import Foundation
import Logging
import Metrics
import OrderFlow
import PGKit
import Prometheus
import ServiceLifecycle
import WorkflowKit

/// `orderflow worker …`
struct WorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Send the Live Activity pushes that order transitions imply.",
        subcommands: [Run.self])

    /// `orderflow worker run`
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Claim activity commands and send them to APNs until stopped.",
            discussion: """
                Runs until SIGTERM or SIGINT, then finishes the pushes in flight, gives back \
                the orders it had claimed and exits 0. Any number of workers can run against \
                one database; none sends a push twice.

                APNs settings come from flags or the environment (a flag wins):
                  --apns-key FILE       ORDERFLOW_APNS_KEY      the team's .p8 signing key
                  --apns-key-id ID      ORDERFLOW_APNS_KEY_ID   its key id
                  --apns-team-id ID     ORDERFLOW_APNS_TEAM_ID  the team id
                  --apns-topic ID       ORDERFLOW_APNS_TOPIC    the app's bundle id
                  --apns-env ENV        ORDERFLOW_APNS_ENV      production (default) or sandbox
                  --apns-url URL        ORDERFLOW_APNS_URL      another endpoint (a local stand-in)
                  --apns-ca FILE        ORDERFLOW_APNS_CA       that endpoint's CA certificate (PEM)

                Keep the .p8 key readable by the worker's user alone (chmod 600): the worker \
                warns once at start, on stderr, when other users can read it. Push tokens \
                appear in its log only as their last 8 characters, the key and its provider \
                tokens never (ORDERFLOW_LOG_LEVEL=trace shows every record).

                Example:
                  ORDERFLOW_APNS_KEY=AuthKey_ABC123DEFG.p8 ORDERFLOW_APNS_KEY_ID=ABC123DEFG \\
                  ORDERFLOW_APNS_TEAM_ID=TEAM123456 ORDERFLOW_APNS_TOPIC=com.example.orders \\
                    orderflow worker run --metrics-port 9464
                """)

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

        @Option(help: ArgumentHelp("Serve Prometheus metrics on this port (GET /metrics).", valueName: "port"))
        var metricsPort: Int?

        @Option(help: ArgumentHelp("Orders claimed at once (default 100).", valueName: "n"))
        var batchSize: Int = 100

        @Option(help: ArgumentHelp("Pushes in flight at once per batch (default 64).", valueName: "n"))
        var concurrency: Int = 64

        @Option(help: ArgumentHelp("Database connections (default 8).", valueName: "n"))
        var connections: Int = 8

        @Option(help: ArgumentHelp("This worker's name in leases and logs (default host:pid:random).", valueName: "id"))
        var workerID: String?

        @Option(help: ArgumentHelp(
            "Seconds a claimed order stays this worker's (default 60); a worker that dies leaves its orders to others after this long.",
            valueName: "seconds"))
        var lease: Int = 60

        func validate() throws {
            if let metricsPort, !(1...65535).contains(metricsPort) {
                throw ValidationError("--metrics-port must be between 1 and 65535")
            }
            guard lease >= 1 else { throw ValidationError("--lease must be at least 1 second") }
            guard batchSize > 0, concurrency > 0, connections > 1 else {
                throw ValidationError("--batch-size and --concurrency must be at least 1, --connections at least 2")
            }
        }

        func run() async throws {
            let context = CommandContext.current()
            let logger = context.logger("orderflow.worker", defaultLevel: .info)
            let apns = try APNSSettings(flags: self, environment: context.environment)
            let merchantID = try context.checkedMerchantID()
            // The client loads the key and checks the endpoint: an unusable setting fails here,
            // before any connection to the database, and names the setting.
            let client: APNSClient
            do {
                client = try APNSClient(configuration: apns.client, logger: context.logger("orderflow.apns", defaultLevel: .info))
            } catch let error as APNSCredentialsError {
                throw CLIError(.usage, "\(apns.keySource): \(error.message)")
            } catch {
                throw CLIError(.usage, "cannot use the APNs settings: \(error)")
            }
            // Once, at start, on stderr whatever the log level, and only about a key that works (an
            // unusable one gets one error line, not two): the worker runs on regardless.
            if let warning = apns.keyPermissionWarning { Terminal.writeError("orderflow: warning: \(warning)") }

            let (database, source): (PostgresConfiguration, CommandContext.DatabaseSource)
            do {
                (database, source) = try await context.databaseConfiguration()
            } catch {
                try? await client.shutdown()
                throw error
            }
            // The engine fires the workflows' durable timers beside the worker; its commits wake
            // the worker in-process, other processes' commits arrive by LISTEN.
            var engineConfiguration = OrderFlowConfiguration(
                database: database, merchantID: merchantID, maximumConnections: connections)
            engineConfiguration.acquireTimeout = .seconds(30)
            let engine = OrderFlowEngine(configuration: engineConfiguration, logger: logger)
            do {
                try await context.ensureSchema(on: engine.pool, configuration: database, source: source)
            } catch {
                try? await client.shutdown()
                await engine.shutdown()
                throw error
            }

            var services: [any Service] = [engine.pool]
            if let metricsPort {
                let registry = PrometheusCollectorRegistry()
                MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
                do {
                    services.append(try MetricsEndpoint(port: metricsPort, registry: registry, logger: logger))
                } catch {
                    try? await client.shutdown()
                    await engine.shutdown()
                    throw error
                }
            }
            let listener = PostgresListener(
                configuration: database, channels: [OrderFlowEngine.wakeChannel],
                logger: context.logger("orderflow.worker.listen", defaultLevel: .info))
            services.append(listener)
            services.append(TimerService(engine: engine, logger: context.logger("orderflow.timers", defaultLevel: .info)))
            var configuration = WorkerConfiguration(
                bundleID: apns.bundleID, batchSize: batchSize, concurrentSends: concurrency)
            if let workerID { configuration.workerID = workerID }
            configuration.lease = .seconds(lease)
            services.append(OrderFlowWorker(
                configuration: configuration, pool: engine.pool, sender: client, wakeSignal: engine.wakeSignal,
                listener: listener, logger: logger))

            // Shut down in reverse: the worker first (it still needs the pool), the pool last.
            let group = ServiceGroup(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            do {
                try await group.run()
            } catch {
                try? await client.shutdown()
                await engine.shutdown()
                throw error
            }
            try? await client.shutdown()
            await engine.shutdown()
        }
    }
}

/// The APNs settings of `worker run`, from flags or the environment, checked before anything
/// starts so that a missing or unreadable setting fails at once with its name.
struct APNSSettings {
    var client: APNSClientConfiguration
    var bundleID: String
    /// Where the key path came from, for messages: `--apns-key` or `ORDERFLOW_APNS_KEY`.
    var keySource: String
    /// Set when the key file is readable by group or others.
    var keyPermissionWarning: String?

    init(flags: WorkerCommand.Run, environment: [String: String]) throws {
        func value(_ flag: String?, _ variable: String) -> String? {
            let given = flag ?? environment[variable]
            guard let given = given?.trimmingCharacters(in: .whitespaces), !given.isEmpty else { return nil }
            return given
        }
        func required(_ flag: String?, _ option: String, _ variable: String, _ what: String) throws -> String {
            guard let given = value(flag, variable) else {
                throw CLIError(.usage, "no APNs \(what) given", remedy: "pass \(option) or set \(variable)")
            }
            return given
        }
        let keyPath = try required(flags.apnsKey, "--apns-key FILE", "ORDERFLOW_APNS_KEY", "signing key (.p8 file)")
        let keyID = try required(flags.apnsKeyID, "--apns-key-id ID", "ORDERFLOW_APNS_KEY_ID", "key id")
        let teamID = try required(flags.apnsTeamID, "--apns-team-id ID", "ORDERFLOW_APNS_TEAM_ID", "team id")
        bundleID = try required(flags.apnsTopic, "--apns-topic BUNDLE_ID", "ORDERFLOW_APNS_TOPIC", "topic (the app's bundle id)")

        func source(_ flag: String?, _ option: String, _ variable: String) -> String {
            flag != nil ? option : variable
        }
        // Apple shows both ids as 10 capital letters and digits; anything else is a copying
        // mistake that APNs would only answer with InvalidProviderToken on the first push.
        for (id, option, variable, what) in [
            (keyID, "--apns-key-id", "ORDERFLOW_APNS_KEY_ID", "key id, shown next to the key in the Apple Developer account"),
            (teamID, "--apns-team-id", "ORDERFLOW_APNS_TEAM_ID", "team id, shown in the Apple Developer account's membership details"),
        ] {
            let flag = option == "--apns-key-id" ? flags.apnsKeyID : flags.apnsTeamID
            guard id.unicodeScalars.count == 10, id.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) || ("0"..."9").contains($0) })
            else {
                throw CLIError(.usage, "\(source(flag, option, variable)) is \"\(MessageText.excerpt(id, limit: 20))\", not an APNs \(what.prefix { $0 != "," })",
                               remedy: "give the 10-character \(what) (capital letters and digits)")
            }
        }
        // A bundle id: letters, digits, hyphens and periods (the worker adds the Live Activity
        // suffix itself).
        let topicSource = source(flags.apnsTopic, "--apns-topic", "ORDERFLOW_APNS_TOPIC")
        guard bundleID.unicodeScalars.count <= 155,
              bundleID.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == ".") }),
              !bundleID.hasPrefix("."), !bundleID.hasSuffix(".")
        else {
            throw CLIError(.usage, "\(topicSource) is \"\(MessageText.excerpt(bundleID, limit: 40))\", not an app bundle id",
                           remedy: "give the app's bundle id, like com.example.orders (letters, digits, hyphens and periods)")
        }
        if bundleID.hasSuffix(".push-type.liveactivity") {
            throw CLIError(.usage, "\(topicSource) ends in .push-type.liveactivity",
                           remedy: "give the app's bundle id alone, like com.example.orders; the worker adds the Live Activity suffix")
        }

        let keySource = source(flags.apnsKey, "--apns-key", "ORDERFLOW_APNS_KEY")
        self.keySource = keySource
        // Checked here, before anything connects, in the words of the setting; the key itself is
        // parsed when the client starts (and its errors name the file too).
        switch SmallTextFile.problem(at: keyPath, maximumBytes: APNSSigningKey.maximumKeyFileBytes) {
        case .missing?:
            throw CLIError(.usage, "\(keySource) names \(keyPath), which does not exist",
                           remedy: "download the key (.p8) from the Apple Developer account and give its path")
        case .directory?:
            throw CLIError(.usage, "\(keySource) names \(keyPath), which is a directory",
                           remedy: "give the path of the .p8 key file itself")
        case .unreadable?:
            throw CLIError(.usage, "\(keySource) names \(keyPath), which this user cannot read",
                           remedy: "make it readable by the user running the worker (and only by it: chmod 600 \(keyPath))")
        case .notRegularFile?, .tooLarge?, .notText?, nil:
            break  // the key's own check, when it is loaded, says exactly what is wrong with it
        }
        keyPermissionWarning = Self.keyPermissionWarning(path: keyPath)

        let environmentName = value(flags.apnsEnvironment, "ORDERFLOW_APNS_ENV")?.lowercased() ?? "production"
        let target: APNSClientConfiguration.Environment
        if let url = value(flags.apnsURL, "ORDERFLOW_APNS_URL") {
            var trustRoots: String?
            if let caPath = value(flags.apnsCA, "ORDERFLOW_APNS_CA") {
                let caSource = flags.apnsCA != nil ? "--apns-ca" : "ORDERFLOW_APNS_CA"
                // Only a regular file of reasonable size: a FIFO or a device would never end.
                guard let pem = try? SmallTextFile.read(caPath, maximumBytes: 1_048_576) else {
                    throw CLIError(.usage, "\(caSource) names \(caPath), which cannot be read",
                                   remedy: "give the path of the endpoint's CA certificate in PEM form")
                }
                trustRoots = pem
            }
            target = .custom(baseURL: url, trustRootsPEM: trustRoots)
        } else {
            switch environmentName {
            case "production": target = .production
            case "sandbox", "development": target = .sandbox
            default:
                let source = flags.apnsEnvironment != nil ? "--apns-env" : "ORDERFLOW_APNS_ENV"
                throw CLIError(.usage, "\(source) is \"\(environmentName)\"", remedy: "use production or sandbox")
            }
        }
        client = APNSClientConfiguration(
            environment: target, credentials: .init(key: .file(path: keyPath), keyID: keyID, teamID: teamID))
    }

    /// What to tell the operator when the key file's mode lets users other than its owner read
    /// (or change) it; nil when only the owner can. The worker still runs: the warning names the
    /// file and the fix.
    static func keyPermissionWarning(path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 != 0 else { return nil }
        let access = if mode & 0o004 != 0 {
            "is readable by every user of this machine"
        } else if mode & 0o040 != 0 {
            "is readable by its group"
        } else {
            "can be changed by users other than its owner"
        }
        return "the APNs signing key \(path) \(access) (mode \(String(format: "%04o", mode))); "
            + "whoever holds it can send notifications as your team. Run `chmod 600 \(path)`"
    }
}

/// Serves the Prometheus registry as text on `GET /metrics`: a blocking accept loop on a
/// thread of its own (scrapes are rare), closed at graceful shutdown.
final class MetricsEndpoint: Service, Sendable {
    private let socket: Int32
    private let registry: PrometheusCollectorRegistry
    private let logger: Logger
    let port: Int

    /// Binds the port at once, so that a port in use fails at start.
    init(port: Int, registry: PrometheusCollectorRegistry, logger: Logger) throws {
        self.port = port
        self.registry = registry
        self.logger = logger
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw CLIError(.internalError, "cannot open a socket for metrics: \(String(cString: strerror(errno)))") }
        var reuse: Int32 = 1
        setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = in_addr(s_addr: INADDR_ANY)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(socket, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(socket)
            throw CLIError(.usage, "cannot serve metrics on port \(port): \(reason)", remedy: "choose another --metrics-port")
        }
        self.socket = socket
    }

    func run() async throws {
        let thread = Thread { [self] in serve() }
        thread.name = "metrics"
        thread.start()
        logger.info("serving metrics", metadata: ["orderflow.metrics_url": "http://0.0.0.0:\(port)/metrics"])
        try? await gracefulShutdown()
        // Unblocks accept(2); the thread then ends.
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }

    private func serve() {
        while true {
            let client = accept(socket, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            respond(on: client)
            close(client)
        }
    }

    private func respond(on client: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request = [UInt8](repeating: 0, count: 4096)
        let count = read(client, &request, request.count)
        guard count > 0 else { return }
        let line = String(decoding: request[..<count], as: UTF8.self).prefix { $0 != "\r" && $0 != "\n" }
        let parts = line.split(separator: " ")
        let (status, type, body): (String, String, [UInt8])
        if parts.count >= 2, parts[0] == "GET", parts[1] == "/metrics" || parts[1].hasPrefix("/metrics?") {
            (status, type, body) = ("200 OK", "text/plain; version=0.0.4; charset=utf-8", registry.emitToBuffer())
        } else {
            (status, type, body) = ("404 Not Found", "text/plain; charset=utf-8", Array("GET /metrics\n".utf8))
        }
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let response = Array(head.utf8) + body
        var offset = 0
        while offset < response.count {
            let written = response[offset...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            offset += written
        }
    }
}
