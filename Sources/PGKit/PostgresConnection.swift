import CLibPQ
import Foundation
import Logging
import Synchronization

/// One libpq connection, confined to a thread of its own.
///
/// The actor's executor is a dedicated thread, so libpq's blocking calls never run on the Swift
/// concurrency pool; callers simply `await` the methods. Statements written in the source are
/// prepared on first use and reused. Use a `PostgresPool` to share connections.
public actor PostgresConnection {
    private let executor: ThreadExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    public nonisolated let configuration: PostgresConfiguration
    private let logger: Logger
    /// The `PGconn *`; `NativeConnection` is the one place that calls `PQfinish`.
    private let native = NativeConnection()
    private var handle: OpaquePointer? { native.pointer }
    /// Prepared statements by `PostgresQuery.preparedKey`.
    private var preparedNames: [UInt: String] = [:]
    /// Readable without a hop to the connection's thread: set once the connection broke or closed.
    nonisolated let health = ConnectionHealth()

    private init(configuration: PostgresConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.executor = ThreadExecutor(name: "pg connection")
    }

    deinit {
        executor.shutdown()
    }

    /// Opens a connection. Fails with `.invalidConfiguration` or `.connectionFailed`, whose
    /// message names host and port (never the password).
    public static func connect(
        _ configuration: PostgresConfiguration, logger: Logger = Logger(label: "orderflow.postgres")
    ) async throws(PostgresError) -> PostgresConnection {
        let connection = PostgresConnection(configuration: configuration, logger: logger)
        do {
            try await connection.open()
        } catch {
            await connection.close()
            throw error
        }
        return connection
    }

    /// Opens a connection for the duration of `body` and closes it afterwards.
    @discardableResult
    public static func withConnection<T: Sendable>(
        _ configuration: PostgresConfiguration, logger: Logger = Logger(label: "orderflow.postgres"),
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await connect(configuration, logger: logger)
        do {
            let value = try await body(connection)
            await connection.close()
            return value
        } catch {
            await connection.close()
            throw error
        }
    }

    private func open() throws(PostgresError) {
        let connection = configuration.openNativeConnection(applicationName: configuration.applicationName)
        native.pointer = connection
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let reason = handle.map { Self.connectionMessage($0) } ?? "out of memory"
            let target = configuration.target
            throw PostgresError(
                .connectionFailed,
                "cannot connect to PostgreSQL at \(target.hostAndPort) (database \"\(target.database)\"): "
                    + PostgresConfiguration.redact(reason, in: configuration.connectionString),
                hint: "check that the server is running and that the database URL is right",
                context: target.hostAndPort)
        }
        PQsetNoticeReceiver(connection, { _, _ in }, nil)  // notices are not errors; keep stderr clean
        // Fixed session settings so that values decode the same on every server.
        let setup = PQexec(connection, "SET TimeZone TO 'UTC'; SET DateStyle TO 'ISO, YMD'; SET IntervalStyle TO 'iso_8601'")
        defer { PQclear(setup) }
        guard PQresultStatus(setup) == PGRES_COMMAND_OK else {
            throw PostgresError(.connectionFailed, "the server refused the session settings: \(Self.connectionMessage(connection))")
        }
    }

    /// Closes the connection; further use fails with `.connectionLost`.
    public func close() {
        health.broken.store(true, ordering: .releasing)
        native.finish()
        preparedNames = [:]
    }

    /// Whether the connection can still be used. Reads whatever the server has sent without
    /// blocking (libpq keeps its socket non-blocking), so a connection the server closed while
    /// idle is noticed here rather than on the next statement.
    public func isUsable() -> Bool {
        guard let handle else { return false }
        if PQtransactionStatus(handle) != PQTRANS_IDLE { return false }
        // A terminated backend sends an error, then closes: read until nothing more is
        // waiting, so that the close itself (EOF) is seen too.
        var socket = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        for _ in 0..<4 where PQstatus(handle) == CONNECTION_OK {
            guard poll(&socket, 1, 0) > 0 else { break }
            if PQconsumeInput(handle) == 0 { break }
        }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// The PostgreSQL server's process id for this session (`pg_backend_pid()`).
    public func backendPID() -> Int32 {
        guard let handle else { return 0 }
        return PQbackendPID(handle)
    }

    // MARK: Queries

    /// Runs one statement with bound parameters and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) throws(PostgresError) -> PostgresRows {
        guard let connection = handle else {
            throw PostgresError(.connectionLost, "the connection to PostgreSQL at \(configuration.target.hostAndPort) is closed")
        }
        var parameters: [String?] = []
        parameters.reserveCapacity(query.bindings.count)
        for (index, binding) in query.bindings.enumerated() {
            do {
                parameters.append(try binding.postgresText())
            } catch {
                throw PostgresError(.invalidParameter, "parameter $\(index + 1) cannot be sent: \(error.reason)")
            }
        }
        let result: OpaquePointer?
        if let key = query.preparedKey {
            let name = try preparedName(for: key, query: query, parameterCount: parameters.count, connection: connection)
            result = withOptionalCStringArray(parameters) { values in
                PQexecPrepared(connection, name, Int32(parameters.count), values, nil, nil, 0)
            }
        } else if parameters.isEmpty {
            // Migration files hold several statements; only the simple protocol runs those.
            result = PQexec(connection, query.sql)
        } else {
            result = withOptionalCStringArray(parameters) { values in
                PQexecParams(connection, query.sql, Int32(parameters.count), nil, values, nil, nil, 0)
            }
        }
        defer { PQclear(result) }
        return try rows(from: result, connection: connection)
    }

    /// Runs a statement written in the source, for its effect.
    public func execute(_ sql: StaticString) throws(PostgresError) {
        try query(PostgresQuery(sql))
    }

    private func preparedName(for key: UInt, query: PostgresQuery, parameterCount: Int, connection: OpaquePointer) throws(PostgresError) -> String {
        if let name = preparedNames[key] { return name }
        let name = "orderflow_\(preparedNames.count + 1)"
        let result = PQprepare(connection, name, query.sql, Int32(parameterCount), nil)
        defer { PQclear(result) }
        _ = try rows(from: result, connection: connection)
        preparedNames[key] = name
        return name
    }

    private func rows(from result: OpaquePointer?, connection: OpaquePointer) throws(PostgresError) -> PostgresRows {
        guard let result else { throw connectionProblem(connection) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(columns: [], values: [], affectedRows: Int(String(cString: PQcmdTuples(result))) ?? 0)
        case PGRES_TUPLES_OK:
            let rowCount = Int(PQntuples(result))
            let fieldCount = Int(PQnfields(result))
            var columns: [PostgresColumn] = []
            columns.reserveCapacity(fieldCount)
            for field in 0..<fieldCount {
                columns.append(PostgresColumn(
                    name: String(cString: PQfname(result, Int32(field))),
                    type: PostgresType(rawValue: PQftype(result, Int32(field)))))
            }
            var values: [[String?]] = []
            values.reserveCapacity(rowCount)
            for row in 0..<rowCount {
                var rowValues: [String?] = []
                rowValues.reserveCapacity(fieldCount)
                for field in 0..<fieldCount {
                    if PQgetisnull(result, Int32(row), Int32(field)) == 1 {
                        rowValues.append(nil)
                    } else {
                        rowValues.append(String(cString: PQgetvalue(result, Int32(row), Int32(field))))
                    }
                }
                values.append(rowValues)
            }
            return PostgresRows(columns: columns, values: values, affectedRows: rowCount)
        default:
            if PQstatus(connection) != CONNECTION_OK { throw connectionProblem(connection, result: result) }
            throw serverError(result)
        }
    }

    private func serverError(_ result: OpaquePointer) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: value)
        }
        return PostgresError(
            .server, field("M") ?? "the server reported an error", sqlState: field("C"),
            detail: field("D"), hint: field("H"), constraint: field("n"),
            context: configuration.target.hostAndPort)
    }

    private func connectionProblem(_ connection: OpaquePointer, result: OpaquePointer? = nil) -> PostgresError {
        let sqlState = result.flatMap { PQresultErrorField($0, Int32(Character("C").asciiValue!)) }.map { String(cString: $0) }
        let error = PostgresError(
            .connectionLost,
            "lost the connection to PostgreSQL at \(configuration.target.hostAndPort): \(Self.connectionMessage(connection))",
            sqlState: sqlState,
            hint: "the server may have restarted; retry the operation",
            context: configuration.target.hostAndPort)
        logger.warning("postgres connection lost", metadata: ["postgres.target": "\(configuration.target.hostAndPort)"])
        close()
        return error
    }

    static func connectionMessage(_ connection: OpaquePointer) -> String {
        guard let message = PQerrorMessage(connection) else { return "unknown error" }
        // libpq's messages are multi-line ("connection to server … failed: …\n\tIs the server…").
        let lines = String(cString: message).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        return lines.isEmpty ? "unknown error" : lines.joined(separator: "; ")
    }

    /// Runs `body` on this connection's thread: several statements, and the work between
    /// them, without a hop per statement.
    public func run<T: Sendable>(_ body: @Sendable (isolated PostgresConnection) async throws -> T) async throws -> T {
        try await body(self)
    }

    // MARK: Transactions

    /// Runs `body` inside BEGIN … COMMIT. If `body` throws, the transaction is rolled back and
    /// the error rethrown; if COMMIT fails, its error is thrown. `body` runs on this connection's
    /// thread, so the statements it issues need no further hops.
    @discardableResult
    public func transaction<T: Sendable>(
        _ body: @Sendable (isolated PostgresConnection) async throws -> T
    ) async throws -> T {
        try execute("BEGIN")
        let value: T
        do {
            value = try await body(self)
        } catch {
            rollbackIfOpen()
            throw error
        }
        if let handle, PQtransactionStatus(handle) == PQTRANS_INERROR {
            // A statement failed and its error was swallowed: COMMIT would silently roll back.
            rollbackIfOpen()
            throw PostgresError(.server, "the transaction was aborted by an earlier error and has been rolled back",
                                sqlState: "25P02")
        }
        try execute("COMMIT")
        return value
    }

    private func rollbackIfOpen() {
        guard let handle, PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) != PQTRANS_IDLE else { return }
        let result = PQexec(handle, "ROLLBACK")
        PQclear(result)
    }
}

