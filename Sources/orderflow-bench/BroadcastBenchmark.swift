import APNS
import ArgumentParser
import Foundation
import Logging

/// What one Live Activity update costs the sender when many devices follow it: one broadcast to a
/// channel (iOS 18) against one push per device, on the local APNs stand-in.
struct BroadcastBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcast",
        abstract: "Cost per update for N followers: one channel broadcast vs one push per device.",
        discussion: """
            1. broadcast: a channel is created through the channel management API, --followers \
            devices subscribe to it on the stand-in, and --updates Live Activity updates are \
            broadcast, one after another. Counted: requests sent, deliveries the stand-in fans out.
            2. per device: the same update sent as --sample device pushes (--concurrency in \
            flight), timed; the cost for --followers devices is that rate extrapolated.

            Example: swift run -c release orderflow-bench broadcast --followers 1000000
            """)

    @Option(help: "Devices following the activity.") var followers = 1_000_000
    @Option(help: "Updates broadcast.") var updates = 20
    @Option(help: "Device pushes timed for the per-device comparison.") var sample = 20_000
    @Option(help: "Device pushes in flight at once.") var concurrency = 200

    func run() async throws {
        guard followers > 0, updates > 0, sample > 0, concurrency > 0 else {
            throw BenchError("--followers, --updates, --sample and --concurrency must be positive")
        }
        var logger = Logger(label: "orderflow.bench")
        logger.logLevel = .warning
        let apns = try await BenchAPNS.start(recordsPushes: false)
        let client = try apns.makeClient(logger: logger, maximumConcurrentRequests: concurrency)
        do {
            try await measure(apns: apns, client: client)
            try await client.shutdown()
            try? await apns.server.stop()
        } catch {
            try? await client.shutdown()
            try? await apns.server.stop()
            throw error
        }
    }

    private func measure(apns: BenchAPNS, client: APNSClient) async throws {
        let channel = try await client.createChannel(bundleID: BenchAPNS.bundleID, storagePolicy: .mostRecentMessageStored)
        for index in 0..<followers { apns.server.subscribe(device: "device-\(index)", toChannel: channel) }
        apns.server.resetBroadcasts()

        let state = try APNSJSONObject(encoding: ["status": "racing", "lap": "12", "leader": "LEC"])
        func payload(_ index: Int) -> LiveActivityPayload {
            .update(timestamp: Date(timeIntervalSince1970: 1_700_000_000 + TimeInterval(index)), contentState: state)
        }
        let clock = ContinuousClock()
        let start = clock.now
        for index in 0..<updates {
            try await client.broadcast(
                try APNSBroadcastRequest(liveActivity: payload(index), channelID: channel, bundleID: BenchAPNS.bundleID,
                                         priority: .conservePower))
        }
        let broadcastSeconds = (clock.now - start).asSeconds / Double(updates)
        let counts = apns.server.broadcastCounts
        let body = try payload(0).encoded()

        // Per device: the same update to `sample` tokens, timed.
        let tokens = (0..<min(sample, 1000)).map { _ in BenchAPNS.randomToken(160) }
        let requests = tokens.map {
            APNSRequest(deviceToken: $0, pushType: .liveActivity, topic: BenchAPNS.bundleID, priority: .conservePower, payload: body)
        }
        _ = await client.sendForBenchmark(requests, count: min(1000, sample), concurrency: concurrency)  // connect, warm up
        let deviceStart = clock.now
        let failures = await client.sendForBenchmark(requests, count: sample, concurrency: concurrency)
        let deviceSeconds = (clock.now - deviceStart).asSeconds
        let rate = Double(sample - failures) / deviceSeconds

        print("")
        print("one update (\(body.count)-byte payload) for \(followers) followers, on the local APNs stand-in (\(apns.server.baseURL))")
        print("broadcast:  \(counts.requests / updates) request per update; the stand-in fanned \(updates) updates out to \(counts.deliveries) deliveries")
        print(String(format: "            %.2f ms per update (mean of %d, sent one after another)", broadcastSeconds * 1000, updates))
        print("per device: \(followers) requests per update")
        print(String(format: "            %.0f pushes/s measured over %d pushes (%d in flight, %d failed)", rate, sample, concurrency, failures))
        print(String(format: "            %.1f s per update for %d followers at that rate", Double(followers) / rate, followers))
        print(String(format: "            %.1f MB of payload per update (broadcast: %d bytes)",
                     Double(followers * body.count) / 1_000_000, body.count))
    }
}
