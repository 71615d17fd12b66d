import Crypto
import APNSCore
import Foundation

/// A notification the local APNs stand-in accepted.
public struct LocalAPNSPush: Sendable {
    /// The hex device token from the path.
    public let deviceToken: String
    /// The `apns-id` answered (the request's, or one generated).
    public let apnsID: UUID
    /// `apns-topic` as received (with `.push-type.liveactivity` for Live Activities).
    public let topic: String
    /// `apns-push-type` as received (`liveactivity`, `alert`, …); `alert` when absent.
    public let pushType: String
    /// `apns-priority`; 10 when absent, as APNs assumes.
    public let priority: Int
    /// `apns-expiration`, when sent.
    public let expiration: Int64?
    /// `apns-collapse-id`, when sent.
    public let collapseID: String?
    /// The key id (`kid`) of the provider token that signed the request.
    public let keyID: String
    /// Every request header, lower-cased names (the last value when a name repeats).
    public let headers: [String: String]
    /// The parsed JSON body.
    public let payload: JSONValue
    /// The body as received.
    public let rawPayload: [UInt8]
    /// When the stand-in received the request.
    public let receivedAt: Date

    /// `aps` of the payload.
    public var aps: JSONValue? { self.payload["aps"] }
}

/// A request the local APNs stand-in refused, by verification or by an injected fault.
public struct LocalAPNSRejection: Sendable, Hashable {
    /// The device token from the path (empty when the path had none).
    public let deviceToken: String
    public let status: Int
    public let reason: String
    /// Why, in words (for a verification failure).
    public let detail: String?
    /// Whether an injected fault, not verification, produced it.
    public let injected: Bool
    public let receivedAt: Date
}

/// An error answer the local APNs stand-in gives on purpose, to exercise the sender.
public struct LocalAPNSFault: Sendable, Hashable {
    public var status: Int
    public var reason: String
    /// Sent as `timestamp` (milliseconds since 1970) in the body, as APNs does for 410.
    public var timestamp: Date?

    public init(status: Int, reason: String, timestamp: Date? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
    }

    /// `410 Unregistered` with the time the token stopped being valid.
    public static func unregistered(since: Date = Date()) -> Self {
        Self(status: 410, reason: "Unregistered", timestamp: since)
    }

    /// `410 ExpiredToken`.
    public static func expiredToken(since: Date = Date()) -> Self {
        Self(status: 410, reason: "ExpiredToken", timestamp: since)
    }

    /// `400 BadDeviceToken`.
    public static let badDeviceToken = Self(status: 400, reason: "BadDeviceToken")
    /// `403 ExpiredProviderToken`.
    public static let expiredProviderToken = Self(status: 403, reason: "ExpiredProviderToken")
    /// `403 InvalidProviderToken`.
    public static let invalidProviderToken = Self(status: 403, reason: "InvalidProviderToken")
    /// `413 PayloadTooLarge`.
    public static let payloadTooLarge = Self(status: 413, reason: "PayloadTooLarge")
    /// `429 TooManyRequests`.
    public static let tooManyRequests = Self(status: 429, reason: "TooManyRequests")
    /// `429 TooManyProviderTokenUpdates`.
    public static let tooManyProviderTokenUpdates = Self(status: 429, reason: "TooManyProviderTokenUpdates")
    /// `500 InternalServerError`.
    public static let internalServerError = Self(status: 500, reason: "InternalServerError")
    /// `503 ServiceUnavailable`.
    public static let serviceUnavailable = Self(status: 503, reason: "ServiceUnavailable")
    /// `503 Shutdown`.
    public static let shutdown = Self(status: 503, reason: "Shutdown")
}

/// Errors of the local APNs stand-in itself.
public struct LocalAPNSServerError: Error, Hashable, CustomStringConvertible {
    public let message: String
    public var description: String { self.message }
}
