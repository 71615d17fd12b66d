import AsyncHTTPClient
import Foundation
import HTTP2Push
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOSSL
import Synchronization

/// Sends notifications to APNs over HTTP/2 with token authentication.
///
/// Pushes go over ``APNSClientConfiguration/connections`` HTTP/2 connections, each on its own
/// event loop where the group has several; they stay open and are reused, and sends go to them
/// in turn. The transport (the `HTTP2Push` module, shared with the FCM client) is written on
/// swift-nio-http2 frames (HTTP2Transport.swift says why and what it keeps); it negotiates
/// HTTP/2 by ALPN and keeps to the stream limit the server announces. Broadcasts and channel
/// requests, which are few, go through AsyncHTTPClient. The client knows nothing of orders or
/// workflows: it sends an ``APNSRequest`` and reports what APNs answered, classified by
/// ``APNSFailureAction``.
///
/// Call ``shutdown()`` before the client is released.
public final class APNSClient: Sendable {
    public let configuration: APNSClientConfiguration
    /// Where pushes go (``send(_:)``).
    let transport: HTTP2Transport
    /// For the broadcast and channel requests (APNSClient+Broadcast.swift): few, so they keep
    /// AsyncHTTPClient, which connects only when one is made.
    let httpClient: HTTPClient
    private let shutDown = Atomic<Bool>(false)
    let providerTokens: any APNSProviderTokenSource
    let inFlight: AsyncSemaphore
    private let devicePathPrefix: String
    let logger: Logger

    /// Creates a client; loads and checks the signing key at once.
    ///
    /// - Parameters:
    ///   - logger: receives debug-level records of sends and info-level records of configuration
    ///     and credential failures. Metadata keys start with `apns.` (the transport's, with
    ///     `http2.`); tokens are truncated.
    ///   - eventLoopGroup: where connections run; by default AsyncHTTPClient's shared group.
    ///   - currentTime: the clock used for provider tokens (injectable for tests).
    ///   - providerTokens: makes the source of provider tokens from the loaded signing key; by
    ///     default an ``APNSProviderTokenFactory`` of this client's own. Pass a shared source when
    ///     several processes send with one key.
    /// - Throws: ``APNSCredentialsError`` for an unusable key, ``APNSConfigurationError`` for an
    ///   unusable URL, trust roots or limit.
    public init(
        configuration: APNSClientConfiguration,
        logger: Logger,
        eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup,
        currentTime: @escaping @Sendable () -> Date = { Date() },
        providerTokens: ((APNSSigningKey) -> any APNSProviderTokenSource)? = nil
    ) throws {
        let (signingKey, trustRoots, endpoint) = try configuration.checked()
        let tls = PushClientPolicy.tls(trustRoots: trustRoots)
        self.configuration = configuration
        self.providerTokens = providerTokens?(signingKey) ?? APNSProviderTokenFactory(
            signingKey: signingKey,
            refreshInterval: configuration.providerTokenRefreshInterval,
            currentTime: currentTime
        )
        self.inFlight = AsyncSemaphore(permits: configuration.maximumConcurrentRequests)
        self.devicePathPrefix = endpoint.pathPrefix + "/3/device/"
        self.logger = logger
        // The connections go on different loops of the group (an EventLoop is a group of one):
        // one connection would keep every stream of the endpoint on one thread.
        self.transport = try HTTP2Transport(
            endpoint: endpoint,
            tlsConfiguration: tls,
            connections: configuration.connections,
            eventLoopGroup: eventLoopGroup,
            connectTimeout: TimeAmount(configuration.timeouts.connect),
            idleTimeout: TimeAmount(configuration.timeouts.idleConnection),
            logger: logger
        )
        self.httpClient = PushClientPolicy.httpClient(
            tls: tls, connectTimeout: TimeAmount(configuration.timeouts.connect),
            idleTimeout: TimeAmount(configuration.timeouts.idleConnection), eventLoopGroup: eventLoopGroup, logger: logger)
    }

    /// Closes the connections. Sends after this fail with a transport error. A second call does nothing.
    public func shutdown() async throws {
        guard !self.shutDown.exchange(true, ordering: .relaxed) else { return }
        await self.transport.shutdown()
        try await self.httpClient.shutdown()
    }


