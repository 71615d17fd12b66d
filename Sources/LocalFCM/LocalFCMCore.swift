import APNSCore
import Foundation
import NIOHTTP1
import Synchronization
import _CryptoExtras

/// The answer to one request.
struct LocalFCMReply: Sendable {
    var status: Int
    var body: [UInt8]
    var headers: [(name: String, value: String)] = []
}

/// Answers the token endpoint and `messages:send` as Google does, applies injected faults and
/// records what it accepted. Shared by every connection of one ``LocalFCMServer``.
final class LocalFCMCore: Sendable {
    struct Account: Sendable {
        var projectID: String
        var privateKeyID: String
        var publicKey: _RSA.Signing.PublicKey
    }

    struct Issued: Sendable {
        var clientEmail: String
        var projectID: String
        var scopes: Set<String>
        var expiresAt: Date
    }

    struct FaultRule: Sendable {
        var fault: LocalFCMFault
        var token: String?
        var remaining: Int?
    }

    struct State: Sendable {
        var accounts: [String: Account] = [:]
        var issued: [String: Issued] = [:]
        var tokenRequestCount = 0
        var faults: [FaultRule] = []
        var messages: [LocalFCMMessage] = []
        var acceptedCount = 0
        var rejections: [LocalFCMRejection] = []
        var nextMessageID: UInt64 = 1
    }

    static let tokenPath = "/token"
    static let invalidCredentialsMessage = "Request had invalid authentication credentials. Expected OAuth 2 access token, "
        + "login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
    static let missingCredentialsMessage = "Request is missing required authentication credential. Expected OAuth 2 access token, "
        + "login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    let configuration: LocalFCMServer.Configuration
    let state = Mutex(State())
    /// The token endpoint's own URL, the `aud` assertions must name (set once the port is known).
    let tokenURI = Mutex("")

    init(configuration: LocalFCMServer.Configuration) {
        self.configuration = configuration
    }

    func respond(method: HTTPMethod, path: String, headers: HTTPHeaders, body: [UInt8], httpMajorVersion: Int) -> LocalFCMReply {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        if path == Self.tokenPath {
            return self.respondToTokenRequest(method: method, headers: headers, body: body)
        }
        return self.respondToSend(method: method, path: path, headers: headers, body: body, httpMajorVersion: httpMajorVersion)
    }

    // MARK: The OAuth token endpoint

