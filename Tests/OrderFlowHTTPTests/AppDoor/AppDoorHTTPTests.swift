import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OrderFlow
import OrderFlowTesting
import PGKit
import Logging
import Testing
@testable import OrderFlowHTTP

extension HTTPAPITests {
    @Test("the app's door: a client secret reads its order and reports its tokens and activity, nothing else")
    func appDoor() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        try await harness.application.test(.router) { client in
            let secret = try await createOrder("A1", client: client, harness: harness)
            let otherSecret = try await createOrder("A2", client: client, harness: harness)
            let device = try await call(client, .post, "/v1/devices", headers: harness.headers(key: secret), body: #"{"device": "phone"}"#)
            #expect(device.status == .created, "\(device.body)")
            let app = harness.headers([.deviceCredential: try #require(device.json["device_credential"] as? String)], key: secret)

            let read = try await call(client, .get, "/v1/orders/A1", headers: app)
            #expect(read.status == .ok, "\(read.body)")
            let token = EngineFixture.token(5)
            let registered = try await call(client, .put, "/v1/orders/A1/activities/phone/token", headers: app, body: #"{"token": "\#(token)"}"#)
            #expect(registered.status == .ok && registered.json["token_suffix"] as? String == String(token.suffix(8)), "\(registered.body)")
            let pushToStart = try await call(client, .put, "/v1/devices/phone/push-to-start-tokens/FoodOrderAttributes", headers: app,
                                             body: #"{"token": "\#(EngineFixture.token(6))"}"#)
            #expect(pushToStart.status == .ok, "\(pushToStart.body)")
            let report = try await call(client, .put, "/v1/orders/A1/activities/phone/state", headers: app,
                                        body: #"{"state": "dismissed", "applied_at": "2026-11-25T10:00:00Z"}"#)
            #expect(report.status == .ok && report.json["app_state"] as? String == "dismissed" && report.json["status"] as? String == "ended",
                    "\(report.body)")
            let shown = try await call(client, .get, "/v1/orders/A1", headers: harness.headers())
            #expect(((shown.json["activities"] as? [[String: Any]])?.first?["app_state"]) as? String == "dismissed", "\(shown.body)")

            // Everything else, and any other order, is refused: 403, with nothing changed.
            for (method, uri, body) in [
                (HTTPRequest.Method.get, "/v1/orders/A2", nil as String?),
                (.put, "/v1/orders/A2/activities/phone/token", #"{"token": "\#(token)"}"#),
                (.put, "/v1/orders/A2/activities/phone/state", #"{"state": "dismissed"}"#),
                (.post, "/v1/orders/A1/advance", #"{"to": "in_progress"}"#),
                (.post, "/v1/orders/A1/cancel", nil),
                (.get, "/v1/orders", nil),
                (.get, "/v1/orders/A1/history", nil),
                (.get, "/v1/deliveries", nil),
                (.get, "/v1/events", nil),
                (.get, "/v1/workflows", nil),
            ] {
                let refused = try await call(client, method, uri, headers: app, body: body)
                expectProblem(refused, .forbidden, code: "forbidden")
                #expect(!refused.body.contains(secret), "a presented secret is never echoed")
            }
            let untouched = try await harness.fixture.engine.order("A2")
            #expect(untouched.activities.isEmpty && untouched.order.state == "received")
            #expect(try await harness.fixture.engine.order("A1").order.state == "received")

            let altered = try await call(client, .get, "/v1/orders/A1", headers: harness.headers(key: String(secret.dropLast(2)) + "AA"))
            expectProblem(altered, .unauthorized, code: "unauthorized", containing: "client secret is not valid")
            #expect(try await call(client, .get, "/v1/orders/A2", headers: harness.headers(key: otherSecret)).status == .ok)

            let badCursor = try await call(client, .get, "/v1/events", headers: harness.headers([HTTPField.Name("Last-Event-ID")!: "yesterday"]))
            expectProblem(badCursor, .badRequest, code: "invalidInput", containing: "not an event id")
        }
    }
}

extension HTTPAPITests {
    @Test("a busy engine answers 503 busy with its Retry-After, at once, and says the database is fine")
    func busyIsServiceUnavailable() async throws {
        let harness = try await Harness.make()
        defer { Task { await harness.fixture.shutdown() } }
        var configuration = OrderFlowConfiguration(database: harness.fixture.database, maximumConnections: 2)
        configuration.acquireTimeout = .milliseconds(300)
        let engine = OrderFlowEngine(configuration: configuration)
        let application = Application(router: try OrderFlowHTTPServer.router(engine: engine, runsWorker: false, logger: Logger(label: "test")))
        // Both connections held while the API is called: each holder says when it has its
        // connection (a fixed sleep raced slow connection set-up on a loaded CI machine) and
        // keeps it until the call has been answered.
        let (held, heldSignal) = AsyncStream.makeStream(of: Void.self)
        let releases = (0..<2).map { _ in AsyncStream.makeStream(of: Void.self) }
        // The 300 ms acquire timeout also bounds opening a connection, which a loaded CI machine
        // can exceed: a holder tries again (for up to 30 s) until it has one.
        let holders = releases.map { release in
            Task {
                let deadline = ContinuousClock.now + .seconds(30)
                while true {
                    do {
                        try await engine.pool.withConnection { connection in
                            _ = try await connection.query(PostgresQuery("SELECT 1"))
                            heldSignal.yield()
                            for await _ in release.stream { break }
                        }
                        return
                    } catch where ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(50))
                    } catch {
                        heldSignal.finish()  // the wait below ends, and the test fails, instead of hanging
                        throw error
                    }
                }
            }
        }
        func releaseHolders() { for release in releases { release.continuation.finish() } }
        defer { releaseHolders() }
        var holding = 0
        for await _ in held {
            holding += 1
            if holding == holders.count { break }
        }
        try #require(holding == holders.count, "a holder could not get its connection: \(holders)")
        try await application.test(.router) { client in
            let started = ContinuousClock.now
            let reply = try await call(client, .get, "/v1/orders", headers: harness.headers())
            expectProblem(reply, .serviceUnavailable, code: "busy", containing: "busy")
            #expect(!reply.body.contains("unavailable"), "busy is not 'the database is unavailable': \(reply.body)")
            let retryAfter = try #require(reply.headers[.retryAfter].flatMap(Int.init), "\(reply.headers)")
            #expect((1...10).contains(retryAfter))
            // The holders never let go while this call runs: an answer at all means refused; well
            // under the default 10 s wait means the 300 ms acquire timeout, with room for a slow CI.
            #expect(ContinuousClock.now - started < .seconds(5), "refused within the acquire timeout, not after the default wait")
        }
        releaseHolders()
        for holder in holders { _ = try? await holder.value }
        await engine.shutdown()
    }
}
