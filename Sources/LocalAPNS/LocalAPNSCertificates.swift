import Crypto
import Foundation
import NIOSSL
import X509

/// A throw-away certificate authority and a server certificate for 127.0.0.1 and localhost,
/// made in memory when a local stand-in (APNs, FCM) is created. No key ever touches the disk.
public struct LocalAPNSCertificates: Sendable {
    /// The CA certificate in PEM, for the client's trust roots.
    public let trustRootPEM: String
    let serverCertificate: NIOSSLCertificate
    let serverPrivateKey: NIOSSLPrivateKey

    /// Makes the CA and the server certificate, valid from an hour before `now` for a week.
    ///
    /// - Parameter now: the start of the validity.
    public init(now: Date = Date()) throws {
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("OrderFlow tests")
            CommonName("OrderFlow local APNs CA")
        }
        let validFrom = now.addingTimeInterval(-3600)
        let validUntil = now.addingTimeInterval(7 * 24 * 3600)
        let ca = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(caKey.publicKey),
            notValidBefore: validFrom,
            notValidAfter: validUntil,
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )

        let serverKey = P256.Signing.PrivateKey()
        let serverName = try DistinguishedName {
            OrganizationName("OrderFlow tests")
            CommonName("localhost")
        }
        let server = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(serverKey.publicKey),
            notValidBefore: validFrom,
            notValidAfter: validUntil,
            issuer: caName,
            subject: serverName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                // subjectAltName (2.5.29.17): IP 127.0.0.1 and DNS localhost, written out in DER
                // so no ASN.1 module is needed here.
                Certificate.Extension(oid: [2, 5, 29, 17], critical: false, value: Self.subjectAltNameDER[...])
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )

        self.trustRootPEM = try ca.serializeAsPEM().pemString
        self.serverCertificate = try NIOSSLCertificate(bytes: Array(try server.serializeAsPEM().pemString.utf8), format: .pem)
        self.serverPrivateKey = try NIOSSLPrivateKey(bytes: Array(serverKey.pemRepresentation.utf8), format: .pem)
    }

    /// SEQUENCE { [7] 127.0.0.1, [2] "localhost" }.
    private static let subjectAltNameDER: [UInt8] =
        [0x30, 0x11, 0x87, 0x04, 127, 0, 0, 1, 0x82, 0x09] + Array("localhost".utf8)

    /// A TLS server context with the certificate.
    ///
    /// - Parameter applicationProtocols: the ALPN protocols offered, in order of preference.
    public func makeServerContext(applicationProtocols: [String]) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(self.serverCertificate)],
            privateKey: .privateKey(self.serverPrivateKey)
        )
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = applicationProtocols
        return try NIOSSLContext(configuration: configuration)
    }
}
