import Foundation
import OrderFlow

let url = ProcessInfo.processInfo.environment["ORDERFLOW_DATABASE_URL"] ?? "postgresql://orderflow@localhost:5432/orderflow"
let database = try DatabaseConfiguration(url)
_ = try await Schema.migrate(database)   // once per database; a no-op when current

let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database))
let yaml = try String(contentsOfFile: "workflows/food-order.yaml", encoding: .utf8)
_ = try await engine.applyWorkflow(yaml: yaml, file: "food-order.yaml")

let orderID = "quickstart-\(UUID().uuidString.prefix(8))"
_ = try await engine.createOrder(NewOrder(
    orderID: orderID, workflow: "food-order",
    attributes: ["merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 3],
    idempotencyKey: "pos-\(orderID)"))
_ = try await engine.advance(orderID, to: "accept", input: ["eta": "+20m"])
_ = try await engine.advance(orderID, to: "ready")
let result = try await engine.advance(orderID, to: "dispatch", input: ["eta": "+15m", "driver": "Sam"])
print("\(orderID): \(result.order.state)")   // out_for_delivery
await engine.shutdown()
