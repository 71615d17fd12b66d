import Foundation
import WorkflowKit

// What `--json` and the HTTP API show of orders: every time is ISO-8601 text, content dates
// included, except inside `aps` — the APNs payload a transition renders, shown exactly as APNs
// receives it (its dates seconds since 1970, its ContentState's dates seconds since 2001-01-01,
// as the app's `JSONDecoder` reads them) and named for what it is.

extension OrderSnapshot {
    /// The snapshot with its ContentState's dates as ISO-8601 text.
    public func readable(in workflow: Workflow) -> OrderSnapshot {
        var order = self
        order.content = workflow.readableContent(content)
        return order
    }
}

extension TransitionRecord {
    /// One entry of an order's history as people and other programs read it.
    public struct Readable: Sendable, Hashable, Encodable {
        public var seq: Int
        public var from: String?
        public var to: String
        public var event: String?
        public var input: JSONValue
        public var actor: String?
        public var idempotencyKey: String?
        public var occurredAt: Date
        /// What the activity shows after the transition, dates as ISO-8601 text.
        public var content: JSONValue
        public var alert: ActivityAlert?
        public var staleDate: Date?
        public var dismissalDate: Date?
        public var relevanceScore: Double?
        /// 5 or 10 (`apns-priority`).
        public var priority: Int
        /// The `aps` dictionary this transition renders, exactly as APNs receives it.
        public var aps: JSONValue
        /// The FCM data message it renders for Android phones, as sent (in histories of orders
        /// an Android phone follows or was sent to).
        public var android: [String: String]?
    }

    /// This entry with readable times, and the APNs payload it renders beside them.
    public func readable(in workflow: Workflow) -> Readable {
        let seconds = { (epoch: Int) in Date(timeIntervalSince1970: TimeInterval(epoch)) }
        let payload = LiveActivityPayload(
            event: LiveActivityPayload.Event(rendered.event), timestamp: seconds(rendered.timestamp),
            contentState: APNSJSONObject(members: rendered.content.objectValue ?? [:]),
            alert: rendered.alert.map(LiveActivityAlert.init), staleDate: rendered.staleDate.map(seconds),
            dismissalDate: rendered.dismissalDate.map(seconds), relevanceScore: rendered.relevanceScore)
        return Readable(
            seq: seq, from: from, to: to, event: event, input: input, actor: actor, idempotencyKey: idempotencyKey,
            occurredAt: occurredAt, content: workflow.readableContent(rendered.content), alert: rendered.alert,
            staleDate: rendered.staleDate.map(seconds), dismissalDate: rendered.dismissalDate.map(seconds),
            relevanceScore: rendered.relevanceScore, priority: rendered.priority, aps: payload.json["aps"] ?? .null,
            android: android)
    }
}

extension OrderFlowEngine {
    /// The workflow version `order` is pinned to (cached), for reading its values.
    public func workflow(of order: OrderSnapshot) async throws -> Workflow {
        try await workflows.workflow(named: order.workflow, version: order.workflowVersion)
    }
}
