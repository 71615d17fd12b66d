import Testing
@testable import PGKit

/// How large a commit group beside another must be (`GroupSizing`). No database, no clock:
/// arrivals and groups are given.
@Suite("Commit group sizes")
struct GroupSizingTests {
    /// Eight callers, two groups of three in flight, a caller arriving with one waiting: the
    /// next group beside waits for four, half of the eight — not three, as the last group was.
    @Test func aGroupBesideAnotherHoldsItsShareOfTheBusyCallers() {
        var sizing = GroupSizing()
        #expect(sizing.besideThreshold(groups: 2, largest: 64) == 2)
        sizing.started(size: 3)
        sizing.started(size: 3)
        sizing.arrival(waiting: 1)
        #expect(sizing.besideThreshold(groups: 2, largest: 64) == 4)
        #expect(sizing.besideThreshold(groups: 3, largest: 64) == 3)
        #expect(sizing.besideThreshold(groups: 1, largest: 64) == 8)
        #expect(sizing.besideThreshold(groups: 2, largest: 3) == 3)
    }

    /// A group larger than the share keeps the old rule: as large as the last group started.
    @Test func neverSmallerThanTheLastGroupStarted() {
        var sizing = GroupSizing()
        sizing.started(size: 6)
        sizing.arrival(waiting: 0)
        #expect(sizing.besideThreshold(groups: 2, largest: 64) == 6)
    }

    /// After a burst of 64 callers, the share falls back once two stretches of arrivals met only
    /// a few callers busy; until then it holds.
    @Test func aBurstIsForgottenAfterTwoStretches() {
        var sizing = GroupSizing()
        sizing.started(size: 40)
        sizing.arrival(waiting: 23)
        sizing.ended(size: 40)
        sizing.started(size: 1)
        #expect(sizing.besideThreshold(groups: 2, largest: 64) == 32)
        for _ in 0..<(GroupSizing.stretch - 1) { sizing.arrival(waiting: 1) }
        #expect(sizing.besideThreshold(groups: 2, largest: 64) == 32)
        for _ in 0..<GroupSizing.stretch { sizing.arrival(waiting: 1) }
        #expect(sizing.besideThreshold(groups: 2, largest: 64) == 32, "the burst's stretch is the previous one")
        sizing.arrival(waiting: 1)
        #expect(sizing.besideThreshold(groups: 2, largest: 64) == 2, "one in flight, one waiting, one arriving: 3 busy")
        #expect(sizing.statementsInFlight == 1)
    }
}
