import Foundation
import HTTP2Push
import NIOSSL

extension APNSClientConfiguration {
    /// Checks everything a client needs before it connects anywhere: the endpoint is an
    /// `https://` URL, the custom trust roots are PEM certificates, the request limit is
    /// positive, and the signing key loads. ``APNSClient/init(configuration:logger:eventLoopGroup:currentTime:)``
    /// runs the same checks; a program calls this to refuse bad settings at start, before it
    /// opens a database connection.
    /// - Throws: ``APNSCredentialsError`` for the key, ``APNSConfigurationError`` for the rest.
    public func validate() throws {
        _ = try checked()
    }

    /// What ``validate()`` checks, with the loaded key and trust roots for the client.
    func checked() throws -> (signingKey: APNSSigningKey, trustRoots: [NIOSSLCertificate]?, endpoint: HTTP2Transport.Endpoint) {
        guard maximumConcurrentRequests > 0 else {
            throw APNSConfigurationError(
                message: "maximumConcurrentRequests is \(maximumConcurrentRequests); it must be at least 1."
            )
        }
        guard connections > 0 else {
            throw APNSConfigurationError(message: "connections is \(connections); it must be at least 1.")
        }
        // Parsed once, here: the transport connects to what this returns.
        guard let endpoint = HTTP2Transport.Endpoint(url: environment.baseURL) else {
            throw APNSConfigurationError(
                message: "The APNs base URL '\(environment.baseURL)' is not an https:// URL with a host; APNs speaks HTTP/2 over TLS only: use https://host[:port].")
        }
        let signingKey = try credentials.loadSigningKey()
        guard case .custom(_, let trustRootsPEM?) = environment else { return (signingKey, nil, endpoint) }
        do {
            let certificates = try NIOSSLCertificate.fromPEMBytes(Array(trustRootsPEM.utf8))
            guard !certificates.isEmpty else { throw APNSConfigurationError(message: "no certificate") }
            return (signingKey, certificates, endpoint)
        } catch {
            throw APNSConfigurationError(
                message: "The custom trust roots are not PEM certificates ('-----BEGIN CERTIFICATE-----'); pass the CA certificate of the endpoint."
            )
        }
    }
}
