import Foundation
import Logging
import PGKit

/// A private PostgreSQL cluster in a project-local folder, for the embedded default.
///
/// `start()` creates the cluster on first use (the distribution's `initdb`), starts it on a
/// spare loopback port with a generated password and returns the connection string; a running
/// cluster is reused. PostgreSQL refuses to run as root, so under root the server runs as the
/// unprivileged `postgres` user (created by Debian's package), through `runuser`.
public struct LocalPostgres: Sendable {
    public enum Status: Sendable, Equatable {
        case notCreated
        case stopped
        case running(port: Int)
    }

    public struct Error: Swift.Error, CustomStringConvertible, Sendable {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// The folder that holds everything (`.orderflow/postgres`).
    public let folder: URL
    public let databaseName = "orderflow"
    public let userName = "orderflow"
    private let logger: Logger

    public init(folder: URL, logger: Logger = Logger(label: "orderflow.localdb")) {
        self.folder = folder.standardizedFileURL
        self.logger = logger
    }

    // MARK: Layout

    /// The cluster's files. When the server user cannot reach the project folder (a checkout
    /// under /root, say), they live in a folder of their own under /var/tmp instead.
    var serverFolder: URL {
        guard Self.isRoot, !serverUserCanTraverse(folder) else { return folder }
        var hash: UInt64 = 14_695_981_039_346_656_037
        for byte in folder.path.utf8 { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
        return URL(fileURLWithPath: "/var/tmp/orderflow-postgres-\(String(hash, radix: 16))")
    }
    var dataDirectory: URL { serverFolder.appendingPathComponent("data") }
    var logFile: URL { serverFolder.appendingPathComponent("server.log") }
    /// Port and password, readable by the invoking user only.
    var credentialsFile: URL { folder.appendingPathComponent("credentials") }

    static var isRoot: Bool { geteuid() == 0 }

    // MARK: Commands

    public func status() async throws -> Status {
        let binaries = try PostgresBinaries.locate()
        guard FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) else {
            return .notCreated
        }
        let result = try await run(binaries.pgCtl, ["-D", dataDirectory.path, "status"], asServerUser: true)
        guard result.status == 0, let port = runningPort() else { return .stopped }
        return .running(port: port)
    }

    /// Creates the cluster if needed, starts it if stopped, and returns its connection string.
    @discardableResult
    public func start() async throws -> String {
        let binaries = try PostgresBinaries.locate()
        if case .notCreated = try await status() { try await create(binaries) }
        guard var credentials = readCredentials() else {
            throw Error("the local database in \(folder.path) has lost its credentials file; remove \(folder.path) and run again to start afresh")
        }
        if case .running(let port) = try await status() {
            if port != credentials.port {
                credentials.port = port
                try writeCredentials(credentials)
            }
            return connectionString(credentials)
        }
        // Keep the port of the last run when it is still free, so that URLs stay valid.
        let port = credentials.port > 0 && Self.isFree(port: credentials.port) ? credentials.port : try Self.sparePort()
        credentials.port = port
        try writeCredentials(credentials)
        logger.info("starting local PostgreSQL", metadata: ["localdb.folder": "\(serverFolder.path)", "localdb.port": "\(port)"])
        let result = try await run(binaries.pgCtl, [
            "-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "60",
            "-o", "-p \(port) -c listen_addresses=127.0.0.1 -c unix_socket_directories=''", "start",
        ], asServerUser: true)
        guard result.status == 0 else {
            throw Error("the local PostgreSQL did not start: \(result.output.lastLines(5)); see \(logFile.path)")
        }
        let url = connectionString(credentials)
        try await createDatabaseIfNeeded(credentials)
        return url
    }

    /// Stops the cluster if it is running (fast shutdown: open transactions roll back).
    public func stop() async throws {
        let binaries = try PostgresBinaries.locate()
        guard case .running = try await status() else { return }
        let result = try await run(binaries.pgCtl, ["-D", dataDirectory.path, "-m", "fast", "-w", "stop"], asServerUser: true)
        guard result.status == 0 else { throw Error("could not stop the local PostgreSQL: \(result.output.lastLines(3))") }
    }

