import Foundation
import Metrics
import WorkflowKit

extension OrderFlowEngine {
    /// Stores a device's push-to-start token for an `ActivityAttributes` type (it may rotate:
    /// the new one replaces the old). Orders the device follows that still wait for an
    /// activity are looked at again. Returns the token as stored (trimmed, lower-case).
    @discardableResult
    public func registerPushToStartToken(deviceID: String, attributesType: String, token: String) async throws -> String {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            try Self.validateIdentifier(attributesType, what: "attributes type")
            let token = try Self.normalizedToken(token)
            try await checkAttributesTypeIsKnown(attributesType)
            try await deviceStore.savePushToStartToken(deviceID: deviceID, attributesType: attributesType, token: token)
            wakeSignal.signal()
            return token
        }
    }

    /// Stores the update token of an activity the app runs for an order (after a push-to-start,
    /// or one the app started itself). Tokens rotate: the newest replaces the old. The device
    /// follows the order from now on, and is sent the order's current state. Returns the token
    /// as stored (trimmed, lower-case).
    @discardableResult
    public func registerActivityToken(orderID: String, deviceID: String, token: String) async throws -> String {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            try Self.validateIdentifier(deviceID, what: "device id")
            let token = try Self.normalizedToken(token)
            try await follow(orderID: orderID, deviceID: deviceID, activityToken: token)
            return token
        }
    }

    /// Stores a device's ordinary APNs device token, used for alert notifications when the
    /// device shows no Live Activity for an order. Returns the token as stored (trimmed,
    /// lower-case).
    @discardableResult
    public func registerDeviceToken(deviceID: String, token: String) async throws -> String {
        try await translatingErrors {
            try Self.validateIdentifier(deviceID, what: "device id")
            let token = try Self.normalizedToken(token)
            try await deviceStore.saveAlertToken(deviceID: deviceID, token: token)
            return token
        }
    }

    /// Makes a device follow an order: it gets its own Live Activity (started by push-to-start
    /// when the workflow says so and the device has a token), or alerts if it cannot show one.
    /// Following twice is harmless.
    public func follow(orderID: String, deviceID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            try Self.validateIdentifier(deviceID, what: "device id")
            try await follow(orderID: orderID, deviceID: deviceID, activityToken: nil)
        }
    }

    /// Records what the customer's app reports of its Live Activity for the order: its state
    /// as ActivityKit gives it, and when it applied the content it shows. A `dismissed` or
    /// `ended` activity is sent nothing more and never push-started again for the order.
    /// Counts, in metrics, how long a transition took from commit to the phone
    /// (`orderflow_commit_to_applied_seconds`), and reports that show the phone had not
    /// applied a push APNs accepted 30 seconds before (`orderflow_app_reports_missing_pushes_total`:
    /// accepted is not shown).
    /// - Throws: `notFound` when the device has no activity for the order (register its token first).
    @discardableResult
    public func reportActivityState(orderID: String, deviceID: String, state: AppActivityState, appliedAt: Date? = nil) async throws -> ActivityInfo {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            try Self.validateIdentifier(deviceID, what: "device id")
            guard let outcome = try await deviceStore.recordAppReport(
                orderID: orderID, deviceID: deviceID, state: state.rawValue, appliedAt: appliedAt)
            else {
                throw OrderFlowError(.notFound,
                    "device \(Self.shown(deviceID)) has no Live Activity for order \(Self.shown(orderID)); register the activity's token first (PUT …/activities/\(Self.shown(deviceID))/token)")
            }
            AppReportMetrics.record(state: state, outcome: outcome, appliedAt: appliedAt)
            return outcome.activity
        }
    }

    /// Stops sending an order's updates to a device.
    public func unfollow(orderID: String, deviceID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(orderID, what: "order id")
            try Self.validateIdentifier(deviceID, what: "device id")
            guard try await deviceStore.removeFollower(orderID: orderID, deviceID: deviceID) else {
                throw OrderFlowError(.notFound, "device \(Self.shown(deviceID)) does not follow order \(Self.shown(orderID)); nothing to undo")
            }
        }
    }

    private func follow(orderID: String, deviceID: String, activityToken: String?) async throws {
        let followed = try await deviceStore.addFollower(orderID: orderID, deviceID: deviceID, activityToken: activityToken)
        guard followed else { throw Self.orderNotFound(orderID) }
        wakeSignal.signal()
    }

    /// A push-to-start token is only of use for an `ActivityAttributes` type some workflow
    /// starts (the names are case-sensitive Swift type names): a typo would store a token no
    /// push ever uses.
    private func checkAttributesTypeIsKnown(_ attributesType: String) async throws {
        var known: Set<String> = []
        for (name, version) in try await workflows.allVersions() {
            known.insert(try await workflows.workflow(named: name, version: version).attributesType)
        }
        guard !known.contains(attributesType) else { return }
        let hint = known.first { $0.lowercased() == attributesType.lowercased() }.map { " (did you mean \($0)?)" } ?? ""
        throw OrderFlowError(
            .notFound,
            "no workflow uses the attributes type \"\(Self.shown(attributesType))\"\(hint); "
                + (known.isEmpty ? "apply a workflow first" : "known types: \(known.sorted().joined(separator: ", "))"),
            candidates: known.sorted())
    }
}

/// What ActivityKit says of an activity (`Activity.activityState`), as the app reports it.
public enum AppActivityState: String, Sendable, Hashable, CaseIterable, Codable {
    case active, stale, ended, dismissed
}

/// The metrics of the apps' reports: what the phone actually shows.
enum AppReportMetrics {
    static func record(state: AppActivityState, outcome: DeviceStore.AppReportOutcome, appliedAt: Date?) {
        Counter(label: "orderflow_app_reports_total", dimensions: [("state", state.rawValue)]).increment()
        if let occurred = outcome.newlyAppliedOccurredAt, let appliedAt {
            Counter(label: "orderflow_pushes_applied_total").increment()
            let seconds = max(0, min(appliedAt, Date()).timeIntervalSince(occurred))
            Metrics.Timer(label: "orderflow_commit_to_applied_seconds").recordSeconds(seconds)
        }
        if outcome.acceptedNotApplied > 0 {
            Counter(label: "orderflow_app_reports_missing_pushes_total").increment()
        }
    }
}
