import APNSCore
@testable import FCM
import Foundation
import LocalFCM
import Testing

@Suite("FCM errors: each answer classified by its meaning")
struct FCMErrorHandlingTests {
    /// Sends token 1 with `fault` injected and returns what the client threw.
    private func failure(of fault: LocalFCMFault) async throws -> (FCMError, tokenRequests: Int) {
        try await LocalFCMFixture.with { fixture in
            fixture.server.injectFault(fault, token: LocalFCMFixture.token(1))
            try await fixture.client.send(dataMessage(2))
            let error = try await #require(throws: FCMError.self) { try await fixture.client.send(dataMessage(1)) }
            #expect(fixture.server.messages().map(\.token) == [LocalFCMFixture.token(2)], "only the faulted token was refused")
            return (error, fixture.server.tokenRequestCount)
        }
    }

    @Test("UNREGISTERED: the token is dead")
    func unregistered() async throws {
        let (error, _) = try await self.failure(of: .unregistered)
        #expect(error.status == 404)
        #expect(error.errorCode == .unregistered)
        #expect(error.action == .tokenDead)
        #expect(!error.action.isRetryable)
    }

    @Test("INVALID_ARGUMENT about the registration token: the token is dead")
    func invalidRegistrationToken() async throws {
        let (error, _) = try await self.failure(of: .invalidRegistrationToken)
        #expect(error.errorCode == .invalidArgument)
        #expect(error.action == .tokenDead)
    }

    @Test("SENDER_ID_MISMATCH: this sender's configuration")
    func senderIDMismatch() async throws {
        let (error, _) = try await self.failure(of: .senderIDMismatch)
        #expect(error.status == 403)
        #expect(error.action == .configurationError)
        #expect(error.description.contains("another Firebase project"))
    }

    @Test("QUOTA_EXCEEDED: retry after FCM's Retry-After")
    func quotaExceeded() async throws {
        let (error, _) = try await self.failure(of: .quotaExceeded(retryAfter: 7))
        #expect(error.status == 429)
        #expect(error.action == .retry(after: .seconds(7)))
        #expect(error.action.isRetryable)
    }

    @Test("UNAVAILABLE with Retry-After, INTERNAL without: retry")
    func unavailableAndInternal() async throws {
        let (unavailable, _) = try await self.failure(of: .unavailable(retryAfter: 3))
        #expect(unavailable.action == .retry(after: .seconds(3)))
        let (internalError, _) = try await self.failure(of: .internal)
        #expect(internalError.status == 500)
        #expect(internalError.action == .retry(after: nil))
    }

    @Test("THIRD_PARTY_AUTH_ERROR is a 401 no new access token mends: configuration, no refresh")
    func thirdPartyAuthError() async throws {
        let (error, tokenRequests) = try await self.failure(of: .thirdPartyAuthError)
        #expect(error.status == 401)
        #expect(error.action == .configurationError)
        #expect(tokenRequests == 1)
    }

    @Test("answers without an FcmError detail are classified by status")
    func answersWithoutFcmError() throws {
        // A project's send quota: Google's RESOURCE_EXHAUSTED with an ErrorInfo, no FcmError.
        let quota = try JSONValue(json: #"{"error":{"code":429,"message":"Quota exceeded for quota metric 'Send requests'","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}"#)
        #expect(FCMClient.failure(status: 429, retryAfter: "30", body: quota, redactedToken: "…").action == .retry(after: .seconds(30)))
        let denied = try JSONValue(json: #"{"error":{"code":403,"message":"Permission 'cloudmessaging.messages.create' denied","status":"PERMISSION_DENIED"}}"#)
        #expect(FCMClient.failure(status: 403, retryAfter: nil, body: denied, redactedToken: "…").action == .credentialsError)
        #expect(FCMClient.failure(status: 502, retryAfter: nil, body: nil, redactedToken: "…").action == .retry(after: nil))
        let unknown = try JSONValue(json: #"{"error":{"code":400,"message":"x","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"SOMETHING_NEW"}]}}"#)
        let classified = FCMClient.failure(status: 400, retryAfter: nil, body: unknown, redactedToken: "…")
        #expect(classified.errorCode == .unknown("SOMETHING_NEW"))
        #expect(classified.action == .messageRejected)
    }

    @Test("Retry-After as seconds and as an HTTP date")
    func retryAfterForms() {
        #expect(FCMClient.retryAfter("12") == .seconds(12))
        let soon = Date().addingTimeInterval(90)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let seconds = FCMClient.retryAfter(formatter.string(from: soon))?.components.seconds ?? -1
        #expect((85...91).contains(seconds))
        #expect(FCMClient.retryAfter("soon") == nil)
    }

    @Test("what can never be sent is refused before sending, and nothing reaches FCM")
    func refusedBeforeSending() async throws {
        try await LocalFCMFixture.with { fixture in
            let large = FCMMessage(token: LocalFCMFixture.token(1), data: ["state": String(repeating: "x", count: 4092)])
            let tooLarge = try await #require(throws: FCMMessageError.self) { try await fixture.client.send(large) }
            #expect(tooLarge.code == .dataTooLarge)
            #expect(tooLarge.action == .messageRejected)
            let reserved = try await #require(throws: FCMMessageError.self) {
                try await fixture.client.send(FCMMessage(token: LocalFCMFixture.token(1), data: ["google.sent_time": "1"]))
            }
            #expect(reserved.code == .reservedKey)
            let badToken = try await #require(throws: FCMMessageError.self) {
                try await fixture.client.send(FCMMessage(token: "not a token/../x", data: [:]))
            }
            #expect(badToken.action == .tokenDead)
            #expect(fixture.server.acceptedCount == 0)
            #expect(fixture.server.rejections().isEmpty)
            // Exactly 4096 bytes of keys and values is accepted.
            try await fixture.client.send(FCMMessage(token: LocalFCMFixture.token(1), data: ["state": String(repeating: "x", count: 4091)]))
            #expect(fixture.server.acceptedCount == 1)
        }
    }

    @Test("an error's text shows the token redacted and no access token")
    func errorTextHasNoSecret() async throws {
        try await LocalFCMFixture.with { fixture in
            fixture.server.injectFault(.unregistered)
            let error = try await #require(throws: FCMError.self) { try await fixture.client.send(dataMessage(1)) }
            let accessToken = try await fixture.client.accessTokens.accessToken()
            #expect(error.description.contains(APNSTokenRedaction.redacted(LocalFCMFixture.token(1))))
            #expect(!error.description.contains(LocalFCMFixture.token(1)))
            #expect(!error.description.contains(accessToken.value))
        }
    }
}
