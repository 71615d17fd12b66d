import Foundation
import LocalFCM
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// Erasure on request: a customer's values, seeded through the ordinary paths and pushed by the
/// worker, are found in no column of any table once the device is forgotten and the orders
/// redacted; the orders' shape stays.
@Suite("Erasure: forgetting a device, redacting orders", .serialized)
struct ErasureTests {
    /// The tables and columns holding `value` (case-insensitive), each column read as text:
    /// text, json and jsonb, bytea (hex), arrays, every other type. Names come from the catalog.
    static func columnsHolding(_ value: String, in database: PostgresConfiguration) async throws -> [String] {
        try await PostgresConnection.withConnection(database) { connection in
            let columns = try await connection.query(PostgresQuery("""
                SELECT c.table_name, c.column_name FROM information_schema.columns c
                JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
                WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
                ORDER BY c.table_name, c.ordinal_position
                """)).map { (try $0.decode("table_name", as: String.self), try $0.decode("column_name", as: String.self)) }
            #expect(columns.count > 50, "read the catalog")
            func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
            var found: [String] = []
            for (table, column) in columns {
                let hits = try await connection.query(PostgresQuery(unsafeSQL: """
                    SELECT count(*) AS n FROM \(quoted(table)) WHERE strpos(lower(\(quoted(column))::text), lower($1)) > 0
                    """, bindings: [value])).single().decode("n", as: Int.self)
                if hits > 0 { found.append("\(table).\(column) (\(hits) rows)") }
            }
            return found
        }
    }

    struct Shape: Equatable {
        var orders: [String]
        var transitions: [String]
        var deliveries: Int
    }

    static func shape(_ pool: PostgresPool) async throws -> Shape {
        Shape(
            orders: try await pool.query(PostgresQuery("""
                SELECT order_id || ' ' || state || ' ' || seq || ' ' || created_at || ' ' || state_entered_at AS line FROM orders ORDER BY order_id
                """)).map { try $0.decode("line") },
            transitions: try await pool.query(PostgresQuery("""
                SELECT order_id || ' ' || seq || ' ' || coalesce(from_state, '-') || ' ' || to_state || ' ' || occurred_at AS line
                FROM order_transitions ORDER BY order_id, seq
                """)).map { try $0.decode("line") },
            deliveries: try await pool.query(PostgresQuery("SELECT count(*) AS n FROM deliveries")).single().decode("n"))
    }

    @Test func nothingErasedSurvivesInAnyColumnAndTheShapeStays() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let startToken = EngineFixture.token(101)
        let activityToken = EngineFixture.token(102)
        let alertToken = EngineFixture.token(103)
        try await h.engine.registerPushToStartToken(deviceID: "zeb-iphone", attributesType: "FoodOrderAttributes", token: startToken)
        try await h.engine.registerDeviceToken(deviceID: "zeb-iphone", token: alertToken)
        _ = try await h.engine.registerAppDevice(deviceID: "zeb-iphone", replacingCredential: true)
        let attributes: JSONValue = ["merchantName": "Zebediah Quartermain", "orderNumber": "ZQ7781", "itemCount": 4]
        _ = try await h.engine.createOrder(NewOrder(orderID: "E1", workflow: "food-order", attributes: attributes))
        try await h.engine.follow(orderID: "E1", deviceID: "zeb-iphone")
        #expect(try await h.apns.waitForPushes(count: 1)[0].alertTitle == "Order ZQ7781 received")
        try await eventually("the start is recorded") { try await h.activity("E1", "zeb-iphone").status == "starting" }
        try await h.engine.registerActivityToken(orderID: "E1", deviceID: "zeb-iphone", token: activityToken)
        try await eventually("the token is handled") { try await h.pendingCommands("E1") == 0 }
        let steps: [(String, JSONValue)] = [("accept", [:]), ("ready", [:]), ("dispatch", ["eta": "+10m", "driver": "Ophelia Thistlewood"]), ("deliver", [:])]
        for (index, (target, input)) in steps.enumerated() {
            _ = try await h.engine.advance("E1", to: target, input: input)
            try await h.apns.waitForPushes(count: 2 + index)
        }
        #expect(h.pushes(activityToken).contains { $0.alertTitle == "Order ZQ7781 is ready" })
        // A second order of the customer's, cancelled with an address in its reason, and a live one.
        _ = try await h.engine.createOrder(NewOrder(orderID: "E2", workflow: "food-order", attributes: attributes))
        _ = try await h.engine.cancel("E2", reason: "wrong address: 17 Xylophone Lane")
        _ = try await h.engine.createOrder(NewOrder(orderID: "E3", workflow: "food-order", attributes: attributes))
        try await eventually("every push but the deferred end is sent") { try await h.pendingCommands("E1") <= 1 }
        try await running.stop()
        let sentBefore = h.apns.acceptedCount
        // The customer's Android phone follows it too (the worker stopped: nothing is sent to it),
        // so that its history renders the Android messages.
        _ = try await h.engine.registerFCMToken(deviceID: "zeb-pixel", token: LocalFCMServer.registrationToken(7))
        try await h.engine.follow(orderID: "E1", deviceID: "zeb-pixel")

