import APNSCore
import AsyncHTTPClient
import Foundation
import HTTP2Push
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Sends data messages to FCM over its HTTP v1 API.
///
/// Messages go over two HTTP/2 connections that stay open (FCM speaks HTTP/2), many
/// streams on each, through the frame-level transport the APNs client sends with
/// (FCMClient+Transport.swift says why); the rare token exchanges go through AsyncHTTPClient.
/// Each message carries an OAuth 2 access token from an
/// ``FCMAccessTokenSource``; a `401 UNAUTHENTICATED` (the token expired or was revoked early)
/// makes the client drop the token, obtain another and send once more. The client knows nothing
/// of orders or workflows: it sends an ``FCMMessage`` and reports what FCM answered, classified
/// by ``FCMFailureAction``.
///
/// Call ``shutdown()`` before the client is released.
public final class FCMClient: Sendable {
    /// What the client was made with.
    public let configuration: FCMClientConfiguration
    /// Where the access tokens come from.
    public let accessTokens: any FCMAccessTokenSource
    private let httpClient: HTTPClient
    let logger: Logger
    private let shutDown = Atomic<Bool>(false)
    /// Where messages go (FCMClient+Transport.swift).
    let transport: HTTP2Transport
    /// `{base path}/v1/projects/{project}/messages:send`.
    let sendPath: String

    /// Creates a client; checks the configuration at once.
    ///
    /// - Parameters:
    ///   - configuration: the service account, the endpoint and the limits.
    ///   - logger: receives debug-level records of refusals and info-level records of
    ///     configuration and credential failures; tokens are truncated, keys never shown.
    ///   - eventLoopGroup: where connections run; by default AsyncHTTPClient's shared group.
    ///   - currentTime: the clock of the access tokens (injectable for tests).
    ///   - accessTokens: makes the source of access tokens from the client's token exchange; by
    ///     default an ``FCMAccessTokenCache`` of this client's own over it. Pass a shared source
    ///     when several workers send with one service account.
    /// - Throws: ``FCMConfigurationError`` for an unusable URL or trust roots.
    public init(
        configuration: FCMClientConfiguration,
        logger: Logger,
        eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup,
        currentTime: @escaping @Sendable () -> Date = { Date() },
        accessTokens: ((FCMTokenExchange) -> any FCMAccessTokenSource)? = nil
    ) throws {
        let tls = PushClientPolicy.tls(trustRoots: try configuration.checkedTrustRoots())
        let httpClient = PushClientPolicy.httpClient(
            tls: tls, connectTimeout: TimeAmount(configuration.timeouts.connect),
            idleTimeout: TimeAmount(configuration.timeouts.idleConnection), eventLoopGroup: eventLoopGroup, logger: logger)
        let exchange = FCMTokenExchange(
            serviceAccount: configuration.serviceAccount, httpClient: httpClient, timeout: configuration.timeouts.request)

        self.configuration = configuration
        self.httpClient = httpClient
        self.logger = logger
        (self.transport, self.sendPath) = try Self.makeTransport(configuration: configuration, tls: tls, eventLoopGroup: eventLoopGroup, logger: logger)
        self.accessTokens = accessTokens?(exchange) ?? FCMAccessTokenCache(
            refreshMargin: configuration.accessTokenRefreshMargin, currentTime: currentTime,
            fetch: { now, _ in try await exchange.exchange(at: now) })
    }

    /// Closes the connections. Sends after this fail with a transport error. A second call does nothing.
    public func shutdown() async throws {
        guard !self.shutDown.exchange(true, ordering: .relaxed) else { return }
        await self.transport.shutdown()
        try await self.httpClient.shutdown()
    }

    /// Sends one message and returns once FCM has accepted it.
    ///
    /// - Parameter message: the data message.
    /// - Returns: the name FCM gave the message.
    /// - Throws: an error conforming to ``FCMSendFailure``: ``FCMError`` when FCM refused the
    ///   message, ``FCMTransportError`` when it could not be reached, ``FCMMessageError`` when the
    ///   message was refused before sending, ``FCMCredentialsError`` when no access token could be
    ///   obtained. `CancellationError` when the task is cancelled.
    @discardableResult
    public func send(_ message: FCMMessage) async throws -> FCMSendResult {
        try message.validate()
        let body = ByteBuffer(bytes: message.encodedBody())
        var token = try await self.accessTokens.accessToken()
        var refreshed = false
        while true {
            let (status, headers, answer) = try await self.post(body, accessToken: token, registrationToken: message.token)
            if status == 200 {
                return FCMSendResult(name: answer?["name"]?.stringValue ?? "")
            }
            // The redacted token and the logger's metadata cost string building: made only for
            // a refusal, not on every accepted message.
            let redactedToken = APNSTokenRedaction.redacted(message.token)
            var logger = self.logger
            logger[metadataKey: "fcm.token"] = "\(redactedToken)"
            let failure = Self.failure(status: status, retryAfter: headers.first(name: "retry-after"), body: answer, redactedToken: redactedToken)
            // An expired or revoked access token: another one, once. THIRD_PARTY_AUTH_ERROR is
            // also a 401, but about the project's APNs or web credentials, which no token mends.
            if status == 401, failure.errorCode == .unspecified, !refreshed {
                refreshed = true
                logger.debug("FCM refused the access token; obtaining another")
                self.accessTokens.accessTokenRejected(token)
                token = try await self.accessTokens.accessToken()
                continue
            }
            let metadata: Logger.Metadata = [
                "fcm.status": "\(status)", "fcm.error_code": "\(failure.errorCode.rawValue)", "fcm.action": "\(failure.action)",
            ]
            switch failure.action {
            case .configurationError, .credentialsError: logger.info("FCM refused the message: \(failure.description)", metadata: metadata)
            default: logger.debug("FCM refused the message", metadata: metadata)
            }
            throw failure
        }
    }

    /// Reads Google's error body: `{"error": {"code", "message", "status", "details": [FcmError,
    /// BadRequest, …]}}`. A body that is not one keeps the status and a shortened text.
    static func failure(status: Int, retryAfter: String?, body: JSONValue?, redactedToken: String) -> FCMError {
        let error = body?["error"]
        var errorCode = FCMErrorCode.unspecified
        var violations: [FCMError.FieldViolation] = []
        for detail in error?["details"]?.arrayValue ?? [] {
            switch detail["@type"]?.stringValue {
            case "type.googleapis.com/google.firebase.fcm.v1.FcmError":
                if let code = detail["errorCode"]?.stringValue { errorCode = FCMErrorCode(rawValue: code) }
            case "type.googleapis.com/google.rpc.BadRequest":
                for violation in detail["fieldViolations"]?.arrayValue ?? [] {
                    violations.append(.init(
                        field: violation["field"]?.stringValue ?? "", description: violation["description"]?.stringValue ?? ""))
                }
            default:
                break
            }
        }
        return FCMError(
            status: status, errorCode: errorCode, canonicalStatus: error?["status"]?.stringValue ?? "HTTP \(status)",
            message: error?["message"]?.stringValue ?? "no error body", fieldViolations: violations,
            retryAfter: retryAfter.flatMap(Self.retryAfter), redactedToken: redactedToken)
    }

    /// `Retry-After` as seconds or as an HTTP date (RFC 9110).
    static func retryAfter(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) { return .seconds(max(0, seconds)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return .seconds(max(0, Int(date.timeIntervalSinceNow.rounded(.up))))
    }
}
