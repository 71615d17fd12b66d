import APNSCore
import Foundation
import LocalAPNS
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// A local stand-in for FCM: Google's OAuth token endpoint and FCM's HTTP v1 `messages:send`, over
/// TLS on 127.0.0.1 (HTTP/2 by ALPN, or HTTP/1.1), refusing what they refuse in their words and
/// recording what they accept. For tests, the demo and benchmarks.
///
/// The token endpoint (``tokenURI``) takes the JWT bearer grant: it checks the assertion's RS256
/// signature against the service account's public key and its claims (`iss` a known account, `kid`
/// its key, `aud` the endpoint, `iat`/`exp` at most an hour apart and current, a scope) and issues
/// access tokens that expire after ``Configuration/accessTokenLifetime``. `messages:send` checks
/// the bearer token (known, unexpired, of the path's project), then the message as FCM does: no
/// unknown field, the right types, one target, a registration token of FCM's form, data values
/// that are strings, no reserved data key, at most 4096 bytes of data, priority `NORMAL`/`HIGH`,
/// a TTL of the form `"<seconds>s"`. Faults can be injected by token or for the next requests.
///
/// Service accounts come from ``makeServiceAccount(projectID:accountName:)`` after ``start()``.
/// The certificate comes from a CA made at creation; pass ``trustRootPEM`` to the client.
public final class LocalFCMServer: Sendable {
    /// What the stand-in does.
    public struct Configuration: Sendable {
        /// Default `127.0.0.1`.
        public var host: String
        /// Default 0: the system picks a free port (``LocalFCMServer/port``).
        public var port: Int
        /// The `expires_in` of issued access tokens, in seconds. Default 3599, as Google.
        public var accessTokenLifetime: Int
        /// Whether accepted messages are kept (``messages()``); off for long benchmarks, counts stay.
        public var recordsMessages: Bool

        /// - Parameters:
        ///   - host: the address to listen on.
        ///   - port: the port; 0 for a free one.
        ///   - accessTokenLifetime: the `expires_in` of issued tokens.
        ///   - recordsMessages: whether accepted messages are kept.
        public init(host: String = "127.0.0.1", port: Int = 0, accessTokenLifetime: Int = 3599, recordsMessages: Bool = true) {
            self.host = host
            self.port = port
            self.accessTokenLifetime = accessTokenLifetime
            self.recordsMessages = recordsMessages
        }
    }

    /// What the stand-in was made with.
    public let configuration: Configuration
    /// The PEM of the CA that signed the server certificate: the client's trust root.
    public let trustRootPEM: String

    let core: LocalFCMCore
    private let certificates: LocalAPNSCertificates
    private let eventLoopGroup: any EventLoopGroup
    private let channel = Mutex<(any Channel)?>(nil)
    private let boundPort = Atomic<Int>(0)

