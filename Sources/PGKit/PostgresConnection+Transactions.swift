import CLibPQ
import Foundation
import Logging
import Synchronization

// Several statements with the connection to themselves: `run`, and BEGIN … COMMIT.
extension PostgresConnection {
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

    func rollbackIfOpen() async {
        guard let handle, PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) != PQTRANS_IDLE else { return }
        _ = try? await execute("ROLLBACK")
    }
}
