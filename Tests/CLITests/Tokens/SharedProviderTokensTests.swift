import APNS
import Crypto
import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import Testing

/// The provider token kept in PostgreSQL for every worker of one (team, key): one signs, the
/// others reuse it; it is renewed before an hour and never within 20 minutes of the last.
@Suite("Shared provider tokens")
struct SharedProviderTokensTests {
    /// Three "workers" (sources on one database, each with its own memory) on one clock.
    final class Clock: Sendable {
        let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { current.withLock { $0 } }
        func advance(minutes: Double) { current.withLock { $0 += minutes * 60 } }
    }

    @Test("one token across workers, renewed by one of them after 50 minutes, not after an early expiry", .timeLimit(.minutes(3)))
    func oneTokenAcrossWorkers() async throws {
        let fixture = try await EngineFixture.make(maximumConnections: 4)
        let clock = Clock()
        let key = try APNSSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: "SHAREKEY01", teamID: "SHARETEAM1")
        let workers = (0..<3).map { _ in
            SharedProviderTokens(store: MerchantStore(pool: fixture.engine.pool), signingKey: key, currentTime: { clock.now })
        }
        // All at once at start: one signs, every worker uses that one.
        let first = try await withThrowingTaskGroup(of: APNSProviderToken.self) { group in
            for worker in workers { for _ in 0..<5 { group.addTask { try await worker.providerToken() } } }
            return try await group.reduce(into: Set<APNSProviderToken>()) { $0.insert($1) }
        }
        #expect(first.count == 1, "\(first.count) tokens signed at start")
        let token = try #require(first.first)

        // A worker that starts later reuses it.
        let late = SharedProviderTokens(store: MerchantStore(pool: fixture.engine.pool), signingKey: key, currentTime: { clock.now })
        #expect(try await late.providerToken() == token)

        // APNs calls it expired 10 minutes in: too early to sign another.
        clock.advance(minutes: 10)
        #expect(workers[0].providerTokenExpired(token) == false)
        #expect(try await workers[0].providerToken() == token)

        // At 50 minutes the first worker to ask renews it; the others take the new one.
        clock.advance(minutes: 40)
        let renewed = try await workers[1].providerToken()
        #expect(renewed != token && renewed.issuedAt == clock.now.addingTimeInterval(-clock.now.timeIntervalSince1970.truncatingRemainder(dividingBy: 1)))
        for worker in [workers[0], workers[2], late] { #expect(try await worker.providerToken() == renewed) }

        // Expired at 25 minutes (older than 20): the next token is signed once, for everyone.
        clock.advance(minutes: 25)
        #expect(workers[2].providerTokenExpired(renewed))
        let third = try await workers[2].providerToken()
        #expect(third != renewed)
        clock.advance(minutes: 1)
        #expect(try await workers[0].providerToken() == renewed, "worker 0 keeps its copy until it is due")
        let rows = try await fixture.engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM apns_provider_tokens")).single()
            .decode("n", as: Int.self)
        #expect(rows == 1)
        await fixture.shutdown()
    }
}