    /// Creates the stand-in and its certificates; ``start()`` opens the port.
    ///
    /// - Parameters:
    ///   - configuration: what the stand-in does.
    ///   - eventLoopGroup: where connections run.
    public init(configuration: Configuration = Configuration(), eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws {
        self.configuration = configuration
        self.certificates = try LocalAPNSCertificates()
        self.trustRootPEM = self.certificates.trustRootPEM
        self.core = LocalFCMCore(configuration: configuration)
        self.eventLoopGroup = eventLoopGroup
    }

    /// The port listened on (0 before ``start()``).
    public var port: Int { self.boundPort.load(ordering: .relaxed) }
    /// `https://127.0.0.1:<port>`, the client's base URL.
    public var baseURL: String { "https://\(self.configuration.host):\(self.port)" }
    /// The token endpoint: the `token_uri` of the service accounts it makes.
    public var tokenURI: String { self.baseURL + LocalFCMCore.tokenPath }

    /// Starts listening.
    public func start() async throws {
        let sslContext = try self.certificates.makeServerContext(applicationProtocols: ["h2", "http/1.1"])
        let core = self.core
        let channel = try await ServerBootstrap(group: self.eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { channel in
                            channel.configureHTTP2Pipeline(mode: .server, inboundStreamInitializer: { stream in
                                stream.eventLoop.makeCompletedFuture {
                                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                                    try stream.pipeline.syncOperations.addHandler(LocalFCMHTTPHandler(core: core, httpMajorVersion: 2))
                                }
                            }).map { _ in }
                        },
                        http1ChannelConfigurator: { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                                try channel.pipeline.syncOperations.addHandler(LocalFCMHTTPHandler(core: core, httpMajorVersion: 1))
                            }
                        })
                }
            }
            .bind(host: self.configuration.host, port: self.configuration.port)
            .get()
        self.boundPort.store(channel.localAddress?.port ?? 0, ordering: .relaxed)
        self.channel.withLock { $0 = channel }
        self.core.tokenURI.withLock { $0 = self.tokenURI }
    }

    /// Stops listening. Open connections end with the event loop group or their client.
    public func stop() async throws {
        let channel = self.channel.withLock { channel in
            defer { channel = nil }
            return channel
        }
        try? await channel?.close()
    }

    // MARK: Service accounts

    /// Makes a service account of `projectID` whose assertions this stand-in accepts, and returns
    /// its key file (``LocalFCMServiceAccountKey/json``). Call after ``start()``: the file names
    /// the token endpoint's port.
    ///
    /// - Parameters:
    ///   - projectID: the Firebase project it sends for.
    ///   - accountName: the part of its e-mail before `@`.
    public func makeServiceAccount(projectID: String, accountName: String = "firebase-adminsdk-test") throws -> LocalFCMServiceAccountKey {
        let key = try LocalFCMServiceAccountKey.generate(projectID: projectID, tokenURI: self.tokenURI, accountName: accountName)
        self.register(key)
        return key
    }

    /// Accepts assertions signed with `key` (made by ``LocalFCMServiceAccountKey/generate(projectID:tokenURI:accountName:freshKey:)``).
    ///
    /// - Parameter key: the service account.
    public func register(_ key: LocalFCMServiceAccountKey) {
        self.core.state.withLock { state in
            state.accounts[key.clientEmail] = .init(projectID: key.projectID, privateKeyID: key.privateKeyID, publicKey: key.publicKey)
        }
    }

    /// Forgets a service account, as deleting its key in the console does: its assertions are
    /// refused from now on (its access tokens stay valid until they expire, as Google's do).
    ///
    /// - Parameter clientEmail: the account's e-mail.
    public func revokeServiceAccount(clientEmail: String) {
        _ = self.core.state.withLock { $0.accounts.removeValue(forKey: clientEmail) }
    }

    /// Makes every access token issued so far expired: the next message with one gets
    /// `401 UNAUTHENTICATED`.
    public func expireAccessTokens() {
        self.core.state.withLock { state in
            for key in state.issued.keys { state.issued[key]?.expiresAt = .distantPast }
        }
    }

    /// How many requests reached the token endpoint since the start.
    public var tokenRequestCount: Int { self.core.state.withLock { $0.tokenRequestCount } }

    // MARK: Records

    /// Every accepted message since the last ``reset()``, in arrival order.
    public func messages() -> [LocalFCMMessage] { self.core.state.withLock { $0.messages } }

    /// How many messages were accepted since the last ``reset()`` (counted when not recording too).
    public var acceptedCount: Int { self.core.state.withLock { $0.acceptedCount } }

    /// The refused requests since the last ``reset()`` (the first 10,000).
    public func rejections() -> [LocalFCMRejection] { self.core.state.withLock { $0.rejections } }

    /// Waits until at least `count` messages were accepted, then returns the recorded ones.
    ///
    /// - Parameters:
    ///   - count: how many.
    ///   - timeout: how long to wait.
    /// - Throws: ``LocalFCMServerError`` when `timeout` passes first.
    @discardableResult
    public func waitForMessages(count: Int, timeout: Duration = .seconds(10)) async throws -> [LocalFCMMessage] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if self.acceptedCount >= count { return self.messages() }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw LocalFCMServerError(message: "The local FCM accepted \(self.acceptedCount) messages, not \(count), within \(timeout).")
    }

    /// Forgets recorded messages and refusals and removes faults; accounts and tokens stay.
    public func reset() {
        self.core.state.withLock { state in
            state.messages.removeAll()
            state.acceptedCount = 0
            state.rejections.removeAll()
            state.faults.removeAll()
        }
    }

    // MARK: Faults

    /// Answers messages that would be accepted with `fault` instead.
    ///
    /// - Parameters:
    ///   - fault: the answer, such as ``LocalFCMFault/unregistered`` or ``LocalFCMFault/quotaExceeded(retryAfter:)``.
    ///   - token: only messages to this registration token; `nil` for every token. Rules for a
    ///     token come before rules for every token; among those, the first added wins.
    ///   - count: for the next `count` matching messages; `nil` for as many as come.
    public func injectFault(_ fault: LocalFCMFault, token: String? = nil, count: Int? = nil) {
        self.core.state.withLock { $0.faults.append(.init(fault: fault, token: token, remaining: count)) }
    }

    /// Removes every injected fault.
    public func clearFaults() {
        self.core.state.withLock { $0.faults.removeAll() }
    }

    /// A registration token of FCM's form, different for each `index`.
    ///
    /// - Parameter index: which token.
    public static func registrationToken(_ index: Int) -> String {
        let instance = String(format: "d%021x", index)
        let tail = String(repeating: "Xk3_9-qZ", count: 16)
        return instance + ":APA91b" + String(format: "%08x", index) + tail
    }
}

/// Serves one HTTP/1.1 connection or one HTTP/2 stream (through NIO's HTTP/1 translation): reads
/// a request, asks the core, writes the answer.
final class LocalFCMHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let core: LocalFCMCore
    private let httpMajorVersion: Int
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(core: LocalFCMCore, httpMajorVersion: Int) {
        self.core = core
        self.httpMajorVersion = httpMajorVersion
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = []
        case .body(let buffer):
            // Anything near this size is refused anyway; keep the stand-in's memory bounded.
            if self.body.count < 1_048_576 { self.body.append(contentsOf: buffer.readableBytesView) }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let reply = self.core.respond(
                method: head.method, path: head.uri, headers: head.headers, body: self.body, httpMajorVersion: self.httpMajorVersion)
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json; charset=UTF-8")
            headers.add(name: "content-length", value: String(reply.body.count))
            for (name, value) in reply.headers { headers.add(name: name, value: value) }
            let status = HTTPResponseStatus(statusCode: reply.status)
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: reply.body)))), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
