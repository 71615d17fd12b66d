import Foundation
import WorkflowKit

// MARK: - Timers
extension OrderFlowEngine {
    /// Fires every workflow timer that is due ("after 45m in ready, go to cancelled"), exactly
    /// once each: a timer's transition carries the idempotency key of the state visit it ends,
    /// and expects the order still to be in that state. Timers whose time passed while no
    /// process ran fire now. Returns how many transitions fired.
    @discardableResult
    public func fireDueTimers(now: Date = Date(), limit: Int = 500) async throws -> Int {
        var fired = 0
        for (name, version) in try await workflows.allVersions() {
            let workflow = try await workflows.workflow(named: name, version: version)
            for timer in workflow.timers {
                guard case .transition(let target) = timer.action else { continue }
                let dueBefore = now.addingTimeInterval(-TimeInterval(timer.after.seconds))
                let due = try await orderStore.ordersDueForTimer(
                    workflow: name, version: version, state: timer.state, dueBefore: dueBefore, limit: limit)
                for (orderID, seq) in due {
                    do {
                        let result = try await advance(
                            orderID, to: target, idempotencyKey: "timer:\(timer.state):\(seq)",
                            expectedState: timer.state, actor: "timer")
                        if !result.replayed { fired += 1 }
                    } catch let error as OrderFlowError where error.code == .conflict || error.code == .invalidTransition {
                        continue  // someone moved the order first: the timer no longer applies
                    }
                }
            }
        }
        return fired
    }

    /// Fires due timers, as ``fireDueTimers(now:limit:)`` does, for every merchant of
    /// `merchants` that has workflows. Returns how many transitions fired.
    @discardableResult
    public func fireDueTimers(for merchants: MerchantScope, now: Date = Date(), limit: Int = 500) async throws -> Int {
        var fired = 0
        for merchantID in try await workflows.merchantIDs(in: merchants) {
            fired += try await forMerchant(merchantID).fireDueTimers(now: now, limit: limit)
        }
        return fired
    }
}
