import Foundation

/// The worker's wall clock, in seconds since 1970: the unit of the times it compares with and
/// writes to the outbox (leases, deferrals, answers, pauses), so one reading serves them all.
enum WorkerClock {
    static func now() -> Double { Date().timeIntervalSince1970 }
}
