import APNSCore
@testable import FCM
import Foundation
import LocalFCM
import Testing

/// The stand-in refuses what FCM refuses, in FCM's words, and the client reads each answer.
@Suite("FCM stand-in: the v1 message format, checked as FCM does")
struct FCMMessageFormatTests {
    private func expectRefusal(
        _ answer: RawRequests.Answer, status: Int = 400, message: String, field: String?, action: FCMFailureAction,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(answer.status == status, sourceLocation: sourceLocation)
        #expect(answer.body["error"]?["code"]?.intValue == status, sourceLocation: sourceLocation)
        #expect(answer.body["error"]?["message"]?.stringValue == message, sourceLocation: sourceLocation)
        let failure = FCMClient.failure(status: answer.status, retryAfter: nil, body: answer.body, redactedToken: "…")
        #expect(failure.fieldViolations.first?.field == field, sourceLocation: sourceLocation)
        #expect(failure.action == action, sourceLocation: sourceLocation)
    }

    @Test("a data value that is not a string")
    func nonStringDataValue() async throws {
        try await LocalFCMFixture.with { fixture in
            let answer = try await RawRequests(fixture: fixture).post(body: RawRequests.body(data: #"{"eta":12,"order":"A-17"}"#))
            self.expectRefusal(answer, message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 12",
                               field: "message.data[0].value", action: .messageRejected)
            #expect(answer.body["error"]?["status"]?.stringValue == "INVALID_ARGUMENT")
            #expect(fixture.server.acceptedCount == 0)
        }
    }

    @Test("unknown fields, in the message and in android")
    func unknownFields() async throws {
        try await LocalFCMFixture.with { fixture in
            let raw = RawRequests(fixture: fixture)
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(message: #","priority":"high""#)),
                message: #"Invalid JSON payload received. Unknown name "priority" at 'message': Cannot find field."#,
                field: "message", action: .messageRejected)
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(message: #","android":{"time_to_live":60}"#)),
                message: #"Invalid JSON payload received. Unknown name "time_to_live" at 'message.android': Cannot find field."#,
                field: "message.android", action: .messageRejected)
        }
    }

    @Test("priority, ttl and collapse key of the wrong form or type")
    func androidFields() async throws {
        try await LocalFCMFixture.with { fixture in
            let raw = RawRequests(fixture: fixture)
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(message: #","android":{"priority":"URGENT"}"#)),
                message: #"Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), "URGENT""#,
                field: "message.android.priority", action: .messageRejected)
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(message: #","android":{"ttl":"3600"}"#)),
                message: #"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), "3600""#,
                field: "message.android.ttl", action: .messageRejected)
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(message: #","android":{"collapse_key":7}"#)),
                message: "Invalid value at 'message.android.collapse_key' (TYPE_STRING), 7",
                field: "message.android.collapse_key", action: .messageRejected)
            let fine = try await raw.post(body: RawRequests.body(message: #","android":{"priority":"NORMAL","ttl":"0.5s","collapseKey":"o"}"#))
            #expect(fine.status == 200)
        }
    }

    @Test("a reserved data key, a payload over 4096 bytes, no target")
    func dataLimitsAndTarget() async throws {
        try await LocalFCMFixture.with { fixture in
            let raw = RawRequests(fixture: fixture)
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(data: #"{"from":"x"}"#)),
                message: "Invalid data payload key: from", field: "message.data", action: .messageRejected)
            let big = String(repeating: "y", count: 4097)
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(data: #"{"s":"\#(big)"}"#)),
                message: "Android message is too big", field: nil, action: .messageRejected)
            self.expectRefusal(
                try await raw.post(body: #"{"message":{"data":{"a":"b"}}}"#),
                message: "Recipient of the message is not set.", field: "message", action: .messageRejected)
        }
    }

    @Test("a token not of FCM's form: the token is dead")
    func badTokenForm() async throws {
        try await LocalFCMFixture.with { fixture in
            let answer = try await RawRequests(fixture: fixture).post(body: RawRequests.body(token: "abc123"))
            self.expectRefusal(answer, message: "The registration token is not a valid FCM registration token", field: nil, action: .tokenDead)
            #expect(answer.body["error"]?["details"]?[0]?["errorCode"]?.stringValue == "INVALID_ARGUMENT")
        }
    }

    @Test("no credential, an unknown bearer token, another project: refused, nothing recorded")
    func wrongCredentials() async throws {
        try await LocalFCMFixture.with { fixture in
            let raw = RawRequests(fixture: fixture)
            let none = try await raw.post(body: RawRequests.body(), bearer: .some(nil))
            #expect(none.status == 401)
            #expect(none.body["error"]?["status"]?.stringValue == "UNAUTHENTICATED")
            let unknown = try await raw.post(body: RawRequests.body(), bearer: "ya29.made-up")
            #expect(unknown.status == 401)
            let otherProject = try await raw.post(path: "/v1/projects/someone-else/messages:send", body: RawRequests.body())
            #expect(otherProject.status == 403)
            #expect(otherProject.body["error"]?["status"]?.stringValue == "PERMISSION_DENIED")
            #expect(FCMClient.failure(status: 403, retryAfter: nil, body: otherProject.body, redactedToken: "…").action == .credentialsError)
            #expect(fixture.server.acceptedCount == 0)
            #expect(fixture.server.rejections().count == 3)
        }
    }

    @Test("over HTTP/1.1, as Python clients send, the same answers")
    func http1() async throws {
        try await LocalFCMFixture.with { fixture in
            let raw = RawRequests(fixture: fixture)
            let accepted = try await raw.post(body: RawRequests.body(), http1: true)
            #expect(accepted.status == 200)
            #expect(fixture.server.messages().map(\.httpMajorVersion) == [1])
            self.expectRefusal(
                try await raw.post(body: RawRequests.body(data: #"{"eta":true}"#), http1: true),
                message: "Invalid value at 'message.data[0].value' (TYPE_STRING), true", field: "message.data[0].value", action: .messageRejected)
        }
    }

    @Test("validate_only is checked, answered, and not delivered")
    func validateOnly() async throws {
        try await LocalFCMFixture.with { fixture in
            let answer = try await RawRequests(fixture: fixture).post(body: #"{"validate_only":true,"message":{"token":"\#(LocalFCMFixture.token(1))","data":{"a":"b"}}}"#)
            #expect(answer.status == 200)
            #expect(answer.body["name"]?.stringValue == "projects/\(LocalFCMFixture.projectID)/messages/fake_message_id")
            #expect(fixture.server.acceptedCount == 0)
        }
    }

    @Test("the bytes sent are the message's body, whatever its options and characters")
    func encodedBodyIsTheBody() throws {
        let data = ["title": "Anna's \"fast\" order\n", "text": "Ünïcode ✓ \u{1}", "z": "", "a-key": "\\"]
        let messages = [
            FCMMessage(token: LocalFCMServer.registrationToken(1), data: data),
            FCMMessage(token: LocalFCMServer.registrationToken(2), data: data, priority: .high, collapseKey: "order:\"A\"", timeToLive: 600),
            FCMMessage(token: LocalFCMServer.registrationToken(3), data: [:], timeToLive: -5),
        ]
        for message in messages {
            #expect(message.encodedBody() == message.body.serialized, "\(message.body.jsonString)")
            #expect(try JSONValue(parsing: message.encodedBody()) == message.body)
        }
    }
}
