import Foundation
import WorkflowKit

extension Workflow {
    /// The Android data message of a stored rendering: the update the iPhone side pushed,
    /// rebuilt from `order_transitions.rendered`, through
    /// ``Workflow/renderAndroid(_:from:order:attributes:input:previous:)``. The worker sends it
    /// (with the alert and priority of the transitions it merged); the history shows it per
    /// transition. One path, so that what the history shows is what was sent.
    func renderAndroid(_ stored: StoredRendering, alert: ActivityAlert?, priority: Int, previous: StoredRendering?,
                       order: String, attributes: JSONValue, input: JSONValue?) throws -> RenderedAndroidUpdate
    {
        let update = RenderedActivityUpdate(
            event: stored.event, state: stored.state, contentState: stored.content, alert: alert,
            staleDate: stored.staleDate.map { Date(timeIntervalSince1970: TimeInterval($0)) },
            relevanceScore: stored.relevanceScore, priority: priority, dismissal: stored.dismissal,
            timestamp: Date(timeIntervalSince1970: TimeInterval(stored.timestamp)))
        let input = input.flatMap { $0.isNull ? nil : $0 } ?? .object([:])
        return try renderAndroid(update, from: previous?.state, order: order, attributes: attributes, input: input,
                                 previous: previous?.content)
    }
}

extension StoredRendering {
    /// The alert and priority of one message that carries `window` (the transitions it merges,
    /// oldest first): the newest alert among them, and their highest priority — 10 when it
    /// carries an alert. The worker sends by it, and the history shows an Android delivery by it.
    static func androidAlertAndPriority(of window: [StoredRendering], newest: StoredRendering) -> (alert: ActivityAlert?, priority: Int) {
        let alert = window.reversed().lazy.compactMap(\.alert).first
        let highest = window.map(\.priority).max() ?? newest.priority
        return (alert, alert == nil ? highest : max(highest, 10))
    }

    /// How an end is dismissed, read back from the stored `dismissal-date`.
    var dismissal: Dismissal? {
        guard isEnd else { return nil }
        guard let dismissalDate else { return .systemDefault }
        return dismissalDate <= timestamp ? .immediate : .after(WorkflowDuration(seconds: dismissalDate - timestamp))
    }
}
