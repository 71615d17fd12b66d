import APNS
import Foundation

/// A merchant (a tenant): its orders, workflows and devices are its own, and it may bring its
/// own APNs app.
public struct MerchantSummary: Sendable, Equatable, Codable {
    public var id: String
    public var name: String?
    public var createdAt: Date
    /// Its own app; nil when its pushes go through the worker's default app.
    public var app: MerchantAppSummary?
    /// What the workers last found about its pushes.
    public var pushState: MerchantPushState
}

/// What may be shown of a merchant's app: never the key, only its fingerprint.
public struct MerchantAppSummary: Sendable, Equatable, Codable {
    public var bundleID: String
    public var teamID: String
    public var keyID: String
    /// `SHA256:` and 16 hex characters of the public key's digest.
    public var keyFingerprint: String
    /// `production`, `sandbox` or `custom` (a stand-in at ``endpointURL``).
    public var environment: String
    public var endpointURL: String?
    public var updatedAt: Date
}

/// What may be shown of a merchant's Firebase project: never the key, only its fingerprint.
public struct MerchantFCMSummary: Sendable, Equatable, Codable {
    public var projectID: String
    public var clientEmail: String
    /// `SHA256:` and 16 hex characters of the public key's digest (`FCMServiceAccount.fingerprint`).
    public var keyFingerprint: String
    public var updatedAt: Date
}

/// Whether a merchant's pushes flow, as the workers last found.
public struct MerchantPushState: Sendable, Equatable, Codable {
    public enum Status: String, Sendable, Codable, CaseIterable {
        /// Pushes flow.
        case ok
        /// APNs refused the app's credentials or topic: nothing is sent for the merchant until
        /// ``MerchantPushState/until`` (then tried again) or until its app is fixed.
        case paused
        /// APNs throttles the merchant's pushes (429): they are sent more slowly.
        case throttled
    }

    public var status: Status
    /// Why, for a person (APNs' reason and what to do).
    public var reason: String?
    public var since: Date?
    /// When sending is tried again.
    public var until: Date?

    public init(status: Status, reason: String? = nil, since: Date? = nil, until: Date? = nil) {
        self.status = status
        self.reason = reason
        self.since = since
        self.until = until
    }

    public static let ok = MerchantPushState(status: .ok)
}

/// A merchant's own APNs app, as given to ``OrderFlowEngine/setAPNSApp(_:masterKey:)``.
public struct MerchantAPNSApp: Sendable, CustomStringConvertible {
    public var merchantID: String
    /// The app's bundle id (the worker adds `.push-type.liveactivity`).
    public var bundleID: String
    /// The team's credentials: the `.p8` key (a file or its PEM), key id and team id.
    public var credentials: APNSClientConfiguration.Credentials
    /// Apple's production or sandbox APNs, or another endpoint (tests, the demo).
    public var environment: APNSClientConfiguration.Environment

    public init(merchantID: String, bundleID: String, credentials: APNSClientConfiguration.Credentials,
                environment: APNSClientConfiguration.Environment = .production) {
        self.merchantID = merchantID
        self.bundleID = bundleID
        self.credentials = credentials
        self.environment = environment
    }

    public var description: String {
        "MerchantAPNSApp(merchantID: \(merchantID), bundleID: \(bundleID), credentials: \(credentials))"
    }
}

/// An API key as listed: never its secret.
public struct APIKeySummary: Sendable, Equatable, Codable {
    /// The public part that names the key (`of_live_<prefix>_…`).
    public var prefix: String
    public var merchantID: String
    public var name: String?
    public var createdAt: Date
    public var lastUsedAt: Date?
    public var revokedAt: Date?
}

/// A new API key: ``secret`` is shown once and never stored.
public struct CreatedAPIKey: Sendable {
    public var key: APIKeySummary
    /// `of_live_<prefix>_<secret>`: give it to the merchant's backend; only its hash is kept.
    public var secret: String
}

/// What the shared provider-token store decided: keep the stored token, or store a new one.
enum ProviderTokenDecision: Sendable {
    case reuse(APNSProviderToken)
    case signed(APNSProviderToken, sealed: Data)

    var token: APNSProviderToken {
        switch self {
        case .reuse(let token), .signed(let token, _): token
        }
    }
}
