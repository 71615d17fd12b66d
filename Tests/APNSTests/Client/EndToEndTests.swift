import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import OrderFlowTesting
import TestTags
import Testing

@Suite("Client against the local APNs over TLS and HTTP/2")
struct EndToEndTests {
    @Test("a Live Activity update is recorded with the suffixed topic, push type, priority and payload")
    func updateRecorded() async throws {
        try await LocalAPNSFixture.with { fixture in
            let apnsID = UUID()
            var request = try liveActivityUpdate(status: "cooking", at: Date(timeIntervalSince1970: 1_700_000_000), priority: .conservePower)
            request.apnsID = apnsID
            request.expiration = 1_700_003_600
            let result = try await fixture.client.send(request)
            #expect(result.status == 200)
            #expect(result.apnsID == apnsID)

            let pushes = fixture.server.pushes(forToken: TestCredentials.deviceToken)
            let push = try #require(pushes.first)
            #expect(pushes.count == 1)
            #expect(push.topic == "com.example.orderflow.push-type.liveactivity")
            #expect(push.pushType == "liveactivity")
            #expect(push.priority == 5)
            #expect(push.expiration == 1_700_003_600)
            #expect(push.apnsID == apnsID)
            #expect(push.headers["apns-id"] == apnsID.uuidString.lowercased())
            #expect(push.keyID == TestCredentials.keyID)
            #expect(push.aps?["event"]?.stringValue == "update")
            #expect(push.aps?["timestamp"]?.integerValue == 1_700_000_000)
            #expect(push.aps?["content-state"] == .object(["status": .string("cooking"), "etaMinutes": .int(12)]))
            #expect(fixture.server.rejectedCount == 0)
        }
    }

    @Test("start and end, and an ordinary alert, pass the stand-in's checks")
    func startEndAndAlert() async throws {
        try await LocalAPNSFixture.with { fixture in
            let now = Date()
            let start = try APNSRequest(
                liveActivity: try .start(
                    timestamp: now,
                    attributesType: "DeliveryAttributes",
                    attributes: DeliveryAttributes(orderID: "A1"),
                    contentState: DeliveryState(status: "placed", etaMinutes: 30),
                    alert: LiveActivityAlert(title: "Order placed", body: "The kitchen has it"),
                    requestInputPushToken: true
                ),
                deviceToken: TestCredentials.token(1),
                bundleID: TestCredentials.bundleID
            )
            let end = try APNSRequest(
                liveActivity: .end(timestamp: now.addingTimeInterval(1), dismissalDate: now.addingTimeInterval(600)),
                deviceToken: TestCredentials.token(1),
                bundleID: TestCredentials.bundleID,
                priority: .conservePower
            )
            let alert = try APNSRequest(
                alert: AlertPayload(title: "Delivered", body: "Enjoy"),
                deviceToken: TestCredentials.token(2),
                bundleID: TestCredentials.bundleID,
                collapseID: "order-A1"
            )
            for request in [start, end, alert] {
                try await fixture.client.send(request)
            }
            let pushes = try await fixture.server.waitForPushes(count: 3, timeout: .seconds(5))
            #expect(pushes.map { $0.aps?["event"]?.stringValue } == ["start", "end", nil])
            #expect(pushes[0].aps?["input-push-token"]?.integerValue == 1)
            #expect(pushes[0].aps?["alert"]?["sound"]?.stringValue == "default")
            #expect(pushes[2].topic == TestCredentials.bundleID)
            #expect(pushes[2].pushType == "alert")
            #expect(pushes[2].collapseID == "order-A1")
            #expect(pushes[2].aps?["sound"]?.stringValue == "default")
        }
    }

    @Test("410 Unregistered for one token is a dead token, with APNs' timestamp; others still pass")
    func unregistered() async throws {
        try await LocalAPNSFixture.with { fixture in
            let since = Date(timeIntervalSince1970: 1_700_000_000.123)
            let dead = TestCredentials.token(7)
            fixture.server.injectFault(.unregistered(since: since), deviceToken: dead)
            let error = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate(token: dead))
            }
            #expect(error?.status == 410)
            #expect(error?.reason == .unregistered)
            #expect(error?.action == .tokenDead)
            #expect(error.flatMap { $0.timestamp.map { abs($0.timeIntervalSince(since)) < 0.002 } } == true)
            #expect(error?.redactedDeviceToken == "…\(dead.suffix(8))")
            #expect(error?.description.contains(dead) == false)

