import Foundation

extension LiveActivityPayload.Event {
    public init(_ event: ActivityEvent) {
        switch event {
        case .start: self = .start
        case .update: self = .update
        case .end: self = .end
        }
    }
}

/// The APNs `event` of a Live Activity push.
public enum ActivityEvent: String, Sendable, Hashable, Codable {
    case start
    case update
    case end
}

/// What one transition shows: everything the sender needs besides tokens and headers.
public struct RenderedActivityUpdate: Sendable, Hashable {
    /// `update`, or `end` when the transition enters a final state.
    public var event: ActivityEvent
    /// The state the order is in after the transition.
    public var state: String
    /// The full ContentState in the app's JSON shape (dates are seconds since 2001-01-01).
    public var contentState: JSONValue
    public var alert: ActivityAlert?
    public var staleDate: Date?
    public var relevanceScore: Double?
    /// 5 or 10 (`apns-priority`).
    public var priority: Int
    /// How the activity is dismissed, for an `end` update.
    public var dismissal: Dismissal?
    /// The transition time; the payload's `timestamp`.
    public var timestamp: Date

    /// An update as rendered earlier and stored, for a sender that renders it again for
    /// another platform (``Workflow/renderAndroid(_:from:order:attributes:input:previous:)``).
    ///
    /// - Parameters:
    ///   - event: `start`, `update` or `end`.
    ///   - state: the state after the transition.
    ///   - contentState: the ContentState, app shape.
    ///   - alert: the alert, if any.
    ///   - staleDate: when the content is stale.
    ///   - relevanceScore: the relevance score.
    ///   - priority: 5 or 10.
    ///   - dismissal: how an `end` is dismissed.
    ///   - timestamp: the transition time.
    public init(event: ActivityEvent, state: String, contentState: JSONValue, alert: ActivityAlert?, staleDate: Date?,
                relevanceScore: Double?, priority: Int, dismissal: Dismissal?, timestamp: Date) {
        self.event = event
        self.state = state
        self.contentState = contentState
        self.alert = alert
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.priority = priority
        self.dismissal = dismissal
        self.timestamp = timestamp
    }

    /// `dismissal-date` for an `end` update.
    public var dismissalDate: Date? {
        guard event == .end else { return nil }
        return dismissal?.dismissalDate(endedAt: timestamp)
    }

    /// The APNs payload of this update, in the format the `APNSCore` module owns.
    public func apnsPayload() -> LiveActivityPayload {
        LiveActivityPayload(
            event: LiveActivityPayload.Event(event), timestamp: timestamp,
            contentState: APNSJSONObject(members: contentState.objectValue ?? [:]), alert: alert.map(LiveActivityAlert.init),
            staleDate: staleDate, dismissalDate: dismissalDate, relevanceScore: relevanceScore)
    }
}

/// A push-to-start: the first update plus the static attributes.
public struct RenderedActivityStart: Sendable, Hashable {
    public var attributesType: String
    /// The static attributes in the app's JSON shape.
    public var attributes: JSONValue
    /// `event == .start`; its alert is the start alert.
    public var update: RenderedActivityUpdate

    /// The APNs payload of the push-to-start, in the format the `APNSCore` module owns.
    public func apnsPayload() -> LiveActivityPayload {
        var payload = update.apnsPayload()
        payload.attributesType = attributesType
        payload.attributes = APNSJSONObject(members: attributes.objectValue ?? [:])
        payload.inputPushToken = true
        return payload
    }
}
