import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit

/// A database for purge tests: the engine's merchant `default` (the purge's default retention,
/// 30 days) and `other` (60 days of its own), both with `food-order`; orders made old by moving
/// their times back, and push records written as a worker leaves them.
struct RetentionWorld: Sendable {
    let fixture: EngineFixture
    let other: OrderFlowEngine

    static func make() async throws -> RetentionWorld {
        let fixture = try await EngineFixture.make()
        try await fixture.engine.addMerchant("other")
        let other = try fixture.engine.forMerchant("other")
        _ = try await other.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        try await fixture.engine.setRetention(.seconds(60 * 86_400), merchantID: "other")
        return RetentionWorld(fixture: fixture, other: other)
    }

    func shutdown() async { await fixture.shutdown() }

    /// An order created, followed by `device` with an activity and cancelled `daysAgo` days ago:
    /// two transitions, one activity, one follower, and the two pushes a worker recorded (its
    /// commands handled, unless `keepCommands`: still sending).
    func finishedOrder(_ engine: OrderFlowEngine, _ orderID: String, daysAgo: Int, device: String = "phone",
                       keepCommands: Bool = false) async throws {
        _ = try await engine.createOrder(NewOrder(
            orderID: orderID, workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": "N1", "itemCount": 1]))
        try await engine.registerActivityToken(orderID: orderID, deviceID: device, token: EngineFixture.token(orderID.count))
        _ = try await engine.cancel(orderID)
        let merchant = engine.configuration.merchantID
        try await sql("""
            INSERT INTO deliveries (merchant_id, order_id, device_id, seq, event, token_kind, token_suffix, priority, outcome)
            VALUES ($1, $2, $3, 1, 'update', 'activity', 'abcd1234', 10, 'sent'), ($1, $2, $3, 2, 'end', 'activity', 'abcd1234', 10, 'sent')
            """, merchant, orderID, device)
        if !keepCommands {
            try await sql("DELETE FROM activity_commands WHERE merchant_id = $1 AND order_id = $2", merchant, orderID)
        }
        try await backdate(engine, orderID, seconds: daysAgo * 86_400)
    }

    /// Moves the order's last change `seconds` into the past.
    func backdate(_ engine: OrderFlowEngine, _ orderID: String, seconds: Int) async throws {
        try await sql("""
            UPDATE orders SET state_entered_at = now() - make_interval(secs => $3), updated_at = now() - make_interval(secs => $3)
            WHERE merchant_id = $1 AND order_id = $2
            """, engine.configuration.merchantID, orderID, Double(seconds))
    }

    /// Rows of the default merchant that the purge takes by age, each named by a text it
    /// carries (`…-40d`, `stale-key`; the never-sent command is from 2020), beside the ones of
    /// the same kinds it must keep.
    func oldLeftovers() async throws {
        try await fixture.createFoodOrder("has-dead")
        try await sql("""
            INSERT INTO deliveries (merchant_id, order_id, device_id, seq, event, token_kind, token_suffix, priority, outcome,
                                    reason, attempted_at, retried_at)
            VALUES ('default', 'has-dead', 'phone', 1, 'start', 'push-to-start', 'abcd1234', 10, 'dead', 'dead-40d',
                    now() - interval '40 days', NULL),
                   ('default', 'has-dead', 'phone', 1, 'start', 'push-to-start', 'abcd1234', 10, 'dead', 'dead-1d',
                    now() - interval '1 day', NULL),
                   ('default', 'has-dead', 'phone', 1, 'start', 'push-to-start', 'abcd1234', 10, 'sent', 'sent-40d',
                    now() - interval '40 days', NULL),
                   ('default', 'has-dead', 'phone', 1, 'start', 'push-to-start', 'abcd1234', 10, 'dead', 'retried-40d',
                    now() - interval '40 days', now() - interval '39 days')
            """)
        try await sql("""
            INSERT INTO activity_commands (merchant_id, order_id, seq, kind, created_at, available_at)
            VALUES ('default', 'has-dead', 1, 'sync', '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z')
            """)
        try await sql("""
            INSERT INTO devices (merchant_id, device_id, alert_token, alert_token_invalid_at, updated_at, credential_issued_at)
            VALUES ('default', 'tokenless-40d', 'aaaa', now() - interval '40 days', now() - interval '41 days', NULL),
                   ('default', 'tokenless-40d-credential', NULL, NULL, now() - interval '40 days', now() - interval '40 days'),
                   ('default', 'tokenless-1d', 'bbbb', now() - interval '1 day', now() - interval '41 days', NULL),
                   ('default', 'live-old', 'cccc', NULL, now() - interval '400 days', NULL),
                   ('default', 'tokenless-follower', 'dddd', now() - interval '40 days', now() - interval '41 days', NULL),
                   ('default', 'reissued', 'eeee', now() - interval '40 days', now() - interval '41 days', now() - interval '1 day')
            """)
        try await sql("""
            INSERT INTO order_followers (merchant_id, order_id, device_id) VALUES ('default', 'has-dead', 'tokenless-follower')
            """)
        try await sql("""
            INSERT INTO push_to_start_tokens (merchant_id, device_id, attributes_type, token, invalid_at, updated_at)
            VALUES ('default', 'tokenless-40d', 'FoodOrderAttributes', 'ffff', now() - interval '35 days', now() - interval '50 days'),
                   ('default', 'p2s-only-40d', 'FoodOrderAttributes', '1111', now() - interval '40 days', now() - interval '45 days'),
                   ('default', 'p2s-mixed', 'FoodOrderAttributes', '2222', now() - interval '40 days', now() - interval '45 days'),
                   ('default', 'p2s-mixed', 'RideAttributes', '3333', NULL, now() - interval '45 days')
            """)
        try await sql("""
            INSERT INTO request_keys (merchant_id, idempotency_key, operation, request_digest, result, created_at)
            VALUES ('default', 'stale-key', 'apply', '\\x00', '{}', now() - interval '2 days'),
                   ('default', 'fresh-key', 'apply', '\\x00', '{}', now() - interval '1 hour')
            """)
    }

    /// A table's rows (as `TableContents` has them) that `keep` keeps: a stored text's own
    /// line breaks (a workflow's YAML, empty lines included) stay as they are.
    static func lines(of rows: String?, keeping keep: (String) -> Bool) -> String {
        (rows ?? "").split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter(keep).joined(separator: "\n")
    }

    func sql(_ text: StaticString, _ bindings: any PostgresBindable...) async throws {
        try await fixture.engine.pool.query(PostgresQuery(text, bindings: bindings))
    }

    func count(_ text: StaticString) async throws -> Int {
        try await fixture.engine.pool.query(PostgresQuery(text)).single().decode("n", as: Int.self)
    }
}
