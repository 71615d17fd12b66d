import APNS
import Foundation
import LocalAPNS
import Testing

/// Broadcast channels (iOS 18) against the stand-in: the management API, one request for every
/// follower, and each broadcast reason.
@Suite("Broadcast channels against the local APNs")
struct BroadcastTests {
    func update(_ status: String, at seconds: TimeInterval = 1_700_000_000) throws -> LiveActivityPayload {
        .update(timestamp: Date(timeIntervalSince1970: seconds), contentState: try APNSJSONObject(encoding: DeliveryState(status: status, etaMinutes: 3)))
    }

    @Test("create, read, list and delete a channel; a deleted channel is ChannelNotRegistered")
    func channelLifecycle() async throws {
        try await LocalAPNSFixture.with { fixture in
            let client = fixture.client
            let stored = try await client.createChannel(bundleID: TestCredentials.bundleID, storagePolicy: .mostRecentMessageStored)
            let unstored = try await client.createChannel(bundleID: TestCredentials.bundleID, storagePolicy: .noMessageStored)
            #expect(stored != unstored)
            #expect(Data(base64Encoded: stored) != nil)
            #expect(try await client.channel(bundleID: TestCredentials.bundleID, id: stored).storagePolicy == .mostRecentMessageStored)
            #expect(try await client.channel(bundleID: TestCredentials.bundleID, id: unstored).storagePolicy == .noMessageStored)
            #expect(Set(try await client.listChannels(bundleID: TestCredentials.bundleID)) == [stored, unstored])

            try await client.deleteChannel(bundleID: TestCredentials.bundleID, id: stored)
            #expect(try await client.listChannels(bundleID: TestCredentials.bundleID) == [unstored])
            let error = await #expect(throws: APNSError.self) {
                try await client.channel(bundleID: TestCredentials.bundleID, id: stored)
            }
            #expect(error?.reason == .channelNotRegistered)
            #expect(error?.channelID == stored)
            #expect(error?.description.contains("request for channel \(stored) with 400 ChannelNotRegistered") == true)
        }
    }

    @Test("one broadcast is one request, however many devices follow the channel")
    func oneRequestForEveryFollower() async throws {
        try await LocalAPNSFixture.with { fixture in
            let channel = try await fixture.client.createChannel(bundleID: TestCredentials.bundleID, storagePolicy: .noMessageStored)
            let followers = (0..<1000).map { "device-\($0)" }
            for device in followers { fixture.server.subscribe(device: device, toChannel: channel) }
            fixture.server.resetBroadcasts()

            let result = try await fixture.client.broadcast(
                try APNSBroadcastRequest(liveActivity: try update("lap 12"), channelID: channel, bundleID: TestCredentials.bundleID,
                                         priority: .conservePower))
            #expect(result.uniqueID != nil)
            let counts = fixture.server.broadcastCounts
            #expect(counts.requests == 1)
            #expect(counts.deliveries == 1000)
            #expect(fixture.server.acceptedCount == 0, "no device push was sent")
            let broadcast = try #require(fixture.server.broadcasts().first)
            #expect(broadcast.priority == 5)
            #expect(broadcast.expiration == 0)
            #expect(broadcast.aps?["content-state"]?["status"] == "lap 12")
            #expect(fixture.server.broadcasts(reaching: "device-999").count == 1)
        }
    }

    @Test("the headers are APNs': apns-channel-id, liveactivity push type, priority 1, 5 or 10, expiration, no topic")
    func headers() async throws {
        try await LocalAPNSFixture.with { fixture in
            let channel = try await fixture.client.createChannel(bundleID: TestCredentials.bundleID, storagePolicy: .mostRecentMessageStored)
            for priority in [APNSBroadcastPriority.lowest, .conservePower, .immediate] {
                try await fixture.client.broadcast(
                    try APNSBroadcastRequest(liveActivity: try update("x"), channelID: channel, bundleID: TestCredentials.bundleID,
                                             priority: priority, expiration: 1_700_003_600))
            }
            #expect(fixture.server.broadcasts().map(\.priority) == [1, 5, 10])
            #expect(fixture.server.broadcasts().allSatisfy { $0.expiration == 1_700_003_600 })
        }
    }

    @Test("each broadcast refusal comes back as its reason, with the channel")
    func refusals() async throws {
        try await LocalAPNSFixture.with { fixture in
            let client = fixture.client
            let unstored = try await client.createChannel(bundleID: TestCredentials.bundleID, storagePolicy: .noMessageStored)
            func reason(_ request: APNSBroadcastRequest) async -> APNSErrorReason? {
                do {
                    try await client.broadcast(request)
                    return nil
                } catch let error as APNSError {
                    return error.reason
                } catch {
                    Issue.record("unexpected \(error)")
                    return nil
                }
            }
            let payload = try update("x")
            // A channel that was never created, or of another app.
            #expect(await reason(try APNSBroadcastRequest(liveActivity: payload, channelID: "bm90LWEtY2hhbm5lbA==",
                                                          bundleID: TestCredentials.bundleID, priority: .immediate)) == .channelNotRegistered)
            #expect(await reason(try APNSBroadcastRequest(liveActivity: payload, channelID: unstored, bundleID: "com.other.app",
                                                          priority: .immediate)) == .channelNotRegistered)
            // A channel that stores nothing takes only apns-expiration 0.
            let expiring = try APNSBroadcastRequest(liveActivity: payload, channelID: unstored, bundleID: TestCredentials.bundleID,
                                                    priority: .immediate, expiration: 1_700_003_600)
            #expect(await reason(expiring) == .invalidPolicy)
            // An injected fault for the channel.
            fixture.server.injectFault(.init(status: 400, reason: "MissingChannelId"), deviceToken: unstored, count: 1)
            let plain = try APNSBroadcastRequest(liveActivity: payload, channelID: unstored, bundleID: TestCredentials.bundleID, priority: .immediate)
            #expect(await reason(plain) == .missingChannelId)
            #expect(await reason(plain) == nil)

            #expect(APNSErrorReason.channelNotRegistered.action(status: 400) == .tokenDead)
            #expect(APNSErrorReason.missingChannelId.action(status: 400) == .configurationError)
            #expect(APNSErrorReason.missingPushType.action(status: 400) == .configurationError)
        }
    }

    @Test("refused before sending: a start, a malformed channel id, a payload over 5120 bytes")
    func refusedBeforeSending() async throws {
        let start = LiveActivityPayload(
            event: .start, timestamp: Date(), contentState: try APNSJSONObject(encoding: DeliveryState(status: "a", etaMinutes: 1)),
            alert: LiveActivityAlert(title: "t", body: "b"), attributesType: "A", attributes: try APNSJSONObject(encoding: ["k": "v"]))
        #expect(throws: APNSPayloadError.self) {
            _ = try APNSBroadcastRequest(liveActivity: start, channelID: "YWJj", bundleID: TestCredentials.bundleID, priority: .immediate)
        }
        try await LocalAPNSFixture.with { fixture in
            let bad = APNSBroadcastRequest(channelID: "not base64!", bundleID: TestCredentials.bundleID, priority: .immediate,
                                           payload: Data("{}".utf8))
            await #expect(throws: APNSRequestError.self) { try await fixture.client.broadcast(bad) }
            let big = try update(String(repeating: "x", count: 5000))
            let channel = try await fixture.client.createChannel(bundleID: TestCredentials.bundleID, storagePolicy: .noMessageStored)
            // Over a device push's 4096 bytes, within a broadcast's 5120.
            try await fixture.client.broadcast(
                try APNSBroadcastRequest(liveActivity: big, channelID: channel, bundleID: TestCredentials.bundleID, priority: .immediate))
            #expect(throws: APNSPayloadError.self) {
                _ = try APNSBroadcastRequest(liveActivity: try update(String(repeating: "x", count: 5200)), channelID: channel,
                                             bundleID: TestCredentials.bundleID, priority: .immediate)
            }
        }
    }

    @Test("a push-to-start can subscribe the new activity to a channel (input-push-channel)")
    func pushToStartJoinsAChannel() throws {
        let start = LiveActivityPayload(
            event: .start, timestamp: Date(timeIntervalSince1970: 1_700_000_000),
            contentState: try APNSJSONObject(encoding: DeliveryState(status: "a", etaMinutes: 1)),
            alert: LiveActivityAlert(title: "Race", body: "Follow it"), attributesType: "RaceAttributes",
            attributes: try APNSJSONObject(encoding: ["track": "Monza"]), inputPushChannel: "YWJjZA==")
        #expect(start.json["aps"]?["input-push-channel"] == "YWJjZA==")
    }
}
