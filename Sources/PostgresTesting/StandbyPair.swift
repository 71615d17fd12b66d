import Foundation
import LocalPostgres
import PGKit

/// Two PostgreSQL servers of one test on loopback: a primary and a streaming-replication
/// standby made from it with `pg_basebackup`, the standby synchronous (`synchronous_standby_names
/// = '*'` on the primary), so that every commit the primary acknowledges is on the standby too.
///
/// The test plays the failover manager: it kills a server with SIGKILL (the postmaster and
/// every backend at once, as when its machine dies), promotes the other (`pg_ctl promote`), and
/// brings the old primary back as a standby of the new one (`pg_rewind`). Servers run as the
/// `postgres` user when the tests run as root; authentication is `trust` on loopback.
public final class StandbyPair: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The two servers' ports; node 0 starts as the primary.
    public let ports: [Int]
    public let folder: URL
    public static let user = "orderflow"
    public static let database = "orderflow"
    private let binaries: URL

    public init() throws {
        guard let binaries = Self.binaryDirectory() else {
            throw Failure(description: "PostgreSQL's server programs (pg_basebackup, pg_rewind) are not installed: apt-get install postgresql")
        }
        self.binaries = binaries
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-standby-\(UUID().uuidString.prefix(8))")
        var ports: [Int] = []
        while ports.count < 2 {
            let port = try LocalPostgres.sparePort()
            if !ports.contains(port) { ports.append(port) }
        }
        self.ports = ports
    }

    /// Every server, in order, for libpq to find the one that takes writes.
    public var url: String {
        "postgresql://\(Self.user)@" + ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
            + "/\(Self.database)?target_session_attrs=read-write&connect_timeout=2"
    }

    /// One server only, whatever its role.
    public func url(node: Int, database: String = StandbyPair.database) -> String {
        "postgresql://\(Self.user)@127.0.0.1:\(ports[node])/\(database)?connect_timeout=2"
    }

    func dataDirectory(_ node: Int) -> String { folder.appendingPathComponent("node\(node)").path }
    func logFile(_ node: Int) -> String { folder.appendingPathComponent("node\(node).log").path }

    // MARK: Life cycle

    /// Creates node 0 as the primary (with the test database) and node 1 as its synchronous
    /// standby, and waits until the standby is in sync.
    public func start() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        if geteuid() == 0, let postgres = getpwnam("postgres") {
            chown(folder.path, postgres.pointee.pw_uid, postgres.pointee.pw_gid)
        }
        try await run("initdb", ["-D", dataDirectory(0), "-U", Self.user, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8",
            // pg_rewind needs checksums or wal_log_hints, which a crashed server's own
            // recovery run (started without our command line) must find in its files.
            "--data-checksums",
        ])
        // Enough WAL kept for a rewound former primary to catch up; in the file, so that the
        // crash recovery pg_rewind runs (without our command line) keeps it too.
        let settings = try FileHandle(forWritingTo: URL(fileURLWithPath: dataDirectory(0) + "/postgresql.conf"))
        try settings.seekToEnd()
        try settings.write(contentsOf: Data("wal_keep_size = 256MB\n".utf8))
        try settings.close()
        try await startServer(0)
        try await admin(0) { connection in try await connection.execute("CREATE DATABASE orderflow") }
        try await run("pg_basebackup", [
            "-h", "127.0.0.1", "-p", "\(ports[0])", "-U", Self.user, "-D", dataDirectory(1), "-X", "stream", "-R",
            "-c", "fast",
        ])
        try await startServer(1)
        try await requireSynchronousStandby(primary: 0)
    }

    /// Makes `primary` wait for a standby's flush before it acknowledges a commit, and waits
    /// until one is connected and in sync.
    public func requireSynchronousStandby(primary: Int) async throws {
        try await admin(primary) { connection in
            try await connection.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            try await connection.execute("SELECT pg_reload_conf()")
        }
        try await waitUntil("node \(primary)'s standby is in sync", timeout: .seconds(30)) {
            try await self.admin(primary) { connection in
                try await connection.query(PostgresQuery(
                    "SELECT count(*) AS n FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'"
                )).single().decode("n", as: Int.self) > 0
            }
        }
    }

    /// SIGKILL to the server and every process of it at once: nothing is shut down, written
    /// or said goodbye to, as when its machine is gone.
    public func kill(_ node: Int) throws {
        guard let text = try? String(contentsOfFile: dataDirectory(node) + "/postmaster.pid", encoding: .utf8),
              let first = text.split(separator: "\n").first, let postmaster = Int32(first)
        else { throw Failure(description: "node \(node) is not running (no postmaster.pid)") }
        var victims = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let end = stat.lastIndex(of: ")")
            else { continue }
            // "pid (comm) state ppid …": the fields after the command's closing parenthesis.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { victims.append(pid) }
        }
        for pid in victims { Foundation.kill(pid, SIGKILL) }
    }

    /// Ends recovery on a standby: it takes writes from now on, on a new timeline.
    public func promote(_ node: Int) async throws {
        try await run("pg_ctl", ["-D", dataDirectory(node), "-w", "-t", "60", "promote"])
    }

    /// Brings a killed former primary back as a standby of `primary`: `pg_rewind` winds its
    /// files back to where the timelines parted (finishing its crash recovery first), then it
    /// starts streaming from the new primary.
    public func rejoinAsStandby(_ node: Int, following primary: Int) async throws {
        // pg_rewind reads the new timeline from the control file, written by a checkpoint.
        try await admin(primary) { connection in try await connection.execute("CHECKPOINT") }
        try? FileManager.default.removeItem(atPath: dataDirectory(node) + "/postmaster.pid")
        try await run("pg_rewind", [
            "-D", dataDirectory(node), "-R",
            "--source-server=host=127.0.0.1 port=\(ports[primary]) user=\(Self.user) dbname=postgres",
        ])
        try await startServer(node)
    }

    /// Stops both servers (immediately) and removes their files.
    public func destroy() async {
        for node in 0..<2 where FileManager.default.fileExists(atPath: dataDirectory(node) + "/postmaster.pid") {
            try? await run("pg_ctl", ["-D", dataDirectory(node), "-m", "immediate", "-w", "stop"])
        }
        try? FileManager.default.removeItem(at: folder)
    }

    /// Runs `body` on a connection of its own to one server (superuser, `postgres` database
    /// unless told otherwise).
    @discardableResult
    public func admin<T: Sendable>(
        _ node: Int, database: String = "postgres", _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await PostgresConnection.withConnection(try PostgresConfiguration(url(node: node, database: database)), body)
    }

    // MARK: Helpers

    private func startServer(_ node: Int) async throws {
        try await run("pg_ctl", [
            "-D", dataDirectory(node), "-l", logFile(node), "-w", "-t", "60",
            "-o", "-p \(ports[node]) -c listen_addresses=127.0.0.1 -c unix_socket_directories=''",
            "start",
        ])
    }

    private func waitUntil(_ what: String, timeout: Duration, _ condition: @Sendable () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (try? await condition()) == true { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw Failure(description: "timed out after \(timeout) waiting until \(what)")
    }

    /// Runs a PostgreSQL program as the server's user; fails with the end of its output.
    private func run(_ program: String, _ arguments: [String]) async throws {
        var command = [binaries.appendingPathComponent(program).path] + arguments
        if geteuid() == 0 { command = ["/usr/sbin/runuser", "-u", "postgres", "--"] + command }
        let output = folder.deletingLastPathComponent().appendingPathComponent("orderflow-standby-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: output) }
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C.UTF-8"
        let status = try await ChildProcess.run(command, environment: environment, outputPath: output.path)
        guard status == 0 else {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            let tail = text.split(whereSeparator: \.isNewline).suffix(6).joined(separator: " | ")
            throw Failure(description: "\(program) \(arguments.first ?? "") failed (exit \(status)): \(tail)")
        }
    }

    /// Debian keeps the server programs under /usr/lib/postgresql/<major>/bin: the newest.
    private static func binaryDirectory() -> URL? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }
            .map { URL(fileURLWithPath: "\(root)/\($0)/bin") }
            .first { FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("pg_rewind").path) }
    }
}
