import Foundation
import Timestamps

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

    /// ISO-8601 text with an offset (`2025-05-01T12:00:00Z`, `…+02:00`, fractional seconds
    /// allowed), read by the project's one parser (`Timestamps`), which PostgreSQL's times share.
    static func parseISO8601(_ text: String) -> Date? {
        ISO8601Timestamp.parse(text, zone: .required)?.date
    }

    /// `2025-05-01T12:00:00Z`, or with milliseconds when the date has a fraction of a second.
    static func formatISO8601(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        let whole = seconds.rounded(.down)
        var millis = Int(((seconds - whole) * 1000).rounded())
        var wholeSeconds = Int64(exactly: whole) ?? 0
        if millis == 1000 {
            millis = 0
            wholeSeconds += 1
        }
        return ISO8601Timestamp.format(seconds: wholeSeconds, milliseconds: millis)
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
