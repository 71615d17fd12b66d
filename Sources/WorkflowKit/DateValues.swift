import Foundation

/// Date text in workflows: ISO-8601 times, offsets from the transition time (`+15m`, `-1h`), and
/// `now`. Dates in the app's JSON are seconds since 2001-01-01 (what Swift's default
/// `JSONDecoder` expects for `Date`).
enum DateValues {
    /// True for ISO-8601 text, an offset such as `+15m`, or `now`.
    static func isDateLiteral(_ text: String) -> Bool {
        parseISO8601(text) != nil || parseOffset(text) != nil
    }

    /// Resolves ISO-8601 text, an offset from `reference`, or `now`.
    static func resolve(_ text: String, relativeTo reference: Date) -> Date? {
        let trimmed = text.trimmingWhitespace(newlines: false)
        if let date = parseISO8601(trimmed) { return date }
        if let offset = parseOffset(trimmed) { return reference.addingTimeInterval(offset) }
        return nil
    }

    /// `now`, `+15m`, `-1h30m`, `+90s`; the offset in seconds.
    static func parseOffset(_ text: String) -> TimeInterval? {
        if text == "now" { return 0 }
        guard let sign = text.first, sign == "+" || sign == "-",
            let duration = WorkflowDuration(parsing: String(text.dropFirst()))
        else { return nil }
        return sign == "+" ? duration.timeInterval : -duration.timeInterval
    }

    private static let utc = TimeZone(identifier: "UTC")!

    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        return calendar
    }()

    /// Years for which the arithmetic below agrees with `calendar` (which switches to the Julian
    /// calendar before October 1582). Every render formats and parses dates, and `Calendar`'s
    /// component conversions cost more than the rest of the rendering: in this range they are
    /// computed directly; outside it `calendar` is asked.
    private static let arithmeticYears = 1600...9999

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day since 1970-01-01 (H. Hinnant's `civil_from_days`).
    static func civilDate(daysSinceEpoch days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// `2025-05-01T12:00:00Z`, with optional fractional seconds and a `Z`, `±hh:mm` or `±hhmm`
    /// offset; a space may stand for the `T`.
    static func parseISO8601(_ text: String) -> Date? {
        let s = Array(text.utf8)
        var i = 0
        func number(_ count: Int) -> Int? {
            guard i + count <= s.count else { return nil }
            var value = 0
            for byte in s[i..<(i + count)] {
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            i += count
            return value
        }
        func expect(_ char: UInt8) -> Bool {
            guard i < s.count, s[i] == char else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(45), let month = number(2), expect(45), let day = number(2) else { return nil }
        guard i < s.count, s[i] == 84 || s[i] == 116 || s[i] == 32 else { return nil }
        i += 1
        guard let hour = number(2), expect(58), let minute = number(2), expect(58), let second = number(2) else { return nil }
        var fraction = 0.0
        if expect(46) {
            var scale = 0.1
            var digits = 0
            while i < s.count, s[i] >= 48 && s[i] <= 57 {
                fraction += Double(s[i] - 48) * scale
                scale /= 10
                i += 1
                digits += 1
            }
            guard digits > 0 else { return nil }
        }
        var offsetSeconds = 0
        guard i < s.count else { return nil }
        if s[i] == 90 || s[i] == 122 {
            i += 1
        } else if s[i] == 43 || s[i] == 45 {
            let negative = s[i] == 45
            i += 1
            guard let hours = number(2) else { return nil }
            _ = expect(58)
            guard let minutes = number(2) else { return nil }
            offsetSeconds = (hours * 3600 + minutes * 60) * (negative ? -1 : 1)
        } else {
            return nil
        }
        guard i == s.count, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else {
            return nil
        }
        let date: Date
        if arithmeticYears.contains(year) {
            let days = daysSinceEpoch(year: year, month: month, day: day)
            guard civilDate(daysSinceEpoch: days).day == day else { return nil }  // 31 April, 29 February 2025
            date = Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
        } else {
            let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            guard let calendarDate = calendar.date(from: components),
                calendar.component(.day, from: calendarDate) == day
            else { return nil }
            date = calendarDate
        }
        return date.addingTimeInterval(fraction - TimeInterval(offsetSeconds))
    }

    /// `2025-05-01T12:00:00Z`, or with milliseconds when the date has a fraction of a second.
    static func formatISO8601(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        let whole = seconds.rounded(.down)
        var millis = Int(((seconds - whole) * 1000).rounded())
        var base = Date(timeIntervalSince1970: whole)
        if millis == 1000 {
            millis = 0
            base = base.addingTimeInterval(1)
        }
        let c: (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int)
        let wholeSeconds = Int(exactly: base.timeIntervalSince1970) ?? 0
        let days = wholeSeconds >= 0 ? wholeSeconds / 86_400 : (wholeSeconds - 86_399) / 86_400
        let civil = civilDate(daysSinceEpoch: days)
        if arithmeticYears.contains(civil.year) {
            let secondOfDay = wholeSeconds - days * 86_400
            c = (civil.year, civil.month, civil.day, secondOfDay / 3600, secondOfDay % 3600 / 60, secondOfDay % 60)
        } else {
            let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: base)
            c = (parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!, parts.second!)
        }
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        var text = "\(pad(c.year, 4))-\(pad(c.month, 2))-\(pad(c.day, 2))T\(pad(c.hour, 2)):\(pad(c.minute, 2)):\(pad(c.second, 2))"
        if millis > 0 { text += "." + pad(millis, 3) }
        return text + "Z"
    }

    /// The app's JSON representation of a date: seconds since 2001-01-01 00:00:00 UTC.
    static func appJSON(_ date: Date) -> JSONValue {
        .double(date.timeIntervalSinceReferenceDate)
    }
}

/// The times a workflow's `date` fields and transition inputs accept, for the doors in front of
/// the engine (the CLI, an HTTP API): asking here, they can never accept a time the engine
/// refuses, or the reverse.
public enum WorkflowTime {
    /// Whether the engine takes `text` as a time: ISO-8601 with a zone (`2025-05-01T12:00:00Z`,
    /// `…+02:00`, fractional seconds allowed), an offset (`+15m`, `-1h30m`) or `now`.
    public static func isValid(_ text: String) -> Bool {
        DateValues.isDateLiteral(text.trimmingWhitespace(newlines: false))
    }
}

extension String {
    /// `trimmingCharacters(in: .whitespacesAndNewlines)` (or `.whitespaces`), without the round
    /// trip through `NSString`: the renderer trims every value it converts. Both sets are the
    /// Unicode White_Space scalars; `.whitespaces` leaves out the line and paragraph breaks.
    func trimmingWhitespace(newlines: Bool = true) -> String {
        func isTrimmed(_ scalar: Unicode.Scalar) -> Bool {
            guard scalar.properties.isWhitespace else { return false }
            if newlines { return true }
            return !(("\u{0A}"..."\u{0D}").contains(scalar) || scalar == "\u{85}" || scalar == "\u{2028}" || scalar == "\u{2029}")
        }
        // The usual case, nothing to trim, decided from the first and last bytes alone.
        if let head = utf8.first, let tail = utf8.last, (0x21..<0x7F).contains(head), (0x21..<0x7F).contains(tail) {
            return self
        }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isTrimmed($0) })!
        if first == scalars.startIndex && scalars.index(after: last) == scalars.endIndex { return self }
        return String(scalars[first...last])
    }
}
