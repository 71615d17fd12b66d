import APNS
import Foundation
import Logging
import NIOCore
import PGKit

/// Where one merchant's pushes go: an app's client and topic. Pushes of one ``app`` are paused
/// together when APNs refuses its credentials or topic.
struct PushRoute: Sendable {
    /// `default` for the worker's default app, `merchant:<id>#<revision>` for a merchant's own.
    var app: String
    var sender: any PushSender
    var bundleID: String
    /// Set when the merchant's app cannot be used at all (its key cannot be opened): its pushes
    /// wait, and this says why.
    var unusable: String?
    /// The app could not be read this time (the database is away): the pushes wait for the
    /// next claim, nothing is paused.
    var transient = false
}

/// The merchants' own APNs apps, for a worker: one `APNSClient` (one HTTP/2 connection set,
/// one provider token shared through PostgreSQL) per app, built from the stored app the first
/// time one of its merchant's pushes is sent, and looked up again every
/// ``Configuration-swift.struct/refreshInterval`` so
/// that a `set-apns` (a key rotation) reaches running workers. A rotated-out client stays open
/// for the pushes in flight and is closed with the registry. Merchants without an app use the
/// worker's default app.
public final class MerchantApps: Sendable {
    /// Settings of the registry.
    public struct Configuration: Sendable {
        /// Opens the stored keys; without it, merchants with their own app are paused (and
        /// said so) while the others send.
        public var masterKey: MasterKey?
        /// How often a merchant's stored app is looked up again. Default 10 seconds.
        public var refreshInterval: Duration
        /// Share each app's provider token with the other workers through PostgreSQL (one
        /// token in use at a time). Default true.
        public var sharesProviderTokens: Bool
        /// The clients' time limits. Default: the APNs client's defaults.
        public var timeouts: APNSClientConfiguration.Timeouts

        public init(masterKey: MasterKey?, refreshInterval: Duration = .seconds(10), sharesProviderTokens: Bool = true,
                    timeouts: APNSClientConfiguration.Timeouts = .init()) {
            self.masterKey = masterKey
            self.refreshInterval = refreshInterval
            self.sharesProviderTokens = sharesProviderTokens
            self.timeouts = timeouts
        }
    }

    public let configuration: Configuration
    private let store: MerchantStore
    private let logger: Logger
    private let eventLoopGroup: (any EventLoopGroup)?
    let routes: MerchantRouteCache<MerchantApps>

    /// - Parameters:
    ///   - configuration: the master key, how often apps are looked up, token sharing.
    ///   - pool: where the apps and the shared provider tokens are read.
    ///   - logger: records of the apps' clients (never a key or a provider token).
    ///   - eventLoopGroup: where the clients' connections run; by default AsyncHTTPClient's.
    public init(configuration: Configuration, pool: PostgresPool, logger: Logger,
                eventLoopGroup: (any EventLoopGroup)? = nil) {
        self.configuration = configuration
        self.store = MerchantStore(pool: pool)
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
        self.routes = MerchantRouteCache(
            refreshInterval: configuration.refreshInterval, logger: logger,
            unreadable: "cannot read a merchant's APNs app; its pushes wait")
    }

    /// Closes every client made.
    public func shutdown() async {
        for client in routes.removeAll() { try? await client.shutdown() }
    }
}

extension MerchantApps: MerchantRouteSource {
    func storedApp(of merchantID: String) async throws -> StoredMerchantApp? {
        try await store.app(of: merchantID)
    }

    /// Never the default app for a merchant not known yet: its pushes would go to the wrong topic.
    func waitingRoute(for merchantID: String) -> PushRoute {
        PushRoute(app: "merchant:\(merchantID)", sender: UnusableApp(), bundleID: "",
                  unusable: "the merchant's APNs app cannot be read now", transient: true)
    }

    /// One client per app identity (team, key, endpoint): merchants sharing an app share its
    /// connections and its provider token.
    func clientIdentity(of stored: StoredMerchantApp) -> String {
        [stored.teamID, stored.keyID, stored.keyFingerprint, stored.environment, stored.endpointURL ?? ""].joined(separator: " ")
    }

    /// A new revision (set-apns again) is a new app: a pause of the old one does not hold it.
    func route(_ stored: StoredMerchantApp, client: APNSClient?, unusable: String?) -> PushRoute {
        PushRoute(app: "merchant:\(stored.merchantID)#\(stored.revision)", sender: client ?? UnusableApp(),
                  bundleID: stored.bundleID, unusable: unusable)
    }

    func makeClient(for stored: StoredMerchantApp) throws(UnusableMerchantApp) -> APNSClient {
        guard let masterKey = configuration.masterKey else {
            throw UnusableMerchantApp("merchant \(stored.merchantID) has its own APNs app but this worker has no master key to open it; give the worker the master key `merchant set-apns` used")
        }
        guard stored.masterKeyID == masterKey.id,
              let pem = masterKey.open(stored.sealedKey, context: OrderFlowEngine.keyContext(
                merchantID: stored.merchantID, teamID: stored.teamID, keyID: stored.keyID)).flatMap({ String(data: $0, encoding: .utf8) })
        else {
            throw UnusableMerchantApp("the APNs key of merchant \(stored.merchantID) is sealed under another master key (id \(stored.masterKeyID)), not this worker's (id \(masterKey.id)); give the worker the master key it was stored with")
        }
        let environment: APNSClientConfiguration.Environment = switch stored.environment {
        case "sandbox": .sandbox
        case "custom": .custom(baseURL: stored.endpointURL ?? "", trustRootsPEM: stored.endpointCA)
        default: .production
        }
        let clientConfiguration = APNSClientConfiguration(
            environment: environment, credentials: .init(key: .pem(pem), keyID: stored.keyID, teamID: stored.teamID),
            timeouts: configuration.timeouts)
        do {
            var clientLogger = logger
            clientLogger[metadataKey: "orderflow.merchant"] = "\(stored.merchantID)"
            let store = self.store
            let shares = configuration.sharesProviderTokens
            let tokens: ((APNSSigningKey) -> any APNSProviderTokenSource)? =
                shares ? { key in SharedProviderTokens(store: store, signingKey: key) } : nil
            let client = if let eventLoopGroup {
                try APNSClient(configuration: clientConfiguration, logger: clientLogger, eventLoopGroup: eventLoopGroup,
                               providerTokens: tokens)
            } else {
                try APNSClient(configuration: clientConfiguration, logger: clientLogger, providerTokens: tokens)
            }
            logger.info("merchant's own APNs app ready", metadata: [
                "orderflow.merchant": "\(stored.merchantID)", "orderflow.bundle_id": "\(stored.bundleID)",
                "apns.key_id": "\(stored.keyID)", "apns.key_fingerprint": "\(stored.keyFingerprint)"])
            return client
        } catch let error as APNSCredentialsError {
            throw UnusableMerchantApp("the stored APNs key of merchant \(stored.merchantID) cannot be used: \(error.message)")
        } catch {
            throw UnusableMerchantApp("the APNs app of merchant \(stored.merchantID) cannot be used: \(error)")
        }
    }
}

/// The sender of an app that cannot be used; never called (its route says why).
private struct UnusableApp: PushSender {
    func send(_ request: APNSRequest) async throws -> APNSSendResult {
        throw OrderFlowError(.invalidConfiguration, "this merchant's APNs app cannot be used")
    }
}