    /// The connection string of the running cluster, or nil when it is not running.
    public func runningConnectionString() async throws -> String? {
        guard case .running(let port) = try await status(), var credentials = readCredentials() else { return nil }
        credentials.port = port
        return connectionString(credentials)
    }

    // MARK: Creation

    private func create(_ binaries: PostgresBinaries) async throws {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: folder, withIntermediateDirectories: true)
        try fileManager.createDirectory(at: serverFolder, withIntermediateDirectories: true)
        if fileManager.fileExists(atPath: dataDirectory.path) {
            // A half-made cluster from an interrupted initdb: start that step again.
            try fileManager.removeItem(at: dataDirectory)
        }
        let password = Self.randomPassword()
        let passwordFile = serverFolder.appendingPathComponent("initdb-password")
        try Self.writeSecretFile(Data((password + "\n").utf8), to: passwordFile)
        defer { try? fileManager.removeItem(at: passwordFile) }
        if Self.isRoot {
            let user = try Self.serverUser()
            try chown(serverFolder, to: user)
            try chown(passwordFile, to: user)
        }
        logger.info("creating local PostgreSQL cluster", metadata: ["localdb.folder": "\(serverFolder.path)"])
        let result = try await run(binaries.initdb, [
            "-D", dataDirectory.path, "-U", userName, "--pwfile", passwordFile.path,
            "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
        ], asServerUser: true)
        guard result.status == 0 else {
            throw Error("initdb failed to create the local database in \(dataDirectory.path): \(result.output.lastLines(5))")
        }
        try writeCredentials(Credentials(port: 0, password: password))
    }

    private func createDatabaseIfNeeded(_ credentials: Credentials) async throws {
        var admin = credentials
        admin.database = "postgres"
        let configuration = try PostgresConfiguration(connectionString(admin))
        try await PostgresConnection.withConnection(configuration) { connection in
            let exists = try await connection.query(
                PostgresQuery("SELECT count(*) AS n FROM pg_database WHERE datname = $1", databaseName)
            ).single().decode("n", as: Int.self) > 0
            if !exists { try await connection.execute("CREATE DATABASE orderflow") }
        }
    }

    // MARK: Credentials

    struct Credentials: Codable {
        var port: Int
        var password: String
        var database: String?
    }

    private func readCredentials() -> Credentials? {
        guard let data = try? Data(contentsOf: credentialsFile) else { return nil }
        return try? JSONDecoder().decode(Credentials.self, from: data)
    }

