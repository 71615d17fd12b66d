import APNSCore
import Foundation
import OrderFlow
import WorkflowKit

extension OrderFlowAPI {
    /// The contract's `AdvanceResult` for `result` as JSON bytes, member for member as
    /// ``advanceResult(_:_:)`` gives it to the generated encoder, written straight into the
    /// answer: no dictionary is built and sorted per object (the members are written in the
    /// order a sorted-keys encoder writes them; nested values the engine gives as JSON are
    /// written as they are).
    static func advanceResultBytes(_ result: AdvanceResult, workflow: Workflow) throws -> [UInt8] {
        let times = ISO8601Transcoder()
        let order = result.order.readable(in: workflow)
        let transition = result.transition.readable(in: workflow)
        var json = AnswerWriter()
        try json.object { json in
            json.key("order")
            try json.order(order, times: times)
            json.bool("replayed", result.replayed)
            json.key("transition")
            try json.object { json in
                json.string("actor", transition.actor)
                try json.object("aps", transition.aps)
                try json.object("content", transition.content)
                try json.string("dismissal_date", transition.dismissalDate.map(times.encode))
                json.string("event", transition.event)
                json.string("from", transition.from)
                try json.object("input", transition.input)
                try json.string("occurred_at", times.encode(transition.occurredAt))
                json.int("priority", transition.priority >= 10 ? 10 : 5)
                if let score = transition.relevanceScore { json.value("relevance_score", .double(score)) }
                json.int("seq", transition.seq)
                try json.string("stale_date", transition.staleDate.map(times.encode))
                json.string("to", transition.to)
            }
        }
        return json.bytes
    }
}

extension OrderFlowAPI {
    /// The contract's `OrderDetails` as JSON bytes, member for member as ``getOrder(_:)`` gives
    /// it to the generated encoder (an app state outside the contract's enum is left out there
    /// too).
    static func orderDetailsBytes(_ order: OrderSnapshot, activities: [ActivityInfo], pendingUpdates: Int) throws -> [UInt8] {
        let times = ISO8601Transcoder()
        var json = AnswerWriter()
        try json.object { json in
            json.key("activities")
            try json.array(activities) { json, activity in
                try json.object { json in
                    try json.string("app_applied_at", activity.appAppliedAt.map(times.encode))
                    if let seq = activity.appAppliedSeq { json.int("app_applied_seq", seq) }
                    try json.string("app_reported_at", activity.appReportedAt.map(times.encode))
                    json.string("app_state", activity.appState.flatMap(Components.Schemas.Activity.AppStatePayload.init(rawValue:))?.rawValue)
                    json.string("device", activity.deviceID)
                    try json.string("last_pushed_at", activity.lastPushedAt.map(times.encode))
                    json.int("last_seq", activity.lastSeq)
                    json.string("status", activity.status)
                    json.string("token_suffix", activity.tokenSuffix)
                }
            }
            json.key("order")
            try json.order(order, times: times)
            json.int("pending_updates", pendingUpdates)
        }
        return json.bytes
    }
}

extension OrderFlowAPI {
    /// The contract's `CreatedOrder`: the order (readable in its workflow) and its client secret.
    static func createdOrderBytes(_ order: OrderSnapshot, clientSecret: String) throws -> [UInt8] {
        var json = AnswerWriter()
        try json.order(order, times: ISO8601Transcoder(), clientSecret: clientSecret)
        return json.bytes
    }
}

extension AnswerWriter {
    /// The contract's `Order` (`order` readable in its workflow); with `clientSecret`, a
    /// `CreatedOrder`.
    mutating func order(_ order: OrderSnapshot, times: ISO8601Transcoder, clientSecret: String? = nil) throws {
        try object { json in
            try json.object("attributes", order.attributes)
            if let channel = order.channel {
                let state = Components.Schemas.BroadcastChannel.StatePayload(rawValue: channel.state.rawValue) ?? .failed
                json.key("channel")
                json.object { json in
                    json.string("id", channel.id)
                    json.string("reason", channel.reason)
                    json.string("state", state.rawValue)
                    json.string("storage", channel.storage == .none ? "none" : "latest")
                }
            }
            json.string("client_secret", clientSecret)
            try json.object("content", order.content)
            try json.string("created_at", times.encode(order.createdAt))
            json.string("id", order.orderID)
            json.bool("is_final", order.isFinal)
            json.int("seq", order.seq)
            json.string("state", order.state)
            try json.string("state_entered_at", times.encode(order.stateEnteredAt))
            try json.string("updated_at", times.encode(order.updatedAt))
            json.string("workflow", order.workflow)
            json.int("workflow_version", order.workflowVersion)
        }
    }
}

/// Writes one JSON document member by member; the caller gives each object's members in the
/// order they are to appear. An absent optional member is left out, as the generated encoder
/// leaves out a nil.
struct AnswerWriter {
    private(set) var bytes: [UInt8] = []
    private var afterValue = false

    init() {
        bytes.reserveCapacity(1_024)
    }

    /// An object whose members `members` writes.
    mutating func object(_ members: (inout AnswerWriter) throws -> Void) rethrows {
        bytes.append(UInt8(ascii: "{"))
        afterValue = false
        try members(&self)
        bytes.append(UInt8(ascii: "}"))
        afterValue = true
    }

    /// An array whose elements `element` writes, one call each.
    mutating func array<Elements: Sequence>(_ elements: Elements, _ element: (inout AnswerWriter, Elements.Element) throws -> Void) rethrows {
        bytes.append(UInt8(ascii: "["))
        afterValue = false
        for item in elements {
            if afterValue { bytes.append(UInt8(ascii: ",")) }
            afterValue = false
            try element(&self, item)
            afterValue = true
        }
        bytes.append(UInt8(ascii: "]"))
        afterValue = true
    }

    /// A member's name; its value follows.
    mutating func key(_ name: StaticString) {
        if afterValue { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: "\":".utf8)
        afterValue = false
    }

    mutating func string(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        JSONValue.writeString(value, into: &bytes)
        afterValue = true
    }

    mutating func int(_ name: StaticString, _ value: Int) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
        afterValue = true
    }

    mutating func bool(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        afterValue = true
    }

    mutating func value(_ name: StaticString, _ value: JSONValue) {
        key(name)
        value.write(into: &bytes)
        afterValue = true
    }

    /// A member the contract declares an object (``OrderFlowAPI/object(_:)`` checks it).
    mutating func object(_ name: StaticString, _ value: JSONValue) throws {
        self.value(name, try OrderFlowAPI.object(value))
    }
}
