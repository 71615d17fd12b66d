import Logging
import ServiceLifecycle

/// LISTEN on a connection of its own, read on the socket thread that serves every connection.
///
/// The connection is an ordinary non-blocking `PostgresConnection`: `LISTEN` goes out like any
/// statement, and the listener then waits for its socket in the same `epoll` set as the
/// statements of every other connection, reading notifications (`PQconsumeInput`,
/// `PQnotifies`) on that thread the moment they arrive. No thread of its own, no polling; stop
/// is graceful shutdown or cancellation, which ends the wait at once. When the connection
/// breaks it reconnects with backoff, LISTENs again and emits `.connected(true)`:
/// notifications sent while it was away are lost, so consumers should re-scan then.
public final class PostgresListener: Service, Sendable {
    public enum Event: Sendable, Equatable {
        /// LISTEN is in place; `reconnected` is true after a lost connection was re-established.
        case connected(reconnected: Bool)
        case notification(channel: String, payload: String)
    }

    /// Every event, in order; finishes when `run()` returns.
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let configuration: PostgresConfiguration
    private let channels: [String]
    private let logger: Logger

    /// - Parameter channels: the channels to LISTEN on (identifiers; quoted by libpq).
    public init(configuration: PostgresConfiguration, channels: [String], logger: Logger = Logger(label: "orderflow.postgres.listen")) {
        var configuration = configuration
        // Named apart in pg_stat_activity from the pool's connections.
        configuration.applicationName += " listener"
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(10_000))
    }

    /// Listens until graceful shutdown or cancellation, then closes its connection, finishes
    /// `events` and returns. Run it once.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            // The whole loop, the reading of notifications included, runs on the socket
            // thread, which resumes it when the socket turns readable: no hop in between.
            await withTaskExecutorPreference(PostgresConnection.socketExecutor) {
                await self.listenUntilCancelled()
            }
        }
        continuation.finish()
    }

    private func listenUntilCancelled() async {
        var failedAttempts = 0
        var everConnected = false
        while !Task.isCancelled {
            var listening = false
            do throws(PostgresError) {
                let connection = try await PostgresConnection.connect(configuration, logger: logger, givingUpWhenCancelled: true)
                do throws(PostgresError) {
                    for channel in channels {
                        try await connection.query(PostgresQuery(unsafeSQL: "LISTEN " + connection.quotedIdentifier(channel)))
                    }
                    listening = true
                    failedAttempts = 0
                    continuation.yield(.connected(reconnected: everConnected))
                    everConnected = true
                    while !Task.isCancelled {
                        for (channel, payload) in try await connection.nextNotifications() {
                            continuation.yield(.notification(channel: channel, payload: payload))
                        }
                    }
                    await connection.close()
                } catch {
                    await connection.close()
                    throw error
                }
            } catch {
                if Task.isCancelled { break }
                failedAttempts += 1
                logger.warning(listening ? "listener lost its connection; reconnecting" : "listener cannot connect; retrying", metadata: [
                    "postgres.target": "\(configuration.target.hostAndPort)",
                    "postgres.error": "\(error.message)",
                ])
            }
            guard !Task.isCancelled else { break }
            // Back off (100 ms doubling to 5 s); cancellation ends the sleep at once.
            let delay = min(5_000, 100 << min(max(failedAttempts - 1, 0), 6))
            try? await Task.sleep(for: .milliseconds(delay))
        }
    }
}

extension PostgresPool {
    /// Sends a notification with bound channel and payload (`pg_notify($1, $2)`), in a
    /// transaction of its own whose commit does not wait for the WAL flush.
    ///
    /// A NOTIFY gets a transaction id, so with the server's default `synchronous_commit` its
    /// commit waits for an fsync before the listeners are told: a wake-up delayed behind every
    /// other commit's flush. The transaction writes no data, and a crash that could undo its
    /// commit also drops every listener's connection, so the wait protects nothing.
    public func notify(channel: String, payload: String = "") async throws {
        try await query(PostgresQuery(
            "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)", channel, payload))
    }
}
