import APNS
import Crypto
import Foundation
import Synchronization

/// The provider token of one (team, key), shared through PostgreSQL by every worker that sends
/// with the key, so that one token is in use at a time: APNs answers
/// `429 TooManyProviderTokenUpdates` when replicas each sign their own.
///
/// The token is kept in `apns_provider_tokens`, sealed (AES-GCM) under a key derived from the
/// signing key, so that only holders of the `.p8` key can read it. A worker uses its copy until
/// it is ``refreshInterval`` old, then asks the database under the (team, key)'s advisory lock:
/// the first to ask signs a new token, the others take it. No token is signed less than 20
/// minutes after the stored one; a worker that starts reuses the stored one. In one process,
/// one request at a time goes to the database; the others wait for its answer.
final class SharedProviderTokens: APNSProviderTokenSource {
    let signingKey: APNSSigningKey
    let refreshInterval: Duration
    private let store: MerchantStore
    private let sealingKey: SymmetricKey
    private let currentTime: @Sendable () -> Date
    private let state = Mutex(State())

    private struct State {
        var current: APNSProviderToken?
        var renewalRequested = false
        /// Set while one task asks the database; the others wait here.
        var waiters: [CheckedContinuation<APNSProviderToken, any Error>]?
        /// Why the last fetch failed, for a waiter that arrives after it.
        var lastError: (any Error)?
    }

    init(store: MerchantStore, signingKey: APNSSigningKey,
         refreshInterval: Duration = APNSProviderTokenFactory.defaultRefreshInterval,
         currentTime: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.signingKey = signingKey
        self.refreshInterval = min(max(refreshInterval, APNSProviderTokenFactory.minimumRegenerationInterval), .seconds(55 * 60))
        self.sealingKey = signingKey.derivedKey(purpose: "orderflow shared APNs provider token")
        self.currentTime = currentTime
    }

    func providerToken() async throws -> APNSProviderToken {
        enum Next { case use(APNSProviderToken), fetch, wait }
        let now = currentTime()
        let next: Next = state.withLock { state in
            if let token = state.current, !isDue(token, renewal: state.renewalRequested, now: now) { return .use(token) }
            if state.waiters != nil { return .wait }
            state.waiters = []
            return .fetch
        }
        switch next {
        case .use(let token):
            return token
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                let outcome: Result<APNSProviderToken, any Error>? = state.withLock { state in
                    if state.waiters != nil {
                        state.waiters!.append(continuation)
                        return nil
                    }
                    // The fetch finished in between.
                    if let current = state.current { return .success(current) }
                    return .failure(state.lastError ?? CancellationError())
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        case .fetch:
            do {
                let token: APNSProviderToken
                do {
                    token = try await fetch(now: now)
                } catch let error where !(error is APNSCredentialsError) {
                    // The database is away: the current token serves while APNs accepts it.
                    guard let current = state.withLock({ $0.current }),
                          Self.age(of: current.issuedAt, at: now) < Self.longestUse else { throw error }
                    token = current
                }
                let waiters = state.withLock { state in
                    state.current = token
                    state.renewalRequested = false
                    defer { state.waiters = nil }
                    return state.waiters ?? []
                }
                for waiter in waiters { waiter.resume(returning: token) }
                return token
            } catch {
                let waiters = state.withLock { state in
                    defer { state.waiters = nil }
                    state.lastError = error
                    return state.waiters ?? []
                }
                for waiter in waiters { waiter.resume(throwing: error) }
                throw error
            }
        }
    }

    func providerTokenExpired(_ token: APNSProviderToken) -> Bool {
        let now = currentTime()
        return state.withLock { state in
            guard let current = state.current, current == token else { return true }
            guard Self.age(of: current.issuedAt, at: now) >= APNSProviderTokenFactory.minimumRegenerationInterval else { return false }
            state.renewalRequested = true
            return true
        }
    }

    private func isDue(_ token: APNSProviderToken, renewal: Bool, now: Date) -> Bool {
        let age = Self.age(of: token.issuedAt, at: now)
        return age >= refreshInterval || (renewal && age >= APNSProviderTokenFactory.minimumRegenerationInterval)
    }

    /// Under the advisory lock: the stored token when it is fresh enough, else a new one.
    private func fetch(now: Date) async throws -> APNSProviderToken {
        let renewal = state.withLock { $0.renewalRequested ? $0.current : nil }
        let context = Data("\(signingKey.teamID) \(signingKey.keyID)".utf8)
        let decision = try await store.withProviderToken(teamID: signingKey.teamID, keyID: signingKey.keyID) { [signingKey, sealingKey, refreshInterval] stored in
            if let stored, let box = try? AES.GCM.SealedBox(combined: stored.sealed),
               let opened = try? AES.GCM.open(box, using: sealingKey, authenticating: context),
               let jwt = String(data: opened, encoding: .utf8)
            {
                let token = APNSProviderToken(jwt: jwt, issuedAt: stored.issuedAt)
                let age = Self.age(of: stored.issuedAt, at: now)
                let expiredHere = renewal == token
                // Keep it while it is young enough, and always within 20 minutes of its signing:
                // another replica may have just signed it.
                if age < APNSProviderTokenFactory.minimumRegenerationInterval || (age < refreshInterval && !expiredHere) {
                    return .reuse(token)
                }
            }
            // None stored, one sealed under another key (a rotated .p8 with the same id), or due.
            let token = try signingKey.signProviderToken(at: now)
            let sealed = try AES.GCM.seal(Data(token.jwt.utf8), using: sealingKey, authenticating: context).combined!
            return .signed(token, sealed: sealed)
        }
        return decision.token
    }

    /// The oldest a token is sent when the database cannot be asked for a newer one (APNs
    /// refuses tokens older than an hour).
    static let longestUse: Duration = .seconds(55 * 60)

    private static func age(of issuedAt: Date, at now: Date) -> Duration {
        .milliseconds(Int64((now.timeIntervalSince(issuedAt) * 1000).rounded(.down)))
    }
}
