import Foundation
import OrderFlowTesting
import PostgresTesting
import Testing

/// Runs the built `orderflow` binary as a user would, and captures what it prints.
///
/// The binary is built by `swift build --product orderflow` (it is not a dependency of the test
/// target, so `swift test` alone does not build it); a missing binary fails the test with that
/// advice instead of skipping.
struct CLI: Sendable {
    struct Result: Sendable, CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var seconds: Double

        var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }

        var description: String { "exit \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }

        func json() throws -> Any {
            try JSONSerialization.jsonObject(with: Data(stdout.utf8))
        }
    }

    let binary: URL
    var environment: [String: String]
    /// The folder of this CLI's files (outputs, the XDG data folder).
    let directory: URL
    /// The working directory of each run; `directory` unless a test moves it.
    var workingDirectory: URL

    /// The database the runs use.
    var databaseURL: String? { environment["ORDERFLOW_DATABASE_URL"] }

    /// A CLI whose database is `url` (passed as ORDERFLOW_DATABASE_URL); `binary` runs another
    /// build of orderflow than this one (the upgrade test's previous release).
    init(databaseURL: String?, extraEnvironment: [String: String] = [:], binary: URL? = nil) throws {
        self.binary = try binary ?? Self.locateBinary()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        workingDirectory = directory
        var environment = ProcessInfo.processInfo.environment
        for key in ["ORDERFLOW_DATABASE_URL", "DATABASE_URL", "ORDERFLOW_HOME", "ORDERFLOW_MERCHANT", "ORDERFLOW_LOG_LEVEL", "ORDERFLOW_LOG_FORMAT", "NO_COLOR",
                    "ORDERFLOW_SECRET_KEY", "ORDERFLOW_SECRET_KEY_FILE"] {
            environment[key] = nil
        }
        environment["ORDERFLOW_DATABASE_URL"] = databaseURL
        environment["USER"] = "tester"
        // Never the user's own data folder: an embedded database a test creates stays in its folder.
        environment["XDG_DATA_HOME"] = directory.appendingPathComponent("data").path
        environment["ORDERFLOW_ACTOR"] = nil
        environment.merge(extraEnvironment) { _, new in new }
        self.environment = environment
    }

    /// A CLI on a fresh, empty database of the throw-away server (`scripts/test` starts it),
    /// migrated with `orderflow migrate`.
    static func withFreshDatabase(migrated: Bool = true) async throws -> CLI {
        let configuration = try await TestDatabase.fresh(prefix: "cli")
        let cli = try CLI(databaseURL: configuration.connectionString)
        if migrated {
            let result = try await cli.run("migrate")
            #expect(result.status == 0, "\(result)")
        }
        return cli
    }

    /// Runs `orderflow arguments…` with stdin from /dev/null and waits for it to exit.
    @discardableResult
    func run(_ arguments: String..., environment extra: [String: String] = [:]) async throws -> Result {
        try await run(arguments, environment: extra)
    }

    func run(_ arguments: [String], environment extra: [String: String] = [:]) async throws -> Result {
        let process = try start(arguments, environment: extra)
        return try await process.finish()
    }

    /// Runs `orderflow-demo arguments…`, the demo's own program (what `scripts/demo` runs),
    /// built beside `orderflow`.
    func runDemo(_ arguments: String..., environment extra: [String: String] = [:]) async throws -> Result {
        let demo = binary.deletingLastPathComponent().appendingPathComponent("orderflow-demo")
        return try await start(executable: demo, arguments, environment: extra).finish()
    }

    /// Starts the binary and returns at once, for commands that run until interrupted.
    func start(_ arguments: [String], environment extra: [String: String] = [:]) throws -> RunningCLI {
        try start(executable: binary, arguments, environment: extra)
    }

    /// Runs `orderflow watch arguments…` until it has drawn the board more than `draws` times
    /// (at most 20 s), then interrupts it as Ctrl-C does and returns what it printed.
    func watchBriefly(_ arguments: [String], draws: Int = 2, environment extra: [String: String] = [:]) async throws -> Result {
        let running = try start(["watch"] + arguments, environment: extra)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let drawn = (try? String(contentsOf: running.stdoutURL, encoding: .utf8)) ?? ""
            if drawn.components(separatedBy: "orderflow watch").count > draws { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        running.interrupt()
        return try await running.finish()
    }

    /// Runs one line of POSIX shell as a person types it, with this build's `orderflow` first
    /// on PATH (for the README's examples and the hints the commands print).
    func shell(_ line: String, environment extra: [String: String] = [:]) async throws -> Result {
        let path = binary.deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        return try await start(executable: URL(fileURLWithPath: "/bin/sh"), ["-c", line],
                               environment: extra.merging(["PATH": path]) { old, _ in old }).finish()
    }

    private func start(executable: URL, _ arguments: [String], environment extra: [String: String]) throws -> RunningCLI {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment.merging(extra) { _, new in new }
        process.currentDirectoryURL = workingDirectory
        process.standardInput = FileHandle.nullDevice
        // Output goes to files: a pipe that nobody drains could fill up and block the child.
        let stdoutURL = directory.appendingPathComponent("stdout-\(UUID().uuidString)")
        let stderrURL = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        let stdoutHandle = try FileHandle(forWritingTo: stdoutURL)
        let stderrHandle = try FileHandle(forWritingTo: stderrURL)
        process.standardOutput = stdoutHandle
        process.standardError = stderrHandle
        let started = Date()
        defer {
            // The child has its own copies; the parent's would only leak.
            try? stdoutHandle.close()
            try? stderrHandle.close()
        }
        try process.run()
        return RunningCLI(process: process, stdoutURL: stdoutURL, stderrURL: stderrURL, started: started)
    }

    // MARK: Finding the binary

    struct BinaryMissing: Error, CustomStringConvertible {
        var looked: [String]
        var description: String {
            "the orderflow binary is not built: run `swift build --product orderflow` (with the same --scratch-path as `swift test`) before the CLI tests; looked in "
                + looked.joined(separator: ", ")
        }
    }

    /// `ORDERFLOW_CLI` when set (e.g. a release build), else next to the test bundle (the same
    /// build), else the newest `.build*/debug/orderflow` of this checkout.
    static func locateBinary() throws -> URL {
        let fileManager = FileManager.default
        var candidates: [URL] = []
        if let explicit = ProcessInfo.processInfo.environment["ORDERFLOW_CLI"], !explicit.isEmpty {
            candidates.append(URL(fileURLWithPath: explicit))
        }
        let testExecutable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = testExecutable.deletingLastPathComponent()
        // On macOS the test binary sits inside `X.xctest/Contents/MacOS`.
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("orderflow"))
            directory = directory.deletingLastPathComponent()
        }
        if let found = candidates.first(where: { fileManager.isExecutableFile(atPath: $0.path) }) {
            return found
        }
        // The checkout's build folders.
        let repository = Fixtures.repository
        var built: [(URL, Date)] = []
        let folders = (try? fileManager.contentsOfDirectory(atPath: repository.path))?.filter { $0.hasPrefix(".build") } ?? []
        for folder in folders {
            let binary = repository.appendingPathComponent(folder).appendingPathComponent("debug/orderflow")
            if fileManager.isExecutableFile(atPath: binary.path),
               let modified = try? fileManager.attributesOfItem(atPath: binary.path)[.modificationDate] as? Date
            {
                built.append((binary, modified))
            }
        }
        if let newest = built.max(by: { $0.1 < $1.1 }) { return newest.0 }
        throw BinaryMissing(looked: candidates.map(\.path) + folders.map { "\($0)/debug/orderflow" })
    }
}

