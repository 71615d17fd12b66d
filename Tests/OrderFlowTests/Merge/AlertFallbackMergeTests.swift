import Foundation
@testable import OrderFlow
import OrderFlowTesting
import Testing
import WorkflowKit

/// When a device's alerts fall back to its ordinary token, and which alert goes: the merge rules
/// alone (the worker against PostgreSQL and the stand-in: `WorkerAlertFallbackTests`).
@Suite("Worker: merge rules of the ordinary-alert fallback")
struct AlertFallbackMergeTests {
    typealias M = WorkerMergeTests
    static let alertToken = "0123456789abcdef"
    static let ownType = ["FoodOrderAttributes": "abcdef0123456789"]

    static func waiting(pushToStart: [String: String]?, alertToken: String? = alertToken, lastSeq: Int = 1) -> OutboxActivity {
        M.activity(status: "waiting", token: nil, lastSeq: lastSeq, pushToStart: pushToStart, alertToken: alertToken)
    }

    @Test func pushToStartTokensForOtherTypesFallBackToTheDeviceToken() throws {
        let device = Self.waiting(pushToStart: ["TickerAttributes": "abcdef0123456789"])
        let order = try M.order([("in_progress", [:]), ("ready", [:])], device: device)
        let plan = M.merge().plan(order: order, workflow: M.workflow, activity: device)
        #expect(plan.pushes.map(\.event) == [.alert])
        #expect(plan.pushes.first?.token == Self.alertToken)
        #expect(plan.state.status == .alerts)
    }

    /// A push-to-start token for the workflow's own type is of no use when the workflow starts
    /// by the app, or once the order is final (no start is sent to show a finished order).
    @Test func anOwnTypeTokenThatCannotStartAnythingFallsBackToo() throws {
        var appStarted = M.workflow
        appStarted.lifecycle.start = .app
        let device = Self.waiting(pushToStart: Self.ownType)
        let ready = try M.order([("in_progress", [:]), ("ready", [:])], device: device)
        let appPlan = M.merge().plan(order: ready, workflow: appStarted, activity: device)
        #expect(appPlan.pushes.map(\.alertTitle) == ["Order 1042 is ready"])

        let cancelled = try M.order([("in_progress", [:]), ("cancelled", [:])], device: device)
        let finalPlan = M.merge().plan(order: cancelled, workflow: M.workflow, activity: device)
        #expect(finalPlan.pushes.map(\.event) == [.alert], "no start for a cancelled order, but its alert")
        #expect(finalPlan.pushes.first?.tokenKind == .device)

        // While the order is live the token starts the activity, which carries the alert.
        let startPlan = M.merge().plan(order: ready, workflow: M.workflow, activity: device)
        #expect(startPlan.pushes.map(\.event) == [.start])
    }

    @Test func startingEndedAndGoneActivitiesGetNoOrdinaryAlert() throws {
        for status in ["starting", "ended", "gone"] {
            let device = M.activity(status: status, token: nil, lastSeq: 1, pushToStart: Self.ownType, alertToken: Self.alertToken)
            let order = try M.order([("in_progress", [:]), ("cancelled", [:])], device: device)
            let plan = M.merge().plan(order: order, workflow: M.workflow, activity: device)
            #expect(plan.pushes.isEmpty, "\(status)")
        }
    }

    /// In a final state only the end's own alert goes; an older one would arrive after the end.
    @Test func aFinalStateSendsOnlyItsOwnAlert() throws {
        let device = Self.waiting(pushToStart: nil)
        let pickedUp = try M.order([("in_progress", [:]), ("ready", [:]), ("picked_up", [:])], device: device)
        let plan = M.merge().plan(order: pickedUp, workflow: M.workflow, activity: device)
        #expect(plan.pushes.isEmpty)
        #expect(plan.state.lastSeq == 4, "nothing is left pending")

        let dispatched = try M.order([("in_progress", [:]), ("ready", [:]), ("out_for_delivery", ["eta": "+10m"])], device: device)
        let live = M.merge().plan(order: dispatched, workflow: M.workflow, activity: device)
        #expect(live.pushes.map(\.alertTitle) == ["On the way"])
        #expect(live.pushes.first?.merged == 2)
    }

    /// A refused push-to-start token: the device is looked at again at once (without it).
    @Test func aDeadPushToStartTokenRevisitsAtOnce() throws {
        let device = Self.waiting(pushToStart: Self.ownType, lastSeq: 0)
        let order = try M.order([("in_progress", [:])], device: device)
        let plan = M.merge().plan(order: order, workflow: M.workflow, activity: device)
        #expect(plan.pushes.map(\.event) == [.start])
        let now = M.t0.timeIntervalSince1970 + 5
        let outcome = ActivityOutcome(
            plan: plan, attempts: [.failed(status: 410, reason: "Unregistered", action: .tokenDead, apnsID: nil, answeredAt: now)],
            configuration: WorkerConfiguration(bundleID: "x"))
        #expect(outcome.deadPushToStartToken == "abcdef0123456789")
        #expect(outcome.revisitAt == now)
        #expect(outcome.state.status == .waiting)
    }
}
