import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import LocalPostgres
import OrderFlow
import OrderFlowDemo
import OrderFlowHTTP
import ServiceLifecycle

/// `orderflow-demo` (run by `scripts/demo`): chooses the database as `orderflow` does and runs
/// ``Demo``. A program of its own: the APNs stand-in it starts stays out of `orderflow`.
@main
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "orderflow-demo",
        abstract: "Run food orders and a ride end to end and show what each Lock Screen was sent.",
        discussion: """
            Starts (or reuses) the database, applies the shipped workflows for a fresh demo \
            merchant, starts a local APNs stand-in (TLS, HTTP/2, token auth; it records every \
            push), a local FCM stand-in (OAuth service account, HTTP v1; it records every \
            message) and a worker in this process, then drives three food orders, a ride and a \
            race; the first order is followed on an iPhone and an Android phone. Once the worker \
            has sent everything, it prints each order's transitions with the pushes they became \
            and the Android phone's messages, and stops what it started. Takes about 10 \
            seconds; nothing is sent to Apple or Google.

            With --board, the worker and the stand-in keep running after the report, beside \
            the HTTP API, and the demo prints a sign-in link to the counter board for the \
            demo's merchant: advance its orders there (or with `ORDERFLOW_MERCHANT=<the \
            demo's merchant> orderflow advance …`) and watch the Lock Screen preview; Ctrl-C \
            stops everything.

            scripts/demo builds and runs it, passing its options on.

            Example:
              scripts/demo
              scripts/demo --board
              ORDERFLOW_DATABASE_URL=postgresql://me@localhost/scratch scripts/demo
            """,
        version: OrderFlowVersion.current)

    @Flag(help: "Keep the demo's worker running and serve the counter board (a sign-in link is printed) until Ctrl-C.")
    var board = false

    @Option(name: .customLong("board-port"), help: ArgumentHelp("The board's port with --board (default 0: a free one).", valueName: "port"))
    var boardPort: Int = 0

    /// Runs the demo; a failure is one `orderflow: …` line and an exit code, as in `orderflow`.
    static func main() async {
        do {
            try CommandContext.bootstrapLogging()
        } catch {
            Foundation.exit(FailureReport.print(error).rawValue)
        }
        var command: DemoCommand
        do {
            command = try parse()
        } catch {
            exit(withError: error)  // --help, or a usage error with the usage
        }
        do {
            try await command.run()
        } catch {
            Foundation.exit(FailureReport.print(error).rawValue)
        }
    }

    func run() async throws {
        let context = CommandContext.current()
        let demo = Demo(terminal: context.terminal, logger: context.logger("orderflow.demo"),
                        masterKey: try MasterKeySetting.optional(context.environment))
        demo.introduce()

        // The embedded cluster is stopped again at the end if this run is what started it.
        var startedHere: LocalPostgres?
        if case .embedded(let local) = context.databaseSource, try await local.runningConnectionString() == nil {
            startedHere = local
        }
        do {
            let (database, source) = try await context.databaseConfiguration()
            let databaseLine = switch source {
            case .embedded(let local):
                startedHere != nil
                    ? "started the embedded PostgreSQL in \(context.displayPath(local.folder)) (stopped again at the end)"
                    : "using the embedded PostgreSQL in \(context.displayPath(local.folder)) (already running; left running)"
            case .url(let url, let variable):
                "using the database of \(variable): \(Formatting.maskedDatabaseURL(url))"
            }
            let logger = context.logger("orderflow.demo")
            let port = boardPort
            let serveBoard: @Sendable (OrderFlowEngine) async throws -> [any Service] = { engine in
                let server = OrderFlowHTTPServer(engine: engine, configuration: .init(port: port), logger: logger)
                return [server, BoardLinkAnnouncer(server: server, merchantID: engine.configuration.merchantID)]
            }
            try await demo.run(database: database, databaseLine: databaseLine, keepServing: board ? serveBoard : nil)
        } catch let error as DemoError {
            if let startedHere { try? await startedHere.stop() }
            throw CLIError(error.kind == .workflowsMissing ? .notFound : .internalError, error.problem, remedy: error.remedy)
        } catch {
            if let startedHere { try? await startedHere.stop() }
            throw error
        }
        if let startedHere {
            try await startedHere.stop()
            context.terminal.write(context.terminal.styled("✓ ", .green) + "stopped the local PostgreSQL again (the demo had started it)")
        }
    }
}

/// Says where the demo's board is once its server listens, then waits for Ctrl-C.
struct BoardLinkAnnouncer: Service {
    let server: OrderFlowHTTPServer
    let merchantID: String

    func run() async throws {
        if let link = try await server.boardSignInLink() {
            Terminal.writeError("orderflow: the counter board of the demo's merchant: \(link)")
            Terminal.writeError("orderflow: the demo's orders have ended; add one and move it from the board or the CLI:")
            Terminal.writeError("  export ORDERFLOW_MERCHANT=\(merchantID)")
            Terminal.writeError("  orderflow order create 2001 --workflow food-order --attr merchantName=\"Luigi's\" --attr orderNumber=2001 --attr itemCount=2")
            Terminal.writeError("  orderflow advance 2001 accept --eta 20m")
            Terminal.writeError("orderflow: the demo keeps its worker and the APNs stand-in running for the board; Ctrl-C stops them")
        }
        try? await gracefulShutdown()
    }
}