/// Whether a connection is known to be broken, readable from any thread.
final class ConnectionHealth: Sendable {
    let broken = Atomic<Bool>(false)
    var isBroken: Bool { broken.load(ordering: .acquiring) }
}

/// Owns a `PGconn *`: `PQfinish` runs here, once, on close or when the connection is dropped.
/// Only its connection actor touches it, on the actor's thread, hence `@unchecked Sendable`.
final class NativeConnection: @unchecked Sendable {
    var pointer: OpaquePointer?

    func finish() {
        if let pointer { PQfinish(pointer) }
        pointer = nil
    }

    deinit { finish() }
}

extension PostgresConfiguration {
    /// Starts a libpq connection (blocking: call it on a connection's own thread). The caller
    /// owns the result, also when its status is not `CONNECTION_OK`, and must `PQfinish` it.
    func openNativeConnection(applicationName: String) -> OpaquePointer? {
        let keys = ["connect_timeout", "application_name", "dbname"]
        let values = [String(connectTimeoutSeconds), applicationName, connectionString]
        // Defaults come first so that the URL's own settings, expanded from `dbname`, win.
        return withCStringArray(keys) { keyPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keyPointers, valuePointers, 1)
            }
        }
    }
}

// MARK: - C string arrays whose buffers outlive the call that reads them

func withCStringArray<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let duplicates = strings.map { strdup($0) }
    defer { duplicates.forEach { free($0) } }
    return body(duplicates.map { UnsafePointer($0) } + [nil])
}

/// NUL-terminated copies of `strings` (nil stays a null pointer), all in one buffer: a
/// statement's parameters cost one allocation, not one each.
func withOptionalCStringArray<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let size = strings.reduce(0) { $0 + ($1.map { $0.utf8.count + 1 } ?? 0) }
    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(size, 1)) { buffer in
        var pointers: [UnsafePointer<CChar>?] = []
        pointers.reserveCapacity(strings.count)
        var offset = 0
        for string in strings {
            guard let string else {
                pointers.append(nil)
                continue
            }
            let written = UnsafeMutableBufferPointer(rebasing: buffer[offset...]).initialize(from: string.utf8).1
            buffer[offset + written] = 0
            pointers.append(UnsafeRawPointer(buffer.baseAddress! + offset).assumingMemoryBound(to: CChar.self))
            offset += written + 1
        }
        return body(pointers)
    }
}
