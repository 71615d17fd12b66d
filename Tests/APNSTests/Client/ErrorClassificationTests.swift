import APNS
import Foundation
import Testing

@Suite("Error reasons and actions")
struct ErrorClassificationTests {
    @Test("every documented reason parses from and prints as APNs' text")
    func roundTrip() {
        let texts = [
            "BadCollapseId", "BadDeviceToken", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic",
            "DeviceTokenNotForTopic", "DuplicateHeaders", "IdleTimeout", "InvalidPushType", "MissingDeviceToken",
            "MissingTopic", "PayloadEmpty", "TopicDisallowed", "MissingChannelId", "BadChannelId", "ChannelNotRegistered",
            "MissingPushType", "InvalidPolicy", "CannotCreateChannelConfig", "BadCertificate", "BadCertificateEnvironment",
            "ExpiredProviderToken", "Forbidden", "InvalidProviderToken", "MissingProviderToken",
            "UnrelatedKeyIdInToken", "BadEnvironmentKeyInToken", "BadPath", "MethodNotAllowed", "ExpiredToken",
            "Unregistered", "PayloadTooLarge", "TooManyProviderTokenUpdates", "TooManyRequests",
            "InternalServerError", "ServiceUnavailable", "Shutdown",
        ]
        #expect(APNSErrorReason.documented.count == texts.count)
        for text in texts {
            let reason = APNSErrorReason(rawValue: text)
            #expect(reason.rawValue == text)
            if case .unknown = reason {
                Issue.record("\(text) should be a documented reason")
            }
        }
        #expect(APNSErrorReason(rawValue: "BrandNewReason") == .unknown("BrandNewReason"))
        #expect(APNSErrorReason(rawValue: "BrandNewReason").rawValue == "BrandNewReason")
    }

    @Test(
        "reasons map to the sender's action from the response table",
        arguments: [
            (400, APNSErrorReason.badDeviceToken, APNSFailureAction.tokenDead),
            (410, .unregistered, .tokenDead),
            (410, .expiredToken, .tokenDead),
            (400, .deviceTokenNotForTopic, .configurationError),
            (400, .badTopic, .configurationError),
            (400, .topicDisallowed, .configurationError),
            (400, .missingTopic, .configurationError),
            (400, .badPriority, .configurationError),
            (400, .badExpirationDate, .configurationError),
            (400, .invalidPushType, .configurationError),
            (400, .payloadEmpty, .configurationError),
            (404, .badPath, .configurationError),
            (405, .methodNotAllowed, .configurationError),
            (403, .expiredProviderToken, .refreshProviderToken),
            (403, .invalidProviderToken, .credentialsError),
            (403, .missingProviderToken, .credentialsError),
            (403, .badEnvironmentKeyInToken, .credentialsError),
            (403, .unrelatedKeyIdInToken, .credentialsError),
            (403, .forbidden, .credentialsError),
            (413, .payloadTooLarge, .payloadRejected),
            (429, .tooManyRequests, .backOffToken(retryAfter: nil)),
            (429, .tooManyProviderTokenUpdates, .retryWithBackoff),
            (500, .internalServerError, .retryWithBackoff),
            (503, .serviceUnavailable, .retryWithBackoff),
            (503, .shutdown, .retryWithBackoff),
            (400, .idleTimeout, .retryWithBackoff),
            (400, .unknown("Whatever"), .configurationError),
            (403, .unknown("Whatever"), .credentialsError),
            (410, .unknown("Whatever"), .tokenDead),
            (429, .unknown("Whatever"), .backOffToken(retryAfter: nil)),
            (502, .unknown("Whatever"), .retryWithBackoff),
        ]
    )
    func classification(status: Int, reason: APNSErrorReason, action: APNSFailureAction) {
        #expect(reason.action(status: status) == action)
        #expect(APNSError(status: status, reason: reason, redactedDeviceToken: "…01234567").action == action)
    }

    @Test("descriptions say what to do and show only the end of the token")
    func descriptions() {
        let error = APNSError(
            status: 410, reason: .unregistered, timestamp: Date(timeIntervalSince1970: 1_700_000_000),
            redactedDeviceToken: "…01234567"
        )
        #expect(error.description.contains("…01234567"))
        #expect(error.description.contains("delete it"))
        #expect(error.description.contains("2023-11-14"))
        let transport = APNSTransportError(underlying: CancellationError(), redactedDeviceToken: "…01234567")
        #expect(transport.action == .retryWithBackoff)
        #expect(transport.description.contains("retry"))
    }
}
