import Foundation
import LocalPostgres
import PGKit
import PostgresTesting
import TestTags
import Testing

/// Connection strings naming several servers (libpq's multi-host form), as given to an
/// application whose PostgreSQL has a standby: the first server that accepts is kept, one that
/// refuses or answers nothing is passed over, and nobody waits past the pool's acquire timeout.
@Suite("PostgreSQL: several servers in one connection string (timed: runs alone)", .tags(.timing))
struct TimingMultiHostTests {
    @Test func parsesEveryServer() throws {
        let url = try PostgresConfiguration("postgresql://app@db1:5432,db2:5433/orders?target_session_attrs=read-write")
        #expect(url.target.servers == ["db1:5432", "db2:5433"])
        #expect(url.target.hostAndPort == "db1:5432, db2:5433")
        #expect(url.target.database == "orders")
        // A port left out in a list is the default; one port for all hosts applies to each.
        #expect(try PostgresConfiguration("postgresql://db1,db2:5433/orders").target.servers == ["db1:5432", "db2:5433"])
        #expect(try PostgresConfiguration("host=db1,db2 port=6432 dbname=orders").target.servers == ["db1:6432", "db2:6432"])
        #expect(try PostgresConfiguration("postgresql://db1:5432/orders").target.hostAndPort == "db1:5432")

        do {
            _ = try PostgresConfiguration("host=db1,db2,db3 port=5432,5433 dbname=orders")
            Issue.record("three hosts with two ports were accepted")
        } catch {
            #expect(error.kind == .invalidConfiguration)
            #expect(error.message.contains("3 hosts but 2 ports"), "\(error.message)")
        }
    }

    /// The first server refuses (nothing listens) and the second answers nothing at all (a
    /// socket that never accepts, like a machine that is gone): both are passed over within
    /// `connect_timeout`, and the connection lands on the third, the real one, which its
    /// messages then name.
    @Test(.timeLimit(.minutes(3)))
    func passesOverServersThatRefuseOrNeverAnswer() async throws {
        let server = try TestDatabase.serverConfiguration()
        let refusing = try LocalPostgres.sparePort()
        let silent = try SilentServer()  // ListenerAndRestartTests'
        defer { withExtendedLifetime(silent) {} }
        let url = try Self.url(server, before: ["127.0.0.1:\(refusing)", "127.0.0.1:\(silent.port)"], connectTimeout: 2)
        let started = ContinuousClock.now
        let port = try await PostgresConnection.withConnection(url) { connection in
            try await connection.query(PostgresQuery("SELECT inet_server_port() AS port")).single().decode("port", as: Int.self)
        }
        let took = ContinuousClock.now - started
        #expect(String(port) == server.target.port)
        #expect(took >= .seconds(1.5) && took < .seconds(6), "took \(took)")

        // Lost later, it names the server it was on, not the whole list.
        let connection = try await PostgresConnection.connect(url)
        let pid = await connection.backendPID()
        try await PostgresConnection.withConnection(server) { admin in
            try await admin.query(PostgresQuery("SELECT pg_terminate_backend($1)", Int(pid)))
        }
        do {
            try await connection.query(PostgresQuery("SELECT 1"))
            Issue.record("a terminated session answered")
        } catch {
            #expect(error.isConnectionLoss)
            #expect(error.message.contains(":\(port)") && !error.message.contains("\(silent.port)"), "\(error.message)")
        }
        await connection.close()
    }

    /// No server answers: the pool's caller hears so within the acquire timeout, however many
    /// servers there are and however long their `connect_timeout`.
    @Test(.timeLimit(.minutes(3)))
    func poolGivesUpWithinTheAcquireTimeout() async throws {
        let server = try TestDatabase.serverConfiguration()
        let silent = try SilentServer()
        defer { withExtendedLifetime(silent) {} }
        let url = try Self.url(server, before: ["127.0.0.1:\(silent.port)", "127.0.0.1:\(silent.port)"], connectTimeout: 10, only: true)
        let pool = PostgresPool(.init(connection: url, maximumConnections: 2, acquireTimeout: .seconds(1)))
        let started = ContinuousClock.now
        do {
            try await pool.query(PostgresQuery("SELECT 1"))
            Issue.record("a silent server answered")
        } catch let error as PostgresError {
            #expect(error.kind == .connectionFailed)
            #expect(error.message.contains("no server accepted a connection within 1"), "\(error.message)")
            #expect(error.message.contains("127.0.0.1:\(silent.port), 127.0.0.1:\(silent.port)"), "\(error.message)")
        }
        let took = ContinuousClock.now - started
        #expect(took < .seconds(2.5), "took \(took)")
        await pool.close()
    }

    /// The test server's URL with `servers` tried before it (or instead of it, `only`).
    static func url(_ server: PostgresConfiguration, before servers: [String], connectTimeout: Int, only: Bool = false) throws -> PostgresConfiguration {
        var components = try #require(URLComponents(string: server.connectionString))
        let real = "\(server.target.host):\(server.target.port)"
        let list = (servers + (only ? [] : [real])).joined(separator: ",")
        components.queryItems = (components.queryItems ?? []).filter { $0.name != "connect_timeout" }
            + [URLQueryItem(name: "connect_timeout", value: String(connectTimeout))]
        // URLComponents has no notion of a host list: put it in place of the one host.
        let text = try #require(components.string).replacingOccurrences(of: "@\(real)/", with: "@\(list)/")
        return try PostgresConfiguration(text)
    }
}
