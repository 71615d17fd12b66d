import CLibPQ
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// LISTEN on a dedicated connection, driven by socket readiness.
///
/// A thread of its own waits in `poll(2)` on the connection's socket and on a wake-up pipe, so
/// a notification is delivered the moment it arrives and nothing sleeps or spins. When the
/// connection breaks it reconnects with backoff, LISTENs again and emits `.connected(true)`:
/// notifications sent while it was away are lost, so consumers should re-scan then.
public final class PostgresListener: Service, Sendable {
    public enum Event: Sendable, Equatable {
        /// LISTEN is in place; `reconnected` is true after a lost connection was re-established.
        case connected(reconnected: Bool)
        case notification(channel: String, payload: String)
    }

    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let configuration: PostgresConfiguration
    private let channels: [String]
    private let logger: Logger
    private let state = Mutex(State())
    /// Wake-up pipe: writing a byte interrupts `poll`.
    private let wakeRead: Int32
    private let wakeWrite: Int32

    private struct State: Sendable {
        var started = false
        var stopping = false
        var finished = false
    }

    /// - Parameter channels: the channels to LISTEN on (identifiers; escaped by libpq).
    public init(configuration: PostgresConfiguration, channels: [String], logger: Logger = Logger(label: "orderflow.postgres.listen")) {
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(10_000))
        var fds: [Int32] = [0, 0]
        pipe(&fds)
        wakeRead = fds[0]
        wakeWrite = fds[1]
        _ = fcntl(wakeRead, F_SETFL, fcntl(wakeRead, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Starts the listening thread and returns when graceful shutdown (or cancellation) stops it.
    public func run() async throws {
        start()
        try? await gracefulShutdown()
        await stop()
    }

    /// Starts the listening thread (idempotent).
    public func start() {
        let first = state.withLock { state -> Bool in
            defer { state.started = true }
            return !state.started
        }
        guard first else { return }
        let thread = Thread { [self] in self.loop() }
        thread.start()
    }

    /// Stops listening and waits until the thread has closed its connection.
    public func stop() async {
        state.withLock { $0.stopping = true }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        while !state.withLock({ $0.finished || !$0.started }) {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    private var isStopping: Bool { state.withLock { $0.stopping } }

    private func loop() {
        nameCurrentThread("pg listen")
        var attempt = 0
        var everConnected = false
        while !isStopping {
            if let connection = connect() {
                attempt = 0
                continuation.yield(.connected(reconnected: everConnected))
                everConnected = true
                listen(on: connection)
                PQfinish(connection)
            } else {
                attempt += 1
            }
            if isStopping { break }
            // Back off (100 ms doubling to 5 s) while staying responsive to stop().
            let delay = min(5_000, 100 << min(attempt, 6))
            _ = waitReadable(socket: nil, timeoutMilliseconds: Int32(delay))
        }
        continuation.finish()
        state.withLock { $0.finished = true }
    }

    private func connect() -> OpaquePointer? {
        let connection = configuration.openNativeConnection(applicationName: configuration.applicationName + " listener")
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let reason = connection.map { PostgresConnection.connectionMessage($0) } ?? "out of memory"
            logger.warning("listener cannot connect; retrying", metadata: [
                "postgres.target": "\(configuration.target.hostAndPort)",
                "postgres.error": "\(PostgresConfiguration.redact(reason, in: configuration.connectionString))",
            ])
            if let connection { PQfinish(connection) }
            return nil
        }
        PQsetNoticeReceiver(connection, { _, _ in }, nil)
        for channel in channels {
            guard let escaped = PQescapeIdentifier(connection, channel, channel.utf8.count) else { continue }
            let statement = "LISTEN " + String(cString: escaped)
            PQfreemem(escaped)
            let result = PQexec(connection, statement)
            let ok = PQresultStatus(result) == PGRES_COMMAND_OK
            PQclear(result)
            if !ok {
                PQfinish(connection)
                return nil
            }
        }
        return connection
    }

    /// Delivers notifications until the connection breaks or stop() is called.
    private func listen(on connection: OpaquePointer) {
        let socket = PQsocket(connection)
        while !isStopping {
            guard waitReadable(socket: socket, timeoutMilliseconds: -1) else { continue }
            guard PQconsumeInput(connection) == 1, PQstatus(connection) == CONNECTION_OK else {
                logger.warning("listener lost its connection; reconnecting", metadata: [
                    "postgres.target": "\(configuration.target.hostAndPort)"
                ])
                return
            }
            while let notify = PQnotifies(connection) {
                let channel = String(cString: notify.pointee.relname)
                let payload = String(cString: notify.pointee.extra)
                PQfreemem(notify)
                continuation.yield(.notification(channel: channel, payload: payload))
            }
        }
    }

    /// Waits until `socket` is readable (true) or the wake pipe fires / the timeout passes (false).
    private func waitReadable(socket: Int32?, timeoutMilliseconds: Int32) -> Bool {
        var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        if let socket { fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
        if ready > 0, fds[0].revents != 0 {
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(wakeRead, &buffer, buffer.count) > 0 {}
        }
        guard ready > 0, fds.count == 2 else { return false }
        return fds[1].revents != 0
    }
}

extension PostgresPool {
    /// Sends a notification with bound channel and payload (`pg_notify($1, $2)`).
    public func notify(channel: String, payload: String = "") async throws {
        try await query(PostgresQuery("SELECT pg_notify($1, $2)", channel, payload))
    }
}
