import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import LocalPostgres
import OrderFlow

/// `orderflow migrate`
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or update the OrderFlow schema in the database.",
        discussion: """
            Applies the numbered migrations this version of orderflow ships that the database \
            does not have yet, each in its own transaction; running it again changes nothing. \
            Needed once for a database named by ORDERFLOW_DATABASE_URL or DATABASE_URL (the \
            embedded database migrates itself).

            Example:
              ORDERFLOW_DATABASE_URL=postgresql://orderflow@db.internal:5432/orderflow orderflow migrate
            """)

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let context = CommandContext.current()
        let configuration: DatabaseConfiguration
        switch context.databaseSource {
        case .url:
            configuration = try await context.databaseConfiguration().configuration
        case .embedded(let local):
            // Not `databaseConfiguration()`, which would migrate silently on a first start.
            configuration = try DatabaseConfiguration(try await local.start())
        }
        let report = try await Schema.migrate(configuration)
        if output.json {
            struct Result: Encodable {
                var applied: [String]
                var alreadyApplied: Int
                var database: String
            }
            try context.terminal.writeJSON(Result(
                applied: report.applied.map(\.fileName), alreadyApplied: report.alreadyApplied,
                database: configuration.target.description))
            return
        }
        let terminal = context.terminal
        if report.applied.isEmpty {
            terminal.write("schema is up to date (\(Formatting.count(report.alreadyApplied, "migration")) applied) in \(configuration.target)")
        } else {
            for migration in report.applied {
                terminal.write("\(terminal.styled("applied", .green)) \(migration.fileName)")
            }
            terminal.write("schema is up to date in \(configuration.target)")
        }
    }
}

