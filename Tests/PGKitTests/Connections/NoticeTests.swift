import Foundation
import Logging
import PGKit
import PostgresTesting
import Synchronization
import Testing

/// libpq prints a server's notices on stderr unless told otherwise: PGKit sends them to the
/// connection's logger instead, and a cut connection says so in one shape.
///
/// One test at a time: two take over standard error, and two takeovers overlapping would leave
/// it pointing at the first one's file, and the runner's report lost there.
@Suite("Notices and lost connections", .serialized)
struct NoticeTests {
    @Test("RAISE NOTICE and WARNING reach the logger (debug, info), not stderr")
    func noticesGoToTheLogger() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let logs = LogRecorder()
        var logger = logs.logger(label: "test.notices")
        logger.logLevel = .debug
        let stderr = try CapturedStandardError()
        try await PostgresConnection.withConnection(configuration, logger: logger) { connection in
            try await connection.query(PostgresQuery("""
                DO $$ BEGIN
                    RAISE NOTICE 'notice-from-the-server %', chr(27) || '[2J';
                    RAISE WARNING 'warning-from-the-server';
                END $$
                """))
        }
        let written = try stderr.finish()
        let notices = logs.records.filter { $0.message == "postgres notice" }
        #expect(notices.count == 2, "\(logs.records)")
        #expect(notices.first?.level == .debug)
        #expect(notices.first?.metadata["postgres.message"]?.description == "notice-from-the-server \u{1B}[2J")
        #expect(notices.first?.metadata["postgres.target"]?.description == configuration.target.hostAndPort)
        #expect(notices.last?.level == .info)
        #expect(notices.last?.metadata["postgres.severity"]?.description == "WARNING")
        #expect(!written.contains("-from-the-server"), "stderr got the notices: \(written)")
    }

    @Test("a WARNING the server sends during the login reaches the logger, not stderr")
    func loginWarningGoesToTheLogger() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        // A role whose login loads plpgsql, which then warns about a setting under its prefix.
        try await PostgresConnection.withConnection(configuration) { admin in
            try await admin.query(PostgresQuery("DROP ROLE IF EXISTS orderflow_noisy_login"))
            try await admin.query(PostgresQuery("CREATE ROLE orderflow_noisy_login LOGIN"))
            try await admin.query(PostgresQuery("ALTER ROLE orderflow_noisy_login SET session_preload_libraries = 'plpgsql'"))
            try await admin.query(PostgresQuery("ALTER ROLE orderflow_noisy_login SET plpgsql.orderflow_login_probe = 'on'"))
        }
        let target = configuration.target
        let noisy = try PostgresConfiguration("postgresql://orderflow_noisy_login@\(target.hostAndPort)/\(target.database)")
        let logs = LogRecorder()
        var logger = logs.logger(label: "test.notices")
        logger.logLevel = .debug
        let stderr = try CapturedStandardError()
        try await PostgresConnection.withConnection(noisy, logger: logger) { connection in
            try await connection.query(PostgresQuery("SELECT 1 AS one"))
        }
        let written = try stderr.finish()
        try await PostgresConnection.withConnection(configuration) { admin in
            try await admin.query(PostgresQuery("DROP ROLE IF EXISTS orderflow_noisy_login"))
        }
        let warnings = logs.records.filter { $0.message == "postgres notice" }
        #expect(warnings.contains { $0.metadata["postgres.message"]?.description.contains("orderflow_login_probe") == true }, "\(logs.records)")
        #expect(!written.contains("orderflow_login_probe"), "stderr got the login's warning: \(written)")
    }

    @Test("a connection the server ends is a connection loss, said with host and port")
    func terminatedBackendIsALoss() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let victim = try await PostgresConnection.connect(configuration)
        let pid = await victim.backendPID()
        try await PostgresConnection.withConnection(configuration) { other in
            try await other.query(PostgresQuery("SELECT pg_terminate_backend($1)::text AS done", pid))
        }
        try await Task.sleep(for: .milliseconds(100))
        do {
            try await victim.query(PostgresQuery("SELECT 1 AS one"))
            Issue.record("a terminated session ran a statement")
        } catch {
            #expect(error.isConnectionLoss, "\(error)")
            #expect(error.context == configuration.target.hostAndPort, "\(error)")
        }
        // Every later use says the same.
        do {
            try await victim.query(PostgresQuery("SELECT 1 AS one"))
        } catch {
            #expect(error.isConnectionLoss)
            #expect(error.message.hasPrefix("lost the connection to PostgreSQL at \(configuration.target.hostAndPort): "), "\(error)")
        }
        await victim.close()
    }
}

/// Standard error sent to a file while it lives (the whole process's: other tests running at
/// the same time may add lines, which only make the check stricter).
final class CapturedStandardError {
    private let saved: Int32
    private let url = FileManager.default.temporaryDirectory.appendingPathComponent("stderr-\(UUID().uuidString)")

    init() throws {
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let file = open(url.path, O_WRONLY)
        saved = dup(STDERR_FILENO)
        dup2(file, STDERR_FILENO)
        close(file)
    }

    func finish() throws -> String {
        fflush(nil)
        dup2(saved, STDERR_FILENO)
        close(saved)
        defer { try? FileManager.default.removeItem(at: url) }
        return try String(contentsOf: url, encoding: .utf8)
    }
}
