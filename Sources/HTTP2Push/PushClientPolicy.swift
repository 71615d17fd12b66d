import AsyncHTTPClient
import Logging
import NIOCore
import NIOSSL

/// What both push clients hold to on the network, in one place: TLS 1.2 or later, against the
/// given trust roots (the system's when none); and for the few requests that go through
/// AsyncHTTPClient (APNs broadcasts and channels, FCM's token exchanges) no redirect followed
/// and no decompression, over HTTP/2 where the server offers it.
public enum PushClientPolicy {
    /// The client's TLS settings, for the transport and for AsyncHTTPClient alike.
    public static func tls(trustRoots: [NIOSSLCertificate]?) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let trustRoots { tls.trustRoots = .certificates(trustRoots) }
        return tls
    }

    /// An AsyncHTTPClient for the client's rare requests, on `eventLoopGroup`. It connects only
    /// when a request is made; call its `shutdown()` with the client's.
    public static func httpClient(
        tls: TLSConfiguration, connectTimeout: TimeAmount, idleTimeout: TimeAmount,
        eventLoopGroup: any EventLoopGroup, logger: Logger
    ) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: connectTimeout, read: nil),
            connectionPool: .init(idleTimeout: idleTimeout),
            decompression: .disabled
        )
        configuration.httpVersion = .automatic
        return HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration, backgroundActivityLogger: logger)
    }
}
