import ArgumentParser
import ConsoleOutput
import LocalPostgres
import OrderFlowDemo

/// `orderflow demo`: chooses the database and runs ``Demo``.
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
        let demo = Demo(terminal: context.terminal, logger: context.logger("orderflow.demo"))
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
            try await demo.run(database: database, databaseLine: databaseLine)
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
