import Foundation

/// How an ``APNSClient`` reaches APNs and signs its requests.
public struct APNSClientConfiguration: Sendable {
    /// Which APNs to talk to.
    public enum Environment: Sendable, Hashable {
        /// `https://api.push.apple.com`, for apps from the App Store, TestFlight and ad-hoc builds.
        case production
        /// `https://api.sandbox.push.apple.com`, for development builds.
        case sandbox
        /// Another endpoint (a local stand-in for tests and benchmarks). `trustRootsPEM`, when
        /// given, replaces the system's trust roots with these PEM certificates.
        case custom(baseURL: String, trustRootsPEM: String?)

        /// The URL requests go to, without a trailing slash.
        public var baseURL: String {
            switch self {
            case .production: "https://api.push.apple.com"
            case .sandbox: "https://api.sandbox.push.apple.com"
            case .custom(let baseURL, _): baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
            }
        }
    }

    /// The team's token-auth credentials (Live Activities accept no certificates).
    public struct Credentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// Where the `.p8` key comes from. Never printed.
        public enum KeySource: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
            /// The PEM text of the key.
            case pem(String)
            /// The path of the `.p8` file.
            case file(path: String)

            public var description: String {
                switch self {
                case .pem: "pem(<redacted>)"
                case .file(let path): "file(path: \(path))"
                }
            }

            public var debugDescription: String { self.description }
            public var customMirror: Mirror { Mirror(self, children: ["source": self.description]) }
        }

        public var key: KeySource
        /// The key id (JWT `kid`).
        public var keyID: String
        /// The team id (JWT `iss`).
        public var teamID: String

        public init(key: KeySource, keyID: String, teamID: String) {
            self.key = key
            self.keyID = keyID
            self.teamID = teamID
        }

        public var description: String {
            "Credentials(key: \(self.key), keyID: \(self.keyID), teamID: \(self.teamID))"
        }

        public var debugDescription: String { self.description }
        public var customMirror: Mirror {
            Mirror(self, children: ["key": self.key.description, "keyID": self.keyID, "teamID": self.teamID])
        }

        /// Loads and parses the key.
        ///
        /// - Throws: ``APNSCredentialsError`` naming the path and what to do.
        public func loadSigningKey() throws -> APNSSigningKey {
            switch self.key {
            case .pem(let pem):
                try APNSSigningKey(pemRepresentation: pem, keyID: self.keyID, teamID: self.teamID)
            case .file(let path):
                try APNSSigningKey(contentsOfFile: path, keyID: self.keyID, teamID: self.teamID)
            }
        }
    }

    /// Time limits.
    public struct Timeouts: Sendable, Hashable {
        /// Establishing a connection (TCP and TLS). Default 10 seconds.
        public var connect: Duration
        /// One request from sending to the whole response, including waiting for a free stream.
        /// Default 30 seconds.
        public var request: Duration
        /// How long an unused connection stays open. APNs treats frequent reconnects as abuse,
        /// so the default is long: 30 minutes.
        public var idleConnection: Duration

        public init(
            connect: Duration = .seconds(10),
            request: Duration = .seconds(30),
            idleConnection: Duration = .seconds(30 * 60)
        ) {
            self.connect = connect
            self.request = request
            self.idleConnection = idleConnection
        }
    }

    public var environment: Environment
    public var credentials: Credentials
    /// Default: ``Timeouts/init(connect:request:idleConnection:)`` with its defaults.
    public var timeouts: Timeouts
    /// The most requests in flight at once; more wait their turn. HTTP/2 stream limits announced
    /// by the server (SETTINGS_MAX_CONCURRENT_STREAMS) apply as well. Default 1000.
    public var maximumConcurrentRequests: Int
    /// HTTP/2 connections kept to the endpoint; requests are spread over them in turn. Each
    /// connection's frames, HPACK and TLS run on one event loop (one thread), so on a group of
    /// several loops the connections are put on different loops. APNs allows several connections
    /// per provider. Default 2.
    public var connections: Int = 2
    /// How long one provider token is reused. Default 50 minutes; kept between 20 and 55.
    public var providerTokenRefreshInterval: Duration
    /// Where broadcasts go (`POST /4/broadcasts/apps/<bundle id>`), without a trailing slash;
    /// `nil`: the environment's push host, as Apple documents. Apple's sample also shows an
    /// `api-broadcast.…` host, hence the setting.
    public var broadcastURLOverride: String? = nil
    /// Where channel requests go; `nil`: the environment's management host
    /// (``Environment/channelManagementBaseURL``).
    public var channelManagementURLOverride: String? = nil

    public init(
        environment: Environment,
        credentials: Credentials,
        timeouts: Timeouts = Timeouts(),
        maximumConcurrentRequests: Int = 1000,
        providerTokenRefreshInterval: Duration = APNSProviderTokenFactory.defaultRefreshInterval
    ) {
        self.environment = environment
        self.credentials = credentials
        self.timeouts = timeouts
        self.maximumConcurrentRequests = maximumConcurrentRequests
        self.providerTokenRefreshInterval = providerTokenRefreshInterval
    }
}