            try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(8)))
            #expect(fixture.server.acceptedCount == 1)
            #expect(fixture.server.rejectedCount == 1)
            #expect(fixture.server.rejections().first?.injected == true)
        }
    }

    @Test("429 TooManyRequests backs off the token; 500 and 503 retry with backoff; faults run out")
    func transientFaults() async throws {
        try await LocalAPNSFixture.with { fixture in
            fixture.server.injectFault(.tooManyRequests, count: 1)
            let throttled = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(throttled?.reason == .tooManyRequests)
            #expect(throttled?.action == .backOffToken(retryAfter: nil))

            fixture.server.injectFault(.internalServerError, count: 1)
            let serverError = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(serverError?.status == 500)
            #expect(serverError?.action == .retryWithBackoff)

            fixture.server.injectFault(.shutdown, duration: .seconds(60))
            for _ in 0..<2 {
                let unavailable = await #expect(throws: APNSError.self) {
                    try await fixture.client.send(try liveActivityUpdate())
                }
                #expect(unavailable?.reason == .shutdown)
                #expect(unavailable?.action == .retryWithBackoff)
            }
            fixture.server.clearFaults()
            try await fixture.client.send(try liveActivityUpdate())
            #expect(fixture.server.acceptedCount == 1)
            #expect(fixture.server.rejectedCount == 4)
        }
    }

    @Test("an unknown reason is kept as text and classified by status")
    func unknownReason() async throws {
        try await LocalAPNSFixture.with { fixture in
            fixture.server.injectFault(LocalAPNSFault(status: 400, reason: "SomethingNewFromApple"), count: 1)
            let error = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(error?.reason == .unknown("SomethingNewFromApple"))
            #expect(error?.action == .configurationError)
            #expect(error?.description.contains("SomethingNewFromApple") == true)

            fixture.server.injectFault(LocalAPNSFault(status: 503, reason: "MaintenanceWindow"), count: 1)
            let unavailable = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(unavailable?.reason == .unknown("MaintenanceWindow"))
            #expect(unavailable?.action == .retryWithBackoff)
        }
    }

    @Test("403 ExpiredProviderToken on a token at least 20 minutes old: refresh, and the retry carries a new token")
    func expiredProviderTokenRefreshes() async throws {
        // The token is signed 30 minutes in the past, so the stand-in still finds it under an hour old.
        let clock = ManualClock(Date().addingTimeInterval(-30 * 60))
        try await LocalAPNSFixture.with(currentTime: clock.read) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            clock.advance(minutes: 25)
            fixture.server.injectFault(.expiredProviderToken, count: 1)
            let error = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(error?.reason == .expiredProviderToken)
            #expect(error?.action == .refreshProviderToken)

            try await fixture.client.send(try liveActivityUpdate())
            let tokens = fixture.server.pushes().compactMap { $0.headers["authorization"] }
            #expect(tokens.count == 2)
            #expect(tokens[0] != tokens[1], "the retry must carry a newly signed provider token")
        }
    }

    @Test("403 ExpiredProviderToken on a fresh token: no new token inside 20 minutes, surfaced as a credentials problem")
    func expiredProviderTokenTooSoon() async throws {
        let clock = ManualClock()
        try await LocalAPNSFixture.with(currentTime: clock.read) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            clock.advance(minutes: 5)
            fixture.server.injectFault(.expiredProviderToken, count: 1)
            let error = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(error?.reason == .expiredProviderToken)
            #expect(error?.action == .credentialsError)
            #expect(error?.description.contains("clock") == true)

            try await fixture.client.send(try liveActivityUpdate())
            let tokens = Set(fixture.server.pushes().compactMap { $0.headers["authorization"] })
            #expect(tokens.count == 1)
        }
    }

    @Test("the client signs a new token after 50 minutes, which APNs' 20-minute rule allows")
    func tokenRegeneratedAfterFiftyMinutes() async throws {
        let clock = ManualClock(Date().addingTimeInterval(-55 * 60))
        try await LocalAPNSFixture.with(
            serverConfiguration: { $0.minimumProviderTokenInterval = .seconds(20 * 60) },
            currentTime: clock.read
        ) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            clock.advance(minutes: 30)
            try await fixture.client.send(try liveActivityUpdate())
            clock.advance(minutes: 21)
            try await fixture.client.send(try liveActivityUpdate())
            let tokens = fixture.server.pushes().compactMap { $0.headers["authorization"] }
            #expect(tokens.count == 3)
            #expect(tokens[0] == tokens[1])
            #expect(tokens[1] != tokens[2])
            #expect(fixture.server.rejectedCount == 0)
        }
    }

    @Test("the stand-in answers TooManyProviderTokenUpdates to tokens regenerated too often")
    func standInDetectsFastRegeneration() async throws {
        try await LocalAPNSFixture.with(serverConfiguration: { $0.minimumProviderTokenInterval = .seconds(20 * 60) }) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            // A second client with the same key signs its own token ten minutes later.
            let later = ManualClock(Date().addingTimeInterval(10 * 60))
            let other = try APNSClient(
                configuration: fixture.client.configuration, logger: Logger(label: "apns-tests"),
                eventLoopGroup: fixture.eventLoopGroup, currentTime: later.read)
            let error = await #expect(throws: APNSError.self) {
                try await other.send(try liveActivityUpdate())
            }
            try await other.shutdown()
            #expect(error?.reason == .tooManyProviderTokenUpdates)
            #expect(error?.action == .retryWithBackoff)
        }
    }

    @Test("a token signed with the wrong key is refused by the stand-in as InvalidProviderToken")
    func wrongKey() async throws {
        try await LocalAPNSFixture.with(clientKey: P256.Signing.PrivateKey()) { fixture in
            let error = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(error?.status == 403)
            #expect(error?.reason == .invalidProviderToken)
            #expect(error?.action == .credentialsError)
            let rejection = try #require(fixture.server.rejections().first)
            #expect(rejection.reason == "InvalidProviderToken")
            #expect(rejection.injected == false)
            #expect(rejection.detail?.contains("signature") == true)
            #expect(fixture.server.acceptedCount == 0)
        }
    }

    @Test("a wrong team id or unknown key id is refused as InvalidProviderToken")
    func wrongTeamOrKeyID() async throws {
        try await LocalAPNSFixture.with(clientConfiguration: { $0.credentials.teamID = "OTHERTEAM1" }) { fixture in
            let error = await #expect(throws: APNSError.self) { try await fixture.client.send(try liveActivityUpdate()) }
            #expect(error?.reason == .invalidProviderToken)
            #expect(fixture.server.rejections().first?.detail?.contains("iss") == true)
        }
        try await LocalAPNSFixture.with(clientConfiguration: { $0.credentials.keyID = "UNKNOWNKEY" }) { fixture in
            let error = await #expect(throws: APNSError.self) { try await fixture.client.send(try liveActivityUpdate()) }
            #expect(error?.reason == .invalidProviderToken)
        }
    }

    @Test("the stand-in refuses Live Activity payloads a device would drop")
    func standInPayloadChecks() async throws {
        try await LocalAPNSFixture.with { fixture in
            let cases: [(String, APNSPushType, String)] = [
                (#"{"aps":{"timestamp":"1700000000","event":"update","content-state":{}}}"#, .liveActivity, "timestamp"),
                (#"{"aps":{"timestamp":1700000000.5,"event":"update","content-state":{}}}"#, .liveActivity, "timestamp"),
                (#"{"aps":{"timestamp":1700000000,"event":"pause","content-state":{}}}"#, .liveActivity, "event"),
                (#"{"aps":{"timestamp":1700000000,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"alert":{"title":"","body":""}}}"#, .liveActivity, "alert"),
                (#"{"aps":{"timestamp":1700000000,"event":"start","content-state":{},"alert":{"title":"t","body":"b"}}}"#, .liveActivity, "attributes-type"),
                (#"{"aps":{"timestamp":1700000000,"event":"update","content-state":{},"sound":"default"}}"#, .liveActivity, "sound"),
                (#"{"notaps":{}}"#, .alert, "aps"),
                (#"{"aps":"#, .alert, "JSON"),
            ]
            for (payload, pushType, mention) in cases {
                let request = APNSRequest(
                    deviceToken: TestCredentials.deviceToken, pushType: pushType,
                    topic: TestCredentials.bundleID, payload: Data(payload.utf8)
                )
                let error = await #expect(throws: APNSError.self) { try await fixture.client.send(request) }
                #expect(error?.status == 400)
                #expect(error?.reason == .unknown("InvalidPayload"))
                #expect(fixture.server.rejections().last?.detail?.contains(mention) == true, "\(payload)")
            }
            // An alert push to a Live Activity topic is the wrong push type.
            var mismatched = try liveActivityUpdate()
            mismatched.pushType = .alert
            mismatched.topic += ".push-type.liveactivity"
            let error = await #expect(throws: APNSError.self) { try await fixture.client.send(mismatched) }
            #expect(error?.reason == .invalidPushType)
            #expect(fixture.server.acceptedCount == 0)
        }
    }

    @Test("only the configured bundle ids are accepted")
    func acceptedBundleIDs() async throws {
        try await LocalAPNSFixture.with(serverConfiguration: { $0.acceptedBundleIDs = ["com.example.other"] }) { fixture in
            let error = await #expect(throws: APNSError.self) { try await fixture.client.send(try liveActivityUpdate()) }
            #expect(error?.reason == .deviceTokenNotForTopic)
            #expect(error?.action == .configurationError)
        }
    }

    @Test("requests that cannot be right are refused before sending")
    func refusedBeforeSending() async throws {
        try await LocalAPNSFixture.with { fixture in
            for token in ["", "abc", "zz", "0123-4567"] {
                let error = await #expect(throws: APNSRequestError.self) {
                    try await fixture.client.send(try liveActivityUpdate(token: token))
                }
                #expect(error?.code == .invalidDeviceToken)
                #expect(error?.action == .tokenDead)
            }
            let oversized = APNSRequest(
                deviceToken: TestCredentials.deviceToken, pushType: .alert, topic: TestCredentials.bundleID,
                payload: Data(repeating: UInt8(ascii: " "), count: 5000)
            )
            let error = await #expect(throws: APNSPayloadError.self) { try await fixture.client.send(oversized) }
            #expect(error?.code == .tooLarge(size: 5000, limit: 4096))
            #expect(fixture.server.acceptedCount + fixture.server.rejectedCount == 0)

            // Tokens of any even hex length are fine, upper case too.
            try await fixture.client.send(try liveActivityUpdate(token: "ABCDEF0123"))
            #expect(fixture.server.acceptedCount == 1)
        }
    }

    @Test("a server that is down gives a transport error to retry with backoff")
    func serverDown() async throws {
        let key = P256.Signing.PrivateKey()
        let server = try LocalAPNSServer(configuration: .init(signingKeys: []))
        try await server.start()
        let baseURL = server.baseURL
        try await server.stop()

        let client = try APNSClient(
            configuration: APNSClientConfiguration(
                environment: .custom(baseURL: baseURL, trustRootsPEM: server.trustRootPEM),
                credentials: .init(key: .pem(key.pemRepresentation), keyID: TestCredentials.keyID, teamID: TestCredentials.teamID),
                timeouts: .init(connect: .seconds(1), request: .seconds(2))
            ),
            logger: Logger(label: "apns-tests")
        )
        let error = await #expect(throws: APNSTransportError.self) {
            try await client.send(try liveActivityUpdate())
        }
        try await client.shutdown()
        #expect(error?.action == .retryWithBackoff)
        #expect(error?.description.contains(TestCredentials.deviceToken) == false)
    }

    @Test("a server whose certificate is not trusted gives a transport error, and nothing is sent")
    func untrustedCertificate() async throws {
        try await LocalAPNSFixture.with { fixture in
            let client = try APNSClient(
                configuration: APNSClientConfiguration(
                    environment: .custom(baseURL: fixture.server.baseURL, trustRootsPEM: nil),
                    credentials: fixture.client.configuration.credentials,
                    timeouts: .init(connect: .seconds(1), request: .seconds(2))
                ),
                logger: Logger(label: "apns-tests")
            )
            let error = await #expect(throws: APNSTransportError.self) {
                try await client.send(try liveActivityUpdate())
            }
            try await client.shutdown()
            #expect(error?.action == .retryWithBackoff)
            #expect(fixture.server.acceptedCount + fixture.server.rejectedCount == 0)
        }
    }

    @Test("a server stopped mid-run: sends fail as transport errors")
    func serverStopsWhileConnected() async throws {
        try await LocalAPNSFixture.with(clientConfiguration: { $0.timeouts.request = .seconds(10) }) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            try await fixture.server.stop()
            let error = await #expect(throws: APNSTransportError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(error?.action == .retryWithBackoff)
        }
    }

    @Test("200 concurrent sends over one client all succeed on few connections")
    func concurrentSends() async throws {
        try await LocalAPNSFixture.with { fixture in
            let ids = try await withThrowingTaskGroup(of: UUID.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(index))).apnsID
                    }
                }
                var ids: Set<UUID> = []
                for try await id in group { ids.insert(id) }
                return ids
            }
            #expect(ids.count == 200)
            #expect(fixture.server.acceptedCount == 200)
            #expect(Set(fixture.server.pushes().map(\.deviceToken)).count == 200)
            #expect(fixture.server.acceptedConnectionCount <= 2, "HTTP/2 multiplexes; connections must be reused")
        }
    }

    @Test("the server's SETTINGS_MAX_CONCURRENT_STREAMS is respected: excess requests wait, none fail")
    func serverStreamLimit() async throws {
        try await LocalAPNSFixture.with(serverConfiguration: { $0.maxConcurrentStreams = 4 }) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            fixture.server.setResponseDelay(.milliseconds(20))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<60 {
                    group.addTask { try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(index))) }
                }
                try await group.waitForAll()
            }
            #expect(fixture.server.acceptedCount == 61)
            #expect(fixture.server.rejectedCount == 0)
        }
    }

    @Test("the in-flight cap holds requests back")
    func inFlightCap() async throws {
        try await LocalAPNSFixture.with(clientConfiguration: { $0.maximumConcurrentRequests = 2 }) { fixture in
            try await fixture.client.send(try liveActivityUpdate())  // warm the connection
            fixture.server.setResponseDelay(.milliseconds(150))
            let started = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<6 {
                    group.addTask { try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(index))) }
                }
                try await group.waitForAll()
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed >= .milliseconds(440), "6 requests, 2 at a time, 150 ms each: at least 3 rounds")
            #expect(fixture.server.acceptedCount == 7)
        }
    }

    @Test("the stand-in's records reset and its wait times out with a clear error")
    func recordsAndWaiting() async throws {
        try await LocalAPNSFixture.with { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            #expect(fixture.server.pushes().count == 1)
            fixture.server.reset()
            #expect(fixture.server.pushes().isEmpty)
            #expect(fixture.server.acceptedCount == 0)
            let error = await #expect(throws: LocalAPNSServerError.self) {
                try await fixture.server.waitForPushes(count: 1, timeout: .milliseconds(100))
            }
            #expect(error?.description.contains("not 1") == true)

            async let waited = fixture.server.waitForPushes(count: 2, timeout: .seconds(30))  // CI machines can be slow
            try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(1)))
            try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(2)))
            #expect(try await waited.map(\.deviceToken) == [TestCredentials.token(1), TestCredentials.token(2)])
        }
    }
}

/// Timing-sensitive: `scripts/test` runs suites named "Timing" on their own, after the rest.
@Suite("Timing: APNs fault windows", .tags(.timing))
struct TimingFaultWindowTests {
    @Test("a fault window closes by itself")
    func faultWindow() async throws {
        try await LocalAPNSFixture.with { fixture in
            try await fixture.client.send(try liveActivityUpdate())  // connect first: the window is short
            fixture.server.injectFault(.serviceUnavailable, duration: .seconds(1))
            let error = await #expect(throws: APNSError.self) {
                try await fixture.client.send(try liveActivityUpdate())
            }
            #expect(error?.reason == .serviceUnavailable)
            try await Task.sleep(for: .milliseconds(1100))
            try await fixture.client.send(try liveActivityUpdate())
        }
    }
}