/// `orderflow db …`: the embedded PostgreSQL.
struct DatabaseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "Start, stop and inspect the embedded PostgreSQL.",
        discussion: """
            When neither ORDERFLOW_DATABASE_URL nor DATABASE_URL is set, orderflow keeps a private \
            PostgreSQL cluster, one per user, found as git finds a repository: in \
            $ORDERFLOW_HOME/postgres when that is set, else in the nearest .orderflow/ folder of \
            the working directory or its parents, else in your data folder \
            ($XDG_DATA_HOME/orderflow, ~/.local/share/orderflow). Commands start it when \
            needed; it keeps running in the background until `orderflow db stop`.

            Example:
              orderflow db status
              psql "$(orderflow db url)"
            """,
        subcommands: [Status.self, Start.self, Stop.self, URLCommand.self])

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show whether the embedded PostgreSQL runs, its port, folder and URL.",
            discussion: """
                The URL is shown with its password masked. With ORDERFLOW_DATABASE_URL or \
                DATABASE_URL set, shows that database instead.

                Example:
                  orderflow db status --json
                """)

        @OptionGroup var output: OutputOptions

        func run() async throws {
            let context = CommandContext.current()
            struct Result: Encodable {
                var kind: String
                var state: String
                var port: Int?
                var folder: String?
                /// Why this embedded database and not another.
                var chosenBecause: String?
                var url: String?
            }
            let result: Result
            switch context.databaseSource {
            case .url(let url, let variable):
                let target = try await context.databaseConfiguration().configuration.target
                result = Result(kind: "external (\(variable))", state: "external", port: Int(target.port), folder: nil,
                                chosenBecause: "\(variable) is set", url: Formatting.maskedDatabaseURL(url))
            case .embedded(let local):
                let reason = context.embeddedHome.reason
                switch try await local.status() {
                case .notCreated:
                    result = Result(kind: "embedded", state: "not created", port: nil, folder: local.folder.path,
                                    chosenBecause: reason, url: nil)
                case .stopped:
                    result = Result(kind: "embedded", state: "stopped", port: nil, folder: local.folder.path,
                                    chosenBecause: reason, url: nil)
                case .running(let port):
                    let url = try await local.runningConnectionString()
                    result = Result(kind: "embedded", state: "running", port: port, folder: local.folder.path,
                                    chosenBecause: reason, url: url.map(Formatting.maskedDatabaseURL))
                }
            }
            if output.json {
                try context.terminal.writeJSON(result)
                return
            }
            let terminal = context.terminal
            let state: String
            switch result.state {
            case "running": state = terminal.styled("running", .green)
            case "external": state = "external"
            default: state = terminal.styled(result.state, .yellow)
            }
            var table = TextTable(header: ["", ""])
            table.rows = [["database", result.kind], ["state", state]]
            if let port = result.port { table.append(["port", String(port)]) }
            if let folder = result.folder { table.append(["folder", folder]) }
            if let reason = result.chosenBecause { table.append(["why this one", reason]) }
            if let url = result.url { table.append(["url", url + terminal.styled("  (`orderflow db url` shows the password)", .dim)]) }
            for line in table.render(terminal).dropFirst() { terminal.write(line) }
            if result.state == "not created" || result.state == "stopped" {
                terminal.write(terminal.styled("start it with `orderflow db start` (any command that needs it starts it too)", .dim))
            }
        }
    }

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create (first time), start and migrate the embedded PostgreSQL.",
            discussion: """
                Creates the cluster with the distribution's initdb on first use, starts it on a \
                spare loopback port with a generated password, and applies the schema. Starting \
                a running cluster just shows it.

                Example:
                  orderflow db start
                """)

        func run() async throws {
            let context = CommandContext.current()
            let local = try DatabaseCommand.embedded(context, command: "start")
            let wasRunning = if case .running = try await local.status() { true } else { false }
            let url = try await local.start()
            let report = try await Schema.migrate(try DatabaseConfiguration(url))
            let terminal = context.terminal
            terminal.write("\(wasRunning ? "already running" : terminal.styled("started", .green)): \(Formatting.maskedDatabaseURL(url))")
            terminal.write("folder: \(local.folder.path)")
            for migration in report.applied { terminal.write("applied \(migration.fileName)") }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop the embedded PostgreSQL.",
            discussion: """
                A fast shutdown: open transactions roll back. The data stays; the next command \
                that needs the database starts it again.

                Example:
                  orderflow db stop
                """)

        func run() async throws {
            let context = CommandContext.current()
            let local = try DatabaseCommand.embedded(context, command: "stop")
            guard case .running = try await local.status() else {
                context.terminal.write("not running (\(local.folder.path))")
                return
            }
            try await local.stop()
            context.terminal.write("stopped (\(local.folder.path))")
        }
    }

    struct URLCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "url",
            abstract: "Print the database's full connection URL, password included.",
            discussion: """
                For psql and for ORDERFLOW_DATABASE_URL in programs that use the library. Starts \
                the embedded PostgreSQL if it is not running (its port can change between \
                starts). With ORDERFLOW_DATABASE_URL or DATABASE_URL set, prints that URL.

                Example:
                  psql "$(orderflow db url)"
                """)

        func run() async throws {
            let context = CommandContext.current()
            switch context.databaseSource {
            case .url(let url, _):
                context.terminal.write(url)
            case .embedded(let local):
                _ = try await context.databaseConfiguration()  // starts (and migrates) it when needed
                guard let url = try await local.runningConnectionString() else {
                    throw CLIError(.databaseUnavailable, "the embedded PostgreSQL did not stay up", remedy: "see `orderflow db status`")
                }
                context.terminal.write(url)
            }
        }
    }

    /// The embedded cluster, or an error when an explicit URL makes it irrelevant.
    static func embedded(_ context: CommandContext, command: String) throws -> LocalPostgres {
        switch context.databaseSource {
        case .embedded(let local):
            return local
        case .url(_, let variable):
            throw CLIError(.usage, "`orderflow db \(command)` manages the embedded PostgreSQL, but \(variable) names another database",
                           remedy: "unset \(variable) to use the embedded one, or manage that server yourself")
        }
    }
}
