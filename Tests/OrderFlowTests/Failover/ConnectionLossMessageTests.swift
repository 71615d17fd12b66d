import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// However a connection is cut, people read one sentence: where, why, and to retry.
@Suite("A lost connection is said one way")
struct ConnectionLossMessageTests {
    @Test("a terminated session, a closed connection and a server's own ending read 'lost the connection to PostgreSQL at …; retry when it is back'")
    func everyLossReadsTheSame() async throws {
        let fixture = try await EngineFixture.make()
        let target = fixture.database.target.hostAndPort
        func expectLossMessage(_ error: any Error, sourceLocation: SourceLocation = #_sourceLocation) {
            let translated = OrderFlowError.translating(error)
            #expect(translated?.code == .databaseUnavailable, "\(error)", sourceLocation: sourceLocation)
            let message = translated?.message ?? ""
            #expect(message.hasPrefix("lost the connection to PostgreSQL at \(target): "), "\(message)", sourceLocation: sourceLocation)
            #expect(message.hasSuffix("; retry when it is back"), "\(message)", sourceLocation: sourceLocation)
            for other in ["the database is unavailable", "may have restarted", "session settings", "retry the operation", "\n"] {
                #expect(!message.contains(other), "\(message)", sourceLocation: sourceLocation)
            }
        }

        let victim = try await PostgresConnection.connect(fixture.database)
        let pid = await victim.backendPID()
        _ = try await fixture.engine.pool.query(PostgresQuery("SELECT pg_terminate_backend($1)::text AS done", pid))
        try await Task.sleep(for: .milliseconds(100))
        for _ in 0..<2 {  // the cut itself, then the connection closed after it
            do {
                try await victim.query(PostgresQuery("SELECT 1 AS one"))
                Issue.record("a terminated session ran a statement")
            } catch {
                expectLossMessage(error)
            }
        }
        await victim.close()
        // The server's own words for ending a session (57P01), as a statement may receive them.
        expectLossMessage(PostgresError(.server, "terminating connection due to administrator command", sqlState: "57P01", context: target))
        await fixture.shutdown()
    }
}
