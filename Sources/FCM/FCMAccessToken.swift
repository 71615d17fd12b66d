import Foundation
import Synchronization

/// An OAuth 2 access token for FCM and when it stops being accepted.
///
/// Printed, dumped or logged it shows only its expiry: the token itself authorises sending to
/// every device of the project.
public struct FCMAccessToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The bearer token, sent as `Authorization: Bearer <value>`.
    public let value: String
    /// When Google stops accepting it (the exchange's time plus `expires_in`).
    public let expiresAt: Date

    /// A token obtained earlier (from ``FCMTokenExchange`` or read back from a shared store).
    ///
    /// - Parameters:
    ///   - value: the bearer token.
    ///   - expiresAt: when it stops being accepted.
    public init(value: String, expiresAt: Date) {
        self.value = value
        self.expiresAt = expiresAt
    }

    public var description: String {
        "FCMAccessToken(expiresAt: \(Int(self.expiresAt.timeIntervalSince1970)))"
    }

    public var debugDescription: String { self.description }
    public var customMirror: Mirror { Mirror(self, children: ["expiresAt": self.expiresAt]) }
}

/// Where an ``FCMClient`` gets the access token for each request. By default an
/// ``FCMAccessTokenCache`` of the client's own over its ``FCMTokenExchange``; a program running
/// several workers with one service account supplies a source they share, so that one token
/// serves all of them instead of each exchanging its own.
public protocol FCMAccessTokenSource: Sendable {
    /// The token to send with now; obtains a new one when the current one is about to expire.
    func accessToken() async throws -> FCMAccessToken
    /// Records that FCM answered `401 UNAUTHENTICATED` to a request carrying `token`: the next
    /// ``accessToken()`` must not return it again.
    ///
    /// - Parameter token: the token FCM refused.
    func accessTokenRejected(_ token: FCMAccessToken)
}

/// Keeps one access token until shortly before it expires, and obtains the next one once however
/// many tasks ask at the same time: the first asks `fetch`, the others wait for its answer.
///
/// `fetch` decides where a token comes from: ``FCMTokenExchange/exchange(at:)`` in one process,
/// or a shared store that returns a token another worker obtained (and exchanges only when
/// the stored one is due).
public final class FCMAccessTokenCache: FCMAccessTokenSource {
    /// How long before its expiry a token is replaced by default: requests in flight, clocks a
    /// little apart, and a token that is still accepted when it arrives.
    public static let defaultRefreshMargin: Duration = .seconds(5 * 60)

    /// What a fetch is told: the time, and the token FCM refused, if that is why it is asked.
    public typealias Fetch = @Sendable (_ now: Date, _ rejected: FCMAccessToken?) async throws -> FCMAccessToken

    private let fetch: Fetch
    private let refreshMargin: Duration
    private let currentTime: @Sendable () -> Date
    private let state = Mutex(State())

    private struct State {
        var current: FCMAccessToken?
        var rejected: FCMAccessToken?
        /// Set while one task fetches; the others wait here.
        var waiters: [CheckedContinuation<FCMAccessToken, any Error>]?
    }

    /// - Parameters:
    ///   - refreshMargin: how long before its expiry a token is replaced.
    ///   - currentTime: the clock (injectable for tests).
    ///   - fetch: obtains a token; called by one task at a time.
    public init(
        refreshMargin: Duration = FCMAccessTokenCache.defaultRefreshMargin,
        currentTime: @escaping @Sendable () -> Date = { Date() },
        fetch: @escaping Fetch
    ) {
        self.fetch = fetch
        self.refreshMargin = refreshMargin
        self.currentTime = currentTime
    }

    /// The cached token while it has more than the refresh margin left, else a fetched one.
    public func accessToken() async throws -> FCMAccessToken {
        enum Next { case use(FCMAccessToken), fetch(rejected: FCMAccessToken?), wait }
        let now = self.currentTime()
        let margin = TimeInterval(self.refreshMargin.components.seconds)
        let next: Next = self.state.withLock { state in
            if let token = state.current, token.expiresAt.timeIntervalSince(now) > margin { return .use(token) }
            if state.waiters != nil { return .wait }
            state.waiters = []
            return .fetch(rejected: state.rejected)
        }
        switch next {
        case .use(let token):
            return token
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                self.state.withLock { state in
                    if state.waiters != nil {
                        state.waiters!.append(continuation)
                    } else if let current = state.current {
                        continuation.resume(returning: current)
                    } else {
                        continuation.resume(throwing: FCMCredentialsError(
                            code: .tokenExchangeFailed, path: nil,
                            message: "No FCM access token could be obtained; see the error of the request that tried."))
                    }
                }
            }
        case .fetch(let rejected):
            let outcome: Result<FCMAccessToken, any Error>
            do {
                outcome = .success(try await self.fetch(now, rejected))
            } catch {
                outcome = .failure(error)
            }
            let waiters = self.state.withLock { state in
                if case .success(let token) = outcome {
                    state.current = token
                    state.rejected = nil
                }
                defer { state.waiters = nil }
                return state.waiters ?? []
            }
            for waiter in waiters { waiter.resume(with: outcome) }
            return try outcome.get()
        }
    }

    public func accessTokenRejected(_ token: FCMAccessToken) {
        self.state.withLock { state in
            guard state.current == token else { return }
            state.current = nil
            state.rejected = token
        }
    }
}
