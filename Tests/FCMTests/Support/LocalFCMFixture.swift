import FCM
import Foundation
import LocalFCM
import Logging
import NIOPosix
import Synchronization

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date = Date()) {
        self.current = Mutex(start)
    }

    var now: Date { self.current.withLock { $0 } }

    func advance(seconds: Double) {
        self.current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    var read: @Sendable () -> Date { { self.now } }
}

/// A running FCM stand-in, a service account it knows and a client pointed at it; all torn down
/// afterwards. They run on an event loop of their own, as the APNs tests' fixture does.
struct LocalFCMFixture {
    static let projectID = "orderflow-test"

    let server: LocalFCMServer
    let client: FCMClient
    let key: LocalFCMServiceAccountKey
    let serviceAccount: FCMServiceAccount
    let eventLoopGroup: MultiThreadedEventLoopGroup

    static func token(_ index: Int) -> String { LocalFCMServer.registrationToken(index) }

    static func with<T>(
        serverConfiguration: LocalFCMServer.Configuration = .init(),
        currentTime: @escaping @Sendable () -> Date = { Date() },
        accessTokens: ((FCMTokenExchange) -> any FCMAccessTokenSource)? = nil,
        _ body: (LocalFCMFixture) async throws -> T
    ) async throws -> T {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try LocalFCMServer(configuration: serverConfiguration, eventLoopGroup: group)
        try await server.start()
        var client: FCMClient?
        do {
            let key = try server.makeServiceAccount(projectID: projectID)
            let account = try FCMServiceAccount(json: key.json)
            let made = try FCMClient(
                configuration: .init(serviceAccount: account, baseURL: server.baseURL, trustRootsPEM: server.trustRootPEM),
                logger: Logger(label: "fcm-tests"), eventLoopGroup: group, currentTime: currentTime, accessTokens: accessTokens)
            client = made
            let result = try await body(LocalFCMFixture(server: server, client: made, key: key, serviceAccount: account, eventLoopGroup: group))
            try await made.shutdown()
            try await server.stop()
            try await group.shutdownGracefully()
            return result
        } catch {
            try? await client?.shutdown()
            try? await server.stop()
            try? await group.shutdownGracefully()
            throw error
        }
    }
}

func dataMessage(_ index: Int = 1, data: [String: String] = ["order": "A-17", "state": "ready"]) -> FCMMessage {
    FCMMessage(token: LocalFCMFixture.token(index), data: data, priority: .high, collapseKey: "order-A-17", timeToLive: 3600)
}
