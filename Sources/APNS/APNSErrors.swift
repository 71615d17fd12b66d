import Foundation

/// An error from ``APNSClient/send(_:)`` that tells the sender what to do next.
///
/// Every error `send` throws conforms, so a worker can write
/// `catch let failure as any APNSSendFailure { switch failure.action { … } }`.
public protocol APNSSendFailure: Error, CustomStringConvertible {
    /// What the sender should do about this failure.
    var action: APNSFailureAction { get }
}

/// APNs answered the request with an error status.
public struct APNSError: APNSSendFailure, Hashable {
    /// The HTTP status code of the response (400, 403, 404, 405, 410, 413, 429, 500, 503, …).
    public let status: Int
    /// The `reason` from the response body.
    public let reason: APNSErrorReason
    /// For `410`: when APNs learned that the token stopped being valid for the topic.
    public let timestamp: Date?
    /// The `apns-id` of the rejected notification, when APNs sent one.
    public let apnsID: UUID?
    /// The device token as it may be shown (``APNSTokenRedaction``): enough to find it in logs,
    /// never the whole token.
    public let redactedDeviceToken: String
    /// What the sender should do; see ``APNSErrorReason/action(status:retryAfter:)``.
    public let action: APNSFailureAction
    /// The channel of a refused broadcast or channel request (channel ids are not secret).
    public let channelID: String?

    public init(
        status: Int,
        reason: APNSErrorReason,
        timestamp: Date? = nil,
        apnsID: UUID? = nil,
        redactedDeviceToken: String,
        action: APNSFailureAction? = nil,
        channelID: String? = nil
    ) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.apnsID = apnsID
        self.redactedDeviceToken = redactedDeviceToken
        self.action = action ?? reason.action(status: status)
        self.channelID = channelID
    }

    public var description: String {
        let target = switch self.channelID {
        case nil: "notification for device token \(self.redactedDeviceToken)"
        case ""?: "channel request"
        case let channelID?: "request for channel \(channelID)"
        }
        let what = "APNs rejected the \(target) with \(self.status) \(self.reason.rawValue)"
        return "\(what): \(self.advice)"
    }

    private var advice: String {
        switch self.reason {
        case .badDeviceToken:
            return "the token is not valid for this environment (a sandbox token sent to production or the reverse); delete it."
        case .unregistered, .expiredToken:
            let since = self.timestamp.map { " since \(ISO8601DateFormatter().string(from: $0))" } ?? ""
            return "the token is no longer active for the topic\(since); delete it and treat its activity as gone."
        case .expiredProviderToken where self.action == .refreshProviderToken:
            return "the provider token is older than an hour; a new one is signed for the next send, retry."
        case .expiredProviderToken:
            return "APNs calls a provider token expired although it was signed less than 20 minutes ago; "
                + "check the system clock. Signing another now would risk TooManyProviderTokenUpdates."
        case .tooManyProviderTokenUpdates:
            return "the provider token was regenerated too often (more than once per 20 minutes); keep the current one and retry later."
        case .tooManyRequests:
            return "APNs throttles this device; back off and send only the latest state later."
        case .payloadTooLarge:
            return "the payload exceeds \(APNSLimits.maximumPayloadSize) bytes; shrink the content state, do not retry as is."
        case .idleTimeout:
            return "the connection was idle too long; reconnect and retry."
        case .internalServerError, .serviceUnavailable, .shutdown:
            return "APNs is unavailable; retry with exponential backoff."
        case .deviceTokenNotForTopic, .badTopic, .topicDisallowed, .missingTopic:
            return "the topic does not match the app of this token; check the configured bundle id and environment."
        case .invalidPushType:
            return "the apns-push-type header is wrong for this topic or payload; fix the request."
        case .badCertificate, .badCertificateEnvironment, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyInToken:
            return "the team's credentials were refused; check the key id, team id, .p8 key and environment, then resume sending for the team."
        case .missingChannelId, .badChannelId:
            return "a broadcast needs the apns-channel-id header with the base64 id APNs gave when the channel was created; fix the request."
        case .channelNotRegistered:
            return "the channel does not exist in this environment (deleted, never created, or a sandbox channel sent to production); create a new one for the event."
        case .missingPushType:
            return "a broadcast and a channel need the Live Activity push type; fix the request."
        case .invalidPolicy:
            return "the message storage policy must be 0 or 1, and a channel with policy 0 takes only apns-expiration 0; fix the request."
        case .cannotCreateChannelConfig:
            return "the app has the most channels APNs allows (10,000 per environment); delete the channels of ended events."
        case .unknown:
            return "an unknown reason; classified as \(self.action) from the status code."
        default:
            return "the request is malformed; this is a bug or misconfiguration, do not retry."
        }
    }
}

/// The request never got an answer from APNs: connection refused, timeout, TLS failure, a dropped
/// connection. Always worth retrying with backoff.
public struct APNSTransportError: APNSSendFailure {
    /// The error AsyncHTTPClient, SwiftNIO or NIOSSL reported.
    public let underlying: any Error
    /// The device token as it may be shown (``APNSTokenRedaction``).
    public let redactedDeviceToken: String

    public init(underlying: any Error, redactedDeviceToken: String) {
        self.underlying = underlying
        self.redactedDeviceToken = redactedDeviceToken
    }

    public var action: APNSFailureAction { .retryWithBackoff }

    public var description: String {
        "Could not deliver the notification for device token \(self.redactedDeviceToken) to APNs (\(self.underlying)); "
            + "check network access to the APNs host, then retry with exponential backoff."
    }
}

/// The payload cannot be sent (``APNSPayloadError``, from `APNSCore`): never retried as is.
extension APNSPayloadError: APNSSendFailure {
    public var action: APNSFailureAction { .payloadRejected }
}

/// The request was refused before sending because one of its fields cannot be right.
public struct APNSRequestError: APNSSendFailure, Hashable {
    public enum Code: Hashable, Sendable {
        /// The device token is empty, not hexadecimal, or of odd length.
        case invalidDeviceToken
        /// The topic (bundle id) is empty.
        case missingTopic
        /// The payload is empty.
        case emptyPayload
        /// A broadcast's channel id is not base64 text.
        case invalidChannelID
        /// A broadcast's `apns-expiration` is negative.
        case invalidExpiration
    }

    public let code: Code
    public let message: String

    public var action: APNSFailureAction {
        switch self.code {
        case .invalidDeviceToken: .tokenDead
        case .missingTopic: .configurationError
        case .emptyPayload: .payloadRejected
        case .invalidChannelID, .invalidExpiration: .configurationError
        }
    }

    public var description: String { self.message }
}

/// A problem with the team's credentials: found when loading the key, or when signing a token fails.
public struct APNSCredentialsError: APNSSendFailure, Hashable {
    public enum Code: Hashable, Sendable {
        /// No file at the configured key path.
        case keyFileNotFound
        /// The key file exists but could not be read.
        case keyFileUnreadable
        /// The key is not a PEM-encoded P-256 private key (an Apple `.p8` file).
        case invalidKey
        /// The key id is empty.
        case missingKeyID
        /// The team id is empty.
        case missingTeamID
        /// Signing a provider token with the key failed.
        case signingFailed
    }

    public let code: Code
    /// The key file's path, when the key came from a file.
    public let path: String?
    public let message: String

    public var action: APNSFailureAction { .credentialsError }
    public var description: String { self.message }
}

/// The client configuration cannot work (a bad base URL, trust roots that are not PEM certificates,
/// a non-positive limit).
public struct APNSConfigurationError: Error, Hashable, CustomStringConvertible {
    public let message: String
    public var description: String { self.message }
}
