import CLibPQ
import Foundation
import Logging
import Synchronization

// One statement's exchange with the server: flushing, awaiting results on the socket without
// blocking a thread, reading rows, and saying what went wrong.
extension PostgresConnection {
    /// For use after `close()` (or a failed open).
    var closedError: PostgresError {
        PostgresError(
            .connectionLost, "lost the connection to PostgreSQL at \(server): it is closed",
            context: server)
    }

    /// Ends a statement's turn, closing first if `close()` came meanwhile.
    func endExchange() {
        if closeRequested {
            closeRequested = false
            native.finish()
            preparedNames = [:]
        }
        statementTurns.pass()
    }

    /// Sends what libpq has buffered and waits, without blocking a thread, for the statement's
    /// results. Like `PQexec`, returns the last result, or the first error.
    func awaitResult(sent: Int32, connection: OpaquePointer) async throws(PostgresError) -> NativeResult {
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

    func waitForSocket(_ socket: Int32, writable: Bool, connection: OpaquePointer) async throws(PostgresError) {
        let failure = await SocketWaiter.shared.wait(for: socket, writable: writable)
        guard failure != 0 else { return }
        throw unwatchable(failure)
    }

    /// The socket cannot be added to the epoll set: the connection is closed.
    func unwatchable(_ failure: Int32) -> PostgresError {
        let error = PostgresError(
            .connectionLost,
            "lost the connection to PostgreSQL at \(server): cannot watch its socket (\(String(cString: strerror(failure))))",
            hint: "the process may be out of file descriptors or epoll watches (fs.epoll.max_user_watches)",
            context: server)
        close()
        return error
    }

    func preparedName(for key: UInt, query: PostgresQuery, parameterCount: Int, connection: OpaquePointer) async throws(PostgresError) -> String {
        if let name = preparedNames[key] { return name }
        let name = "orderflow_\(preparedNames.count + 1)"
        let sent = PQsendPrepare(connection, name, query.sql, Int32(parameterCount), nil)
        let result = try await awaitResult(sent: sent, connection: connection)
        _ = try rows(from: result, connection: connection)
        preparedNames[key] = name
        return name
    }

    func rows(from nativeResult: borrowing NativeResult, connection: OpaquePointer) throws(PostgresError) -> PostgresRows {
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

    func serverError(_ result: borrowing NativeResult) -> PostgresError {
        PostgresError(
            .server, result.errorField("M") ?? "the server reported an error", sqlState: result.errorField("C"),
            detail: result.errorField("D"), hint: result.errorField("H"), constraint: result.errorField("n"),
            context: server)
    }

    func connectionProblem(_ connection: OpaquePointer, sqlState: String? = nil) -> PostgresError {
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
}
