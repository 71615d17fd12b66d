import APNSCore
import Foundation

/// An error from ``FCMClient/send(_:)`` that tells the sender what to do next.
///
/// Every error `send` throws (but `CancellationError`) conforms, so a worker can write
/// `catch let failure as any FCMSendFailure { switch failure.action { … } }`.
public protocol FCMSendFailure: Error, CustomStringConvertible {
    /// What the sender should do about this failure.
    var action: FCMFailureAction { get }
}

/// FCM answered the message with an error.
public struct FCMError: FCMSendFailure, Hashable {
    /// One entry of the `google.rpc.BadRequest` detail: which field was wrong and why.
    public struct FieldViolation: Sendable, Hashable {
        /// The field's path, such as `message.data[0].value` or `message.android.ttl`.
        public let field: String
        /// FCM's words about it.
        public let description: String

        /// - Parameters:
        ///   - field: the field's path.
        ///   - description: FCM's words about it.
        public init(field: String, description: String) {
            self.field = field
            self.description = description
        }
    }

    /// The HTTP status (400, 401, 403, 404, 429, 500, 503, …).
    public let status: Int
    /// The FcmError detail's `errorCode`; ``FCMErrorCode/unspecified`` when there was none.
    public let errorCode: FCMErrorCode
    /// The canonical status (`error.status`: `INVALID_ARGUMENT`, `NOT_FOUND`, `UNAUTHENTICATED`, …).
    public let canonicalStatus: String
    /// FCM's `error.message`, at most 300 characters.
    public let message: String
    /// The `google.rpc.BadRequest` detail's field violations.
    public let fieldViolations: [FieldViolation]
    /// The answer's `Retry-After`.
    public let retryAfter: Duration?
    /// The registration token as it may be shown (`APNSTokenRedaction`: `…` and 8 characters).
    public let redactedToken: String
    /// What the sender should do; see ``FCMErrorCode``.
    public let action: FCMFailureAction

    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - errorCode: the FcmError code.
    ///   - canonicalStatus: `error.status`.
    ///   - message: `error.message`.
    ///   - fieldViolations: the BadRequest detail's violations.
    ///   - retryAfter: the `Retry-After` header.
    ///   - redactedToken: the token as it may be shown.
    public init(
        status: Int, errorCode: FCMErrorCode, canonicalStatus: String, message: String,
        fieldViolations: [FieldViolation] = [], retryAfter: Duration? = nil, redactedToken: String
    ) {
        self.status = status
        self.errorCode = errorCode
        self.canonicalStatus = canonicalStatus
        self.message = String(message.prefix(300))
        self.fieldViolations = fieldViolations
        self.retryAfter = retryAfter
        self.redactedToken = redactedToken
        let tokenIsInvalid = fieldViolations.contains { $0.field == "message.token" }
            || message.localizedCaseInsensitiveContains("registration token")
        self.action = errorCode.action(status: status, tokenIsInvalid: tokenIsInvalid, retryAfter: retryAfter)
    }

    /// The reason in one line, for a dead letter: the field and FCM's words when it named one.
    public var reason: String {
        if let violation = self.fieldViolations.first {
            return "\(violation.field): \(violation.description)"
        }
        return self.message
    }

    public var description: String {
        let code = self.errorCode == .unspecified ? self.canonicalStatus : self.errorCode.rawValue
        return "FCM refused the message for token \(self.redactedToken) with \(self.status) \(code) (\(self.reason)): \(self.advice)"
    }

    private var advice: String {
        switch self.action {
        case .tokenDead where self.errorCode == .unregistered:
            return "the app instance is no longer registered (uninstalled, or its token replaced); stop sending to this device."
        case .tokenDead:
            return "the registration token is not a valid FCM token; stop sending to this device and check how the app reports its token."
        case .retry(let after?):
            return "retry after \(after.components.seconds) seconds, as FCM asked."
        case .retry(nil):
            return "retry with exponential backoff and jitter."
        case .messageRejected:
            return "this message can never be accepted as it is; fix what the field says, do not retry it."
        case .configurationError where self.errorCode == .senderIDMismatch:
            return "the token belongs to another Firebase project than the service account's; check that the app and the key come from the same project."
        case .configurationError where self.errorCode == .thirdPartyAuthError:
            return "the Firebase project's APNs or web push credentials were refused; this does not concern Android devices, check the project's settings."
        case .configurationError:
            return "the Firebase project or request path is wrong; check the project id of the service account."
        case .credentialsError:
            return "the service account may not send for this project (revoked key, missing Firebase Cloud Messaging permission); fix the key, then resume sending."
        }
    }
}

/// The request never got an answer from FCM (connection refused, timeout, TLS failure): retry
/// with backoff.
public struct FCMTransportError: FCMSendFailure {
    /// The error the HTTP/2 transport, SwiftNIO or NIOSSL reported.
    public let underlying: any Error
    /// The registration token as it may be shown.
    public let redactedToken: String

    public var action: FCMFailureAction { .retry(after: nil) }

    public var description: String {
        "Could not deliver the message for token \(self.redactedToken) to FCM (\(self.underlying)); "
            + "check network access to the FCM host, then retry with exponential backoff."
    }
}

/// The message was refused before sending because it can never be accepted.
public struct FCMMessageError: FCMSendFailure, Hashable {
    /// What is wrong.
    public enum Code: Sendable, Hashable {
        /// The registration token is empty or has characters no FCM token has.
        case invalidToken
        /// The data (keys and values, UTF-8) is larger than 4096 bytes.
        case dataTooLarge
        /// A data key FCM reserves (`from`, `message_type`, `gcm…`, `google…`) or an empty one.
        case reservedKey
        /// The collapse key is empty.
        case invalidCollapseKey
    }

    /// What is wrong.
    public let code: Code
    /// Words for people.
    public let message: String

    public var action: FCMFailureAction { self.code == .invalidToken ? .tokenDead : .messageRejected }
    public var description: String { self.message }
}

/// A problem with the service account: found when reading its key file, signing the OAuth
/// assertion, or exchanging it for an access token.
public struct FCMCredentialsError: FCMSendFailure, Hashable {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// No file at the path.
        case fileNotFound
        /// The path is not a readable text file of a plausible size.
        case fileUnreadable
        /// The file is not a JSON object.
        case notJSON
        /// The JSON is another kind of Google credential (`authorized_user`, …).
        case notServiceAccount
        /// A field the key must have is missing.
        case missingField
        /// A field has the wrong type or form.
        case invalidField
        /// `private_key` is not a usable RSA private key.
        case invalidKey
        /// Signing the assertion failed.
        case signingFailed
        /// The token endpoint refused the assertion (`invalid_grant`: a deleted key or account,
        /// a clock far off): permanent until the key is fixed.
        case tokenExchangeRefused
        /// The token endpoint could not be reached or failed (5xx): retry later.
        case tokenExchangeFailed
    }

    /// What went wrong.
    public let code: Code
    /// The key file's path, when the key came from a file.
    public let path: String?
    /// Words for people; never any of the key.
    public let message: String

    public var action: FCMFailureAction {
        self.code == .tokenExchangeFailed ? .retry(after: nil) : .credentialsError
    }

    public var description: String { self.message }
}

/// The client configuration cannot work (a base URL that is not https, trust roots that are
/// not PEM certificates, a limit below one).
public struct FCMConfigurationError: Error, Hashable, CustomStringConvertible {
    /// Words for people.
    public let message: String
    public var description: String { self.message }
}
