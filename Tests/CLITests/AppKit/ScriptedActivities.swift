import Foundation
import OrderFlowKit

/// An activity the test plays: its streams are fed by hand, as ActivityKit would.
final class ScriptedActivity: ObservedActivity, @unchecked Sendable {
    let id: String
    let attributesType = "FoodOrderAttributes"
    let orderID: String?
    let pushTokenUpdates: AsyncStream<Data>
    let stateUpdates: AsyncStream<ActivityLifecycle>
    let contentUpdates: AsyncStream<Date>
    let tokens: AsyncStream<Data>.Continuation
    let states: AsyncStream<ActivityLifecycle>.Continuation

    init(id: String, token: Data, orderID: String? = nil) {
        self.id = id
        self.orderID = orderID
        (pushTokenUpdates, tokens) = AsyncStream.makeStream()
        (stateUpdates, states) = AsyncStream.makeStream()
        contentUpdates = AsyncStream { $0.finish() }
        tokens.yield(token)
    }
}

/// One launch of the app: the push-to-start token ActivityKit hands it and the activities that exist.
struct ScriptedActivities: ActivitySource {
    let pushToStart: Data
    let existing: [ScriptedActivity]
    var attributesTypes: [String] { ["FoodOrderAttributes"] }
    func pushToStartTokenUpdates(for attributesType: String) -> AsyncStream<Data> {
        let token = pushToStart
        return AsyncStream { $0.yield(token) }
    }
    func currentActivities() -> [any ObservedActivity] { existing }
    func activityUpdates() -> AsyncStream<any ObservedActivity> { AsyncStream { _ in } }
}

extension Data {
    static func token(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
