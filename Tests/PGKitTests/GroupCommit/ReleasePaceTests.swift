import Testing
@testable import PGKit

/// The pool's pace under load (`ReleasePace`): the mean interval between connections coming
/// back, over a window of the last intervals. No database, no clock: intervals are given.
@Suite("The pool's pace under load")
struct ReleasePaceTests {
    @Test func tellsNothingUntilItHasSeenEnough() throws {
        var pace = ReleasePace()
        for _ in 0..<(ReleasePace.minimumCount - 1) { pace.add(0.001) }
        #expect(pace.mean == nil)
        pace.add(0.001)
        #expect(abs(try #require(pace.mean) - 0.001) < 1e-12)
    }

    /// A commit group's eight callers let go together, then none for 8 ms: one connection per
    /// millisecond, whichever interval the window starts or ends on (within one burst's worth).
    @Test func burstsCountAsTheStretchTheyCover() throws {
        var pace = ReleasePace()
        var readings: [Double] = []
        for round in 0..<400 {
            for release in 0..<8 {
                pace.add(release == 0 ? 0.008 : 0)
                if round > 150 { readings.append(try #require(pace.mean)) }
            }
        }
        for reading in readings {
            #expect(abs(reading - 0.001) < 0.001 * 8 / Double(ReleasePace.window) + 1e-12, "read \(reading)")
        }
    }

    @Test func followsAChangeOfPaceWithinItsWindow() throws {
        var pace = ReleasePace()
        for _ in 0..<ReleasePace.window { pace.add(0.001) }
        #expect(abs(try #require(pace.mean) - 0.001) < 1e-12)
        for _ in 0..<(ReleasePace.window / 2) { pace.add(0.002) }
        #expect(abs(try #require(pace.mean) - 0.0015) < 1e-12)
        for _ in 0..<(ReleasePace.window / 2) { pace.add(0.002) }
        #expect(abs(try #require(pace.mean) - 0.002) < 1e-12)
    }

    /// One stall (a checkpoint) of 50 ms in a pool serving a caller every 0.5 ms moves the pace
    /// by a tenth, not by half or more as a moving average of a few dozen intervals would.
    @Test func oneStallMovesItLittle() throws {
        var pace = ReleasePace()
        for _ in 0..<ReleasePace.window { pace.add(0.0005) }
        pace.add(0.050)
        let mean = try #require(pace.mean)
        #expect(mean > 0.0005 && mean < 0.0005 * 1.11, "read \(mean)")
    }

    /// The server stood still for 1.5 s (a checkpoint, the machine paused) among intervals of
    /// 0.86 ms: mostly a delay every waiting caller has lived through, not a pace 2.7 times
    /// slower from now on (what the mean of the window would read with it counted whole).
    @Test func aLongStallIsMostlyADelay() throws {
        var pace = ReleasePace()
        for _ in 0..<ReleasePace.window { pace.add(0.000_86) }
        pace.add(1.5)
        let mean = try #require(pace.mean)
        #expect(mean < 0.000_86 * 1.3, "read \(mean)")
        // A slower pace is followed, though: three times slower within a window.
        for _ in 0..<ReleasePace.window { pace.add(0.000_86 * 3) }
        #expect(abs(try #require(pace.mean) - 0.000_86 * 3) < 1e-9)
    }

    @Test func staysExactOverMillionsOfIntervals() throws {
        var pace = ReleasePace()
        // Intervals that are not exact in binary, added and taken away millions of times.
        for index in 0..<3_000_000 { pace.add(index % 3 == 0 ? 0.0001 : 0.0007) }
        let mean = try #require(pace.mean)
        // The window holds (about) a third of 0.1 ms and two thirds of 0.7 ms.
        #expect(abs(mean - 0.0005) < 0.000_001, "read \(mean)")
    }

    @Test func aClockGoingBackCountsAsNoTime() throws {
        var pace = ReleasePace()
        for _ in 0..<ReleasePace.minimumCount { pace.add(0.001) }
        pace.add(-5)
        let mean = try #require(pace.mean)
        #expect(mean > 0 && mean <= 0.001)
    }
}