        let erased = ["Zebediah", "Quartermain", "ZQ7781", "Thistlewood", "Xylophone", startToken, activityToken, alertToken, "zeb-iphone"]
        for value in erased {
            #expect(try await !Self.columnsHolding(value, in: h.fixture.database).isEmpty, "seeded: \(value.prefix(12))")
        }
        var shapeBefore = try await Self.shape(h.pool)
        // The history's Android messages are rendered on read: from the customer's values now…
        let androidBefore = "\(try await h.engine.history("E1").transitions.map(\.android))"
        #expect(androidBefore.contains("ZQ7781"), "\(androidBefore)")

        // A live order is refused and left as it was.
        let liveBefore = try await TableContents.read(h.fixture.database)
        await #expect(throws: OrderFlowError.self) { try await h.engine.redactOrder("E3") }
        do {
            try await h.engine.redactOrder("E3")
        } catch let error as OrderFlowError {
            #expect(error.code == .conflict && error.currentState == "received" && error.message.contains("Cancel it first"), "\(error)")
        }
        #expect(TableContents.changes(liveBefore, try await TableContents.read(h.fixture.database)).isEmpty)
        _ = try await h.engine.cancel("E3")

        try await h.engine.forgetDevice("zeb-iphone")
        for order in ["E1", "E2", "E3"] { try await h.engine.redactOrder(order) }

        for value in erased {
            let left = try await Self.columnsHolding(value, in: h.fixture.database)
            #expect(left.isEmpty, "\(value.prefix(12))… survives in \(left)")
        }
        var shapeAfter = try await Self.shape(h.pool)
        shapeBefore.transitions.append(contentsOf: shapeAfter.transitions.filter { $0.hasPrefix("E3 2 ") })
        #expect(shapeAfter.transitions == shapeBefore.transitions, "states and times stay")
        #expect(shapeAfter.deliveries == shapeBefore.deliveries, "pushes stay counted")
        shapeAfter.orders = shapeAfter.orders.filter { !$0.hasPrefix("E3") }
        #expect(shapeAfter.orders == shapeBefore.orders.filter { !$0.hasPrefix("E3") })
        let order = try await h.engine.order("E1")
        #expect(order.order.state == "delivered" && order.order.seq == 5)
        #expect(order.order.attributes == ["merchantName": "(redacted)", "orderNumber": "(redacted)", "itemCount": 0])
        #expect(order.activities.map(\.deviceID) == ["zeb-pixel"], "the forgotten device's activity is gone, not the other phone's")
        #expect(try await h.pendingCommands() == 0, "the deferred end is not sent after the redaction")
        let history = try await h.engine.history("E1")
        #expect(history.transitions.count == 5 && history.deliveries.allSatisfy { $0.deviceID == "(forgotten)" })
        // …and from the redactions once the order is redacted.
        let androidAfter = history.transitions.compactMap(\.android)
        #expect(androidAfter.count == 5 && androidAfter.last?["title"] == "(redacted)", "\(androidAfter)")
        for value in erased { #expect(!"\(androidAfter)".contains(value), "\(value.prefix(12))… in the Android messages") }

        // Erasing again: an unknown device; a redaction changes nothing more.
        let again = try await TableContents.read(h.fixture.database)
        await #expect(throws: OrderFlowError.self) { try await h.engine.forgetDevice("zeb-iphone") }
        try await h.engine.redactOrder("E1")
        #expect(TableContents.changes(again, try await TableContents.read(h.fixture.database)).isEmpty)

        // Nothing more is sent for the erased orders or to the forgotten device.
        let rerun = h.start(h.configuration("w2"))
        try await Task.sleep(for: .milliseconds(500))
        try await rerun.stop()
        #expect(h.apns.acceptedCount == sentBefore)
        await h.shutdown()
    }

