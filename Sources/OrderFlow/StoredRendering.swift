import Foundation
import WorkflowKit

/// What one transition made the activity show, as stored in `order_transitions.rendered`.
///
/// The engine renders a transition once, when it commits; the worker later merges the stored
/// renderings of an order's pending transitions into one push (newest content, newest alert).
public struct StoredRendering: Codable, Sendable, Hashable {
    /// `start`, `update` or `end`.
    public var event: ActivityEvent
    /// The state the order is in after the transition.
    public var state: String
    /// The full ContentState, in the app's JSON shape.
    public var content: JSONValue
    public var alert: ActivityAlert?
    /// Epoch seconds after which the device shows the content as stale.
    public var staleDate: Int?
    public var relevanceScore: Double?
    /// 5 or 10.
    public var priority: Int
    /// For `end`: epoch seconds at which the ended activity leaves the Lock Screen; nil for the
    /// system default.
    public var dismissalDate: Int?
    /// When the transition happened, epoch seconds: the basis of `aps.timestamp`.
    public var timestamp: Int

    public init(_ update: RenderedActivityUpdate) {
        event = update.event
        state = update.state
        content = update.contentState
        alert = update.alert
        staleDate = update.staleDate.map(LiveActivityPayload.epochSeconds)
        relevanceScore = update.relevanceScore
        priority = update.priority
        dismissalDate = update.dismissalDate.map(LiveActivityPayload.epochSeconds)
        timestamp = LiveActivityPayload.epochSeconds(update.timestamp)
    }

    public var isEnd: Bool { event == .end }

    /// The same JSON object `Codable` gives (nil fields left out), built directly: every advance
    /// stores one, and `JSONEncoder` cost a tenth of the engine's CPU per advance.
    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "event": .string(event.rawValue), "state": .string(state), "content": content,
            "priority": .int(priority), "timestamp": .int(timestamp),
        ]
        if let alert { object["alert"] = alert.json }
        if let staleDate { object["staleDate"] = .int(staleDate) }
        if let relevanceScore { object["relevanceScore"] = .double(relevanceScore) }
        if let dismissalDate { object["dismissalDate"] = .int(dismissalDate) }
        return .object(object)
    }
}
