import Foundation
import Testing
@testable import WorkflowKit

/// The renderer formats and parses dates with civil-date arithmetic instead of `Calendar`
/// (for speed): the two must agree.
@Suite("Date arithmetic")
struct DateArithmeticTests {
    let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    @Test func formattingAgreesWithCalendar() {
        var generator = SystemRandomNumberGenerator()
        // 1600-01-01 … 9999-12-31, plus the edges of leap days and of the epoch.
        var instants: [TimeInterval] = [0, -1, 86_399, 86_400, 951_782_400, 951_868_799, 4_107_542_400, -11_676_096_000]
        for _ in 0..<2_000 { instants.append(TimeInterval(Int64.random(in: -11_676_096_000...253_402_300_799, using: &generator))) }
        for seconds in instants {
            let date = Date(timeIntervalSince1970: seconds)
            let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            let expected = String(format: "%04ld-%02ld-%02ldT%02ld:%02ld:%02ldZ", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
            #expect(DateValues.formatISO8601(date) == expected)
            #expect(DateValues.parseISO8601(expected) == date)
        }
        #expect(DateValues.formatISO8601(Date(timeIntervalSince1970: 1.25)) == "1970-01-01T00:00:01.250Z")
    }

    @Test func parsingRejectsDaysMonthsDoNotHave() {
        #expect(DateValues.parseISO8601("2024-02-29T00:00:00Z") != nil)
        #expect(DateValues.parseISO8601("2025-02-29T00:00:00Z") == nil)
        #expect(DateValues.parseISO8601("2025-04-31T00:00:00Z") == nil)
        #expect(DateValues.parseISO8601("2000-02-29T12:00:00+02:00") == Date(timeIntervalSince1970: 951_818_400))
        #expect(DateValues.parseISO8601("1900-02-29T00:00:00Z") == nil)
        // Before 1582 the calendar is the proleptic Gregorian one, as in PostgreSQL (which stores
        // every date the engine reads), not Foundation's switch to the Julian calendar: the same
        // text names another day there, and 1500-02-29 (a Julian leap day) does not exist.
        #expect(DateValues.parseISO8601("1500-03-01T00:00:00Z") == Date(timeIntervalSince1970: -14_826_672_000))
        #expect(calendar.date(from: DateComponents(year: 1500, month: 3, day: 1)) != Date(timeIntervalSince1970: -14_826_672_000))
        #expect(DateValues.parseISO8601("1500-02-29T00:00:00Z") == nil)
    }

    @Test("the doors' check of a time is the engine's reading of it")
    func doorsAgreeWithTheEngine() {
        let now = Date()
        for text in [
            "2025-05-01T12:00:00Z", "2025-05-01 12:00:00Z", "2025-05-01t12:00:00z", "2025-05-01T12:00:00.5+02:00",
            "2025-05-01T12:00:00+0200", "+15m", "-1h30m", "now", " +15m ",
            "2025-05-01T12:00:00", "2025-02-30T00:00:00Z", "2025-05-01", "15m", "+15", "soon", "", "2025-13-01T00:00:00Z",
        ] {
            #expect(WorkflowTime.isValid(text) == (DateValues.resolve(text, relativeTo: now) != nil), "\(text)")
        }
        #expect(WorkflowTime.isValid("2025-05-01 12:00:00Z") && !WorkflowTime.isValid("2025-02-30T00:00:00Z"))
    }

    @Test func trimmingMatchesFoundation() {
        for text in ["", " ", " a ", "\t\n x y \u{2028}", "\u{A0}b\u{3000}", "plain", "\u{85}c\r\n"] {
            #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(text.trimmingWhitespace(newlines: false) == text.trimmingCharacters(in: .whitespaces))
        }
    }

    @Test func byteCountMatchesSerialization() {
        let values: [JSONValue] = [
            ["b": true, "a": [1, 2.5, "x", nil], "c": ["z": "\"quoted\"\n\u{01}\u{7F}", "y": -3], "d": 1e20],
            ["é": "日本 🍕", "": [], "o": [:], "f": false, "t": "\u{08}\u{0C}\t\r\\/"],
            .double(.nan), .double(3), .int(Int.min),
        ]
        for value in values { #expect(value.jsonByteCount == value.jsonString.utf8.count) }
    }
}
