import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
@testable import OrderFlowHTTP

/// `PUT /v1/devices/{device}/fcm-token`: an Android device's FCM token, stored by the
/// merchant's key or by the app with the device's own credential, and by nobody else.
extension HTTPAPITests {
    /// An FCM registration token of the shape Firebase gives (`<instance id>:APA91b…`).
    static func fcmToken(_ name: String) -> String {
        "\(name):APA91b" + String(repeating: "Xy7_-", count: 30)
    }

    /// Every stored FCM token, `merchant/device=token`, read from PostgreSQL.
    static func storedFCMTokens(_ harness: Harness) async throws -> [String] {
        try await harness.fixture.engine.pool.query(PostgresQuery(
            "SELECT merchant_id || '/' || device_id || '=' || fcm_token AS row FROM devices WHERE fcm_token IS NOT NULL ORDER BY 1")
        ).map { try $0.decode("row", as: String.self) }
    }

    @Test("an Android device's FCM token: the merchant's key, or the app with that device's own credential")
    func fcmTokenDoor() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.engine.addMerchant("elsewhere")
        let otherKey = try await harness.fixture.engine.createAPIKey(merchantID: "elsewhere", name: "other").secret
        try await harness.fixture.engine.forMerchant("elsewhere").registerFCMToken(deviceID: "bob-pixel", token: Self.fcmToken("bob"))
        try await harness.application.test(.router) { client in
            let anna = try await createOrder("ANNA-1", client: client, harness: harness)
            let mallory = try await createOrder("MAL-1", client: client, harness: harness)
            let registered = try await call(client, .post, "/v1/devices", headers: harness.headers(key: anna), body: #"{"device": "anna-pixel"}"#)
            let firstCredential = try #require(registered.json["device_credential"] as? String)

            // Anna's app stores its token with its credential; the answer shows its end only.
            let stored = try await call(client, .put, "/v1/devices/anna-pixel/fcm-token",
                                        headers: harness.headers([.deviceCredential: firstCredential], key: anna),
                                        body: #"{"token": "\#(Self.fcmToken("anna"))"}"#)
            #expect(stored.status == .ok && stored.json["token_suffix"] as? String == String(Self.fcmToken("anna").suffix(8)), "\(stored.body)")
            #expect(!stored.body.contains(Self.fcmToken("anna")))
            // The merchant's key stores any of its devices' tokens.
            #expect(try await call(client, .put, "/v1/devices/shop-pixel/fcm-token", headers: harness.headers(),
                                   body: #"{"token": "\#(Self.fcmToken("shop"))"}"#).status == .ok)

            // The merchant replaces Anna's lost credential: the first one is revoked.
            let replaced = try await call(client, .post, "/v1/devices", headers: harness.headers(),
                                          body: #"{"device": "anna-pixel", "replace_credential": true}"#)
            let annaApp = harness.headers([.deviceCredential: try #require(replaced.json["device_credential"] as? String)], key: anna)
            let malloryDevice = try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory), body: "{}")
            let malloryCredential = try #require(malloryDevice.json["device_credential"] as? String)
            let revokedKey = try await harness.fixture.engine.createAPIKey(merchantID: "default", name: "gone")
            try await harness.fixture.engine.revokeAPIKey(merchantID: "default", prefix: revokedKey.key.prefix)
            let tokensBefore = try await Self.storedFCMTokens(harness)
            #expect(tokensBefore == ["default/anna-pixel=\(Self.fcmToken("anna"))", "default/shop-pixel=\(Self.fcmToken("shop"))",
                                     "elsewhere/bob-pixel=\(Self.fcmToken("bob"))"])

            // The wrong ways: refused, and nothing changes.
            let before = try await Self.databaseContents(harness.fixture.database)
            let attacker = #"{"token": "\#(Self.fcmToken("mallory"))"}"#
            for (headers, device, status) in [
                (harness.headers([.deviceCredential: malloryCredential], key: mallory), "anna-pixel", HTTPResponse.Status.forbidden),  // another device's credential
                (harness.headers([.deviceCredential: firstCredential], key: anna), "anna-pixel", .forbidden),       // a revoked credential
                (harness.headers(key: anna), "anna-pixel", .forbidden),                                             // the order's secret alone
                (harness.headers([.deviceCredential: "of_dev_" + String(repeating: "A", count: 43)], key: mallory), "anna-pixel", .forbidden),
                (harness.headers([.deviceCredential: "of_dev_short"], key: anna), "anna-pixel", .forbidden),
                (annaApp, "shop-pixel", .forbidden),                      // Anna's credential on another device of her merchant
                (annaApp, "bob-pixel", .forbidden),                       // another merchant's device: not Anna's merchant's at all
                (harness.headers(key: revokedKey.secret), "anna-pixel", .unauthorized),                             // a revoked API key
                ([.contentType: "application/json"], "anna-pixel", .unauthorized),                                  // no credential
            ] {
                let refused = try await call(client, .put, "/v1/devices/\(device)/fcm-token", headers: headers, body: attacker)
                expectProblem(refused, status, code: status == .forbidden ? "forbidden" : "unauthorized")
                #expect(!refused.body.contains(malloryCredential) && !refused.body.contains(firstCredential) && !refused.body.contains("APA91b"))
            }
            // A token that is not one: 400 with the engine's sentence, by either credential.
            for headers in [annaApp, harness.headers()] {
                expectProblem(try await call(client, .put, "/v1/devices/anna-pixel/fcm-token", headers: headers, body: #"{"token": "short"}"#),
                              .badRequest, code: "invalidInput", containing: "the FCM registration token is 5 characters long")
                expectProblem(try await call(client, .put, "/v1/devices/anna-pixel/fcm-token", headers: headers,
                                             body: #"{"token": "\#(Self.fcmToken("anna"))!"}"#),
                              .badRequest, code: "invalidInput", containing: "that no FCM token has")
            }
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "a refused FCM token")
            #expect(try await Self.storedFCMTokens(harness) == tokensBefore)

            // Another merchant's key names its own device of that id, never Anna's.
            #expect(try await call(client, .put, "/v1/devices/anna-pixel/fcm-token", headers: harness.headers(key: otherKey), body: attacker).status == .ok)
            #expect(try await Self.storedFCMTokens(harness) == tokensBefore.prefix(2) + ["elsewhere/anna-pixel=\(Self.fcmToken("mallory"))"]
                    + tokensBefore.suffix(1))
            // Anna's current credential rotates her token.
            #expect(try await call(client, .put, "/v1/devices/anna-pixel/fcm-token", headers: annaApp,
                                   body: #"{"token": "\#(Self.fcmToken("anna2"))"}"#).status == .ok)
            #expect(try await Self.storedFCMTokens(harness).first == "default/anna-pixel=\(Self.fcmToken("anna2"))")
        }
    }
}
