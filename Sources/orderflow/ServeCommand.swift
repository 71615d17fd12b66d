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

/// `orderflow serve`
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the HTTP API (and run the worker) until stopped.",
        discussion: """
            The API is described by its contract, served at /openapi.yaml (docs/http-api.md \
            walks through it with curl). Every call but /healthz and /openapi.yaml needs a \
            merchant's API key: `orderflow api-key create --merchant ID`. Runs the worker too \
            (the APNs settings are `orderflow worker run`'s), unless --no-worker. SIGTERM or \
            SIGINT lets the requests in flight finish, then stops the worker, and exits 0.

            The counter board for staff is served at /board: at start, serve prints a \
            one-time sign-in link for the default merchant (`orderflow board-link` prints \
            one for any merchant).

            Example:
              orderflow serve --port 8080 --no-worker
            """)

    @Option(help: ArgumentHelp("The address to listen on (default 127.0.0.1, this machine only).", valueName: "address"))
    var host: String = "127.0.0.1"

    @Option(help: ArgumentHelp("The port to listen on (default 8080; 0 picks a free one).", valueName: "port"))
    var port: Int = 8080

    @Flag(name: .customLong("no-worker"), help: "Serve the API only; workers run elsewhere (`orderflow worker run`).")
    var noWorker = false

    @Option(name: .customLong("public-url"), help: ArgumentHelp(
        "Where clients reach this server through its TLS proxy (https://orders.example.com): sign-in links name it, and the board's cookie becomes Secure and __Host-.",
        valueName: "url"))
    var publicURL: String?

    @Option(name: .customLong("device-credentials"), help: ArgumentHelp(
        "required (default): the customer's app registers its device and sends its credential before a client secret may change it. compatible: devices never registered may still be changed with a client secret alone, for apps released before device credentials; switch back once they have updated (docs/http-api.md).",
        valueName: "policy"))
    var deviceCredentials: DeviceCredentialPolicy = .required

    @Option(name: .customLong("metrics-token-file"), help: ArgumentHelp(
        "Also serve GET /metrics on the API's port, to requests bearing the token this file holds (`Authorization: Bearer <token>`, at least 16 characters). Without it the metrics are only on --metrics-port's own listener.",
        valueName: "file"))
    var metricsTokenFile: String?

    @OptionGroup var worker: HostOptions

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        if let publicURL {
            guard let url = URL(string: publicURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil,
                  url.query == nil, url.fragment == nil
            else { throw ValidationError("--public-url must be an http or https URL without query, such as https://orders.example.com") }
        }
    }

    func run() async throws {
        // Taken first, before the embedded database (a child process) could inherit it.
        let systemd = SystemdNotifier.takenFromEnvironment()
        let context = CommandContext.current()
        let logger = context.logger("orderflow.serve", defaultLevel: .info)
        // Said once the server listens (a server that cannot start says only why).
        var warnings: [String] = []
        if try MasterKeySetting.optional(context.environment) == nil {
            warnings.append("no master key (ORDERFLOW_SECRET_KEY_FILE): the keys of customers' client secrets are stored unsealed in the database; set one, then `orderflow master-key rotate` seals them")
        }
        if deviceCredentials == .compatible {
            warnings.append("--device-credentials compatible: a client secret alone may still change a device never registered; switch back to required once the apps register their devices")
        }
        // One registry for the process: the API's request metrics, the engine's and the
        // worker's, all on one `GET /metrics` (its own listener, or the API's with a token).
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let metricsToken = try metricsTokenFile.map { try Self.metricsToken(file: $0) }
        var configuration = OrderFlowHTTPConfiguration(host: host, port: port, runsWorker: !noWorker, metrics: registry,
                                                       metricsToken: metricsToken)
        configuration.publicURL = publicURL
        if noWorker {
            let (database, source) = try await context.databaseConfiguration()
            try await Schema.checkSessionsAreKept(database)
            var engine = OrderFlowConfiguration(database: database, maximumConnections: worker.connections)
            engine.cachedOrders = worker.cachedOrders
            engine.deviceCredentials = deviceCredentials
            engine.masterKey = try MasterKeySetting.optional(context.environment)
            try await context.withEngine(engine, source: source) { engine in
                let server = OrderFlowHTTPServer(engine: engine, configuration: configuration, logger: logger)
                try await Self.serve(worker.metricsListener(registry: registry, logger: logger) + [server],
                                     server: server, warnings: warnings, logger: logger, systemd: systemd)
            }
        } else {
            // The worker's metrics go to the process's registry (`MetricsSystem`), shown with the rest.
            let host = try await worker.makeHost(context: context, logger: logger, deviceCredentials: deviceCredentials)
            configuration.workerStatus = { host.status }
            let server = OrderFlowHTTPServer(engine: host.engine, configuration: configuration, logger: logger)
            // Stopped in reverse order: the API drains its requests first, then the worker stops.
            try await Self.serve([host, server] + worker.metricsListener(registry: registry, logger: logger),
                                 server: server, warnings: warnings, logger: logger, systemd: systemd,
                                 workerReady: { try await host.readyForSystemd() })
        }
    }

    /// The metrics token a file holds (surrounding whitespace dropped).
    static func metricsToken(file: String) throws -> String {
        let token = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count >= 16, token.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw CLIError(.usage, "--metrics-token-file: \(file) must hold one token of at least 16 characters, no spaces (`openssl rand -hex 24 > \(file)`)")
        }
        return token
    }

    /// Runs `services` until a signal, saying once where the API listens; tells systemd when it
    /// serves (the API listens, and the worker, if any, reached the database) and when it stops.
    static func serve(_ services: [any Service], server: OrderFlowHTTPServer, warnings: [String] = [], logger: Logger,
                      systemd: SystemdNotifier? = nil, workerReady: (@Sendable () async throws -> Void)? = nil) async throws {
        var services = services
        if let systemd {
            services.append(SystemdReadiness(notifier: systemd, ready: {
                guard let port = await server.listening() else { throw CancellationError() }
                try await workerReady?()
                return "serving the API on \(server.configuration.host):\(port)"
            }, logger: logger))
        }
        let group = ServiceGroup(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                guard let port = await server.listening() else { return }
                Terminal.writeError("orderflow: serving the API on http://\(server.configuration.host):\(port) (contract: /openapi.yaml); Ctrl-C stops it")
                for warning in warnings { Terminal.writeError("orderflow: warning: \(warning)") }
                // As notebook servers do: a one-time link that signs a browser in to the board —
                // for a person at the terminal, not for the files a log shipper keeps.
                guard LogFormat.process == .text else { return }
                do {
                    if let link = try await server.boardSignInLink(lifetime: OrderFlowEngine.boardStartLinkLifetime) {
                        Terminal.writeError("orderflow: the counter board: \(link) (works once, for \(OrderFlowEngine.boardStartLinkLifetime / 60) minutes; `orderflow board-link` prints another)")
                    }
                } catch {
                    Terminal.writeError("orderflow: no sign-in link for the board: \(error)")
                }
            }
            try await tasks.waitForAll()
        }
    }
}

extension DeviceCredentialPolicy: ExpressibleByArgument {}
