import Foundation

/// Date ranges in workflows (`daterange`, an ETA window): two date texts joined by `..` —
/// `+10m..+25m`, `2025-05-01T07:10:00Z..2025-05-01T07:25:00Z`, `now..+20m` — each side what a
/// `date` accepts; `...` (Swift's spelling) reads the same. In the app's JSON a range is
/// `[lower, upper]`, each seconds since 2001-01-01: what Swift's `ClosedRange<Date>` Codable
/// writes and reads with a default encoder and decoder (which refuses lower > upper).
enum DateRangeValues {
    /// The two sides of `a..b` (or `a...b`), trimmed; nil without a separator. No ISO-8601 time
    /// or offset contains `..`, so the first one separates.
    static func split(_ text: String) -> (lower: String, upper: String)? {
        guard let separator = text.range(of: "..") else { return nil }
        var upperStart = separator.upperBound
        if upperStart < text.endIndex, text[upperStart] == "." { upperStart = text.index(after: upperStart) }
        return (String(text[..<separator.lowerBound]).trimmingWhitespace(), String(text[upperStart...]).trimmingWhitespace())
    }

    /// `lower..upper`: the form ranges are written, stored and shown in.
    static func join(_ lower: String, _ upper: String) -> String {
        lower + ".." + upper
    }

    /// True for `a..b` where both sides are date literals (ISO-8601, an offset such as `+15m`, `now`).
    static func isLiteral(_ text: String) -> Bool {
        guard let (lower, upper) = split(text) else { return false }
        return DateValues.isDateLiteral(lower) && DateValues.isDateLiteral(upper)
    }

    /// Both sides resolved (ISO-8601 text, or an offset from `reference`), in the order written.
    static func resolve(_ text: String, relativeTo reference: Date) -> (lower: Date, upper: Date)? {
        guard let (lower, upper) = split(text),
            let lowerDate = DateValues.resolve(lower, relativeTo: reference),
            let upperDate = DateValues.resolve(upper, relativeTo: reference)
        else { return nil }
        return (lowerDate, upperDate)
    }

    /// Whether a literal's upper side lies before its lower side whatever the transition time:
    /// both ISO-8601, or both offsets. (An ISO side against an offset is checked when rendered.)
    static func isInverted(_ text: String) -> Bool {
        guard let (lower, upper) = split(text) else { return false }
        if let lowerDate = DateValues.parseISO8601(lower), let upperDate = DateValues.parseISO8601(upper) {
            return upperDate < lowerDate
        }
        if let lowerOffset = DateValues.parseOffset(lower), let upperOffset = DateValues.parseOffset(upper) {
            return upperOffset < lowerOffset
        }
        return false
    }

    /// `2025-05-01T07:10:00Z..2025-05-01T07:25:00Z`: a range as templates and people read it.
    static func formatISO8601(_ lower: Date, _ upper: Date) -> String {
        join(DateValues.formatISO8601(lower), DateValues.formatISO8601(upper))
    }

    /// The app's JSON representation: `[lower, upper]`, seconds since 2001-01-01 00:00:00 UTC.
    static func appJSON(_ lower: Date, _ upper: Date) -> JSONValue {
        .array([DateValues.appJSON(lower), DateValues.appJSON(upper)])
    }

    /// The bounds of a range already in the app's shape (two numbers), or nil.
    static func appBounds(_ value: JSONValue) -> (lower: Double, upper: Double)? {
        guard let items = value.arrayValue, items.count == 2, let lower = items[0].doubleValue, let upper = items[1].doubleValue,
            lower.isFinite, upper.isFinite
        else { return nil }
        return (lower, upper)
    }

    /// How a range is written, for messages.
    static let example = "\"+10m..+25m\" or \"2025-05-01T07:10:00Z..2025-05-01T07:25:00Z\""
}
