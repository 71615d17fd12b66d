/// The `errorCode` of the `google.firebase.fcm.v1.FcmError` detail of an FCM error answer.
///
/// Every code Firebase documents has a case; anything else is kept verbatim in ``unknown(_:)``.
/// An answer without the detail (a `401` for an expired access token, a project quota's `429`)
/// has ``unspecified``, and is classified by its HTTP status.
public enum FCMErrorCode: Sendable, Hashable, CustomStringConvertible {
    /// `UNSPECIFIED_ERROR`, or no FcmError detail at all.
    case unspecified
    /// `INVALID_ARGUMENT` (400): a bad registration token, a bad field, a payload over 4096
    /// bytes, a reserved data key, a bad TTL.
    case invalidArgument
    /// `UNREGISTERED` (404): the app instance is gone (uninstalled, token expired or replaced).
    case unregistered
    /// `SENDER_ID_MISMATCH` (403): the token belongs to another Firebase project.
    case senderIDMismatch
    /// `QUOTA_EXCEEDED` (429): a sending limit (project, device or topic) was exceeded.
    case quotaExceeded
    /// `UNAVAILABLE` (503): FCM is overloaded.
    case unavailable
    /// `INTERNAL` (500): an unknown error inside FCM.
    case `internal`
    /// `THIRD_PARTY_AUTH_ERROR` (401): the APNs certificate or web push key of the Firebase
    /// project was refused; it does not concern Android tokens.
    case thirdPartyAuthError
    /// A code this library does not know, kept exactly as FCM sent it.
    case unknown(String)

    /// Parses the `errorCode` text; unknown text becomes ``unknown(_:)``.
    ///
    /// - Parameter rawValue: the text, such as `UNREGISTERED`.
    public init(rawValue: String) {
        self = switch rawValue {
        case "UNSPECIFIED_ERROR": .unspecified
        case "INVALID_ARGUMENT": .invalidArgument
        case "UNREGISTERED": .unregistered
        case "SENDER_ID_MISMATCH": .senderIDMismatch
        case "QUOTA_EXCEEDED": .quotaExceeded
        case "UNAVAILABLE": .unavailable
        case "INTERNAL": .internal
        case "THIRD_PARTY_AUTH_ERROR": .thirdPartyAuthError
        default: .unknown(rawValue)
        }
    }

    /// The text FCM uses for this code.
    public var rawValue: String {
        switch self {
        case .unspecified: "UNSPECIFIED_ERROR"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .unregistered: "UNREGISTERED"
        case .senderIDMismatch: "SENDER_ID_MISMATCH"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .unavailable: "UNAVAILABLE"
        case .internal: "INTERNAL"
        case .thirdPartyAuthError: "THIRD_PARTY_AUTH_ERROR"
        case .unknown(let text): text
        }
    }

    public var description: String { self.rawValue }

    /// What a sender should do, following Firebase's error-code reference: `status` decides for
    /// ``unspecified`` and ``unknown(_:)``; `tokenIsInvalid` (the answer names the registration
    /// token as the bad argument) turns ``invalidArgument`` into a dead token, as Firebase's
    /// token-management guide says.
    func action(status: Int, tokenIsInvalid: Bool, retryAfter: Duration?) -> FCMFailureAction {
        switch self {
        case .unregistered: .tokenDead
        case .invalidArgument: tokenIsInvalid ? .tokenDead : .messageRejected
        case .senderIDMismatch, .thirdPartyAuthError: .configurationError
        case .quotaExceeded, .unavailable, .internal: .retry(after: retryAfter)
        case .unspecified, .unknown: FCMFailureAction(status: status, retryAfter: retryAfter)
        }
    }
}

/// What the sender (the worker) should do after a failed send.
public enum FCMFailureAction: Sendable, Hashable, CustomStringConvertible {
    /// The registration token will never work again (`UNREGISTERED`, or `INVALID_ARGUMENT`
    /// naming the token): stop sending to the device. Never retry.
    case tokenDead
    /// A passing refusal (`QUOTA_EXCEEDED`, `UNAVAILABLE`, `INTERNAL`, no answer): retry after
    /// `after` when FCM said (`Retry-After`), else with exponential backoff and jitter.
    case retry(after: Duration?)
    /// This message can never be accepted as it is (`INVALID_ARGUMENT` about a field, the data
    /// limit): a dead letter with the reason. Other messages are not affected.
    case messageRejected
    /// The Firebase project's configuration is wrong for this token or app (`SENDER_ID_MISMATCH`,
    /// `THIRD_PARTY_AUTH_ERROR`, an unknown project): hold back this sender only, and surface it.
    case configurationError
    /// The service account is refused (the key revoked, no permission to send, an access token
    /// refused even after a refresh): hold back this sender until its key is fixed.
    case credentialsError

    /// The classification by HTTP status alone, for answers without a known FcmError code.
    ///
    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - retryAfter: the `Retry-After` of the answer, when it had one.
    public init(status: Int, retryAfter: Duration? = nil) {
        switch status {
        case 400: self = .messageRejected
        case 401, 403: self = .credentialsError
        case 408, 429, 500...599: self = .retry(after: retryAfter)
        default: self = .configurationError
        }
    }

    /// Whether sending the same message again later can succeed.
    public var isRetryable: Bool {
        if case .retry = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .tokenDead: "tokenDead"
        case .retry(let after?): "retry(after: \(after))"
        case .retry(nil): "retry"
        case .messageRejected: "messageRejected"
        case .configurationError: "configurationError"
        case .credentialsError: "credentialsError"
        }
    }
}
