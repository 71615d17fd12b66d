import Foundation
import NIOSSL

/// How an ``FCMClient`` reaches FCM and authenticates.
public struct FCMClientConfiguration: Sendable {
    /// Time limits.
    public struct Timeouts: Sendable, Hashable {
        /// Establishing a connection (TCP and TLS). Default 10 seconds.
        public var connect: Duration
        /// One request, from sending to the whole answer. Default 30 seconds.
        public var request: Duration
        /// How long an unused connection stays open. Default 10 minutes.
        public var idleConnection: Duration

        /// - Parameters:
        ///   - connect: establishing a connection.
        ///   - request: one request, to the whole answer.
        ///   - idleConnection: how long an unused connection stays open.
        public init(connect: Duration = .seconds(10), request: Duration = .seconds(30), idleConnection: Duration = .seconds(600)) {
            self.connect = connect
            self.request = request
            self.idleConnection = idleConnection
        }
    }

    /// FCM's own endpoint.
    public static let defaultBaseURL = "https://fcm.googleapis.com"

    /// The service account whose key signs the OAuth assertions; its project receives the messages.
    public var serviceAccount: FCMServiceAccount
    /// Where messages go, without a trailing slash: ``defaultBaseURL``, or a stand-in.
    public var baseURL: String
    /// PEM certificates that replace the system's trust roots (for a stand-in); `nil` for the system's.
    public var trustRootsPEM: String?
    /// Default: ``Timeouts/init(connect:request:idleConnection:)`` with its defaults.
    public var timeouts: Timeouts
    /// How long before its expiry an access token is replaced. Default five minutes.
    public var accessTokenRefreshMargin: Duration

    /// - Parameters:
    ///   - serviceAccount: the service account (``FCMServiceAccount/init(contentsOfFile:)``).
    ///   - baseURL: where messages go; FCM's own endpoint by default.
    ///   - trustRootsPEM: trust roots replacing the system's, for a stand-in.
    ///   - timeouts: time limits.
    ///   - accessTokenRefreshMargin: how long before its expiry an access token is replaced.
    public init(
        serviceAccount: FCMServiceAccount,
        baseURL: String = FCMClientConfiguration.defaultBaseURL,
        trustRootsPEM: String? = nil,
        timeouts: Timeouts = Timeouts(),
        accessTokenRefreshMargin: Duration = FCMAccessTokenCache.defaultRefreshMargin
    ) {
        self.serviceAccount = serviceAccount
        self.baseURL = baseURL
        self.trustRootsPEM = trustRootsPEM
        self.timeouts = timeouts
        self.accessTokenRefreshMargin = accessTokenRefreshMargin
    }

    /// `{base}/v1/projects/{project}/messages:send`.
    var sendURL: String {
        let base = self.baseURL.hasSuffix("/") ? String(self.baseURL.dropLast()) : self.baseURL
        return base + "/v1/projects/" + self.serviceAccount.projectID + "/messages:send"
    }

    /// Checks everything a client needs before it connects: an `https://` base URL, trust roots
    /// that are PEM certificates. A program calls this to refuse bad settings at start.
    ///
    /// - Throws: ``FCMConfigurationError``.
    public func validate() throws {
        _ = try self.checkedTrustRoots()
    }

    func checkedTrustRoots() throws -> [NIOSSLCertificate]? {
        guard let url = URL(string: self.baseURL), url.scheme == "https", url.host != nil else {
            throw FCMConfigurationError(message: "The FCM base URL '\(self.baseURL)' is not an https:// URL; leave it at \(Self.defaultBaseURL).")
        }
        let projectCharacters = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789-")
        guard self.serviceAccount.projectID.unicodeScalars.allSatisfy(projectCharacters.contains) else {
            throw FCMConfigurationError(
                message: "The project id '\(self.serviceAccount.projectID.prefix(64))' of the service account is not a Google Cloud project id (lower-case letters, digits, hyphens).")
        }
        guard let pem = self.trustRootsPEM else { return nil }
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)), !certificates.isEmpty else {
            throw FCMConfigurationError(
                message: "The FCM trust roots are not PEM certificates ('-----BEGIN CERTIFICATE-----'); pass the CA certificate of the endpoint.")
        }
        return certificates
    }
}
