/// The `reason` string APNs returns in the JSON body of a rejected request.
///
/// Every reason Apple documents has a case; anything else is kept verbatim in
/// ``unknown(_:)`` so a new reason is never dropped or misread.
public enum APNSErrorReason: Sendable, Hashable, CustomStringConvertible {
    // 400
    case badCollapseId
    case badDeviceToken
    case badExpirationDate
    case badMessageId
    case badPriority
    case badTopic
    case deviceTokenNotForTopic
    case duplicateHeaders
    case idleTimeout
    case invalidPushType
    case missingDeviceToken
    case missingTopic
    case payloadEmpty
    case topicDisallowed
    // 400, broadcast and channel management (iOS 18)
    /// A broadcast without the `apns-channel-id` header.
    case missingChannelId
    /// The `apns-channel-id` is not a channel id (not base64, or of the wrong form).
    case badChannelId
    /// The channel does not exist (never created, deleted, or of the other environment).
    case channelNotRegistered
    /// A broadcast or channel request without `apns-push-type` (or `push-type`).
    case missingPushType
    /// `message-storage-policy` is not 0 or 1, or does not allow what was asked (a non-zero
    /// `apns-expiration` on a channel that stores nothing).
    case invalidPolicy
    /// The app has 10,000 channels in this environment already: delete ended ones.
    case cannotCreateChannelConfig
    // 403
    case badCertificate
    case badCertificateEnvironment
    case expiredProviderToken
    case forbidden
    case invalidProviderToken
    case missingProviderToken
    case unrelatedKeyIdInToken
    case badEnvironmentKeyInToken
    // 404, 405
    case badPath
    case methodNotAllowed
    // 410
    case expiredToken
    case unregistered
    // 413
    case payloadTooLarge
    // 429
    case tooManyProviderTokenUpdates
    case tooManyRequests
    // 500, 503
    case internalServerError
    case serviceUnavailable
    case shutdown
    /// A reason this library does not know, kept exactly as APNs sent it.
    case unknown(String)

    /// Every documented reason, in the order Apple lists them.
    public static let documented: [APNSErrorReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .missingChannelId, .badChannelId, .channelNotRegistered,
        .missingPushType, .invalidPolicy, .cannotCreateChannelConfig, .badCertificate, .badCertificateEnvironment,
        .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken,
        .unrelatedKeyIdInToken, .badEnvironmentKeyInToken, .badPath, .methodNotAllowed, .expiredToken,
        .unregistered, .payloadTooLarge, .tooManyProviderTokenUpdates, .tooManyRequests,
        .internalServerError, .serviceUnavailable, .shutdown,
    ]

    private static let byRawValue: [String: APNSErrorReason] = Dictionary(
        uniqueKeysWithValues: documented.map { ($0.rawValue, $0) }
    )

    /// Parses the `reason` text of an APNs error body; unknown text becomes ``unknown(_:)``.
    public init(rawValue: String) {
        self = Self.byRawValue[rawValue] ?? .unknown(rawValue)
    }

    /// The text APNs uses for this reason.
    public var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .missingChannelId: "MissingChannelId"
        case .badChannelId: "BadChannelId"
        case .channelNotRegistered: "ChannelNotRegistered"
        case .missingPushType: "MissingPushType"
        case .invalidPolicy: "InvalidPolicy"
        case .cannotCreateChannelConfig: "CannotCreateChannelConfig"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyInToken: "BadEnvironmentKeyInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .unknown(let text): text
        }
    }

    public var description: String { self.rawValue }

    /// What a sender should do about this reason, following the response table in
    /// Apple's "Handling notification responses from APNs". `status` decides for ``unknown(_:)`` reasons.
    public func action(status: Int, retryAfter: Duration? = nil) -> APNSFailureAction {
        switch self {
        case .badDeviceToken, .unregistered, .expiredToken:
            return .tokenDead
        case .badCollapseId, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed, .badPath, .methodNotAllowed,
            .missingChannelId, .badChannelId, .missingPushType, .invalidPolicy, .cannotCreateChannelConfig:
            return .configurationError
        case .channelNotRegistered:
            // The channel is gone: like a dead token, for everyone who followed it.
            return .tokenDead
        case .expiredProviderToken:
            return .refreshProviderToken
        case .badCertificate, .badCertificateEnvironment, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyInToken:
            return .credentialsError
        case .payloadTooLarge:
            return .payloadRejected
        case .tooManyRequests:
            return .backOffToken(retryAfter: retryAfter)
        case .idleTimeout, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable, .shutdown:
            // IdleTimeout and TooManyProviderTokenUpdates concern the connection, not the
            // notification: reconnect (keeping the same provider token) and retry later.
            return .retryWithBackoff
        case .unknown:
            return APNSFailureAction(status: status, retryAfter: retryAfter)
        }
    }
}

/// What the sender (the worker) should do after a failed send.
public enum APNSFailureAction: Sendable, Hashable, CustomStringConvertible {
    /// The device token will never work again (`410 Unregistered`/`ExpiredToken`, `400 BadDeviceToken`):
    /// delete it and treat its activity as gone. Never retry.
    case tokenDead
    /// A transient failure of APNs or of the connection: retry with exponential backoff and jitter.
    case retryWithBackoff
    /// APNs throttles this device token (`429 TooManyRequests`): wait, then send only the latest state.
    case backOffToken(retryAfter: Duration?)
    /// The provider token was declared expired and the client will sign a new one: retry the send.
    case refreshProviderToken
    /// The request is wrong for this app (topic, push type, priority, …): a bug or misconfiguration.
    /// Stop sending for the app and surface it loudly; retrying cannot help.
    case configurationError
    /// The team's credentials are rejected (bad key, key id, team id, environment): stop sending for
    /// the team and surface it loudly until the credentials are fixed.
    case credentialsError
    /// The payload itself is unacceptable (too large, malformed): never retry it as is.
    case payloadRejected

    /// The classification for a status code alone, used when the reason is unknown.
    public init(status: Int, retryAfter: Duration? = nil) {
        switch status {
        case 403: self = .credentialsError
        case 410: self = .tokenDead
        case 413: self = .payloadRejected
        case 429: self = .backOffToken(retryAfter: retryAfter)
        case 500...599: self = .retryWithBackoff
        default: self = .configurationError
        }
    }

    /// Whether sending the same notification again later can succeed.
    public var isRetryable: Bool {
        switch self {
        case .retryWithBackoff, .backOffToken, .refreshProviderToken: true
        case .tokenDead, .configurationError, .credentialsError, .payloadRejected: false
        }
    }

    public var description: String {
        switch self {
        case .tokenDead: "tokenDead"
        case .retryWithBackoff: "retryWithBackoff"
        case .backOffToken(let retryAfter?): "backOffToken(retryAfter: \(retryAfter))"
        case .backOffToken(nil): "backOffToken"
        case .refreshProviderToken: "refreshProviderToken"
        case .configurationError: "configurationError"
        case .credentialsError: "credentialsError"
        case .payloadRejected: "payloadRejected"
        }
    }
}
