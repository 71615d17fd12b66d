import APNSCore
import Foundation

/// A message the local FCM stand-in accepted.
public struct LocalFCMMessage: Sendable {
    /// The project of the path (`projects/{project}/messages:send`).
    public let projectID: String
    /// `message.token`.
    public let token: String
    /// `message.data` (every value a string, as checked).
    public let data: [String: String]
    /// `message.android.priority` as sent (`HIGH`, `NORMAL`), when sent.
    public let priority: String?
    /// `message.android.collapse_key`, when sent.
    public let collapseKey: String?
    /// `message.android.ttl` as sent (`"3600s"`), when sent.
    public let ttl: String?
    /// The service account whose access token authorised the request.
    public let clientEmail: String
    /// The name answered: `projects/{project}/messages/{id}`.
    public let name: String
    /// `2` when the request came over HTTP/2, `1` over HTTP/1.1.
    public let httpMajorVersion: Int
    /// The whole body as parsed.
    public let body: JSONValue
    /// When the stand-in received it.
    public let receivedAt: Date
}

/// A request the stand-in refused, by a check or an injected fault.
public struct LocalFCMRejection: Sendable, Hashable {
    /// The path requested (`/token` or `/v1/projects/…/messages:send`).
    public let path: String
    /// `message.token`, when the body had one.
    public let token: String?
    /// The HTTP status answered.
    public let status: Int
    /// The FcmError code, the OAuth error, or the canonical status answered.
    public let code: String
    /// The error message answered.
    public let message: String
    /// Whether an injected fault, not a check, produced it.
    public let injected: Bool
}

/// An error answer the stand-in gives on purpose, as FCM words it.
public struct LocalFCMFault: Sendable, Hashable {
    /// The HTTP status.
    public var status: Int
    /// The canonical status (`error.status`).
    public var canonicalStatus: String
    /// `error.message`.
    public var message: String
    /// The FcmError detail's `errorCode`; `nil` for an answer without one.
    public var errorCode: String?
    /// Sent as `Retry-After` (seconds), when set.
    public var retryAfter: Int?

    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - canonicalStatus: `error.status`.
    ///   - message: `error.message`.
    ///   - errorCode: the FcmError code, or `nil` for none.
    ///   - retryAfter: the `Retry-After` in seconds.
    public init(status: Int, canonicalStatus: String, message: String, errorCode: String?, retryAfter: Int? = nil) {
        self.status = status
        self.canonicalStatus = canonicalStatus
        self.message = message
        self.errorCode = errorCode
        self.retryAfter = retryAfter
    }

    /// `404 UNREGISTERED`: the app instance is gone.
    public static let unregistered = Self(
        status: 404, canonicalStatus: "NOT_FOUND", message: "Requested entity was not found.", errorCode: "UNREGISTERED")
    /// `403 SENDER_ID_MISMATCH`: the token belongs to another project.
    public static let senderIDMismatch = Self(
        status: 403, canonicalStatus: "PERMISSION_DENIED", message: "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
    /// `400 INVALID_ARGUMENT` for a token FCM does not know as one.
    public static let invalidRegistrationToken = Self(
        status: 400, canonicalStatus: "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token",
        errorCode: "INVALID_ARGUMENT")
    /// `500 INTERNAL`.
    public static let `internal` = Self(
        status: 500, canonicalStatus: "INTERNAL", message: "Internal error encountered.", errorCode: "INTERNAL")
    /// `401 THIRD_PARTY_AUTH_ERROR`: the project's APNs or web push credentials were refused.
    public static let thirdPartyAuthError = Self(
        status: 401, canonicalStatus: "UNAUTHENTICATED", message: "Auth error from APNS or Web Push Service",
        errorCode: "THIRD_PARTY_AUTH_ERROR")
    /// `401 UNAUTHENTICATED` without an FcmError: the access token expired (or was revoked).
    public static let accessTokenExpired = Self(
        status: 401, canonicalStatus: "UNAUTHENTICATED", message: LocalFCMCore.invalidCredentialsMessage, errorCode: nil)

    /// `429 QUOTA_EXCEEDED`: too many messages to one device.
    ///
    /// - Parameter retryAfter: the `Retry-After` in seconds.
    public static func quotaExceeded(retryAfter: Int? = nil) -> Self {
        Self(status: 429, canonicalStatus: "RESOURCE_EXHAUSTED", message: "Device message rate exceeded.",
             errorCode: "QUOTA_EXCEEDED", retryAfter: retryAfter)
    }

    /// `503 UNAVAILABLE`: FCM is overloaded.
    ///
    /// - Parameter retryAfter: the `Retry-After` in seconds.
    public static func unavailable(retryAfter: Int? = nil) -> Self {
        Self(status: 503, canonicalStatus: "UNAVAILABLE", message: "The service is currently unavailable.",
             errorCode: "UNAVAILABLE", retryAfter: retryAfter)
    }
}

/// Errors of the stand-in itself.
public struct LocalFCMServerError: Error, Hashable, CustomStringConvertible {
    /// Words for people.
    public let message: String
    public var description: String { self.message }
}