    private func respondToTokenRequest(method: HTTPMethod, headers: HTTPHeaders, body: [UInt8]) -> LocalFCMReply {
        let now = Date()
        self.state.withLock { $0.tokenRequestCount += 1 }
        func refuse(_ status: Int, _ error: String, _ description: String) -> LocalFCMReply {
            self.record(LocalFCMRejection(path: Self.tokenPath, token: nil, status: status, code: error, message: description, injected: false))
            return LocalFCMReply(status: status, body: JSONValue.object(["error": .string(error), "error_description": .string(description)]).serialized)
        }
        guard method == .POST else { return refuse(405, "invalid_request", "The token endpoint takes POST.") }
        let form = Self.formFields(body)
        guard let grantType = form["grant_type"] else { return refuse(400, "invalid_request", "Missing required parameter: grant_type") }
        guard grantType == Self.grantType else { return refuse(400, "unsupported_grant_type", "Invalid grant_type: \(grantType)") }
        guard let assertion = form["assertion"] else { return refuse(400, "invalid_request", "Missing required parameter: assertion") }

        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]), let claimsData = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = try? JSONValue(data: headerData), let claims = try? JSONValue(data: claimsData)
        else { return refuse(400, "invalid_grant", "Invalid JWT: the assertion is not a compact JWS of JSON header and claims.") }
        guard header["alg"]?.stringValue == "RS256" else { return refuse(400, "invalid_grant", "Invalid JWT Signature.") }
        guard let issuer = claims["iss"]?.stringValue, let account = self.state.withLock({ $0.accounts[issuer] }) else {
            return refuse(400, "invalid_grant", "Invalid grant: account not found")
        }
        if let keyID = header["kid"]?.stringValue, keyID != account.privateKeyID {
            return refuse(400, "invalid_grant", "Invalid JWT Signature.")
        }
        let signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        guard account.publicKey.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: signature), for: signingInput, padding: .insecurePKCS1v1_5)
        else { return refuse(400, "invalid_grant", "Invalid JWT Signature.") }
        let audience = self.tokenURI.withLock { $0 }
        guard claims["aud"]?.stringValue == audience else {
            return refuse(400, "invalid_grant", "Invalid JWT: Failed audience check. The right audience is \(audience)")
        }
        let nowSeconds = Int(now.timeIntervalSince1970)
        guard let issuedAt = claims["iat"]?.integerValue, let expiry = claims["exp"]?.integerValue,
              expiry > issuedAt, expiry - issuedAt <= 3600, expiry > nowSeconds, issuedAt <= nowSeconds + 300
        else {
            return refuse(400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
                + "Check your iat and exp values in the JWT claim.")
        }
        guard let scope = claims["scope"]?.stringValue, !scope.isEmpty else {
            return refuse(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }

        let lifetime = self.configuration.accessTokenLifetime
        let value = "ya29.c." + Base64URL.encode((0..<48).map { _ in UInt8.random(in: 0...255) })
        let issued = Issued(
            clientEmail: issuer, projectID: account.projectID, scopes: Set(scope.split(separator: " ").map(String.init)),
            expiresAt: now.addingTimeInterval(TimeInterval(lifetime)))
        self.state.withLock { $0.issued[value] = issued }
        return LocalFCMReply(status: 200, body: JSONValue.object([
            "access_token": .string(value), "expires_in": .int(lifetime), "token_type": "Bearer",
        ]).serialized)
    }

    /// `application/x-www-form-urlencoded` fields (the last value of a repeated name).
    static func formFields(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            fields[decoded(parts[0])] = parts.count > 1 ? decoded(parts[1]) : ""
        }
        return fields
    }

    // MARK: messages:send

    private func respondToSend(method: HTTPMethod, path: String, headers: HTTPHeaders, body: [UInt8], httpMajorVersion: Int) -> LocalFCMReply {
        let now = Date()
        var token: String?
        func refuse(_ status: Int, _ canonical: String, _ message: String, errorCode: String? = nil,
                    field: String? = nil, errorInfo: String? = nil) -> LocalFCMReply {
            self.record(LocalFCMRejection(path: path, token: token, status: status, code: errorCode ?? canonical, message: message, injected: false))
            return LocalFCMReply(status: status, body: Self.googleError(
                status: status, canonical: canonical, message: message, errorCode: errorCode, field: field, errorInfo: errorInfo))
        }
        let prefix = "/v1/projects/", suffix = "/messages:send"
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.count > prefix.count + suffix.count else {
            return refuse(404, "NOT_FOUND", "The requested URL \(path) was not found on this server.")
        }
        let projectID = String(path.dropFirst(prefix.count).dropLast(suffix.count))
        guard method == .POST else { return refuse(404, "NOT_FOUND", "The requested URL \(path) was not found on this server.") }

        // The access token.
        guard let authorization = headers.first(name: "authorization") else {
            return refuse(401, "UNAUTHENTICATED", Self.missingCredentialsMessage, errorInfo: "CREDENTIALS_MISSING")
        }
        guard authorization.lowercased().hasPrefix("bearer "),
              let issued = self.state.withLock({ $0.issued[String(authorization.dropFirst(7))] })
        else { return refuse(401, "UNAUTHENTICATED", Self.invalidCredentialsMessage) }
        guard issued.expiresAt > now else {
            return refuse(401, "UNAUTHENTICATED", Self.invalidCredentialsMessage, errorInfo: "ACCESS_TOKEN_EXPIRED")
        }
        guard issued.scopes.contains("https://www.googleapis.com/auth/firebase.messaging")
            || issued.scopes.contains("https://www.googleapis.com/auth/cloud-platform")
        else { return refuse(403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.", errorInfo: "ACCESS_TOKEN_SCOPE_INSUFFICIENT") }
        guard issued.projectID == projectID else {
            return refuse(403, "PERMISSION_DENIED", "Permission 'cloudmessaging.messages.create' denied on resource "
                + "'//cloudresourcemanager.googleapis.com/projects/\(projectID)' (or it may not exist).", errorInfo: "IAM_PERMISSION_DENIED")
        }

        // The message.
        let checked: LocalFCMCore.CheckedMessage
        switch Self.check(body) {
        case .success(let message):
            checked = message
        case .failure(let problem):
            token = problem.token
            return refuse(400, "INVALID_ARGUMENT", problem.message, errorCode: problem.field == nil ? "INVALID_ARGUMENT" : nil, field: problem.field)
        }
        token = checked.token

        if let fault = self.takeFault(forToken: checked.token) {
            self.record(LocalFCMRejection(
                path: path, token: token, status: fault.status, code: fault.errorCode ?? fault.canonicalStatus,
                message: fault.message, injected: true))
            var reply = LocalFCMReply(status: fault.status, body: Self.googleError(
                status: fault.status, canonical: fault.canonicalStatus, message: fault.message, errorCode: fault.errorCode,
                field: nil, errorInfo: fault.errorCode == nil && fault.status == 401 ? "ACCESS_TOKEN_EXPIRED" : nil))
            if let retryAfter = fault.retryAfter { reply.headers.append(("retry-after", String(retryAfter))) }
            return reply
        }
        if checked.validateOnly {
            return LocalFCMReply(status: 200, body: JSONValue.object(["name": .string("projects/\(projectID)/messages/fake_message_id")]).serialized)
        }
        let name: String = self.state.withLock { state in
            defer { state.nextMessageID += 1 }
            let millis = Int64(now.timeIntervalSince1970 * 1000)
            return "projects/\(projectID)/messages/0:\(millis)%\(String(format: "%016llx", state.nextMessageID))"
        }
        let message = LocalFCMMessage(
            projectID: projectID, token: checked.token, data: checked.data, priority: checked.priority, collapseKey: checked.collapseKey,
            ttl: checked.ttl, clientEmail: issued.clientEmail, name: name, httpMajorVersion: httpMajorVersion, body: checked.body,
            receivedAt: now)
        let records = self.configuration.recordsMessages
        self.state.withLock { state in
            state.acceptedCount += 1
            if records { state.messages.append(message) }
        }
        return LocalFCMReply(status: 200, body: JSONValue.object(["name": .string(name)]).serialized)
    }

    /// Google's error body: `{"error": {"code", "message", "status", "details": [...]}}`.
    static func googleError(status: Int, canonical: String, message: String, errorCode: String?, field: String?, errorInfo: String?) -> [UInt8] {
        var details: [JSONValue] = []
        if let errorCode {
            details.append(.object(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": .string(errorCode)]))
        }
        if let field {
            details.append(.object([
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": .array([.object(["field": .string(field), "description": .string(message)])]),
            ]))
        }
        if let errorInfo {
            details.append(.object([
                "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": .string(errorInfo), "domain": "googleapis.com",
                "metadata": .object(["service": "fcm.googleapis.com", "method": "google.firebase.fcm.v1.FcmService.SendMessage"]),
            ]))
        }
        var error: [String: JSONValue] = ["code": .int(status), "message": .string(message), "status": .string(canonical)]
        if !details.isEmpty { error["details"] = .array(details) }
        return JSONValue.object(["error": .object(error)]).serialized
    }

    // MARK: Faults and records

    func takeFault(forToken token: String) -> LocalFCMFault? {
        self.state.withLock { state in
            state.faults.removeAll { $0.remaining.map { $0 <= 0 } ?? false }
            guard let index = state.faults.firstIndex(where: { $0.token == token }) ?? state.faults.firstIndex(where: { $0.token == nil })
            else { return nil }
            if let remaining = state.faults[index].remaining { state.faults[index].remaining = remaining - 1 }
            return state.faults[index].fault
        }
    }

    func record(_ rejection: LocalFCMRejection) {
        self.state.withLock { state in
            if state.rejections.count < 10_000 { state.rejections.append(rejection) }
        }
    }
}