    private func writeCredentials(_ credentials: Credentials) throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Self.writeSecretFile(try JSONEncoder().encode(credentials), to: credentialsFile)
    }

    /// Writes a file that holds a secret so that no other user can read it at any moment: a new
    /// file created 0600 (not chmod-ed after it was written, which leaves a window), filled,
    /// flushed, then renamed over `url` in one step.
    static func writeSecretFile(_ data: Data, to url: URL) throws {
        let temporary = url.path + ".\(getpid()).tmp"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw Error("cannot create \(temporary): \(String(cString: strerror(errno)))")
        }
        var failure: Int32 = 0
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += written
            }
        }
        if failure == 0, fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        guard failure == 0, rename(temporary, url.path) == 0 else {
            let reason = failure != 0 ? failure : errno
            unlink(temporary)
            throw Error("cannot write \(url.path): \(String(cString: strerror(reason)))")
        }
    }

    private func connectionString(_ credentials: Credentials) -> String {
        let database = credentials.database ?? databaseName
        return "postgresql://\(userName):\(credentials.password)@127.0.0.1:\(credentials.port)/\(database)"
    }

    private func runningPort() -> Int? {
        // postmaster.pid: line 4 is the port.
        guard let text = try? String(contentsOf: dataDirectory.appendingPathComponent("postmaster.pid"), encoding: .utf8)
        else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count > 3 else { return nil }
        return Int(lines[3].trimmingCharacters(in: .whitespaces))
    }

    // MARK: Helpers

    static func randomPassword() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<24).map { _ in String(UInt8.random(in: 0..<16, using: &generator), radix: 16) }.joined()
    }

    /// Asks the kernel for a free loopback port.
    public static func sparePort() throws -> Int {
        try bindLoopback(port: 0)
    }

    static func isFree(port: Int) -> Bool {
        (try? bindLoopback(port: port)) != nil
    }

    /// Binds a loopback socket to `port` (0: any) and returns the port it got.
    private static func bindLoopback(port: Int) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Error("cannot open a socket to find a free port") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
            }
        }
        guard bound else { throw Error("cannot find a free local port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func serverUser() throws -> (name: String, uid: uid_t, gid: gid_t) {
        for name in ["postgres", "nobody"] {
            if let entry = getpwnam(name) { return (name, entry.pointee.pw_uid, entry.pointee.pw_gid) }
        }
        throw Error("running as root, and there is no unprivileged 'postgres' user to run PostgreSQL as; install the postgresql package or run as an ordinary user")
    }

    private func serverUserCanTraverse(_ url: URL) -> Bool {
        guard let user = try? Self.serverUser() else { return false }
        // Every ancestor must be searchable by the server user (other-execute, or its own).
        var path = url.deletingLastPathComponent()
        while true {
            var info = stat()
            if stat(path.path, &info) == 0 {
                let mode = info.st_mode
                let searchable = (mode & S_IXOTH) != 0
                    || (info.st_uid == user.uid && (mode & S_IXUSR) != 0)
                    || (info.st_gid == user.gid && (mode & S_IXGRP) != 0)
                if !searchable { return false }
            }
            if path.path == "/" { return true }
            path = path.deletingLastPathComponent()
        }
    }

    private func chown(_ url: URL, to user: (name: String, uid: uid_t, gid: gid_t)) throws {
        guard Foundation.chown(url.path, user.uid, user.gid) == 0 else {
            throw Error("cannot hand \(url.path) to the '\(user.name)' user that runs PostgreSQL")
        }
    }

    /// Runs a PostgreSQL program, as the server user when we are root, and returns its exit
    /// status and output.
    private func run(_ executable: String, _ arguments: [String], asServerUser: Bool = false) async throws -> (status: Int32, output: String) {
        var command = [executable] + arguments
        if asServerUser && Self.isRoot {
            command = ["/usr/sbin/runuser", "-u", try Self.serverUser().name, "--"] + command
        }
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-pg-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: outputFile) }
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C.UTF-8"
        let status = try await ChildProcess.run(command, environment: environment, outputPath: outputFile.path)
        let output = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
        return (status, output)
    }
}

/// Where the distribution put `initdb` and `pg_ctl`.
struct PostgresBinaries {
    var initdb: String
    var pgCtl: String

    static func locate() throws -> PostgresBinaries {
        let fileManager = FileManager.default
        var candidates: [String] = []
        // Debian keeps the server programs out of PATH, under /usr/lib/postgresql/<major>/bin.
        if let versions = try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
                candidates.append("/usr/lib/postgresql/\(version)/bin")
            }
        }
        candidates += (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for directory in candidates {
            let initdb = directory + "/initdb"
            let pgCtl = directory + "/pg_ctl"
            if fileManager.isExecutableFile(atPath: initdb) && fileManager.isExecutableFile(atPath: pgCtl) {
                return PostgresBinaries(initdb: initdb, pgCtl: pgCtl)
            }
        }
        throw LocalPostgres.Error(
            "PostgreSQL is not installed (no initdb/pg_ctl found): install it with `sudo apt-get install postgresql`, or set ORDERFLOW_DATABASE_URL to use an existing server")
    }
}

extension String {
    func lastLines(_ count: Int) -> String {
        split(whereSeparator: \.isNewline).suffix(count).joined(separator: " | ")
    }
}
