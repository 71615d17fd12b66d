import AsyncHTTPClient
import Foundation
import OrderFlow
import PGKit
import PostgresTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve` and `worker run` under systemd's `Type=notify`: a real Unix datagram socket stands
/// in for systemd (`NOTIFY_SOCKET`), as a path and in the abstract namespace. `READY=1` comes
/// once the API answers (and the worker reached the database), `STOPPING=1` on SIGTERM, then
/// the process exits 0; without `NOTIFY_SOCKET` nothing is sent anywhere.
@Suite("Readiness for systemd", .serialized)
struct SystemdReadinessTests {
    @Test("serve: READY=1 once the API answers, STOPPING=1 on SIGTERM", arguments: [false, true])
    func serve(abstract: Bool) async throws {
        let cli = try await CLI.withFreshDatabase()
        let systemd = try NotifySocket(abstract: abstract)
        let serve = try cli.start(["serve", "--port", "0", "--no-worker"], environment: ["NOTIFY_SOCKET": systemd.address])
        let ready = try #require(await systemd.next(), "no READY=1 within 30 s")
        #expect(ready.hasPrefix("READY=1\nSTATUS=serving the API on 127.0.0.1:"), "\(ready)")
        let port = String(ready.split(separator: ":").last ?? "")
        let health = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/healthz"), timeout: .seconds(10))
        #expect(health.status == .ok, "ready means the API answers")

        serve.process.terminate()   // SIGTERM, as systemctl stop sends
        let stopping = try #require(await systemd.next(), "no STOPPING=1 within 30 s")
        #expect(stopping.hasPrefix("STOPPING=1\n"), "\(stopping)")
        let stopped = try await serve.finish()
        #expect(stopped.status == 0, "\(stopped)")
        #expect(await systemd.next(timeout: .milliseconds(200)) == nil, "two messages, no more")
    }

    @Test("worker run: READY=1 once it runs on its connections, STOPPING=1 on SIGTERM; no socket, no message")
    func worker() async throws {
        let database = try await TestDatabase.fresh(prefix: "notify")
        _ = try await Schema.migrate(database)
        let fixture = try await WorkerFixture.start(keyMode: 0o600)
        let cli = try CLI(databaseURL: database.connectionString)
        let systemd = try NotifySocket(abstract: false)
        let worker = try cli.start(fixture.arguments, environment: ["NOTIFY_SOCKET": systemd.address])
        let ready = try #require(await systemd.next(), "no READY=1 within 30 s")
        #expect(ready == "READY=1\nSTATUS=sending pushes", "\(ready)")
        worker.process.terminate()
        #expect(await systemd.next()?.hasPrefix("STOPPING=1\n") == true)
        let stopped = try await worker.finish()
        #expect(stopped.status == 0, "\(stopped)")

        // A worker that cannot start (no such database) never says it is ready.
        let unreachable = try CLI(databaseURL: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
        let failed = try await unreachable.run(fixture.arguments, environment: ["NOTIFY_SOCKET": systemd.address])
        #expect(failed.status == 69, "\(failed)")
        #expect(await systemd.next(timeout: .milliseconds(200)) == nil, "nothing said by a worker that never ran")
        try await fixture.stop()
    }
}

/// A Unix datagram socket bound where `NOTIFY_SOCKET` points, read without blocking.
final class NotifySocket: @unchecked Sendable {
    let address: String
    private let descriptor: Int32
    private let path: String?

    init(abstract: Bool) throws {
        let name = "orderflow-notify-\(UUID().uuidString.prefix(8))"
        path = abstract ? nil : FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        address = path ?? "@" + name
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(address.utf8)
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: bytes) }
        let length = MemoryLayout.offset(of: \sockaddr_un.sun_path)! + bytes.count + (abstract ? 0 : 1)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(length)) }
        }
        guard bound == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    deinit {
        close(descriptor)
        if let path { unlink(path) }
    }

    /// The next datagram's text, or nil when none came within `timeout`.
    func next(timeout: Duration = .seconds(30)) async -> String? {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count >= 0 { return String(decoding: buffer[0..<count], as: UTF8.self) }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}
