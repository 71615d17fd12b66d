import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// Every table the engine writes, as JSON text.
struct StoredData: Equatable {
    var tables: [String: String] = [:]

    static func read(_ engine: OrderFlowEngine) async throws -> StoredData {
        var data = StoredData()
        func add(_ name: String, _ query: PostgresQuery) async throws {
            data.tables[name] = try await engine.pool.query(query).single().decode("rows", as: String.self)
        }
        try await add("orders", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id), '[]')::text AS rows FROM orders t"))
        try await add("order_transitions", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id, t.seq), '[]')::text AS rows FROM order_transitions t"))
        try await add("activity_commands", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.id), '[]')::text AS rows FROM activity_commands t"))
        try await add("order_followers", PostgresQuery("""
            SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id, t.device_id), '[]')::text AS rows
            FROM order_followers t
            """))
        try await add("activities", PostgresQuery("""
            SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.order_id, t.device_id), '[]')::text AS rows
            FROM activities t
            """))
        try await add("devices", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.device_id), '[]')::text AS rows FROM devices t"))
        try await add("push_to_start_tokens", PostgresQuery("""
            SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.merchant_id, t.device_id, t.attributes_type), '[]')::text AS rows
            FROM push_to_start_tokens t
            """))
        try await add("deliveries", PostgresQuery(
            "SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.id), '[]')::text AS rows FROM deliveries t"))
        try await add("workflow_versions", PostgresQuery("""
            SELECT coalesce(jsonb_agg(jsonb_build_object('name', t.name, 'version', t.version) ORDER BY t.name, t.version), '[]')::text
                   AS rows
            FROM workflow_versions t
            """))
        return data
    }

    func differences(from other: StoredData) -> [String] {
        tables.keys.sorted().filter { tables[$0] != other.tables[$0] }
    }
}

/// Runs the cases and keeps the tally. Used by one test task only.
final class BadInputChecker {
    let engine: OrderFlowEngine
    private(set) var refused: [(category: String, count: Int)] = []
    private(set) var accepted = 0
    private(set) var failures = 0

    init(engine: OrderFlowEngine) {
        self.engine = engine
    }

    private func count(_ category: String) {
        if let index = refused.firstIndex(where: { $0.category == category }) {
            refused[index].count += 1
        } else {
            refused.append((category, 1))
        }
    }

    var summary: String {
        let total = refused.map(\.count).reduce(0, +)
        let breakdown = refused.map { "\($0.category) \($0.count)" }.joined(separator: ", ")
        return "bad input: \(total) cases, all rejected with a clear error, stored data unchanged (\(breakdown)); "
            + "\(accepted) hostile-but-legitimate values stored and rendered back exactly"
    }

    /// Expects `body` to throw an `OrderFlowError` with `code` whose message contains every
    /// fragment (case-insensitive), reads as a sentence for people, and that nothing changed.
    func refuses(
        _ label: String, category: String, _ code: OrderFlowError.Code, mentioning fragments: [String] = [],
        notMentioning secrets: [String] = [], sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async throws {
        let before = try await StoredData.read(engine)
        var problems: [String] = []
        do {
            try await body()
            problems.append("was accepted")
        } catch let error as OrderFlowError {
            if error.code != code { problems.append("code \(error.code), expected \(code)") }
            let message = error.message
            for fragment in fragments where !message.lowercased().contains(fragment.lowercased()) {
                problems.append("message lacks \"\(fragment)\"")
            }
            for secret in secrets where message.contains(secret) {
                problems.append("message quotes \"\(secret.prefix(20))…\"")
            }
            problems += Self.humanProblems(message)
            if !problems.isEmpty { problems.append("message: \(message)") }
        } catch {
            problems.append("threw \(type(of: error)), not OrderFlowError: \(String(describing: error).prefix(300))")
        }
        let after = try await StoredData.read(engine)
        let changed = after.differences(from: before)
        if !changed.isEmpty { problems.append("changed stored data: \(changed.joined(separator: ", "))") }
        if problems.isEmpty {
            count(category)
        } else {
            failures += 1
            Issue.record("\(category) / \(label): \(problems.joined(separator: "; "))", sourceLocation: sourceLocation)
        }
    }

    /// A hostile value that is legitimate: `body` must succeed and check the round trip itself.
    func accepts(_ label: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        do {
            try await body()
            accepted += 1
        } catch {
            failures += 1
            Issue.record("accepting \(label) failed: \(String(describing: error).prefix(400))", sourceLocation: sourceLocation)
        }
    }

    /// What makes a message unfit for people: internals, control characters, pages of text.
    static func humanProblems(_ message: String) -> [String] {
        var problems: [String] = []
        if message.isEmpty { problems.append("empty message") }
        if message.unicodeScalars.count > 700 { problems.append("message is \(message.unicodeScalars.count) characters long") }
        if message.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            problems.append("message contains control characters")
        }
        for marker in ["SQLSTATE", "PostgresError", "Optional(", "Swift.", "DecodingError", "unexpected error", "libpq", "parameter $"]
        where message.contains(marker) {
            problems.append("message shows internals (\(marker))")
        }
        return problems
    }
}

/// A thrown error's message, for round-trip checks.
struct RoundTripMismatch: Error, CustomStringConvertible {
    var description: String
    init(_ what: String, expected: Any, got: Any) {
        description = "\(what): expected \(String(reflecting: expected)), got \(String(reflecting: got))"
    }
}

func require<T: Equatable>(_ what: String, _ got: T, equals expected: T) throws {
    if got != expected { throw RoundTripMismatch(what, expected: expected, got: got) }
}
