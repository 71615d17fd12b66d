import ConsoleOutput
import Foundation
import LocalPostgres
import Logging
import OrderFlow

/// What every command needs from its surroundings, read once at the edge: the environment,
/// the terminal, a logger, and the one place that decides which database to use.
///
/// Shared by `orderflow` and `orderflow-demo`; every command uses it the same way:
///
/// ```swift
/// let context = CommandContext.current()
/// try await context.withEngine(maximumConnections: 8) { engine in … }
/// ```
public struct CommandContext: Sendable {
    public let environment: [String: String]
    public let terminal: Terminal
    public let logger: Logger
    /// The working directory, under which the embedded database lives by default.
    public let workingDirectory: URL

    public init(environment: [String: String], terminal: Terminal, logger: Logger, workingDirectory: URL) {
        self.environment = environment
        self.terminal = terminal
        self.logger = logger
        self.workingDirectory = workingDirectory
    }

    /// The context of this process.
    public static func current() -> CommandContext {
        let environment = ProcessInfo.processInfo.environment
        return CommandContext(
            environment: environment,
            terminal: Terminal.current(environment: environment),
            logger: Logger(label: "orderflow.cli"),
            workingDirectory: URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true))
    }

    // MARK: Logging

    /// Log level of the process: `ORDERFLOW_LOG_LEVEL` (trace…critical), else `warning` so that
    /// command output stays clean. Long-running commands raise their own loggers to `info`.
    public static func logLevel(environment: [String: String]) -> Logger.Level {
        environment["ORDERFLOW_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .warning
    }

    /// Installs the process's log handler on standard error — text with values escaped, or
    /// JSON lines (`--log-format`, `ORDERFLOW_LOG_FORMAT`) — and returns `arguments` without
    /// `--log-format`. Called once, by each program's `main`, before the arguments are parsed:
    /// the format is every command's, and logging starts before a command runs.
    ///
    /// - Throws: `CLIError(.usage)` for a format other than `text` or `json`; the handler is
    ///   then the text one, so that the message is read as before.
    @discardableResult
    public static func bootstrapLogging(arguments: [String] = []) throws -> [String] {
        let environment = ProcessInfo.processInfo.environment
        let level = logLevel(environment: environment)
        let chosen: (format: LogFormat, remaining: [String])
        do {
            chosen = try LogFormatSetting.choose(arguments: arguments, environment: environment)
        } catch {
            LoggingSystem.bootstrap { label in EscapingLogHandler(label: label, level: level) }
            throw error
        }
        LogFormat.process = chosen.format
        LoggingSystem.bootstrap { label in chosen.format.handler(label: label, level: level) }
        return chosen.remaining
    }

    /// A logger for a part of a command, at `ORDERFLOW_LOG_LEVEL` when set, else at
    /// `defaultLevel` (long-running commands such as `worker run` pass `.info`).
    public func logger(_ label: String, defaultLevel: Logger.Level = .warning) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = environment["ORDERFLOW_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? defaultLevel
        return logger
    }

    /// Who is acting, for an order's history: `ORDERFLOW_ACTOR`, else `cli:<user>`.
    public var actor: String {
        if let actor = environment["ORDERFLOW_ACTOR"], !actor.isEmpty { return actor }
        let user = environment["USER"] ?? environment["LOGNAME"] ?? getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) }
        return "cli:" + (user ?? "unknown")
    }

    /// The merchant whose orders the commands see: `ORDERFLOW_MERCHANT`, else `default`.
    public var merchantID: String {
        environment["ORDERFLOW_MERCHANT"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
    }

    /// ``merchantID``, checked: one the engine cannot store is a usage error naming
    /// `ORDERFLOW_MERCHANT`. Commands call it before they touch the database.
    public func checkedMerchantID() throws -> String {
        let merchantID = self.merchantID
        do {
            try OrderFlowConfiguration.validate(merchantID: merchantID)
        } catch let error as OrderFlowError {
            throw CLIError(.usage, "ORDERFLOW_MERCHANT is not usable: \(error.message)",
                           remedy: "set it to your merchant's id, or unset it for \"default\"")
        }
        return merchantID
    }

    /// `url` relative to the working directory when inside it (`.orderflow/postgres`), else
    /// absolute: what a person can paste into the next command from here.
    public func displayPath(_ url: URL) -> String {
        let path = url.standardizedFileURL.path
        let base = workingDirectory.standardizedFileURL.path
        let prefix = base.hasSuffix("/") ? base : base + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }

    // MARK: Database selection

    /// Where the database comes from.
    public enum DatabaseSource: Sendable {
        /// A URL from the named environment variable.
        case url(String, variable: String)
        /// The private cluster in ``embeddedHome``.
        case embedded(LocalPostgres)
    }

    /// `ORDERFLOW_DATABASE_URL`, else `DATABASE_URL`, else the embedded cluster.
    public var databaseSource: DatabaseSource {
        for variable in ["ORDERFLOW_DATABASE_URL", "DATABASE_URL"] {
            if let url = environment[variable]?.trimmingCharacters(in: .whitespaces), !url.isEmpty {
                return .url(url, variable: variable)
            }
        }
        return .embedded(localPostgres)
    }

    /// Where the embedded database lives, and why there.
    public struct EmbeddedHome: Sendable, Equatable {
        /// The folder holding `postgres/` (a `.orderflow` folder, or the user's data folder).
        public var folder: URL
        /// Why this one, for `db status` and the line said when one is created.
        public var reason: String
    }

    /// The embedded database's home, found as git finds a repository: `ORDERFLOW_HOME` when
    /// set; else the nearest `.orderflow/` folder in the working directory or its parents; else
    /// the user's data folder (`$XDG_DATA_HOME/orderflow`, `~/.local/share/orderflow`). One
    /// database per user, whatever folder a command runs in.
    public var embeddedHome: EmbeddedHome {
        if let home = environment["ORDERFLOW_HOME"], !home.isEmpty {
            return EmbeddedHome(folder: URL(fileURLWithPath: home, isDirectory: true).standardizedFileURL, reason: "ORDERFLOW_HOME is set")
        }
        var folder = workingDirectory.standardizedFileURL
        while true {
            let candidate = folder.appendingPathComponent(".orderflow", isDirectory: true)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), isDirectory.boolValue {
                return EmbeddedHome(folder: candidate, reason: "the nearest .orderflow folder to the working directory")
            }
            let parent = folder.deletingLastPathComponent().standardizedFileURL
            if parent.path == folder.path { break }
            folder = parent
        }
        let data: URL
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            data = URL(fileURLWithPath: xdg, isDirectory: true)
        } else {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
            data = URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".local/share", isDirectory: true)
        }
        return EmbeddedHome(
            folder: data.appendingPathComponent("orderflow", isDirectory: true).standardizedFileURL,
            reason: "your data folder: no .orderflow folder in the working directory or its parents, and ORDERFLOW_HOME is not set")
    }

    /// The embedded cluster, in ``embeddedHome``'s `postgres` folder.
    public var localPostgres: LocalPostgres {
        LocalPostgres(folder: embeddedHome.folder.appendingPathComponent("postgres", isDirectory: true), logger: logger)
    }

    /// The database to use, ready for work: an explicit URL is parsed (its schema is checked when
    /// the engine opens); the embedded cluster is started if needed and migrated when started.
    public func databaseConfiguration() async throws -> (configuration: DatabaseConfiguration, source: DatabaseSource) {
        let source = databaseSource
        switch source {
        case .url(let url, let variable):
            do {
                return (try DatabaseConfiguration(url), source)
            } catch {
                throw CLIError(.usage, "\(variable) is not a usable database URL: \(error.message)")
            }
        case .embedded(let local):
            // A variable that is set but blank (`ORDERFLOW_DATABASE_URL=$UNSET_VAR`) is a mistake,
            // not a wish for the embedded database: using it would put the data somewhere else.
            if let blank = ["ORDERFLOW_DATABASE_URL", "DATABASE_URL"].first(where: { environment[$0] != nil }) {
                throw CLIError(.usage, "\(blank) is set but empty",
                               remedy: "give a URL like postgresql://user@host:5432/database, or unset it to use the embedded database")
            }
            // Reusing a running cluster costs one `pg_ctl status`; starting one also migrates it.
            if let url = try await local.runningConnectionString() {
                return (try DatabaseConfiguration(url), source)
            }
            if case .notCreated = try await local.status() {
                // A new database where staff expected their orders is a surprise: say where, and why.
                let home = embeddedHome
                Terminal.writeError("orderflow: creating a new embedded PostgreSQL in \(local.folder.path) (\(home.reason))")
            }
            let configuration = try DatabaseConfiguration(try await local.start())
            _ = try await Schema.migrate(configuration)
            return (configuration, source)
        }
    }

    // MARK: Engine

    /// Runs `body` with an engine on the selected database and shuts the engine down afterwards.
    ///
    /// Before `body`, one cheap query checks that the schema is current: the embedded database
    /// is migrated on the spot; an explicit URL without the schema fails with advice to run
    /// `orderflow migrate`. The CLI's short commands use one connection.
    public func withEngine<T: Sendable>(
        maximumConnections: Int = 1,
        _ body: (OrderFlowEngine) async throws -> T
    ) async throws -> T {
        let merchantID = try checkedMerchantID()
        let (configuration, source) = try await databaseConfiguration()
        return try await withEngine(
            OrderFlowConfiguration(database: configuration, merchantID: merchantID, maximumConnections: maximumConnections),
            source: source, body)
    }

    /// Runs `body` with an engine of the given configuration, after the schema check above.
    public func withEngine<T: Sendable>(
        _ configuration: OrderFlowConfiguration, source: DatabaseSource,
        _ body: (OrderFlowEngine) async throws -> T
    ) async throws -> T {
        let engine = OrderFlowEngine(configuration: configuration, logger: logger)
        do {
            try await ensureSchema(of: engine, configuration: configuration.database, source: source)
            let value = try await body(engine)
            await engine.shutdown()
            return value
        } catch {
            await engine.shutdown()
            throw error
        }
    }

    /// Compares the newest applied migration with the newest bundled one (one query on the
    /// engine's own connection, which the command then reuses).
    func ensureSchema(of engine: OrderFlowEngine, configuration: DatabaseConfiguration, source: DatabaseSource) async throws {
        let status = try await engine.schemaStatus()
        guard !status.isCurrent else { return }
        switch source {
        case .embedded:
            _ = try await Schema.migrate(configuration)
        case .url:
            if status.applied == 0 {
                throw CLIError(.databaseUnavailable, "the database has no OrderFlow schema: run `orderflow migrate`")
            }
            throw CLIError(.databaseUnavailable, "the database schema is at migration \(status.applied), this orderflow needs \(status.bundled)",
                           remedy: "run `orderflow migrate`")
        }
    }
}
