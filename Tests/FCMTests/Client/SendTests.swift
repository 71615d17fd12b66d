import APNSCore
import FCM
import Foundation
import LocalFCM
import Synchronization
import Testing

@Suite("FCM client against the stand-in: sending and access tokens")
struct FCMSendTests {
    @Test("a data message arrives as FCM's v1 format, over HTTP/2, with one token exchange")
    func dataMessageArrives() async throws {
        try await LocalFCMFixture.with { fixture in
            let result = try await fixture.client.send(dataMessage(1))
            #expect(result.name.hasPrefix("projects/\(LocalFCMFixture.projectID)/messages/0:"))
            let messages = fixture.server.messages()
            try #require(messages.count == 1)
            let message = messages[0]
            #expect(message.token == LocalFCMFixture.token(1))
            #expect(message.data == ["order": "A-17", "state": "ready"])
            #expect(message.priority == "HIGH")
            #expect(message.collapseKey == "order-A-17")
            #expect(message.ttl == "3600s")
            #expect(message.clientEmail == fixture.key.clientEmail)
            #expect(message.httpMajorVersion == 2)
            #expect(message.body["message"]?["notification"] == nil, "a data message has no notification block")
            #expect(fixture.server.tokenRequestCount == 1)
        }
    }

    @Test("concurrent sends share one access token request")
    func concurrentSendsShareOneToken() async throws {
        try await LocalFCMFixture.with { fixture in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    group.addTask { try await fixture.client.send(dataMessage(index)) }
                }
                try await group.waitForAll()
            }
            #expect(fixture.server.acceptedCount == 40)
            #expect(fixture.server.tokenRequestCount == 1)
        }
    }

    @Test("an expired access token: 401, one new token, the message sent")
    func expiredTokenRefreshedOnce() async throws {
        try await LocalFCMFixture.with { fixture in
            try await fixture.client.send(dataMessage(1))
            fixture.server.expireAccessTokens()
            try await fixture.client.send(dataMessage(2))
            #expect(fixture.server.tokenRequestCount == 2)
            #expect(fixture.server.rejections().map(\.status) == [401])
            #expect(fixture.server.messages().map(\.token) == [LocalFCMFixture.token(1), LocalFCMFixture.token(2)])
        }
    }

    @Test("401 again after the refresh is a credentials error, with one refresh only")
    func unauthenticatedTwiceIsCredentialsError() async throws {
        try await LocalFCMFixture.with { fixture in
            fixture.server.injectFault(.accessTokenExpired, count: 5)
            let error = await #expect(throws: FCMError.self) { try await fixture.client.send(dataMessage(1)) }
            #expect(error?.status == 401)
            #expect(error?.action == .credentialsError)
            #expect(fixture.server.tokenRequestCount == 2)
            #expect(fixture.server.rejections().count == 2)
        }
    }

    @Test("a token is replaced five minutes before its expiry, not earlier")
    func tokenReplacedShortlyBeforeExpiry() async throws {
        let clock = ManualClock()
        try await LocalFCMFixture.with(serverConfiguration: .init(accessTokenLifetime: 400), currentTime: clock.read) { fixture in
            try await fixture.client.send(dataMessage(1))
            clock.advance(seconds: 50)
            try await fixture.client.send(dataMessage(2))
            #expect(fixture.server.tokenRequestCount == 1, "350 s left: kept")
            clock.advance(seconds: 100)
            try await fixture.client.send(dataMessage(3))
            #expect(fixture.server.tokenRequestCount == 2, "250 s left: replaced")
        }
    }

    @Test("clients given one shared token source exchange once between them")
    func sharedSourceAcrossClients() async throws {
        try await LocalFCMFixture.with { fixture in
            // The seam a program with several workers uses: one source for every client of the account.
            let exchange = CountingExchange()
            let shared = FCMAccessTokenCache { now, _ in try await exchange.fetch(now) }
            let second = try FCMClient(
                configuration: .init(serviceAccount: fixture.serviceAccount, baseURL: fixture.server.baseURL,
                                     trustRootsPEM: fixture.server.trustRootPEM),
                logger: .init(label: "fcm-tests"), eventLoopGroup: fixture.eventLoopGroup,
                accessTokens: { made in exchange.set(made); return shared })
            let third = try FCMClient(
                configuration: .init(serviceAccount: fixture.serviceAccount, baseURL: fixture.server.baseURL,
                                     trustRootsPEM: fixture.server.trustRootPEM),
                logger: .init(label: "fcm-tests"), eventLoopGroup: fixture.eventLoopGroup,
                accessTokens: { _ in shared })
            try await second.send(dataMessage(1))
            try await third.send(dataMessage(2))
            try await second.shutdown()
            try await third.shutdown()
            #expect(fixture.server.acceptedCount == 2)
            #expect(fixture.server.tokenRequestCount == 1)
        }
    }

    @Test("fifty concurrent callers of the cache wait for one fetch")
    func cacheFetchesOnceForConcurrentCallers() async throws {
        let fetches = Mutex(0)
        let cache = FCMAccessTokenCache { now, _ in
            fetches.withLock { $0 += 1 }
            try await Task.sleep(for: .milliseconds(50))
            return FCMAccessToken(value: "ya29.test", expiresAt: now.addingTimeInterval(3599))
        }
        let tokens = try await withThrowingTaskGroup(of: FCMAccessToken.self) { group in
            for _ in 0..<50 { group.addTask { try await cache.accessToken() } }
            return try await group.reduce(into: Set<FCMAccessToken>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        #expect(fetches.withLock { $0 } == 1)
        // A rejected token is not handed out again; the fetch is told which one was refused.
        let rejected = tokens.first!
        cache.accessTokenRejected(rejected)
        _ = try await cache.accessToken()
        #expect(fetches.withLock { $0 } == 2)
    }

    @Test("a printed access token, message or account shows no secret")
    func noSecretInDescriptions() async throws {
        try await LocalFCMFixture.with { fixture in
            let token = try await fixture.client.accessTokens.accessToken()
            let message = dataMessage(1)
            let texts = ["\(token)", String(reflecting: token), "\(message)", String(reflecting: message),
                         "\(fixture.serviceAccount)", String(reflecting: fixture.serviceAccount)]
            var dumped = ""
            dump(fixture.serviceAccount, to: &dumped)
            dump(token, to: &dumped)
            for text in texts + [dumped] {
                #expect(!text.contains(token.value))
                #expect(!text.contains(message.token))
                #expect(!text.contains("PRIVATE KEY"))
            }
        }
    }
}

/// Counts exchanges made through the first client's ``FCMTokenExchange``.
final class CountingExchange: Sendable {
    private let exchange = Mutex<FCMTokenExchange?>(nil)
    func set(_ exchange: FCMTokenExchange) { self.exchange.withLock { $0 = exchange } }
    func fetch(_ now: Date) async throws -> FCMAccessToken {
        guard let exchange = self.exchange.withLock({ $0 }) else { throw CancellationError() }
        return try await exchange.exchange(at: now)
    }
}
