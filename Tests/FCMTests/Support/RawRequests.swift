import APNSCore
import AsyncHTTPClient
import FCM
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// Requests the client never makes (bad bodies, no credential, another project), sent as they
/// are to the stand-in over the fixture's TLS.
struct RawRequests {
    let fixture: LocalFCMFixture

    struct Answer {
        var status: Int
        var body: JSONValue
        var headers: HTTPHeaders
    }

    /// - Parameter http1: over HTTP/1.1, as Python's `requests` (firebase-admin, pyfcm) sends.
    func post(
        path: String? = nil, body: String, bearer: String?? = .none, contentType: String = "application/json", http1: Bool = false
    ) async throws -> Answer {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(self.fixture.server.trustRootPEM.utf8)))
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        if http1 { configuration.httpVersion = .http1Only }
        let client = HTTPClient(eventLoopGroup: self.fixture.eventLoopGroup, configuration: configuration)
        do {
            let target = path ?? "/v1/projects/\(LocalFCMFixture.projectID)/messages:send"
            var request = HTTPClientRequest(url: self.fixture.server.baseURL + target)
            request.method = .POST
            request.headers.add(name: "content-type", value: contentType)
            switch bearer {
            case .none:
                let token = try await self.fixture.client.accessTokens.accessToken()
                request.headers.add(name: "authorization", value: "Bearer " + token.value)
            case .some(let value?):
                request.headers.add(name: "authorization", value: "Bearer " + value)
            case .some(nil):
                break
            }
            request.body = .bytes(ByteBuffer(string: body))
            let response = try await client.execute(request, timeout: .seconds(10))
            let bytes = try await response.body.collect(upTo: 1 << 20)
            let answer = Answer(
                status: Int(response.status.code), body: try JSONValue(parsing: bytes.readableBytesView), headers: response.headers)
            try await client.shutdown()
            return answer
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// A `messages:send` body for the fixture's token 1 with `message` members replaced.
    static func body(token: String = LocalFCMFixture.token(1), message extra: String = "", data: String = #"{"order":"A-17"}"#) -> String {
        #"{"message":{"token":"\#(token)","data":\#(data)\#(extra)}}"#
    }
}