    /// Sends one notification and returns once APNs has answered.
    ///
    /// - Throws: an error conforming to ``APNSSendFailure``: ``APNSError`` when APNs refused the
    ///   notification, ``APNSTransportError`` when it could not be reached, ``APNSPayloadError``
    ///   or ``APNSRequestError`` when the request was refused before sending,
    ///   ``APNSCredentialsError`` when no provider token could be signed. `CancellationError`
    ///   when the task is cancelled.
    @discardableResult
    public func send(_ request: APNSRequest) async throws -> APNSSendResult {
        try request.validate()
        let redactedToken = APNSTokenRedaction.redacted(request.deviceToken)
        let apnsID = request.apnsID ?? UUID()
        let apnsIDText = APNSClient.lowercasedText(apnsID)
        // The per-send metadata costs string building on every send; AsyncHTTPClient logs with it
        // only at debug and trace level, so below that the plain logger is passed and the
        // metadata is added where this method itself logs (every failure path).
        func decorated(_ base: Logger) -> Logger {
            var logger = base
            logger[metadataKey: "apns.token"] = "\(redactedToken)"
            logger[metadataKey: "apns.id"] = "\(apnsIDText)"
            logger[metadataKey: "apns.push_type"] = "\(request.pushType.rawValue)"
            return logger
        }
        let verbose = self.logger.logLevel <= .debug
        let logger = verbose ? decorated(self.logger) : self.logger

        try await self.inFlight.acquire()
        defer { self.inFlight.release() }

        let providerToken = try await self.providerTokens.providerToken()
        // Values that differ per request (path, apns-id) stay out of the HPACK table; the
        // token and the other headers repeat and are indexed.
        var headers = self.transport.makeHeaders(path: self.devicePathPrefix + request.deviceToken)
        headers.add(name: "authorization", value: "bearer " + providerToken.jwt)
        headers.add(name: "apns-push-type", value: request.pushType.rawValue)
        headers.add(name: "apns-topic", value: request.headerTopic)
        headers.add(name: "apns-priority", value: String(request.priority.rawValue))
        headers.add(name: "apns-id", value: apnsIDText, indexing: .nonIndexable)
        if let expiration = request.expiration {
            headers.add(name: "apns-expiration", value: String(expiration))
        }
        if let collapseID = request.collapseID {
            headers.add(name: "apns-collapse-id", value: collapseID)
        }
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(request.payload.count))

        let response: HTTP2Response
        do {
            response = try await self.transport.execute(
                headers: headers,
                body: ByteBuffer(bytes: request.payload),
                deadline: .now() + TimeAmount(self.configuration.timeouts.request)
            )
        } catch {
            if Task.isCancelled {
                throw CancellationError()
            }
            logger.debug("APNs unreachable", metadata: ["apns.error": "\(error)"])
            throw APNSTransportError(underlying: error, redactedDeviceToken: redactedToken)
        }

        // APNs echoes the apns-id it was sent: compare the text before parsing a UUID.
        let answeredText = response.headers.first(name: "apns-id")
        let answeredID = answeredText == apnsIDText ? apnsID : answeredText.flatMap(UUID.init(uuidString:))
        guard response.status == 200 else {
            let logger = verbose ? logger : decorated(logger)
            let failure = self.failure(
                status: response.status,
                retryAfter: response.headers.first(name: "retry-after"),
                body: response.body ?? ByteBuffer(),
                apnsID: answeredID ?? apnsID,
                providerToken: providerToken,
                redactedToken: redactedToken
            )
            var metadata: Logger.Metadata = [
                "apns.status": "\(failure.status)",
                "apns.reason": "\(failure.reason.rawValue)",
                "apns.action": "\(failure.action)",
            ]
            if let timestamp = failure.timestamp {
                metadata["apns.timestamp"] = "\(Int64(timestamp.timeIntervalSince1970 * 1000))"
            }
            switch failure.action {
            case .configurationError, .credentialsError:
                logger.info("APNs refused the notification: \(failure.description)", metadata: metadata)
            default:
                logger.debug("APNs refused the notification", metadata: metadata)
            }
            throw failure
        }
        logger.trace("APNs accepted the notification")
        return APNSSendResult(apnsID: answeredID ?? apnsID, status: response.status)
    }

    /// `uuid` as 36 lower-case characters (what APNs sends back), without Foundation's
    /// `uuidString` (formatted with sprintf) and a second pass to lower-case it.
    static func lowercasedText(_ uuid: UUID) -> String {
        let digits: StaticString = "0123456789abcdef"
        return withUnsafeBytes(of: uuid.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { buffer in
                var index = 0
                for (position, byte) in bytes.enumerated() {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        buffer[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    buffer[index] = digits.utf8Start[Int(byte >> 4)]
                    buffer[index + 1] = digits.utf8Start[Int(byte & 0x0f)]
                    index += 2
                }
                return index
            }
        }
    }

    func failure(
        status: Int,
        retryAfter retryAfterText: String?,
        body: ByteBuffer,
        apnsID: UUID,
        providerToken: APNSProviderToken,
        redactedToken: String,
        channelID: String? = nil
    ) -> APNSError {
        let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(body.readableBytesView))
        let reason: APNSErrorReason
        if let text = decoded?.reason {
            reason = APNSErrorReason(rawValue: text)
        } else {
            // Not an APNs error body: keep what there is, shortened, as the unknown reason.
            let text = String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines)
            reason = .unknown(String(text.prefix(200)))
        }
        let timestamp = decoded?.timestamp.map { Date(timeIntervalSince1970: $0 / 1000) }
        let retryAfter = retryAfterText.flatMap { Int($0) }.map { Duration.seconds($0) }

        var action = reason.action(status: status, retryAfter: retryAfter)
        if reason == .expiredProviderToken, !self.providerTokens.providerTokenExpired(providerToken) {
            // The token is younger than 20 minutes: signing another would risk
            // TooManyProviderTokenUpdates, and a fresh token called expired means a clock problem.
            action = .credentialsError
        }
        return APNSError(
            status: status,
            reason: reason,
            timestamp: timestamp,
            apnsID: apnsID,
            redactedDeviceToken: redactedToken,
            action: action,
            channelID: channelID
        )
    }

    /// The JSON body of an APNs error: `reason`, and for 410 `timestamp` in milliseconds since 1970.
    private struct ErrorBody: Decodable {
        var reason: String?
        var timestamp: Double?
    }
}
