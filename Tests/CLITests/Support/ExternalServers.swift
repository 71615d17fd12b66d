import Foundation
import Testing

/// Debian's haproxy and pgbouncer, run by the tests as an operator runs them: a config file, a
/// process, stopped at the end. `scripts/setup` installs both; a missing one fails the test with
/// that advice instead of skipping.
enum ExternalServer {
    struct Missing: Error, CustomStringConvertible {
        var program: String
        var description: String { "\(program) is not installed: run scripts/setup --test-deps (or apt-get install \(program))" }
    }

    static func binary(_ name: String) throws -> String {
        for folder in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
            let path = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw Missing(program: name)
    }

    /// A loopback port nobody listens on now (the kernel's pick, released at once).
    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw CocoaError(.fileNoSuchFile) }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(socket, pointer, length) == 0 && getsockname(socket, pointer, &length) == 0
            }
        }
        guard bound else { throw CocoaError(.fileWriteUnknown) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A folder for a server's config, log and pid file that an unprivileged server may write.
    static func folder(_ name: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o777)
        return folder
    }

    /// Waits until something accepts connections on the loopback `port` (at most 20 s).
    static func waitUntilListening(_ port: Int, what: String) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(socket)
            if connected { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw SoakFailure(description: "\(what) never listened on 127.0.0.1:\(port)")
    }
}

/// PgBouncer in front of the test server, in `mode` (session or transaction pooling).
struct PgBouncer: Sendable {
    let port: Int
    let folder: URL
    /// `databaseURL` with PgBouncer's port instead of the server's.
    let url: String

    static func start(before databaseURL: String, mode: String) async throws -> PgBouncer {
        let binary = try ExternalServer.binary("pgbouncer")
        guard let server = URLComponents(string: databaseURL), let host = server.host, let serverPort = server.port, let user = server.user
        else { throw SoakFailure(description: "not a database URL: the test server's") }
        let port = try ExternalServer.freePort()
        let folder = try ExternalServer.folder("pgbouncer")
        try """
            [databases]
            * = host=\(host) port=\(serverPort)
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(folder.path)/users.txt
            pool_mode = \(mode)
            max_client_conn = 200
            default_pool_size = 20
            logfile = \(folder.path)/pgbouncer.log
            pidfile = \(folder.path)/pgbouncer.pid
            """.write(to: folder.appendingPathComponent("pgbouncer.ini"), atomically: true, encoding: .utf8)
        try "\"\(user)\" \"\"\n".write(to: folder.appendingPathComponent("users.txt"), atomically: true, encoding: .utf8)
        // PgBouncer refuses to run as root: under root, as the server's own user.
        let process = Process()
        if getuid() == 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", "postgres", "--", binary, "-d", folder.appendingPathComponent("pgbouncer.ini").path]
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["-d", folder.appendingPathComponent("pgbouncer.ini").path]
        }
        try process.run()
        // It forks into the background and exits (waited for by polling: Foundation's
        // waitUntilExit can hang inside a Swift Testing task).
        let deadline = ContinuousClock.now + .seconds(20)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try await ExternalServer.waitUntilListening(port, what: "pgbouncer")
        var pooled = server
        pooled.port = port
        // PgBouncer speaks plain TCP to its clients here (no client_tls_* settings).
        pooled.queryItems = (server.queryItems ?? []).filter { $0.name != "sslmode" } + [URLQueryItem(name: "sslmode", value: "disable")]
        return PgBouncer(port: port, folder: folder, url: pooled.string!)
    }

    func stop() {
        if let text = try? String(contentsOf: folder.appendingPathComponent("pgbouncer.pid"), encoding: .utf8),
           let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            kill(pid, SIGTERM)
            usleep(300_000)
            kill(pid, SIGKILL)  // nothing, when it has ended
        }
    }
}

/// HAProxy balancing HTTP over `backends` (loopback ports) round robin, checking each on
/// `GET /healthz`: the configuration docs/operations.md shows.
struct HAProxy: Sendable {
    let port: Int
    let process: RunningProcess

    static func configuration(port: Int, backends: [Int]) -> String {
        """
        global
            maxconn 4096

        defaults
            mode http
            timeout connect 2s
            timeout client 60s
            timeout server 60s
            # event streams (GET /v1/events) stay open; the server writes a comment every 15 s
            timeout tunnel 1h
            # a connection refused (a replica down) is tried again on another replica
            retries 2
            option redispatch

        frontend orderflow_api
            bind 127.0.0.1:\(port)
            default_backend orderflow_serve

        backend orderflow_serve
            balance roundrobin
            option httpchk GET /healthz
            http-check expect status 200
            default-server inter 500ms fall 2 rise 1
        \(backends.enumerated().map { "    server serve\($0.offset + 1) 127.0.0.1:\($0.element) check" }.joined(separator: "\n"))

        """
    }

    static func start(backends: [Int]) async throws -> HAProxy {
        let binary = try ExternalServer.binary("haproxy")
        let port = try ExternalServer.freePort()
        let folder = try ExternalServer.folder("haproxy")
        let file = folder.appendingPathComponent("haproxy.cfg")
        try configuration(port: port, backends: backends).write(to: file, atomically: true, encoding: .utf8)
        let process = try RunningProcess.start(binary, ["-db", "-f", file.path], folder: folder)
        try await ExternalServer.waitUntilListening(port, what: "haproxy")
        return HAProxy(port: port, process: process)
    }

    func stop() async {
        await process.stop()
    }
}

/// A child process with its output in files (a pipe nobody drains could block it).
struct RunningProcess: @unchecked Sendable {
    // Process is not Sendable; a RunningProcess is stopped by one task.
    let process: Process
    let output: URL

    static func start(_ binary: String, _ arguments: [String], folder: URL) throws -> RunningProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let output = folder.appendingPathComponent("output.log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return RunningProcess(process: process, output: output)
    }

    func stop() async {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
