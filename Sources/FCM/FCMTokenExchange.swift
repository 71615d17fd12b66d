import APNSCore
import AsyncHTTPClient
import Foundation
import NIOCore

/// Exchanges a service account's signed assertion for an OAuth 2 access token: the JWT bearer
/// grant (RFC 7523) at the account's `token_uri`.
///
/// Each call is one request to Google; keep the token (``FCMAccessTokenCache``, or a store
/// several workers share) rather than exchanging per message.
public struct FCMTokenExchange: Sendable {
    /// The account whose key signs the assertions.
    public let serviceAccount: FCMServiceAccount
    let httpClient: HTTPClient
    let timeout: Duration

    /// An exchange of its own, for a token source that outlives any one ``FCMClient`` (the one a
    /// client passes to its `accessTokens` factory uses that client's connections, and stops
    /// working when the client is shut down).
    ///
    /// - Parameters:
    ///   - serviceAccount: the account whose key signs the assertions.
    ///   - httpClient: the HTTP client the exchanges go through; the caller shuts it down.
    ///   - timeout: the longest one exchange may take.
    public init(serviceAccount: FCMServiceAccount, httpClient: HTTPClient, timeout: Duration = .seconds(30)) {
        self.serviceAccount = serviceAccount
        self.httpClient = httpClient
        self.timeout = timeout
    }

    /// Obtains a new access token.
    ///
    /// - Parameter now: the assertion's issue time; the token's expiry counts from it.
    /// - Throws: ``FCMCredentialsError``: ``FCMCredentialsError/Code/tokenExchangeRefused`` when
    ///   Google refuses the assertion (the key deleted, the clock far off), and
    ///   ``FCMCredentialsError/Code/tokenExchangeFailed`` when it cannot be asked or fails.
    public func exchange(at now: Date) async throws -> FCMAccessToken {
        let account = self.serviceAccount
        let assertion = try account.signedAssertion(at: now)
        var request = HTTPClientRequest(url: account.tokenURI)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        // The grant type's URN and a JWT need no percent-encoding beyond ':' (base64url, dots).
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        request.body = .bytes(ByteBuffer(string: form))
        let who = "\(account.clientEmail) (key \(account.privateKeyID))"

        let status: Int
        let body: JSONValue?
        do {
            let response = try await self.httpClient.execute(request, deadline: .now() + TimeAmount(self.timeout))
            let bytes = try await response.body.collect(upTo: 64 * 1024)
            status = Int(response.status.code)
            body = try? JSONValue(parsing: bytes.readableBytesView)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw FCMCredentialsError(
                code: .tokenExchangeFailed, path: nil,
                message: "Could not reach the OAuth token endpoint \(account.tokenURI) for \(who) (\(error)); retry later.")
        }
        if status == 200, let value = body?["access_token"]?.stringValue, !value.isEmpty,
           let expiresIn = body?["expires_in"]?.intValue, expiresIn > 0 {
            return FCMAccessToken(value: value, expiresAt: now.addingTimeInterval(TimeInterval(expiresIn)))
        }
        // Google's OAuth errors: {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}.
        let error = body?["error"]?.stringValue.map { String($0.prefix(60)) } ?? "no OAuth error"
        let detail = body?["error_description"]?.stringValue.map { String($0.prefix(200)) } ?? ""
        let said = "answered \(status) \(error)\(detail.isEmpty ? "" : " (\(detail))")"
        if status == 200 || status == 408 || status == 429 || status >= 500 {
            throw FCMCredentialsError(
                code: .tokenExchangeFailed, path: nil,
                message: "The OAuth token endpoint \(account.tokenURI) \(status == 200 ? "answered without an access token" : said) for \(who); retry later.")
        }
        throw FCMCredentialsError(
            code: .tokenExchangeRefused, path: nil,
            message: "The OAuth token endpoint \(account.tokenURI) refused the service account \(who): \(said). "
                + "The key may have been deleted or the account disabled, or this machine's clock is off; "
                + "check the clock, or generate a new key in the Firebase console and configure it.")
    }
}
