import Crypto
import APNSCore
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// Faults a test injects: answers the stand-in gives instead of accepting, by device or for every request.
extension LocalAPNSCore {
    struct FaultRule: Sendable {
        var fault: LocalAPNSFault
        var deviceToken: String?
        var remaining: Int?
        var until: ContinuousClock.Instant?
        /// Answers only this fraction of the matching requests, chosen at random; nil: all.
        var fraction: Double?
    }

    struct FaultState {
        var rules: [FaultRule] = []
        var delay: Duration?
    }

    func addFault(_ fault: LocalAPNSFault, deviceToken: String?, count: Int?, duration: Duration?, fraction: Double? = nil) {
        let rule = FaultRule(
            fault: fault,
            deviceToken: deviceToken,
            remaining: count,
            until: duration.map { ContinuousClock.now + $0 },
            fraction: fraction
        )
        self.faults.withLock { $0.rules.append(rule) }
    }

    func setDelay(_ delay: Duration?) {
        self.faults.withLock { $0.delay = delay }
    }

    func clearFaults() {
        self.faults.withLock { $0 = FaultState() }
    }

    /// The fault to answer with, if any (rules for this token before rules for every token, in
    /// the order they were added), and the delay to apply.
    func takeFault(forToken deviceToken: String) -> (LocalAPNSFault?, Duration?) {
        self.faults.withLock { state in
            if state.rules.isEmpty { return (nil, state.delay) }
            let now = ContinuousClock.now
            state.rules.removeAll { rule in
                rule.remaining.map { $0 <= 0 } ?? false || rule.until.map { $0 <= now } ?? false
            }
            let index =
                state.rules.firstIndex { $0.deviceToken == deviceToken }
                ?? state.rules.firstIndex { $0.deviceToken == nil }
            guard let index else { return (nil, state.delay) }
            if let fraction = state.rules[index].fraction, Double.random(in: 0..<1) >= fraction { return (nil, state.delay) }
            let fault = state.rules[index].fault
            if let remaining = state.rules[index].remaining {
                state.rules[index].remaining = remaining - 1
            }
            return (fault, state.delay)
        }
    }
}
