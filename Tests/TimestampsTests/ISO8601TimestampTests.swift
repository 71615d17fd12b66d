import Foundation
import Testing
import Timestamps

/// The one ISO-8601 reading: PostgreSQL's output, a workflow's dates and the doors' times.
@Suite("ISO-8601 timestamps")
struct ISO8601TimestampTests {
    func seconds(_ text: String, zone: ISO8601Timestamp.Zone = .required) -> Int64? {
        ISO8601Timestamp.parse(text, zone: zone).map { $0.seconds }
    }

    @Test("every form PostgreSQL, workflows and people write reads as the same instant")
    func formsOfOneInstant() {
        let instant: Int64 = 1_746_100_800  // 2025-05-01T12:00:00Z
        for text in [
            "2025-05-01T12:00:00Z", "2025-05-01 12:00:00Z", "2025-05-01t12:00:00z", "2025-05-01T14:00:00+02:00",
            "2025-05-01T14:00:00+0200", "2025-05-01T14:00:00+02", "2025-05-01 12:00:00+00", "2025-05-01T06:30:00-05:30",
            "2025-05-01 14:00:00+02:00:00",
        ] {
            #expect(seconds(text) == instant, "\(text)")
        }
        #expect(seconds("2025-05-01 12:00:00", zone: .optional) == instant, "a timestamp without zone reads as UTC")
    }

    @Test("what is not a time is refused, whatever door it came through")
    func refusals() {
        for text in [
            "2025-05-01T12:00:00", "2025-02-29T00:00:00Z", "2025-04-31T00:00:00Z", "2025-13-01T00:00:00Z",
            "2025-05-01T24:00:00Z", "2025-05-01T12:60:00Z", "2025-05-01T12:00:61Z", "2025-05-01", "2025-05-01T12:00Z",
            "2025-05-01T12:00:00.Z", "2025-05-01T12:00:00+2", "2025-05-01T12:00:00+24:00", "2025-05-01T12:00:00+02:60",
            "2025-05-01T12:00:00Z ", " 2025-05-01T12:00:00Z", "2025-05-01X12:00:00Z", "soon", "", "+15m",
        ] {
            #expect(seconds(text) == nil, "\(text)")
        }
    }

    @Test func fractionsRoundToTheMicrosecondAsPostgreSQLStoresThem() throws {
        let half = try #require(ISO8601Timestamp.parse("2026-11-18 11:06:40.5+00"))
        #expect(half.microseconds == 500_000)
        let rounded = try #require(ISO8601Timestamp.parse("2026-11-18T11:06:40.1234565Z"))
        #expect(rounded.microseconds == 123_457)
        let carried = try #require(ISO8601Timestamp.parse("2026-11-18T11:06:40.9999996Z"))
        #expect(carried.microseconds == 0 && carried.seconds == half.seconds + 1)
    }

    @Test("formatting and parsing agree with each other and with Foundation's Gregorian calendar")
    func roundTrips() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var generator = SystemRandomNumberGenerator()
        // 1600-01-01 … 9999-12-31: where Foundation's calendar is the proleptic Gregorian one too.
        var instants: [Int64] = [0, -1, 86_399, 86_400, 951_782_400, 951_868_799, -11_676_096_000, 253_402_300_799]
        for _ in 0..<2_000 { instants.append(Int64.random(in: -11_676_096_000...253_402_300_799, using: &generator)) }
        for seconds in instants {
            let text = ISO8601Timestamp.format(seconds: seconds)
            let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second],
                                            from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            #expect(text == String(format: "%04ld-%02ld-%02ldT%02ld:%02ld:%02ldZ", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!))
            #expect(self.seconds(text) == seconds, "\(text)")
            let micros = Int64.random(in: 0..<1_000_000, using: &generator)
            let stored = ISO8601Timestamp.formatForPostgres(.init(seconds: seconds, microseconds: micros))
            #expect(ISO8601Timestamp.parse(stored) == .init(seconds: seconds, microseconds: micros), "\(stored)")
        }
        #expect(ISO8601Timestamp.format(seconds: 1, milliseconds: 250) == "1970-01-01T00:00:01.250Z")
        #expect(ISO8601Timestamp.formatForPostgres(.init(seconds: 0, microseconds: 5)) == "1970-01-01 00:00:00.000005+00")
    }

    @Test("before 1582 the calendar stays Gregorian, as PostgreSQL's")
    func prolepticGregorian() {
        #expect(seconds("1500-03-01T00:00:00Z") == -14_826_672_000)
        #expect(seconds("1500-02-29T00:00:00Z") == nil, "a Julian leap day, not a Gregorian one")
        #expect(seconds("0000-01-01T00:00:00Z") == -62_167_219_200)
        #expect(CivilDate(daysSinceEpoch: CivilDate.daysSinceEpoch(year: 1582, month: 10, day: 10)) == CivilDate(year: 1582, month: 10, day: 10))
    }
}
