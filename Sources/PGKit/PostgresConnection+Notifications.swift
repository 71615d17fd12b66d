import CLibPQ
import Foundation
import Logging
import Synchronization

// LISTEN's notifications, received on the socket thread like a statement's answer.
extension PostgresConnection {
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

    func receiveNotifications() async throws(PostgresError) -> [(channel: String, payload: String)] {
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
}
