import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
@testable import OrderFlowHTTP

extension HTTPAPITests {
    @Test("forgetting a device: the merchant's key, or the app with the device's own credential; anything else is an unknown device")
    func forgetDeviceDoor() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.engine.addMerchant("elsewhere")
        let otherKey = try await harness.fixture.engine.createAPIKey(merchantID: "elsewhere", name: "other").secret
        try await harness.application.test(.router) { client in
            let anna = try await createOrder("ANNA-1", client: client, harness: harness)
            let mallory = try await createOrder("MAL-1", client: client, harness: harness)
            let registered = try await call(client, .post, "/v1/devices", headers: harness.headers(key: anna), body: #"{"device": "anna-iphone"}"#)
            let annaCredential = try #require(registered.json["device_credential"] as? String)
            let annaApp = harness.headers([.deviceCredential: annaCredential], key: anna)
            #expect(try await call(client, .put, "/v1/devices/anna-iphone/push-to-start-tokens/FoodOrderAttributes", headers: annaApp,
                                   body: #"{"token": "\#(EngineFixture.token(1))"}"#).status == .ok)
            #expect(try await call(client, .put, "/v1/orders/ANNA-1/activities/anna-iphone/token", headers: annaApp,
                                   body: #"{"token": "\#(EngineFixture.token(2))"}"#).status == .ok)
            let malloryDevice = try await call(client, .post, "/v1/devices", headers: harness.headers(key: mallory), body: "{}")
            let malloryCredential = try #require(malloryDevice.json["device_credential"] as? String)

            let unknown = try await call(client, .delete, "/v1/devices/anna-iphonf", headers: harness.headers())
            expectProblem(unknown, .notFound, code: "notFound", containing: "is not known")
            func sameAsUnknown(_ reply: Reply) {
                expectProblem(reply, .notFound, code: "notFound")
                #expect((reply.json["detail"] as? String)?.replacingOccurrences(of: "anna-iphone", with: "anna-iphonf")
                        == unknown.json["detail"] as? String, "\(reply.body)")
                #expect(!reply.body.contains(annaCredential) && !reply.body.contains(malloryCredential))
            }
            // Each key used once before the comparison: a key's first use records when it was used.
            #expect(try await call(client, .get, "/v1/orders", headers: harness.headers(key: otherKey)).status == .ok)
            let before = try await Self.databaseContents(harness.fixture.database)
            for headers in [
                harness.headers(key: otherKey),                                                   // another merchant
                harness.headers([.deviceCredential: malloryCredential], key: mallory),            // another device's credential
                harness.headers(key: anna),                                                       // the order's secret alone
                harness.headers([.deviceCredential: "of_dev_" + String(repeating: "A", count: 43)], key: anna),
                harness.headers([.deviceCredential: "of_dev_short"], key: anna),
            ] {
                sameAsUnknown(try await call(client, .delete, "/v1/devices/anna-iphone", headers: headers))
            }
            let anonymous = try await call(client, .delete, "/v1/devices/anna-iphone", headers: [.contentType: "application/json"])
            expectProblem(anonymous, .unauthorized, code: "unauthorized")
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "a refused forget")

            // Her own device's credential forgets it: everything of it is gone; again, it is unknown.
            #expect(try await call(client, .delete, "/v1/devices/anna-iphone", headers: annaApp).status == .noContent)
            let left = try await harness.fixture.engine.pool.query(PostgresQuery("""
                SELECT (SELECT count(*) FROM devices WHERE device_id = 'anna-iphone') + (SELECT count(*) FROM push_to_start_tokens WHERE device_id = 'anna-iphone')
                     + (SELECT count(*) FROM activities WHERE device_id = 'anna-iphone') + (SELECT count(*) FROM order_followers WHERE device_id = 'anna-iphone')
                     + (SELECT count(*) FROM activity_commands WHERE device_id = 'anna-iphone') AS n
                """)).single().decode("n", as: Int.self)
            #expect(left == 0)
            sameAsUnknown(try await call(client, .delete, "/v1/devices/anna-iphone", headers: annaApp))
            // The merchant's key forgets any device of its own.
            #expect(try await call(client, .put, "/v1/orders/MAL-1/followers/bob-iphone", headers: harness.headers()).status == .noContent)
            #expect(try await call(client, .delete, "/v1/devices/bob-iphone", headers: harness.headers()).status == .noContent)
            expectProblem(try await call(client, .delete, "/v1/devices/bob-iphone", headers: harness.headers()), .notFound, code: "notFound")
        }
    }

    @Test("redacting an order: the merchant's key only, a finished order only, twice harmless")
    func redactOrderDoor() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        _ = try await harness.fixture.engine.addMerchant("elsewhere")
        let otherKey = try await harness.fixture.engine.createAPIKey(merchantID: "elsewhere", name: "other").secret
        try await harness.application.test(.router) { client in
            let secret = try await createOrder("R1", client: client, harness: harness)
            _ = try await createOrder("R2", client: client, harness: harness)
            #expect(try await call(client, .post, "/v1/orders/R1/cancel", headers: harness.headers(),
                                   body: #"{"reason": "customer moved to 9 Quince Row"}"#).status == .ok)
            let device = try await call(client, .post, "/v1/devices", headers: harness.headers(key: secret), body: "{}")
            let app = harness.headers([.deviceCredential: try #require(device.json["device_credential"] as? String)], key: secret)

            // Each key used once before the comparison: a key's first use records when it was used.
            #expect(try await call(client, .get, "/v1/orders", headers: harness.headers(key: otherKey)).status == .ok)
            let before = try await Self.databaseContents(harness.fixture.database)
            expectProblem(try await call(client, .post, "/v1/orders/R1/redact", headers: app), .forbidden, code: "forbidden")
            expectProblem(try await call(client, .post, "/v1/orders/R1/redact", headers: harness.headers(key: secret)), .forbidden, code: "forbidden")
            expectProblem(try await call(client, .post, "/v1/orders/R1/redact", headers: harness.headers(key: otherKey)), .notFound, code: "notFound")
            expectProblem(try await call(client, .post, "/v1/orders/R1/redact", headers: [.contentType: "application/json"]),
                          .unauthorized, code: "unauthorized")
            expectProblem(try await call(client, .post, "/v1/orders/NONE/redact", headers: harness.headers()), .notFound, code: "notFound")
            let live = try await call(client, .post, "/v1/orders/R2/redact", headers: harness.headers())
            expectProblem(live, .conflict, code: "conflict", containing: "Cancel it first")
            #expect(live.json["current_state"] as? String == "received", "\(live.body)")
            Self.expectUnchanged(before, try await Self.databaseContents(harness.fixture.database), "a refused redaction")

            #expect(try await call(client, .post, "/v1/orders/R1/redact", headers: harness.headers()).status == .noContent)
            let shown = try await call(client, .get, "/v1/orders/R1", headers: harness.headers())
            #expect((shown.json["order"] as? [String: Any])?["state"] as? String == "cancelled" && !shown.body.contains("Luigi") && shown.body.contains("(redacted)"), "\(shown.body)")
            let history = try await call(client, .get, "/v1/orders/R1/history", headers: harness.headers())
            #expect(history.status == .ok && !history.body.contains("Quince") && !history.body.contains("Luigi"), "\(history.body)")
            let once = try await Self.databaseContents(harness.fixture.database)
            #expect(try await call(client, .post, "/v1/orders/R1/redact", headers: harness.headers()).status == .noContent)
            Self.expectUnchanged(once, try await Self.databaseContents(harness.fixture.database), "a second redaction")
        }
    }
}
