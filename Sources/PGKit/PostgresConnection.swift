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
    let logger: Logger
    /// The `PGconn *`; `NativeConnection` is the one place that calls `PQfinish`.
    let native = NativeConnection()
    var handle: OpaquePointer? { native.pointer }
    /// Prepared statements by `PostgresQuery.preparedKey`.
    var preparedNames: [UInt: String] = [:]
    /// Readable without a hop to the actor: set once the connection broke or closed.
    nonisolated let health = ConnectionHealth()
    /// Taken from sending a statement to reading its last result: the actor is reentrant at
    /// the socket waits, but libpq's protocol is not.
    let statementTurns = Turns()
    /// `close()` came while a statement was in flight: close when it ends.
    var closeRequested = false
    /// Taken by a `run` or `transaction` body for its whole length, and by any statement from
    /// outside one. The tasks of that body know it through `heldConnections`.
    let sessionTurns = Turns()
    /// (A number rather than the object's address: a task that outlives the body must not
    /// pass for it on a later connection that reuses the address.)
    @TaskLocal static var heldConnections: [UInt64] = []
    /// The server this connection reached, "host:port", for messages: of the several a
    /// multi-host connection string names, the one that accepted it.
    var server: String
    nonisolated let identity = PostgresConnection.identities.add(1, ordering: .relaxed).newValue
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

    func open(givingUpWhenCancelled: Bool) async throws(PostgresError) {
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
        guard !query.localSettings.isEmpty else {
            return try await inTurn { () async throws(PostgresError) in try await exchange(query, parameters: parameters) }
        }
        // The settings' statement and this one in one pipeline: one round trip, one transaction.
        let settings = query.localSettingsStatement
        let settingsParameters = try Self.parameters(of: settings)
        return try await inTurn { () async throws(PostgresError) in
            try await exchangeGroup([settings, query], parameterLists: [settingsParameters, parameters])[1]
        }
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
    func inTurn<T>(_ exchange: () async throws(PostgresError) -> T) async throws(PostgresError) -> T {
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

    func exchange(_ query: PostgresQuery, parameters: [String?]) async throws(PostgresError) -> PostgresRows {
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
            guard query.isSingleStatementOfTheSource else {
                throw PostgresError(.invalidParameter, "only statements written in the source can be sent in a group")
            }
            parameterLists.append(try Self.parameters(of: query))
        }
        return try await inTurn { () async throws(PostgresError) in try await exchangeGroup(queries, parameterLists: parameterLists) }
    }

    func exchangeGroup(_ queries: [PostgresQuery], parameterLists: [[String?]]) async throws(PostgresError) -> [PostgresRows] {
        guard let connection = handle else {
            throw closedError
        }
        guard PQtransactionStatus(connection) == PQTRANS_IDLE else {
            throw PostgresError(.unexpectedResult, "a group of statements cannot run inside a transaction: it commits by itself", context: server)
        }
        // Prepared first, one round trip each, outside the pipeline (once per connection); a
        // statement planned at each run is parsed and planned in the pipeline.
        var names: [String?] = []
        names.reserveCapacity(queries.count)
        for (query, parameters) in zip(queries, parameterLists) {
            guard let key = query.preparedKey else { names.append(nil); continue }
            names.append(try await preparedName(for: key, query: query, parameterCount: parameters.count, connection: connection))
        }
        guard PQenterPipelineMode(connection) == 1 else { throw connectionProblem(connection) }
        for ((name, parameters), query) in zip(zip(names, parameterLists), queries) {
            let sent = withOptionalCStringArray(parameters) { values in
                if let name { return PQsendQueryPrepared(connection, name, Int32(parameters.count), values, nil, nil, 0) }
                return PQsendQueryParams(connection, query.sql, Int32(parameters.count), nil, values, nil, nil, 0)
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
    func flush(_ connection: OpaquePointer) async throws(PostgresError) {
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
    func nextResult(_ connection: OpaquePointer, failingWith sqlState: String?) async throws(PostgresError) -> NativeResult {
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

    var insideSession: Bool { Self.heldConnections.contains(identity) }
}
