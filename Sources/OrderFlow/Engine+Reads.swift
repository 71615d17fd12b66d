import Foundation
import WorkflowKit

extension OrderFlowEngine {
    /// An order with each device's activity.
    public func order(_ orderID: String) async throws -> OrderDetails {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            let rows = try await orderStore.details(orderID: orderID)
            guard let first = rows.first else { throw Self.orderNotFound(orderID) }
            let activities = try rows.filter { row in try !row.isNull("device_id") }.map(ActivityInfo.init(row:))
            return OrderDetails(order: try await orderSnapshot(row: first), activities: activities,
                                pendingCommands: try first.decode("pending", as: Int.self))
        }
    }

    /// Every transition of an order and every push attempt made for it. Where an Android phone
    /// follows the order or was sent to, each transition carries the Android data message it
    /// renders; other orders' transitions have none (rendering it costs a template pass per
    /// transition that no one reads).
    public func history(_ orderID: String) async throws -> OrderHistory {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            let snapshot = try await orderSnapshot(orderID)
            let stored = try await orderStore.transitions(orderID: orderID)
            var transitions = stored.transitions
            var deliveries = try await orderStore.deliveries(orderID: orderID)
            let workflow = try await workflow(of: snapshot)
            // A phone that unfollowed (or whose device was forgotten) was followed on Android if
            // it was sent to: its deliveries say so.
            if stored.followedOnAndroid || deliveries.contains(where: { $0.platform == "android" }) {
                for index in transitions.indices {
                    transitions[index].android = Self.android(of: transitions[index], after: index > 0 ? transitions[index - 1] : nil,
                                                              order: snapshot, workflow: workflow)
                }
            }
            for index in deliveries.indices where deliveries[index].platform == "android" {
                deliveries[index].android = Self.android(of: deliveries[index], transitions: transitions, order: snapshot, workflow: workflow)
            }
            return OrderHistory(order: snapshot, transitions: transitions, deliveries: deliveries)
        }
    }

    /// The data message the worker sends an Android phone for `transition` alone, rendered from
    /// the stored rendering as the worker renders it: a redacted order's from its redactions.
    /// Nil when it cannot be rendered (the worker recorded that delivery as a dead letter).
    static func android(of transition: TransitionRecord, after previous: TransitionRecord?, order: OrderSnapshot,
                        workflow: Workflow) -> [String: String]?
    {
        let stored = transition.rendered
        return try? workflow.renderAndroid(
            stored, alert: stored.alert, priority: stored.priority, previous: previous?.rendered, order: order.orderID,
            attributes: order.attributes, input: transition.input).data
    }

    /// The data message of one Android delivery as the worker made it: the newest transition it
    /// carried, with the newest alert and the highest priority of the transitions it merged.
    static func android(of delivery: DeliveryRecord, transitions: [TransitionRecord], order: OrderSnapshot,
                        workflow: Workflow) -> [String: String]?
    {
        let window = transitions.filter { $0.seq > delivery.seq - max(delivery.merged, 1) && $0.seq <= delivery.seq }
        guard let newest = window.last else { return nil }
        let (alert, priority) = StoredRendering.androidAlertAndPriority(of: window.map(\.rendered), newest: newest.rendered)
        let previous = transitions.last { $0.seq < newest.seq }
        return try? workflow.renderAndroid(
            newest.rendered, alert: alert, priority: priority, previous: previous?.rendered, order: order.orderID,
            attributes: order.attributes, input: newest.input).data
    }

    /// Orders filtered by workflow and state, in order-id order, a page at a time.
    public func orders(_ query: OrderQuery = OrderQuery()) async throws -> OrderPage {
        try await translatingErrors {
            try Self.validateIdentifier(query.workflow, what: "workflow name")
            try Self.validateIdentifier(query.state, what: "state name")
            // The engine's own output, an order id: it may predate the id policy.
            if let after = query.after { try Self.validateStoredIdentifier(after, what: "page cursor") }
            try await checkFilters(query)
            let rows = try await orderStore.orderPage(workflow: query.workflow, state: query.state, after: query.after, limit: query.limit)
            var summaries: [OrderSummary] = []
            for row in rows.prefix(query.limit) {
                let workflow = try await workflows.workflow(
                    named: try row.decode("workflow_name"), version: try row.decode("workflow_version"))
                summaries.append(OrderSummary(
                    order: try OrderSnapshot(row: row, finalStates: workflow.finalStates),
                    activityStatuses: try row.decode("statuses", as: [String].self)))
            }
            let next = rows.count > query.limit ? summaries.last?.order.orderID : nil
            return OrderPage(orders: summaries, nextCursor: next)
        }
    }

    /// Push attempts, newest first; `failedOnly` lists the dead letters not yet retried.
    public func deliveries(failedOnly: Bool = false, limit: Int = 100) async throws -> [DeliveryRecord] {
        try await translatingErrors {
            try await orderStore.recentDeliveries(failedOnly: failedOnly, limit: min(max(1, limit), 10_000))
        }
    }

    /// Re-queues a dead letter: the device's activity is sent the order's current state again.
    public func retryDelivery(id: Int64) async throws {
        try await translatingErrors {
            switch try await orderStore.requeueDeadLetter(id: id) {
            case .requeued:
                break
            case .notDeadLetter:
                throw OrderFlowError(.notFound, "delivery \(id) is not a dead letter waiting for a retry (it went through, or was retried already)", remedy: .listDeadLetters)
            case .notFound:
                throw OrderFlowError(.notFound, "delivery \(id) does not exist", remedy: .findDeadLetterIDs)
            }
            wakeSignal.signal()
        }
    }

    /// A filter naming no workflow or state that exists is a mistake to name, not an empty page.
    private func checkFilters(_ query: OrderQuery) async throws {
        guard query.workflow != nil || query.state != nil else { return }
        let versions = try await workflows.allVersions()
        let names = Set(versions.map(\.0)).sorted()
        if let wanted = query.workflow, !names.contains(wanted) {
            throw OrderFlowError(
                .invalidInput,
                "no workflow is named \"\(Self.shown(wanted))\"\(didYouMean(wanted, in: names)); workflows: \(names.isEmpty ? "none applied yet" : names.joined(separator: ", "))",
                candidates: names)
        }
        guard let wanted = query.state else { return }
        var states: [String] = []
        for (name, version) in versions where query.workflow == nil || query.workflow == name {
            for state in try await workflows.workflow(named: name, version: version).states.map(\.name) where !states.contains(state) {
                states.append(state)
            }
        }
        guard !states.contains(wanted) else { return }
        let scope = query.workflow.map { "workflow \($0)" } ?? "any workflow"
        throw OrderFlowError(
            .invalidInput,
            "\(scope) has no state \"\(Self.shown(wanted))\"\(didYouMean(wanted, in: states)); states: \(states.joined(separator: ", "))",
            candidates: states)
    }
}
