import Foundation
import OrderFlow

/// A one-time sign-in token for a merchant's counter board (`GET /board?token=…`).
public struct BoardSignInToken: Sendable {
    public var merchantID: String
    /// `of_signin_…`: shown once, stored only as its hash.
    public var token: String
    public var expiresAt: Date
}

/// A board session, started by consuming a sign-in token; its secret goes into a cookie.
public struct BoardSession: Sendable {
    public var merchantID: String
    /// `of_board_…`: stored only as its hash.
    public var secret: String
    public var expiresAt: Date
}

/// The board's sign-in links and sessions: the HTTP door's own credentials, kept beside the
/// engine's data (migration `0004_board_sessions.sql`) through the engine's pool. The engine
/// lends only door-neutral parts: bearer secrets (``OrderFlowEngine/randomSecret()`` and its
/// kin) and whether a merchant exists.
extension OrderFlowEngine {
    var boardSessionStore: BoardSessionStore { BoardSessionStore(pool: pool) }

    public static let boardSignInScheme = "of_signin_"
    public static let boardSessionScheme = "of_board_"
    /// How long a sign-in link from `orderflow board-link` stays usable: an operator may hand
    /// it to the counter for later in the day.
    public static let boardSignInLifetime = 24 * 60 * 60
    /// How long the link `orderflow serve` prints at start stays usable: whoever starts the
    /// server opens it now; a log kept for weeks must not hold a working link.
    public static let boardStartLinkLifetime = 15 * 60
    /// How long a board stays signed in: a long shift.
    public static let boardSessionLifetime = 12 * 60 * 60

    /// Makes a one-time sign-in link's token for the board of `merchantID` (the default
    /// merchant, or one added with `orderflow merchant add`).
    /// - Throws: `OrderFlowError.notFound` for an unknown merchant.
    public func createBoardSignInToken(merchantID: String, lifetime seconds: Int = boardSignInLifetime) async throws -> BoardSignInToken {
        try await boardTranslatingErrors {
            try await requireMerchant(merchantID)
            let token = Self.boardSignInScheme + Self.randomSecret()
            let expiresAt = try await boardSessionStore.insertSignInToken(
                hash: Self.secretHash(token), merchantID: merchantID, seconds: max(1, seconds))
            return BoardSignInToken(merchantID: merchantID, token: token, expiresAt: expiresAt)
        }
    }

    /// Whether a sign-in token would still start a session (known, unused, not expired),
    /// without using it: the page a link opens asks, and only its form's POST consumes it.
    public func boardSignInTokenIsLive(_ token: String) async throws -> Bool {
        try await boardTranslatingErrors {
            guard Self.isSecret(token, scheme: Self.boardSignInScheme) else { return false }
            return try await boardSessionStore.signInTokenIsLive(hash: Self.secretHash(token))
        }
    }

    /// Consumes a sign-in token and starts a session. Nil when the token is unknown, used
    /// already or expired: it never works twice.
    public func redeemBoardSignInToken(_ token: String) async throws -> BoardSession? {
        try await boardTranslatingErrors {
            guard Self.isSecret(token, scheme: Self.boardSignInScheme) else { return nil }
            let secret = Self.boardSessionScheme + Self.randomSecret()
            guard let started = try await boardSessionStore.redeemSignInToken(
                hash: Self.secretHash(token), sessionHash: Self.secretHash(secret), seconds: Self.boardSessionLifetime)
            else { return nil }
            return BoardSession(merchantID: started.merchantID, secret: secret, expiresAt: started.expiresAt)
        }
    }

    /// The merchant of a live board session; nil for an unknown or expired one.
    public func resolveBoardSession(_ secret: String) async throws -> String? {
        try await boardTranslatingErrors {
            guard Self.isSecret(secret, scheme: Self.boardSessionScheme) else { return nil }
            return try await boardSessionStore.sessionMerchant(hash: Self.secretHash(secret))
        }
    }

    /// How the history names changes a board session made: `board:` and the first 12 hex
    /// digits of a SHA-256 of its secret (the same for every change of the session, and saying
    /// nothing of the secret).
    public static func boardSessionActor(_ secret: String) -> String {
        "board:" + secretHash(secret).prefix(6).map { String(format: "%02x", $0) }.joined()
    }

    /// Ends a board session (signing out); unknown secrets are ignored.
    public func endBoardSession(_ secret: String) async throws {
        try await boardTranslatingErrors {
            guard Self.isSecret(secret, scheme: Self.boardSessionScheme) else { return }
            try await boardSessionStore.deleteSession(hash: Self.secretHash(secret))
        }
    }

    /// The store's errors in the engine's vocabulary, as the engine's own calls throw them.
    private func boardTranslatingErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw OrderFlowError.translating(error) ?? error
        }
    }
}
