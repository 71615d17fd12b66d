import CLibPQ
import Foundation
import Logging
import Synchronization

/// One libpq connection, confined to this actor.
///
/// libpq runs in its non-blocking mode: a statement is sent, then the caller's task suspends
/// until the socket has the answer (`SocketWaiter`), so nothing ever blocks a thread of the
/// Swift concurrency pool and no connection needs a thread of its own. Only opening a
/// connection blocks (name lookup, authentication, TLS): that runs on a short-lived thread.
/// Statements on one connection run one at a time, in the order they were called, and a
/// `run` or `transaction` body has the connection to itself until it returns: other callers'
/// statements wait for it. Statements written in the source are prepared on first use and
/// reused. Use a `PostgresPool` to share connections.
public actor PostgresConnection {
    public nonisolated let configuration: PostgresConfiguration
    private let logger: Logger
    /// The `PGconn *`; `NativeConnection` is the one place that calls `PQfinish`.
    private let native = NativeConnection()
    private var handle: OpaquePointer? { native.pointer }
    /// Prepared statements by `PostgresQuery.preparedKey`.
    private var preparedNames: [UInt: String] = [:]
    /// Readable without a hop to the actor: set once the connection broke or closed.
    nonisolated let health = ConnectionHealth()
    /// Taken from sending a statement to reading its last result: the actor is reentrant at
    /// the socket waits, but libpq's protocol is not.
    private let statementTurns = Turns()
    /// `close()` came while a statement was in flight: close when it ends.
    private var closeRequested = false
    /// Taken by a `run` or `transaction` body for its whole length, and by any statement from
    /// outside one. The tasks of that body know it through `heldConnections`.
    private let sessionTurns = Turns()
    /// (A number rather than the object's address: a task that outlives the body must not
    /// pass for it on a later connection that reuses the address.)
    @TaskLocal private static var heldConnections: [UInt64] = []
    /// The server this connection reached, "host:port", for messages: of the several a
    /// multi-host connection string names, the one that accepted it.
    private var server: String
    private nonisolated let identity = PostgresConnection.identities.add(1, ordering: .relaxed).newValue
    private static let identities = Atomic<UInt64>(0)

    private init(configuration: PostgresConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.server = configuration.target.hostAndPort
    }

    /// Opens a connection. Fails with `.invalidConfiguration` or `.connectionFailed`, whose
    /// message names host and port (never the password).
    public static func connect(
        _ configuration: PostgresConfiguration, logger: Logger = Logger(label: "orderflow.postgres")
    ) async throws(PostgresError) -> PostgresConnection {
        try await connect(configuration, logger: logger, givingUpWhenCancelled: false)
    }

    /// Opens a connection, or gives up after `limit` with `.connectionFailed`: a caller never
    /// waits longer, however many servers the connection string names and however long each
    /// takes to refuse. An attempt given up finishes on its own thread and is closed.
    static func connect(
        _ configuration: PostgresConfiguration, logger: Logger, within limit: Duration
    ) async throws(PostgresError) -> PostgresConnection {
        let first = await withTaskGroup(of: Result<PostgresConnection, PostgresError>?.self) { group in
            group.addTask {
                do throws(PostgresError) {
                    return .success(try await connect(configuration, logger: logger, givingUpWhenCancelled: true))
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            // The other one, if the connection won the race just as the time ran out.
            for await case .success(let late)? in group where first == nil { await late.close() }
            return first
        }
        switch first {
        case .success(let connection)?: return connection
        case .failure(let error)?: throw error
        case nil:
            let target = configuration.target
            if Task.isCancelled { throw PostgresError(.shutdown, "stopped while connecting to PostgreSQL at \(target.hostAndPort)") }
            throw PostgresError(
                .connectionFailed,
                "cannot connect to PostgreSQL at \(target.hostAndPort) (database \"\(target.database)\"): no server accepted a connection within \(limit)",
                hint: "check that the server is running and that the database URL is right",
                context: target.hostAndPort)
        }
    }

    /// `givingUpWhenCancelled`: a cancelled task stops waiting for the connect thread at once
    /// and gets `.shutdown` (the listener's stop must not wait out `connect_timeout`).
    static func connect(
        _ configuration: PostgresConfiguration, logger: Logger, givingUpWhenCancelled: Bool
    ) async throws(PostgresError) -> PostgresConnection {
        let connection = PostgresConnection(configuration: configuration, logger: logger)
        do {
            try await connection.open(givingUpWhenCancelled: givingUpWhenCancelled)
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

    private func open(givingUpWhenCancelled: Bool) async throws(PostgresError) {
        let configuration = self.configuration
        // libpq's default prints notices on stderr, raw: they go to the logger instead, from the
        // first byte the server sends (a WARNING can come with the login).
        let notices = NoticeLog(logger: logger, target: configuration.target.hostAndPort)
        // libpq's connect blocks (name lookup, TCP, authentication, TLS): on a thread of its own,
        // never on the concurrency pool. Connections are opened rarely; a thread each is cheap.
        let connect: @Sendable () -> NativeConnection = {
            let connection = configuration.openNativeConnection(notices: notices)
            if let pointer = connection.pointer, PQstatus(pointer) == CONNECTION_OK { PQsetnonblocking(pointer, 1) }
            return connection
        }
        let opened: NativeConnection
        if givingUpWhenCancelled {
            guard let connection = await onThreadOfItsOwnUnlessCancelled(named: "pg connect", connect) else {
                throw PostgresError(.shutdown, "stopped while connecting to PostgreSQL at \(configuration.target.hostAndPort)")
            }
            opened = connection
        } else {
            opened = await onThreadOfItsOwn(named: "pg connect", connect)
        }
        let timedOutAfter = opened.timedOutAfter
        native.pointer = opened.take()
        guard let connection = handle, PQstatus(connection) == CONNECTION_OK else {
            let reason = timedOutAfter.map { "no answer within \($0 / 1000) s (timeout expired)" }
                ?? handle.map { Self.connectionMessage($0) } ?? "out of memory"
            let target = configuration.target
            throw PostgresError(
                .connectionFailed,
                "cannot connect to PostgreSQL at \(target.hostAndPort) (database \"\(target.database)\"): "
                    + PostgresConfiguration.redact(reason, in: configuration.connectionString),
                hint: "check that the server is running and that the database URL is right",
                context: target.hostAndPort)
        }
        native.noticeLog = notices
        if let host = PQhost(connection), let port = PQport(connection) {
            server = PostgresConfiguration.Target.address(host: String(cString: host), port: String(cString: port))
        }
        guard PQisnonblocking(connection) == 1 else {
            throw PostgresError(.connectionFailed, "cannot put the connection into non-blocking mode: \(Self.connectionMessage(connection))")
        }
        // Fixed session settings so that values decode the same on every server.
        do {
            try await query(PostgresQuery(severalStatements: "SET TimeZone TO 'UTC'; SET DateStyle TO 'ISO, YMD'; SET IntervalStyle TO 'iso_8601'"))
        } catch where error.isConnectionProblem || error.kind == .shutdown {
            throw error  // cut off, not refused: said as every lost connection is
        } catch {
            throw PostgresError(.connectionFailed, "the server refused the session settings: \(error.message)")
        }
    }

    /// Closes the connection; further use fails with `.connectionLost`. A statement in flight
    /// is allowed to finish first (its socket is still being read); the connection closes then.
    public func close() {
        health.broken.store(true, ordering: .releasing)
        if statementTurns.taken {
            closeRequested = true
            return
        }
        native.finish()
        preparedNames = [:]
    }

    /// Whether the connection can still be used. Reads whatever the server has sent without
    /// blocking (libpq keeps its socket non-blocking), so a connection the server closed while
    /// idle is noticed here rather than on the next statement.
    public func isUsable() -> Bool {
        guard let handle, !statementTurns.taken, !sessionTurns.taken else { return false }
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
    public func query(_ query: PostgresQuery) async throws(PostgresError) -> PostgresRows {
        let parameters = try Self.parameters(of: query)
        return try await inTurn { () async throws(PostgresError) in try await exchange(query, parameters: parameters) }
    }

    /// The query's parameters in PostgreSQL's text format.
    static func parameters(of query: PostgresQuery) throws(PostgresError) -> [String?] {
        var parameters: [String?] = []
        parameters.reserveCapacity(query.bindings.count)
        for (index, binding) in query.bindings.enumerated() {
            do {
                parameters.append(try binding.postgresText())
            } catch {
                throw PostgresError(.invalidParameter, "parameter $\(index + 1) cannot be sent: \(error.reason)")
            }
        }
        return parameters
    }

    /// Runs one exchange with the server when it is this caller's turn: a statement from
    /// outside a `run`/`transaction` body waits until the body is done, and statements take
    /// turns on the socket.
    private func inTurn<T>(_ exchange: () async throws(PostgresError) -> T) async throws(PostgresError) -> T {
        let outsider = !insideSession
        if outsider { await sessionTurns.take() }
        await statementTurns.take()
        do {
            let value = try await exchange()
            endExchange()
            if outsider { sessionTurns.pass() }
            return value
        } catch {
            endExchange()
            if outsider { sessionTurns.pass() }
            throw error
        }
    }

    private func exchange(_ query: PostgresQuery, parameters: [String?]) async throws(PostgresError) -> PostgresRows {
        guard let connection = handle else {
            throw closedError
        }
        let result: NativeResult
        if let key = query.preparedKey {
            let name = try await preparedName(for: key, query: query, parameterCount: parameters.count, connection: connection)
            let sent = withOptionalCStringArray(parameters) { values in
                PQsendQueryPrepared(connection, name, Int32(parameters.count), values, nil, nil, 0)
            }
            result = try await awaitResult(sent: sent, connection: connection)
        } else if parameters.isEmpty {
            // Migration files hold several statements; only the simple protocol runs those.
            result = try await awaitResult(sent: PQsendQuery(connection, query.sql), connection: connection)
        } else {
            let sent = withOptionalCStringArray(parameters) { values in
                PQsendQueryParams(connection, query.sql, Int32(parameters.count), nil, values, nil, nil, 0)
            }
            result = try await awaitResult(sent: sent, connection: connection)
        }
        return try rows(from: result, connection: connection)
    }

    /// Runs a group's batch statement (`PostgresPool.queryCommittingTogether`): one statement,
    /// committed by itself, so — like `queryGroup` — never inside an open transaction, whose
    /// fate would then decide the other callers' statements too.
    func queryBatch(_ query: PostgresQuery) async throws(PostgresError) -> PostgresRows {
        let parameters = try Self.parameters(of: query)
        return try await inTurn { () async throws(PostgresError) in
            guard let connection = handle else { throw closedError }
            guard PQtransactionStatus(connection) == PQTRANS_IDLE else {
                throw PostgresError(.unexpectedResult, "a group of statements cannot run inside a transaction: it commits by itself", context: server)
            }
            return try await exchange(query, parameters: parameters)
        }
    }

    /// Runs `queries` in one round trip as one transaction, in libpq's pipeline mode: every
    /// statement is sent, then one Sync, which commits them together (the implicit transaction
    /// of the extended protocol). Either every statement commits and their rows come back in
    /// order, or none does and the first error is thrown — the server skips the statements
    /// after a failed one and rolls the whole group back. Statements only (no `severalStatements`),
    /// each written in the source (prepared, like `query`'s).
    func queryGroup(_ queries: [PostgresQuery]) async throws(PostgresError) -> [PostgresRows] {
        var parameterLists: [[String?]] = []
        parameterLists.reserveCapacity(queries.count)
        for query in queries {
            guard query.preparedKey != nil else {
                throw PostgresError(.invalidParameter, "only statements written in the source can be sent in a group")
            }
            parameterLists.append(try Self.parameters(of: query))
        }
        return try await inTurn { () async throws(PostgresError) in try await exchangeGroup(queries, parameterLists: parameterLists) }
    }

    private func exchangeGroup(_ queries: [PostgresQuery], parameterLists: [[String?]]) async throws(PostgresError) -> [PostgresRows] {
        guard let connection = handle else {
            throw closedError
        }
        guard PQtransactionStatus(connection) == PQTRANS_IDLE else {
            throw PostgresError(.unexpectedResult, "a group of statements cannot run inside a transaction: it commits by itself", context: server)
        }
        // Prepared first, one round trip each, outside the pipeline (once per connection).
        var names: [String] = []
        names.reserveCapacity(queries.count)
        for (query, parameters) in zip(queries, parameterLists) {
            names.append(try await preparedName(for: query.preparedKey!, query: query, parameterCount: parameters.count, connection: connection))
        }
        guard PQenterPipelineMode(connection) == 1 else { throw connectionProblem(connection) }
        for (name, parameters) in zip(names, parameterLists) {
            let sent = withOptionalCStringArray(parameters) { values in
                PQsendQueryPrepared(connection, name, Int32(parameters.count), values, nil, nil, 0)
            }
            guard sent == 1 else { throw connectionProblem(connection) }
        }
        guard PQpipelineSync(connection) == 1 else { throw connectionProblem(connection) }
        try await flush(connection)
        // Each statement's results end with a null; the Sync's result ends the pipeline.
        var rowsByQuery: [PostgresRows] = []
        rowsByQuery.reserveCapacity(queries.count)
        var firstError: PostgresError?
        for _ in queries {
            var kept = NativeResult(nil)
            while true {
                let next = try await nextResult(connection, failingWith: kept.errorField("C"))
                guard next.pointer != nil else { break }
                if kept.status != PGRES_FATAL_ERROR { kept = next }
            }
            guard firstError == nil else { continue }  // the rest were skipped
            switch kept.status {
            case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
                rowsByQuery.append(try rows(from: kept, connection: connection))
            case PGRES_FATAL_ERROR:
                firstError = serverError(kept)
            default:
                // Skipped without an error of its own, or an answer no statement here gives.
                firstError = PostgresError(
                    .unexpectedResult, "a statement of the group was not run (status \(kept.status.rawValue)); nothing was committed",
                    context: server)
            }
        }
        let sync = try await nextResult(connection, failingWith: nil)
        guard sync.status == PGRES_PIPELINE_SYNC else {
            // Nothing else can come here; a connection in an unknown state is not reused.
            close()
            throw PostgresError(.unexpectedResult, "the server's answer to a group of statements ended unexpectedly; the connection was closed", context: server)
        }
        guard PQexitPipelineMode(connection) == 1 else { throw connectionProblem(connection) }
        if let firstError { throw firstError }
        return rowsByQuery
    }

    /// Sends everything libpq has buffered, waiting (without blocking a thread) while the socket is full.
    private func flush(_ connection: OpaquePointer) async throws(PostgresError) {
        let socket = PQsocket(connection)
        // Large statements may not fit the socket's buffer; the server may answer meanwhile.
        while true {
            let flushed = PQflush(connection)
            if flushed == 0 { return }
            guard flushed > 0 else { throw connectionProblem(connection) }
            try await waitForSocket(socket, writable: true, connection: connection)
            if PQconsumeInput(connection) == 0 { throw connectionProblem(connection) }
        }
    }

    /// The next result (nil pointer: the current statement's results are over), waiting for
    /// the socket while libpq needs more input. `sqlState`: the error already received, for
    /// the message when the connection closes.
    private func nextResult(_ connection: OpaquePointer, failingWith sqlState: String?) async throws(PostgresError) -> NativeResult {
        let socket = PQsocket(connection)
        while PQisBusy(connection) == 1 {
            // OpenSSL may hold decrypted bytes that libpq has not taken yet; the socket
            // would not signal them again.
            if orderflow_tls_pending(connection) == 0 {
                try await waitForSocket(socket, writable: false, connection: connection)
            }
            if PQconsumeInput(connection) == 0 {
                // The server may have said why before closing (57P01 on shutdown, say).
                throw connectionProblem(connection, sqlState: sqlState)
            }
        }
        return NativeResult(PQgetResult(connection))
    }

    /// Runs a statement written in the source, for its effect.
    public func execute(_ sql: StaticString) async throws(PostgresError) {
        try await query(PostgresQuery(sql))
    }

    private var insideSession: Bool { Self.heldConnections.contains(identity) }

    // MARK: Notifications

    /// Quotes `name` as an identifier, by libpq's rules for this connection's encoding, for the
    /// statements that take no parameters there (`LISTEN`).
    func quotedIdentifier(_ name: String) throws(PostgresError) -> String {
        guard let handle else {
            throw closedError
        }
        guard let quoted = PQescapeIdentifier(handle, name, name.utf8.count) else {
            throw PostgresError(.invalidParameter, "cannot quote the identifier: \(Self.connectionMessage(handle))")
        }
        defer { PQfreemem(quoted) }
        return String(cString: quoted)
    }

    /// Waits, on the socket thread like a statement's answer, until notifications (from
    /// `LISTEN`) arrive, and returns them in the order they were sent; returns none at once
    /// when the calling task is cancelled. Throws `.connectionLost` when the connection breaks.
    func nextNotifications() async throws(PostgresError) -> [(channel: String, payload: String)] {
        await statementTurns.take()
        do {
            let received = try await receiveNotifications()
            endExchange()
            return received
        } catch {
            endExchange()
            throw error
        }
    }

    private func receiveNotifications() async throws(PostgresError) -> [(channel: String, payload: String)] {
        guard let connection = handle else {
            throw closedError
        }
        let socket = PQsocket(connection)
        while true {
            // libpq may have read some already, together with an earlier answer.
            var received: [(channel: String, payload: String)] = []
            while let notification = PQnotifies(connection) {
                received.append((String(cString: notification.pointee.relname), String(cString: notification.pointee.extra)))
                PQfreemem(notification)
            }
            if !received.isEmpty { return received }
            if orderflow_tls_pending(connection) == 0 {
                let failure = await SocketWaiter.shared.waitUntilReadableOrCancelled(socket)
                if failure == ECANCELED, Task.isCancelled { return [] }
                if failure != 0 { throw unwatchable(failure) }
            }
            // A terminated backend sends its error, then closes: either ends the connection.
            guard PQconsumeInput(connection) == 1, PQstatus(connection) == CONNECTION_OK else {
                throw connectionProblem(connection)
            }
        }
    }

    /// For use after `close()` (or a failed open).
    private var closedError: PostgresError {
        PostgresError(
            .connectionLost, "lost the connection to PostgreSQL at \(server): it is closed",
            context: server)
    }

    /// Ends a statement's turn, closing first if `close()` came meanwhile.
    private func endExchange() {
        if closeRequested {
            closeRequested = false
            native.finish()
            preparedNames = [:]
        }
        statementTurns.pass()
    }

    /// Sends what libpq has buffered and waits, without blocking a thread, for the statement's
    /// results. Like `PQexec`, returns the last result, or the first error.
    private func awaitResult(sent: Int32, connection: OpaquePointer) async throws(PostgresError) -> NativeResult {
        guard sent == 1 else { throw connectionProblem(connection) }
        try await flush(connection)
        var kept = NativeResult(nil)
        while true {
            let next = try await nextResult(connection, failingWith: kept.errorField("C"))
            guard next.pointer != nil else { return kept }
            switch next.status {
            case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
                // libpq now waits for COPY data that will never come: no statement can follow.
                close()
                throw PostgresError(
                    .unexpectedResult, "COPY with STDIN or STDOUT is not supported here; the connection was closed",
                    hint: "load or export data with psql's \\copy, or with INSERT … SELECT and SELECT",
                    context: server)
            default:
                break
            }
            // The first error is the one to report; later results only say the rest was skipped.
            if kept.status != PGRES_FATAL_ERROR { kept = next }
        }
    }

    private func waitForSocket(_ socket: Int32, writable: Bool, connection: OpaquePointer) async throws(PostgresError) {
        let failure = await SocketWaiter.shared.wait(for: socket, writable: writable)
        guard failure != 0 else { return }
        throw unwatchable(failure)
    }

    /// The socket cannot be added to the epoll set: the connection is closed.
    private func unwatchable(_ failure: Int32) -> PostgresError {
        let error = PostgresError(
            .connectionLost,
            "lost the connection to PostgreSQL at \(server): cannot watch its socket (\(String(cString: strerror(failure))))",
            hint: "the process may be out of file descriptors or epoll watches (fs.epoll.max_user_watches)",
            context: server)
        close()
        return error
    }

    private func preparedName(for key: UInt, query: PostgresQuery, parameterCount: Int, connection: OpaquePointer) async throws(PostgresError) -> String {
        if let name = preparedNames[key] { return name }
        let name = "orderflow_\(preparedNames.count + 1)"
        let sent = PQsendPrepare(connection, name, query.sql, Int32(parameterCount), nil)
        let result = try await awaitResult(sent: sent, connection: connection)
        _ = try rows(from: result, connection: connection)
        preparedNames[key] = name
        return name
    }

    private func rows(from nativeResult: borrowing NativeResult, connection: OpaquePointer) throws(PostgresError) -> PostgresRows {
        guard let result = nativeResult.pointer else { throw connectionProblem(connection) }
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
            if PQstatus(connection) != CONNECTION_OK { throw connectionProblem(connection, sqlState: nativeResult.errorField("C")) }
            throw serverError(nativeResult)
        }
    }

    private func serverError(_ result: borrowing NativeResult) -> PostgresError {
        PostgresError(
            .server, result.errorField("M") ?? "the server reported an error", sqlState: result.errorField("C"),
            detail: result.errorField("D"), hint: result.errorField("H"), constraint: result.errorField("n"),
            context: server)
    }

    private func connectionProblem(_ connection: OpaquePointer, sqlState: String? = nil) -> PostgresError {
        let error = PostgresError(
            .connectionLost,
            "lost the connection to PostgreSQL at \(server): \(Self.connectionMessage(connection))",
            sqlState: sqlState,
            hint: "the server may have restarted; retry the operation",
            context: server)
        logger.warning("postgres connection lost", metadata: ["postgres.target": "\(server)"])
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

    /// Runs `body` isolated to this connection: several statements, and the work between
    /// them, without a hop per statement.
    public func run<T: Sendable>(_ body: @Sendable (isolated PostgresConnection) async throws -> T) async throws -> T {
        if insideSession { return try await body(self) }
        await sessionTurns.take()
        do {
            let value = try await Self.$heldConnections.withValue(Self.heldConnections + [identity]) {
                try await body(self)
            }
            sessionTurns.pass()
            return value
        } catch {
            sessionTurns.pass()
            throw error
        }
    }

    // MARK: Transactions

    /// Runs `body` inside BEGIN … COMMIT. If `body` throws, the transaction is rolled back and
    /// the error rethrown; if COMMIT fails, its error is thrown. `body` runs isolated to this
    /// connection, so the statements it issues need no further hops.
    @discardableResult
    public func transaction<T: Sendable>(
        _ body: @Sendable (isolated PostgresConnection) async throws -> T
    ) async throws -> T {
        // Inside `run`: nobody else's statement can land between BEGIN and COMMIT.
        try await run { connection in
            try await connection.execute("BEGIN")
            let value: T
            do {
                value = try await body(connection)
            } catch {
                await connection.rollbackIfOpen()
                throw error
            }
            if let handle = connection.handle, PQtransactionStatus(handle) == PQTRANS_INERROR {
                // A statement failed and its error was swallowed: COMMIT would silently roll back.
                await connection.rollbackIfOpen()
                throw PostgresError(.server, "the transaction was aborted by an earlier error and has been rolled back",
                                    sqlState: "25P02")
            }
            try await connection.execute("COMMIT")
            return value
        }
    }

    private func rollbackIfOpen() async {
        guard let handle, PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) != PQTRANS_IDLE else { return }
        _ = try? await execute("ROLLBACK")
    }
}

/// Turns for the tasks of one actor: `take` waits, without blocking a thread, until the holder
/// `pass`es; waiters get their turn in arrival order. Confined to its actor (not `Sendable`).
final class Turns {
    private(set) var taken = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func take(isolation: isolated (any Actor)? = #isolation) async {
        if taken {
            await withCheckedContinuation(isolation: isolation) { waiting.append($0) }  // handed over still taken
        }
        taken = true
    }

    func pass() {
        if waiting.isEmpty {
            taken = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}

/// Whether a connection is known to be broken, readable from any thread.
final class ConnectionHealth: Sendable {
    let broken = Atomic<Bool>(false)
    var isBroken: Bool { broken.load(ordering: .acquiring) }
}

/// Owns a `PGresult *` (or none): `PQclear` runs here, once, when the owner goes out of scope,
/// on every path, thrown errors included.
struct NativeResult: ~Copyable {
    let pointer: OpaquePointer?

    init(_ pointer: OpaquePointer?) {
        self.pointer = pointer
    }

    var status: ExecStatusType { pointer.map(PQresultStatus) ?? PGRES_EMPTY_QUERY }

    /// A field of the error the result carries (`"C"`: SQLSTATE, `"M"`: message, …), if any.
    func errorField(_ code: Character) -> String? {
        guard let pointer, let value = PQresultErrorField(pointer, Int32(code.asciiValue!)) else { return nil }
        return String(cString: value)
    }

    deinit { PQclear(pointer) }
}

/// Owns a `PGconn *`: `PQfinish` runs here, once, on close or when the connection is dropped.
/// Only its connection actor touches it (and the thread that opens it, before handing it over
/// with `take()`), hence `@unchecked Sendable`.
final class NativeConnection: @unchecked Sendable {
    var pointer: OpaquePointer?
    /// Milliseconds the server gave no sign of progress for while connecting, when it gave up.
    var timedOutAfter: Int32?
    /// The notice receiver's argument: kept until `PQfinish`, after which libpq calls it no more.
    var noticeLog: NoticeLog?

    init(_ pointer: OpaquePointer? = nil) {
        self.pointer = pointer
    }

    /// Hands the pointer, and with it the duty to finish it, to the caller.
    func take() -> OpaquePointer? {
        defer { pointer = nil }
        return pointer
    }

    func finish() {
        if let pointer { PQfinish(pointer) }
        pointer = nil
        noticeLog = nil
    }

    deinit { finish() }
}

/// Where a connection's notices go (NOTICE, WARNING, … that a server sends besides results,
/// from `RAISE NOTICE` or DDL): the connection's logger, at debug (info for a WARNING), with
/// the server's words in metadata. Never stderr, where they would reach a terminal raw.
final class NoticeLog: Sendable {
    let logger: Logger
    let target: String

    init(logger: Logger, target: String) {
        self.logger = logger
        self.target = target
    }

    func log(_ result: OpaquePointer) {
        func field(_ code: Character) -> String? {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        // `V`: the severity never translated (`S` may be localized).
        let severity = field("V") ?? field("S") ?? "NOTICE"
        var metadata: Logger.Metadata = ["postgres.target": "\(target)", "postgres.severity": "\(severity)"]
        if let state = field("C") { metadata["postgres.sqlstate"] = "\(state)" }
        if let message = field("M") { metadata["postgres.message"] = "\(message)" }
        logger.log(level: severity == "WARNING" ? .info : .debug, "postgres notice", metadata: metadata)
    }
}

extension PostgresConfiguration {
    /// Starts a libpq connection (blocking: never call it on the concurrency pool). The result
    /// owns the `PGconn *`, also when its status is not `CONNECTION_OK`.
    ///
    /// Started with `PQconnectStartParams` so that `notices` receives what the server says from
    /// the first message on (a notice during the login would otherwise reach stderr raw), then
    /// driven with `PQconnectPoll` — which does not apply `connect_timeout`, so it is applied
    /// here: that long without progress ends the attempt with that server and, as libpq's own
    /// loop does, moves on to the next one the connection string names (a server whose machine
    /// is gone answers nothing at all; the promoted standby may be next in the list).
    func openNativeConnection(notices: NoticeLog, remaining servers: (hosts: String, ports: String)? = nil) -> NativeConnection {
        var keys = ["connect_timeout", "application_name", "dbname"]
        var values = [String(connectTimeoutSeconds), applicationName, connectionString]
        // Defaults come first so that the URL's own settings, expanded from `dbname`, win; the
        // servers still to try, after one timed out, come last and win over the URL's.
        if let servers {
            keys += ["host", "port"]
            values += [servers.hosts, servers.ports]
        }
        let native = NativeConnection(withCStringArray(keys) { keyPointers in
            withCStringArray(values) { valuePointers in
                PQconnectStartParams(keyPointers, valuePointers, 1)
            }
        })
        guard let connection = native.pointer else { return native }
        native.noticeLog = notices
        PQsetNoticeReceiver(connection, { argument, result in
            guard let argument, let result else { return }
            Unmanaged<NoticeLog>.fromOpaque(argument).takeUnretainedValue().log(result)
        }, Unmanaged.passUnretained(notices).toOpaque())
        guard PQstatus(connection) != CONNECTION_BAD else { return native }
        // libpq's documented loop: wait for what the last poll asked for, poll again.
        var state = PGRES_POLLING_WRITING
        let patience = Self.connectTimeoutMilliseconds(connection)
        while state != PGRES_POLLING_OK && state != PGRES_POLLING_FAILED {
            var socket = pollfd(fd: PQsocket(connection), events: Int16(state == PGRES_POLLING_READING ? POLLIN : POLLOUT), revents: 0)
            var ready: Int32
            repeat { ready = poll(&socket, 1, patience) } while ready < 0 && errno == EINTR
            guard ready > 0 else {
                if let next = Self.serversAfterCurrent(connection) {
                    return openNativeConnection(notices: notices, remaining: next)
                }
                native.timedOutAfter = patience
                break
            }
            state = PQconnectPoll(connection)
        }
        return native
    }

    /// The hosts and ports after the one `connection` is trying, in libpq's list form, or nil
    /// when it is the last (or the servers are given as `hostaddr`, left to libpq alone).
    static func serversAfterCurrent(_ connection: OpaquePointer) -> (hosts: String, ports: String)? {
        guard let current = PQhost(connection).map({ String(cString: $0) }),
              let currentPort = PQport(connection).map({ String(cString: $0) }),
              let options = PQconninfo(connection)
        else { return nil }
        defer { PQconninfoFree(options) }
        let values = settings(options)
        guard let hostList = values["host"], (values["hostaddr"] ?? "").isEmpty else { return nil }
        let hosts = hostList.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        var ports = (values["port"] ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        if ports.count != hosts.count { ports = Array(repeating: ports.first ?? "", count: hosts.count) }
        guard let index = hosts.indices.first(where: { hosts[$0] == current && (ports[$0] == currentPort || ports[$0].isEmpty) }),
              index + 1 < hosts.count
        else { return nil }
        return (hosts[(index + 1)...].joined(separator: ","), ports[(index + 1)...].joined(separator: ","))
    }
}

extension PostgresConfiguration {
    /// The connection's `connect_timeout` as libpq reads it (the URL's own, else ours): at
    /// least 2 s, and -1 (wait as long as it takes) for 0 or none, as libpq documents.
    static func connectTimeoutMilliseconds(_ connection: OpaquePointer) -> Int32 {
        guard let options = PQconninfo(connection) else { return 5_000 }
        defer { PQconninfoFree(options) }
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if String(cString: keyword) == "connect_timeout" {
                guard let value = cursor.pointee.val, let seconds = Int32(String(cString: value)), seconds > 0 else { return -1 }
                return max(2, min(seconds, 86_400)) * 1000
            }
            cursor += 1
        }
        return -1
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
