import Foundation
import Logging
import OrderFlow
import PGKit
import PostgresTesting
import WorkflowKit

/// A fresh, migrated database with the shipped workflows applied, and an engine on it.
public struct EngineFixture: Sendable {
    public let database: PostgresConfiguration
    public let engine: OrderFlowEngine

    /// The repository's root, found from this file's place in it.
    public static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The shipped workflow files (`workflows/*.yaml`).
    public static func shippedWorkflow(_ name: String) throws -> String {
        try String(contentsOf: repositoryRoot.appendingPathComponent("workflows/\(name).yaml"), encoding: .utf8)
    }

    /// Creates the database, migrates it and applies `food-order` and `ride`.
    public static func make(maximumConnections: Int = 8, logger: Logger = Logger(label: "orderflow.test")) async throws -> EngineFixture {
        let database = try await TestDatabase.fresh()
        _ = try await Schema.migrate(database)
        let engine = OrderFlowEngine(
            configuration: OrderFlowConfiguration(database: database, maximumConnections: maximumConnections), logger: logger)
        for name in ["food-order", "ride"] {
            _ = try await engine.applyWorkflow(yaml: try shippedWorkflow(name), file: "\(name).yaml")
        }
        return EngineFixture(database: database, engine: engine)
    }

    /// Creates a food order with plausible attributes.
    @discardableResult
    public func createFoodOrder(_ orderID: String, merchant: String = "Luigi's", items: Int = 2) async throws -> OrderSnapshot {
        try await engine.createOrder(NewOrder(
            orderID: orderID, workflow: "food-order",
            attributes: ["merchantName": .string(merchant), "orderNumber": .string(orderID), "itemCount": .int(items)]))
    }

    /// A hex token of `length` characters (real APNs tokens are often 160).
    public static func token(_ seed: Int, length: Int = 160) -> String {
        var generator = SeededGenerator(seed: UInt64(seed))
        return (0..<length).map { _ in String(UInt8.random(in: 0..<16, using: &generator), radix: 16) }.joined()
    }

    public func shutdown() async {
        await engine.shutdown()
    }
}

/// A small deterministic generator (SplitMix64) for reproducible test data.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
