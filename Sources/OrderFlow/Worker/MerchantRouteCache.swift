import Logging
import Synchronization

/// A merchant's app as stored: each `set-apns` or `set-fcm` stores it one revision later, which
/// is how a worker tells a rotated app from the one it already uses.
protocol StoredMerchantRevision: Sendable {
    var revision: Int { get }
}

extension StoredMerchantApp: StoredMerchantRevision {}
extension StoredFCMApp: StoredMerchantRevision {}

/// Why a merchant's stored app cannot be used: its messages wait, and this says why.
struct UnusableMerchantApp: Error {
    var why: String

    init(_ why: String) { self.why = why }
}

/// What a ``MerchantRouteCache`` needs of one kind of merchant app (APNs, FCM): how it is read,
/// which stored apps share a client, how a client is made and what a route is.
protocol MerchantRouteSource: Sendable {
    associatedtype Stored: StoredMerchantRevision
    associatedtype Route: Sendable
    associatedtype Client: Sendable

    /// The source's routes, kept.
    var routes: MerchantRouteCache<Self> { get }

    /// The merchant's stored app; nil when it has none of this kind.
    func storedApp(of merchantID: String) async throws -> Stored?
    /// The route of a merchant not known yet while its app cannot be read: its messages wait.
    func waitingRoute(for merchantID: String) -> Route
    /// What makes two stored apps one client: merchants whose apps say the same share it.
    func clientIdentity(of stored: Stored) -> String
    /// A new client for the stored app, or why it cannot be used.
    func makeClient(for stored: Stored) throws(UnusableMerchantApp) -> Client
    /// The route of the stored app: through `client`, or (nil) unusable for the reason given.
    func route(_ stored: Stored, client: Client?, unusable: String?) -> Route
}

extension MerchantRouteSource {
    /// The route of `merchantID`'s messages; nil when the merchant has no app of this kind.
    func route(for merchantID: String) async -> Route? {
        await routes.route(for: merchantID, from: self)
    }
}

/// Each merchant's route (where its messages go) for a worker, made from the merchant's stored
/// app the first time one of its messages is sent and kept with the clients it opened.
///
/// A route is looked up again once it is `refreshInterval` old, so that a key rotation reaches
/// running workers; only a new revision makes a new route, an unchanged one keeps its route for
/// another interval. When the database cannot be read the route already known is kept (the next
/// message looks again), and a merchant not known yet gets its source's waiting route, never a
/// guess. One client per identity: a replaced one stays open for the messages in flight until
/// ``removeAll()``.
final class MerchantRouteCache<Source: MerchantRouteSource>: Sendable {
    private let refreshInterval: Duration
    private let logger: Logger
    private let unreadable: Logger.Message
    private let state = Mutex(State())

    private struct State {
        var entries: [String: Entry] = [:]
        var clients: [String: Source.Client] = [:]
    }

    private struct Entry {
        var checkedAt: ContinuousClock.Instant
        /// nil: the merchant has no app of this kind.
        var revision: Int?
        var route: Source.Route?
    }

    /// - Parameters:
    ///   - refreshInterval: how long a route is used before the stored app is read again.
    ///   - logger: where a failed read is said, at warning level, with the merchant and the error.
    ///   - unreadable: what that warning says (what waits because of it).
    init(refreshInterval: Duration, logger: Logger, unreadable: Logger.Message) {
        self.refreshInterval = refreshInterval
        self.logger = logger
        self.unreadable = unreadable
    }

    /// The route of `merchantID`'s messages; nil when the merchant has no app of this kind.
    /// - Parameters:
    ///   - merchantID: whose route.
    ///   - source: reads the merchant's app and makes its client and route (the cache's owner).
    func route(for merchantID: String, from source: Source) async -> Source.Route? {
        let now = ContinuousClock.now
        if let entry = state.withLock({ $0.entries[merchantID] }), now - entry.checkedAt < refreshInterval {
            return entry.route
        }
        let stored: Source.Stored?
        do {
            stored = try await source.storedApp(of: merchantID)
        } catch {
            logger.warning(unreadable, metadata: ["orderflow.merchant": "\(merchantID)", "orderflow.error": "\(error)"])
            if let entry = state.withLock({ $0.entries[merchantID] }) { return entry.route }
            return source.waitingRoute(for: merchantID)
        }
        return state.withLock { state -> Source.Route? in
            if let entry = state.entries[merchantID], entry.revision == stored?.revision {
                state.entries[merchantID]?.checkedAt = now
                return entry.route
            }
            let route = stored.map { Self.route(of: $0, from: source, clients: &state.clients) }
            state.entries[merchantID] = Entry(checkedAt: now, revision: stored?.revision, route: route)
            return route
        }
    }

    /// The route of a stored app of a new revision, through the client of its identity (made
    /// now if there is none yet).
    private static func route(of stored: Source.Stored, from source: Source,
                              clients: inout [String: Source.Client]) -> Source.Route {
        let identity = source.clientIdentity(of: stored)
        if let client = clients[identity] {
            return source.route(stored, client: client, unusable: nil)
        }
        do throws(UnusableMerchantApp) {
            let client = try source.makeClient(for: stored)
            clients[identity] = client
            return source.route(stored, client: client, unusable: nil)
        } catch {
            return source.route(stored, client: nil, unusable: error.why)
        }
    }

    /// Forgets every route and hands back every client made, for the owner to close.
    func removeAll() -> [Source.Client] {
        state.withLock { state -> [Source.Client] in
            defer { state = State() }
            return Array(state.clients.values)
        }
    }
}
