import Foundation
import Logging
import OrderFlow
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Tells systemd what a `Type=notify` service is doing (sd_notify(3)): `READY=1` once it
/// serves, `STOPPING=1` when it begins to stop, each with a `STATUS=` line for
/// `systemctl status`.
///
/// Written here rather than taken from a library: the protocol is one datagram of text to the
/// Unix socket named by `NOTIFY_SOCKET`, no Swift package for it is mirrored on the machines
/// this builds on, and linking libsystemd for one call would add a C dependency to every
/// build, also where systemd is absent.
struct SystemdNotifier: Sendable {
    /// The socket's address as `NOTIFY_SOCKET` gives it: a path, or `@name` in the abstract
    /// namespace.
    let address: String

    /// The notifier systemd asked for, if it did; `NOTIFY_SOCKET` is then removed from the
    /// environment, as sd_notify's `unset_environment` does, so that programs this one starts
    /// (the embedded PostgreSQL, built with systemd support on Debian) do not speak for it.
    static func takenFromEnvironment() -> SystemdNotifier? {
        guard let address = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"] else { return nil }
        unsetenv("NOTIFY_SOCKET")
        guard address.hasPrefix("/") || address.hasPrefix("@") else { return nil }
        return SystemdNotifier(address: address)
    }

    /// Sends `state` (`KEY=value` lines) as one datagram; false when it could not be sent
    /// (systemd gone, a socket path too long). Never blocks: the socket is a datagram socket
    /// and systemd's end reads at once.
    @discardableResult
    func notify(_ state: String) -> Bool {
        #if os(Linux)
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let descriptor = socket(AF_UNIX, SOCK_DGRAM, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        var path = Array(address.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }   // the abstract namespace
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { buffer in
            buffer.copyBytes(from: path)
        }
        // An abstract name is exactly its bytes; a path also gets its terminating zero.
        let length = MemoryLayout.offset(of: \sockaddr_un.sun_path)! + path.count + (path.first == 0 ? 0 : 1)
        let bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                sendto(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL), address, socklen_t(length))
            }
        }
        return sent == bytes.count
    }
}

/// The service that speaks to systemd for `serve` and `worker run`: `READY=1` once `ready`
/// returns (the API listens, the worker reached the database), `STOPPING=1` as soon as a
/// graceful shutdown begins. Put last in its `ServiceGroup`: the group stops services in
/// reverse order, so this one says so before the others drain.
struct SystemdReadiness: Service {
    let notifier: SystemdNotifier
    /// Returns when the process serves; says what for `systemctl status`.
    let ready: @Sendable () async throws -> String
    let logger: Logger

    func run() async throws {
        let ready = self.ready
        do {
            let status = try await cancelWhenGracefulShutdown { try await ready() }
            notifier.notify("READY=1\nSTATUS=\(status)")
            logger.debug("told systemd: ready", metadata: ["systemd.status": "\(status)"])
        } catch {
            // Stopped before it was ready, or never ready: systemd's start timeout says so.
            logger.debug("not ready; systemd is not told", metadata: ["error.message": "\(error)"])
        }
        try? await gracefulShutdown()
        notifier.notify("STOPPING=1\nSTATUS=stopping: finishing the work in flight")
    }
}

extension OrderFlowHost {
    /// Returns once the host runs and its engine has answered a query on its connections: what
    /// `READY=1` promises for a worker. Throws when the host stopped or failed first.
    func readyForSystemd() async throws {
        while status == "starting" { try await Task.sleep(for: .milliseconds(20)) }
        guard status == "running" else { throw CancellationError() }
        _ = try await engine.schemaStatus()
    }
}
