import FCM
import Foundation
import Logging
import NIOCore
import PGKit
import Synchronization

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
    private let eventLoopGroup: (any EventLoopGroup)?
    private let state = Mutex(State())

    private struct State {
        var entries: [String: Entry] = [:]
        /// One client per key and endpoint; replaced ones stay open for the messages in flight
        /// and are closed at ``shutdown()``.
        var clients: [String: FCMClient] = [:]
    }

    private struct Entry {
        var checkedAt: ContinuousClock.Instant
        var revision: Int?
        var route: FCMRoute?
    }

    init(settings: Settings, pool: PostgresPool, logger: Logger, eventLoopGroup: (any EventLoopGroup)? = nil) {
        self.settings = settings
        self.store = FCMDeliveryStore(pool: pool)
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
    }

    /// The route of `merchantID`'s FCM messages; nil when the merchant has no Firebase project.
    func route(for merchantID: String) async -> FCMRoute? {
        let now = ContinuousClock.now
        if let entry = state.withLock({ $0.entries[merchantID] }), now - entry.checkedAt < settings.refreshInterval {
            return entry.route
        }
        let stored: StoredFCMApp?
        do {
            stored = try await store.app(of: merchantID)
        } catch {
            logger.warning("cannot read a merchant's Firebase project; its Android messages wait", metadata: [
                "orderflow.merchant": "\(merchantID)", "orderflow.error": "\(error)"])
            if let entry = state.withLock({ $0.entries[merchantID] }) { return entry.route }
            return FCMRoute(app: "fcm:\(merchantID)", client: nil, projectID: "",
                            unusable: "the merchant's Firebase project cannot be read now", transient: true)
        }
        return state.withLock { state -> FCMRoute? in
            if let entry = state.entries[merchantID], entry.revision == stored?.revision {
                state.entries[merchantID]?.checkedAt = now
                return entry.route
            }
            let route = stored.map { makeRoute($0, clients: &state.clients) }
            state.entries[merchantID] = Entry(checkedAt: now, revision: stored?.revision, route: route)
            return route
        }
    }

    private func makeRoute(_ stored: StoredFCMApp, clients: inout [String: FCMClient]) -> FCMRoute {
        let app = "fcm:\(stored.merchantID)#\(stored.revision)"
        func unusable(_ why: String) -> FCMRoute {
            FCMRoute(app: app, client: nil, projectID: stored.projectID, unusable: why)
        }
        let identity = [stored.clientEmail, stored.keyFingerprint, settings.baseURL].joined(separator: " ")
        if let client = clients[identity] {
            return FCMRoute(app: app, client: client, projectID: stored.projectID)
        }
        guard let masterKey = settings.masterKey else {
            return unusable("merchant \(stored.merchantID) has a Firebase project but this worker has no master key to open its service account; give the worker the master key `merchant set-fcm` used")
        }
        guard stored.masterKeyID == masterKey.id,
              let opened = masterKey.open(stored.sealedKey, context: OrderFlowEngine.fcmKeyContext(
                merchantID: stored.merchantID, projectID: stored.projectID)),
              let json = String(data: opened, encoding: .utf8)
        else {
            return unusable("the FCM service account of merchant \(stored.merchantID) is sealed under another master key (id \(stored.masterKeyID)), not this worker's (id \(masterKey.id)); give the worker the master key it was stored with")
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
            let client = if let eventLoopGroup {
                try FCMClient(configuration: configuration, logger: clientLogger, eventLoopGroup: eventLoopGroup, accessTokens: tokens)
            } else {
                try FCMClient(configuration: configuration, logger: clientLogger, accessTokens: tokens)
            }
            logger.info("merchant's Firebase project ready", metadata: [
                "orderflow.merchant": "\(stored.merchantID)", "fcm.project": "\(stored.projectID)",
                "fcm.key_fingerprint": "\(stored.keyFingerprint)"])
            clients[identity] = client
            return FCMRoute(app: app, client: client, projectID: stored.projectID)
        } catch {
            return unusable("the FCM service account of merchant \(stored.merchantID) cannot be used: \(error)")
        }
    }

    /// The `private_key` of a service account's JSON: the sealing key of its shared tokens comes from it.
    private static func privateKeyPEM(of json: String) -> String {
        let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        return object?["private_key"] as? String ?? json
    }

    /// Closes every client made.
    func shutdown() async {
        let clients = state.withLock { state -> [FCMClient] in
            defer { state = State() }
            return Array(state.clients.values)
        }
        for client in clients { try? await client.shutdown() }
    }
}
