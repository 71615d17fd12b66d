import APNSCore
import Foundation
import HTTP2Push
import Logging
import NIOCore
import NIOHPACK
import NIOSSL

// Why messages do not go through AsyncHTTPClient, as the token exchanges still do.
//
// A message is a small POST with a small JSON answer, sent by the thousand. Under
// AsyncHTTPClient each one costs an HTTP/2 stream child channel with its own pipeline and an
// HTTP/1-style codec, a `Transaction` and a hand-over of the answer's head and body to the task:
// in a profile of `orderflow-bench delivery` that machinery was most of the client's time, and
// the client managed a fraction of the APNs client's rate against a comparable stand-in. The
// transport the APNs client sends with too (the `HTTP2Push` module) is written on
// swift-nio-http2's frames and knows no push service (HTTP2Transport.swift). What FCM gets
// from it: HTTP/2 by ALPN with custom trust roots, the server's stream limit, a deadline per
// request, GOAWAY and reconnection, cancellation, an idle timeout. FCM (fcm.googleapis.com)
// speaks HTTP/2; an endpoint that offers only HTTP/1.1 is refused with a transport error.
extension FCMClient {
    /// HTTP/2 connections to the endpoint, each on its own event loop of the group.
    static let connections = 2

    /// The transport and the path messages are posted to.
    static func makeTransport(
        configuration: FCMClientConfiguration, tls: TLSConfiguration, eventLoopGroup: any EventLoopGroup, logger: Logger
    ) throws -> (HTTP2Transport, String) {
        guard let endpoint = HTTP2Transport.Endpoint(url: configuration.baseURL) else {
            throw FCMConfigurationError(
                message: "The FCM base URL '\(configuration.baseURL)' is not an https:// URL with a host; leave it at \(FCMClientConfiguration.defaultBaseURL).")
        }
        let transport = try HTTP2Transport(
            endpoint: endpoint, tlsConfiguration: tls, connections: Self.connections, eventLoopGroup: eventLoopGroup,
            connectTimeout: TimeAmount(configuration.timeouts.connect), idleTimeout: TimeAmount(configuration.timeouts.idleConnection),
            logger: logger)
        let path = endpoint.pathPrefix + "/v1/projects/" + configuration.serviceAccount.projectID + "/messages:send"
        return (transport, path)
    }

    /// One POST to `messages:send`: the status, the headers and the answer's JSON (nil when it is none).
    func post(_ body: ByteBuffer, accessToken: FCMAccessToken, registrationToken: String) async throws -> (Int, HPACKHeaders, JSONValue?) {
        // The access token repeats on every message until it is replaced, and is indexed by HPACK.
        var headers = self.transport.makeHeaders(path: self.sendPath)
        headers.add(name: "authorization", value: "Bearer " + accessToken.value)
        headers.add(name: "content-type", value: "application/json; charset=UTF-8")
        headers.add(name: "content-length", value: String(body.readableBytes))
        do {
            let response = try await self.transport.execute(
                headers: headers, body: body, deadline: .now() + TimeAmount(self.configuration.timeouts.request))
            return (response.status, response.headers, response.body.flatMap { try? JSONValue(parsing: $0.readableBytesView) })
        } catch {
            if Task.isCancelled { throw CancellationError() }
            let redactedToken = APNSTokenRedaction.redacted(registrationToken)
            self.logger.debug("FCM unreachable", metadata: ["fcm.token": "\(redactedToken)", "fcm.error": "\(error)"])
            throw FCMTransportError(underlying: error, redactedToken: redactedToken)
        }
    }
}