    @Test func forgettingIsTheMerchantsAndTheDevicesOwn() async throws {
        let fixture = try await EngineFixture.make()
        defer { Task { await fixture.shutdown() } }
        _ = try await fixture.createFoodOrder("O1")
        try await fixture.engine.follow(orderID: "O1", deviceID: "anna-iphone")
        let anna = try await fixture.engine.registerAppDevice(deviceID: "anna-iphone", replacingCredential: true)
        let other = try await fixture.engine.registerAppDevice(deviceID: "mallory-iphone", replacingCredential: true)
        let otherMerchant = try fixture.engine.forMerchant("elsewhere")
        let before = try await TableContents.read(fixture.database)
        for attempt in [
            { try await otherMerchant.forgetDevice("anna-iphone") },
            { try await otherMerchant.forgetAppDevice("anna-iphone", credential: anna.credential) },
            { try await fixture.engine.forgetAppDevice("anna-iphone", credential: other.credential) },
            { try await fixture.engine.forgetAppDevice("anna-iphone", credential: nil) },
            { try await fixture.engine.forgetAppDevice("anna-iphone", credential: "of_dev_short") },
            { try await fixture.engine.forgetDevice("nobody") },
        ] as [@Sendable () async throws -> Void] {
            do {
                try await attempt()
                Issue.record("refused")
            } catch let error as OrderFlowError {
                #expect(error.code == .notFound && error.message.contains("is not known"), "\(error)")
            }
        }
        await #expect(throws: OrderFlowError.self) { try await fixture.engine.redactOrder("O2") }
        await #expect(throws: OrderFlowError.self) { try await otherMerchant.redactOrder("O1") }
        #expect(TableContents.changes(before, try await TableContents.read(fixture.database)).isEmpty)
        try await fixture.engine.forgetAppDevice("anna-iphone", credential: anna.credential)
        #expect(try await fixture.engine.order("O1").activities.isEmpty)
    }

    /// What a worker's record does once its push is answered: the delivery, then the lease ends.
    static func recordInFlightPush(_ pool: PostgresPool, order: String, device: String, alert: String) async throws {
        try await pool.query(PostgresQuery("""
            INSERT INTO deliveries (merchant_id, order_id, device_id, seq, event, token_kind, token_suffix, priority, alert_title, outcome)
            VALUES ('default', $1, $2, 1, 'update', 'activity', 'abcdef12', 10, $3, 'sent')
            """, order, device, alert))
        try await pool.query(PostgresQuery(
            "UPDATE orders SET dispatch_lease_until = NULL, dispatch_owner = NULL WHERE order_id = $1", order))
    }

    @Test func anErasureAwaitsAPushAWorkerIsSending() async throws {
        let fixture = try await EngineFixture.make()
        defer { Task { await fixture.shutdown() } }
        let pool = fixture.engine.pool
        _ = try await fixture.createFoodOrder("L1")
        try await fixture.engine.follow(orderID: "L1", deviceID: "zeb-iphone")
        _ = try await fixture.engine.cancel("L1")
        let lease = PostgresQuery(
            "UPDATE orders SET dispatch_lease_until = now() + interval '20 seconds', dispatch_owner = 'w1' WHERE order_id = 'L1'")

        // A worker holds the order's lease while its push to the device is out.
        try await pool.query(lease)
        let forgetting = Task { try await fixture.engine.forgetDevice("zeb-iphone") }
        try await Task.sleep(for: .milliseconds(300))
        try await Self.recordInFlightPush(pool, order: "L1", device: "zeb-iphone", alert: "Order L1 is ready")
        try await forgetting.value
        let devices: [String] = try await pool.query(PostgresQuery("SELECT device_id FROM deliveries WHERE order_id = 'L1'"))
            .map { try $0.decode("device_id") }
        #expect(devices == ["(forgotten)"], "the push recorded after the forget is untied from the device")

        try await pool.query(lease)
        let redacting = Task { try await fixture.engine.redactOrder("L1") }
        try await Task.sleep(for: .milliseconds(300))
        try await Self.recordInFlightPush(pool, order: "L1", device: "zeb-ipad", alert: "Order L1 was cancelled")
        try await redacting.value
        let titles: [String] = try await pool.query(PostgresQuery("SELECT alert_title FROM deliveries WHERE order_id = 'L1'"))
            .map { try $0.decode("alert_title") }
        #expect(titles == ["(redacted)", "(redacted)"], "the push recorded while the redaction waited is redacted too")
    }
}
