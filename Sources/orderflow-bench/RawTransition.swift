import Foundation
import OrderFlow
import PGKit

/// The raw limit the benchmarks measure against: pgbench running the writes of one engine
/// advance as one data-modifying statement (the order's new content, the history row with its
/// input and rendering, the command), on orders of a merchant of its own (`raw`), one round trip
/// and one commit per transition. The JSON values are those of a real first advance (accept
/// with an ETA), bound as parameters (pgbench `-D`) as the engine binds them.
struct RawTransition {
    /// The merchant whose orders pgbench moves; the engine's own orders are not touched.
    static let merchant = "raw"
    private let variables: [String: String]

    /// Creates and advances a sample order through `engine` (its merchant, ids `raw-sample`
    /// and `raw-template`; the commands they enqueued are removed), then `orders` orders of
    /// merchant `raw` for pgbench, with the same workflow version.
    static func prepare(engine: OrderFlowEngine, orders count: Int) async throws -> RawTransition {
        for orderID in ["raw-sample", "raw-template"] {
            _ = try await engine.createOrder(NewOrder(
                orderID: orderID, workflow: "food-order",
                attributes: ["merchantName": "Bench Bistro", "orderNumber": "sample", "itemCount": 2]))
        }
        let sample = try await engine.advance("raw-sample", to: "accept", input: ["eta": "+20m"])
        try await engine.pool.query(PostgresQuery(
            "DELETE FROM activity_commands WHERE merchant_id = $1 AND order_id IN ('raw-sample', 'raw-template')",
            engine.configuration.merchantID))
        try await engine.pool.query(PostgresQuery("""
            INSERT INTO workflow_versions (merchant_id, name, version, definition, source, checksum)
            SELECT $1, name, version, definition, source, checksum FROM workflow_versions WHERE merchant_id = $2
            """, merchant, engine.configuration.merchantID))
        try await engine.pool.query(PostgresQuery("""
            INSERT INTO orders (merchant_id, order_id, workflow_name, workflow_version, state, seq, attributes, content,
                                created_at, updated_at, state_entered_at)
            SELECT $1, 'raw-' || n, o.workflow_name, o.workflow_version, 'received', 1, o.attributes, o.content,
                   now(), now(), now()
            FROM generate_series(1, $3) AS n,
                 (SELECT workflow_name, workflow_version, attributes, content FROM orders
                  WHERE merchant_id = $2 AND order_id = 'raw-template') AS o
            """, merchant, engine.configuration.merchantID, count))
        return RawTransition(variables: [
            "rendered": try PostgresJSON(encoding: sample.transition.rendered).text,
            "content": try PostgresJSON(encoding: sample.order.content).text,
            "input": try PostgresJSON(encoding: sample.transition.input).text,
            "orders": "\(count)",
        ])
    }

    /// pgbench with `clients` clients for `seconds`: transitions per second.
    func run(url: String, clients: Int, seconds: Int) async throws -> Double {
        try await runPgbench(url: url, script: Self.script, clients: clients, seconds: seconds, variables: variables)
    }

    /// Removes the commands pgbench's transitions enqueued (a worker draining the queue next
    /// must find only the engine's).
    static func removeCommands(_ pool: PostgresPool) async throws {
        try await pool.query(PostgresQuery("DELETE FROM activity_commands WHERE merchant_id = $1", merchant))
    }

    /// pgbench's transition, on the orders of `merchant` (written out: SQL is never built from strings here, `SQLSafetyTests`).
    private static let script = """
        \\set n random(1, :orders)
        WITH moved AS (UPDATE orders SET state = 'in_progress', seq = seq + 1, content = :content::jsonb, updated_at = now(), state_entered_at = now() WHERE merchant_id = 'raw' AND order_id = 'raw-' || :n RETURNING merchant_id, order_id, seq), history AS (INSERT INTO order_transitions (merchant_id, order_id, seq, from_state, to_state, event, input, rendered, actor, idempotency_key, occurred_at) SELECT merchant_id, order_id, seq, 'received', 'in_progress', 'accept', :input::jsonb, :rendered::jsonb, NULL, NULL, now() FROM moved), command AS (INSERT INTO activity_commands (merchant_id, order_id, seq, kind) SELECT merchant_id, order_id, seq, 'update' FROM moved) SELECT seq FROM moved;

        """
}
