import APNS
import Foundation
import WorkflowKit

// MARK: - The engine's own transition rule, beside the workflow's

extension OrderFlowEngine {
    // MARK: Push-to-start size

    /// A push-to-start sent to a device that follows the order later, in `state`, carries the
    /// order's content plus its attributes and the start alert: refuse a transition whose push
    /// would be over APNs' limit, before it is committed. The part besides the content is the
    /// same for every state of an order (but for a stale date and a relevance score), so it is
    /// measured once per order and the exact rendering is done only near the limit.
    func checkPushToStartFits(
        orderID: String, workflow: Workflow, state: String, known: inout OrderCache.Entry, content: PostgresJSONText, at time: Date
    ) throws {
        guard workflow.startsByPush, state != workflow.initialState, !workflow.isFinal(state) else { return }
        do {
            let overhead: Int
            if let measured = known.startOverhead {
                overhead = measured
            } else {
                overhead = try workflow.renderStart(in: state, attributes: known.attributes, input: [:], previous: [:], at: time)
                    .bytesBesidesContent
                known.startOverhead = overhead
            }
            // A stale date and a relevance score add at most this much in another state.
            let stateKeys = 64
            guard overhead + content.byteCount + stateKeys > APNSLimits.maximumPayloadSize else { return }
            _ = try workflow.renderStart(in: state, attributes: known.attributes, input: [:], previous: content.value, at: time)
        } catch let error as RenderError where error.code == .payloadTooLarge {
            throw OrderFlowError(
                .invalidInput,
                "order \(Self.shown(orderID)) cannot go to \(state): a device that starts its Live Activity there would be sent a push-to-start over APNs' \(APNSLimits.maximumPayloadSize)-byte limit (the order's attributes, the start alert and this content together); shorten the text values given")
        }
    }
}

extension RenderedActivityStart {
    /// The payload's bytes besides the content state: attributes, start alert, dates. Measured
    /// at creation (or on an order's first keyless advance) and kept in the order cache.
    var bytesBesidesContent: Int { apnsPayload().encodedSize - update.contentState.jsonByteCount }
}

/// A rendered ContentState with its JSON text, measured once.
struct PostgresJSONText {
    let value: JSONValue
    let text: String
    var byteCount: Int { text.utf8.count }

    init(_ value: JSONValue) {
        self.value = value
        self.text = value.jsonString
    }
}

extension Workflow {
    /// Whether the server may start the activity by push: at creation, for a device that
    /// follows later, or to restart it at the 8-hour limit.
    var startsByPush: Bool {
        lifecycle.start == .pushToStart || lifecycle.onTimeLimit == .restart
    }
}

extension Audience {
    /// A new broadcast order's channel: the worker creates it after the commit.
    var pendingChannel: BroadcastChannelInfo? {
        guard case .broadcast(let storage) = self else { return nil }
        return BroadcastChannelInfo(id: nil, state: .pending, storage: storage, reason: nil)
    }

    /// `order_channels.storage_policy` (APNs' `message-storage-policy`); nil for per-device orders.
    var storagePolicy: Int? {
        switch self {
        case .perDevice: nil
        case .broadcast(.none): 0
        case .broadcast(.latest): 1
        }
    }
}