/// A started `orderflow` process.
struct RunningCLI: @unchecked Sendable {
    // Process is not Sendable; a RunningCLI is used by one test task at a time.
    let process: Process
    let stdoutURL: URL
    let stderrURL: URL
    let started: Date

    func interrupt() {
        process.interrupt()
    }

    /// Waits for the exit (at most 60 s) and reads the output.
    func finish() async throws -> CLI.Result {
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                Issue.record("orderflow \(process.arguments ?? []) did not exit within 60 s")
                break
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        process.waitUntilExit()
        let seconds = Date().timeIntervalSince(started)
        let stdout = (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: stdoutURL)
        try? FileManager.default.removeItem(at: stderrURL)
        return CLI.Result(status: process.terminationStatus, stdout: stdout, stderr: stderr, seconds: seconds)
    }
}

/// Files of this checkout (the shipped workflows).
enum Fixtures {
    static let repository = EngineFixture.repositoryRoot
    static var foodOrder: String { repository.appendingPathComponent("workflows/food-order.yaml").path }
    static var ride: String { repository.appendingPathComponent("workflows/ride.yaml").path }

    /// Writes `text` to a temporary file named `name` and returns its path.
    static func file(_ name: String, _ text: String) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-fixtures-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    /// A small workflow where `pa` is ambiguous from `pending` (packed, paid).
    static let counterWorkflow = """
        name: counter
        activity:
          attributes-type: CounterAttributes
          attributes:
            label: string(20)
            itemCount: int
          content-state:
            status: enum(pending, packed, paid, done)
        lifecycle:
          start: app
        states:
          pending:
            initial: true
            content: {status: pending}
          packed:
            content: {status: packed}
          paid:
            content: {status: paid}
          done:
            final: true
            content: {status: done}
        transitions:
          - {from: pending, to: packed}
          - {from: pending, to: paid}
          - from: [packed, paid]
            to: done
            input: {note: string(20)?, count: int?}
        """
}

/// The folders of this machine that output may name: the checkout, the working and temporary
/// directories, the home directory. Checks for secrets by their shape (a long hex or base64
/// run) look at output with these paths taken out, so that a checkout in a folder named for
/// a commit (`/builds/3f9c…e1/`, as many CI systems do) is not read as a leaked token.
enum KnownPaths {
    static var all: [String] {
        let paths: [String] = [
            Fixtures.repository.standardizedFileURL.path,
            FileManager.default.currentDirectoryPath,
            NSTemporaryDirectory(),
            FileManager.default.homeDirectoryForCurrentUser.path,
        ]
        var trimmed: Set<String> = []
        for path in paths {
            let path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
            if path.count > 1 { trimmed.insert(path) }
        }
        // Longest first, so that a folder inside another is taken out whole.
        return trimmed.sorted { $0.count > $1.count }
    }

    /// `text` with every known path replaced by `<path>`.
    static func removed(from text: String) -> String {
        all.reduce(text) { $0.replacingOccurrences(of: $1, with: "<path>") }
    }
}
