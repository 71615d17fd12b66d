import FCM
import Foundation
import Logging
import PGKit

/// Where one merchant's FCM messages go: its Firebase project's client. Messages of one ``app``
/// are paused together when FCM refuses the project or the service account.
struct FCMRoute: Sendable {
    /// `fcm:<merchant>#<revision>`: a new `merchant set-fcm` is a new app, not held by the old one's pause.
    var app: String
    /// nil when the route is ``unusable``.
    var client: FCMClient?
    var projectID: String
    /// Set when the merchant's service account cannot be used (sealed under another master key,
    /// not a usable key): its messages wait, and this says why.
    var unusable: String?
    /// The project could not be read this time (the database is away): the messages wait for
    /// the next claim, nothing is paused.
    var transient = false
}

/// The merchants' Firebase projects, for a worker: one `FCMClient` per service account key,
/// made from the stored (sealed) account the first time one of its merchant's messages is sent,
/// its OAuth access token shared with the other workers through PostgreSQL
/// (``SharedFCMAccessTokens``), and looked up again every ``Settings/refreshInterval`` so that
/// a `merchant set-fcm` (a key rotation) reaches running workers.
final class FCMApps: Sendable {
    struct Settings: Sendable {
        /// Opens the stored service accounts; without it every Android message waits (said so).
        var masterKey: MasterKey?
        /// FCM's endpoint (``WorkerConfiguration/fcmBaseURL``) and its trust roots.
        var baseURL: String
        var trustRootsPEM: String?
        var refreshInterval: Duration = .seconds(10)
        var sharesAccessTokens = true
        var accessTokenRefreshMargin: Duration = FCMAccessTokenCache.defaultRefreshMargin
    }

    let settings: Settings
    private let store: FCMDeliveryStore
    private let logger: Logger
    let routes: MerchantRouteCache<FCMApps>

    init(settings: Settings, pool: PostgresPool, logger: Logger) {
        self.settings = settings
        self.store = FCMDeliveryStore(pool: pool)
        self.logger = logger
        self.routes = MerchantRouteCache(
            refreshInterval: settings.refreshInterval, logger: logger,
            unreadable: "cannot read a merchant's Firebase project; its Android messages wait")
    }

    /// The `private_key` of a service account's JSON: the sealing key of its shared tokens comes from it.
    private static func privateKeyPEM(of json: String) -> String {
        let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        return object?["private_key"] as? String ?? json
    }

    /// Closes every client made.
    func shutdown() async {
        for client in routes.removeAll() { try? await client.shutdown() }
    }
}

extension FCMApps: MerchantRouteSource {
    func storedApp(of merchantID: String) async throws -> StoredFCMApp? {
        try await store.app(of: merchantID)
    }

    func waitingRoute(for merchantID: String) -> FCMRoute {
        FCMRoute(app: "fcm:\(merchantID)", client: nil, projectID: "",
                 unusable: "the merchant's Firebase project cannot be read now", transient: true)
    }

    /// One client per key and endpoint.
    func clientIdentity(of stored: StoredFCMApp) -> String {
        [stored.clientEmail, stored.keyFingerprint, settings.baseURL].joined(separator: " ")
    }

    func route(_ stored: StoredFCMApp, client: FCMClient?, unusable: String?) -> FCMRoute {
        FCMRoute(app: "fcm:\(stored.merchantID)#\(stored.revision)", client: client, projectID: stored.projectID, unusable: unusable)
    }

    func makeClient(for stored: StoredFCMApp) throws(UnusableMerchantApp) -> FCMClient {
        guard let masterKey = settings.masterKey else {
            throw UnusableMerchantApp("merchant \(stored.merchantID) has a Firebase project but this worker has no master key to open its service account; give the worker the master key `merchant set-fcm` used")
        }
        guard stored.masterKeyID == masterKey.id,
              let opened = masterKey.open(stored.sealedKey, context: OrderFlowEngine.fcmKeyContext(
                merchantID: stored.merchantID, projectID: stored.projectID)),
              let json = String(data: opened, encoding: .utf8)
        else {
            throw UnusableMerchantApp("the FCM service account of merchant \(stored.merchantID) is sealed under another master key (id \(stored.masterKeyID)), not this worker's (id \(masterKey.id)); give the worker the master key it was stored with")
        }
        do {
            let account = try FCM.FCMServiceAccount(json: json)
            let configuration = FCMClientConfiguration(
                serviceAccount: account, baseURL: settings.baseURL, trustRootsPEM: settings.trustRootsPEM,
                accessTokenRefreshMargin: settings.accessTokenRefreshMargin)
            var clientLogger = logger
            clientLogger[metadataKey: "orderflow.merchant"] = "\(stored.merchantID)"
            let shared = settings.sharesAccessTokens
                ? SharedFCMAccessTokens(store: store, clientEmail: stored.clientEmail, keyFingerprint: stored.keyFingerprint,
                                        privateKeyPEM: Self.privateKeyPEM(of: json), refreshMargin: settings.accessTokenRefreshMargin)
                : nil
            let margin = settings.accessTokenRefreshMargin
            let tokens: ((FCMTokenExchange) -> any FCMAccessTokenSource)? = shared.map { shared in
                { exchange in
                    FCMAccessTokenCache(refreshMargin: margin) { now, rejected in
                        try await shared.fetch(now: now, rejected: rejected, exchange: exchange)
                    }
                }
            }
            let client = try FCMClient(configuration: configuration, logger: clientLogger, accessTokens: tokens)
            logger.info("merchant's Firebase project ready", metadata: [
                "orderflow.merchant": "\(stored.merchantID)", "fcm.project": "\(stored.projectID)",
                "fcm.key_fingerprint": "\(stored.keyFingerprint)"])
            return client
        } catch {
            throw UnusableMerchantApp("the FCM service account of merchant \(stored.merchantID) cannot be used: \(error)")
        }
    }
}
