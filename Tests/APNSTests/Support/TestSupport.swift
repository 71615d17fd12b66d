import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import NIOPosix
import OrderFlowTesting
import Synchronization

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date = Date()) {
        self.current = Mutex(start)
    }

    var now: Date { self.current.withLock { $0 } }

    func advance(minutes: Double) {
        self.current.withLock { $0 = $0.addingTimeInterval(minutes * 60) }
    }

    var read: @Sendable () -> Date { { self.now } }
}

enum TestCredentials {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let bundleID = "com.example.orderflow"
    /// 160 hex characters, like a real Live Activity token.
    static let deviceToken = String(repeating: "0123456789abcdef", count: 10)

    static func token(_ index: Int) -> String {
        String(format: "%064x", index) + String(repeating: "ab", count: 48)
    }
}

/// A running local APNs stand-in and a client pointed at it; both are torn down afterwards.
///
/// The two run on an event loop of their own, not on NIO's shared one: tests run in parallel,
/// and in a debug build one test's hundreds of HTTP/2 streams keep a shared loop busy for
/// seconds, long enough for another test's connection to time out.
struct LocalAPNSFixture {
    let server: LocalAPNSServer
    let client: APNSClient
    let signingKey: P256.Signing.PrivateKey
    /// For further clients of a scenario, so that they share the fixture's loop.
    let eventLoopGroup: MultiThreadedEventLoopGroup

    static func with<T>(
        serverConfiguration: (inout LocalAPNSServer.Configuration) -> Void = { _ in },
        clientConfiguration: (inout APNSClientConfiguration) -> Void = { _ in },
        clientKey: P256.Signing.PrivateKey? = nil,
        currentTime: @escaping @Sendable () -> Date = { Date() },
        _ body: (LocalAPNSFixture) async throws -> T
    ) async throws -> T {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let result = try await with(group, serverConfiguration, clientConfiguration, clientKey, currentTime, body)
            try await group.shutdownGracefully()
            return result
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func with<T>(
        _ group: MultiThreadedEventLoopGroup,
        _ serverConfiguration: (inout LocalAPNSServer.Configuration) -> Void,
        _ clientConfiguration: (inout APNSClientConfiguration) -> Void,
        _ clientKey: P256.Signing.PrivateKey?,
        _ currentTime: @escaping @Sendable () -> Date,
        _ body: (LocalAPNSFixture) async throws -> T
    ) async throws -> T {
        let key = P256.Signing.PrivateKey()
        var serverConfig = LocalAPNSServer.Configuration(
            signingKeys: [.init(keyID: TestCredentials.keyID, teamID: TestCredentials.teamID, publicKey: key.publicKey)]
        )
        serverConfiguration(&serverConfig)
        let server = try LocalAPNSServer(configuration: serverConfig, eventLoopGroup: group)
        try await server.start()

        var config = APNSClientConfiguration(
            environment: .custom(baseURL: server.baseURL, trustRootsPEM: server.trustRootPEM),
            credentials: .init(
                key: .pem((clientKey ?? key).pemRepresentation),
                keyID: TestCredentials.keyID,
                teamID: TestCredentials.teamID
            )
        )
        clientConfiguration(&config)
        let client: APNSClient
        do {
            client = try APNSClient(
                configuration: config, logger: Logger(label: "apns-tests"), eventLoopGroup: group, currentTime: currentTime)
        } catch {
            try await server.stop()
            throw error
        }
        let fixture = LocalAPNSFixture(server: server, client: client, signingKey: key, eventLoopGroup: group)
        do {
            let result = try await body(fixture)
            try await client.shutdown()
            try await server.stop()
            return result
        } catch {
            try? await client.shutdown()
            try? await server.stop()
            throw error
        }
    }
}

/// A content state shaped like an app's `ActivityAttributes.ContentState`.
struct DeliveryState: Codable, Sendable, Equatable {
    var status: String
    var etaMinutes: Int
}

struct DeliveryAttributes: Codable, Sendable, Equatable {
    var orderID: String
}

func liveActivityUpdate(
    status: String = "preparing",
    at timestamp: Date = Date(),
    token: String = TestCredentials.deviceToken,
    priority: APNSPriority = .immediate
) throws -> APNSRequest {
    try APNSRequest(
        liveActivity: .update(timestamp: timestamp, contentState: DeliveryState(status: status, etaMinutes: 12)),
        deviceToken: token,
        bundleID: TestCredentials.bundleID,
        priority: priority
    )
}
