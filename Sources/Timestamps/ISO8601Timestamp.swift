import Foundation

/// The one reading of ISO-8601 date-times in OrderFlow, and the civil-date arithmetic behind it.
///
/// PostgreSQL's `timestamptz` output (`2026-11-22 13:07:22.5+00`), a workflow's dates
/// (`2025-05-01T12:00:00Z`) and the times the CLI and the HTTP API take all go through
/// ``parse(_:zone:)``, so no door can accept a time the engine refuses, or the reverse.
///
/// Hand-written rather than `ISO8601DateFormatter` or `Date.ISO8601FormatStyle`: every row the
/// engine reads and every render parses one, and those cost several microseconds each; and, as
/// PostgreSQL does, the calendar here is the proleptic Gregorian one for every year (Foundation's
/// `Calendar` switches to the Julian calendar before October 1582).
public enum ISO8601Timestamp {
    /// Whether a UTC offset must be given.
    public enum Zone: Sendable {
        /// `Z`, `+02:00`, `+0200` or `+02` (and `+02:00:00`) required: a time a person or an app
        /// gives means one instant only with it.
        case required
        /// No offset reads as UTC: PostgreSQL's `timestamp` (without time zone) output.
        case optional
    }

    /// An instant as whole seconds since 1970-01-01 UTC and microseconds (0 ..< 1,000,000): the
    /// precision of PostgreSQL's `timestamptz`.
    public struct Instant: Sendable, Hashable {
        public var seconds: Int64
        public var microseconds: Int64

        public init(seconds: Int64, microseconds: Int64) {
            self.seconds = seconds
            self.microseconds = microseconds
        }

        /// `date` rounded to the nearest microsecond, as PostgreSQL stores it.
        public init(_ date: Date) {
            let totalMicros = (date.timeIntervalSince1970 * 1_000_000).rounded()
            var seconds = Int64((totalMicros / 1_000_000).rounded(.down))
            var micros = Int64(totalMicros - Double(seconds) * 1_000_000)
            if micros < 0 { micros += 1_000_000; seconds -= 1 }
            if micros >= 1_000_000 { micros -= 1_000_000; seconds += 1 }
            self.init(seconds: seconds, microseconds: micros)
        }

        /// The one way a `Date` is made from an instant: parsing and `Instant(date).date` agree
        /// to the last bit.
        public var date: Date {
            Date(timeIntervalSince1970: Double(seconds) + Double(microseconds) / 1_000_000)
        }
    }

    /// Reads `YYYY-MM-DD`, `T`, `t` or a space, `HH:MM:SS`, optional fractional seconds (rounded
    /// to the microsecond, as PostgreSQL stores them), then `Z`/`z` or an offset `±HH`, `±HH:MM`,
    /// `±HHMM`, `±HH:MM:SS`. Refuses days a month does not have, hours past 23, minutes past 59
    /// and seconds past 60 (a leap second reads as the next minute's first).
    public static func parse(_ text: String, zone: Zone = .required) -> Instant? {
        var text = text
        return text.withUTF8 { parse(bytes: $0, zone: zone) }
    }

    static func parse(bytes s: UnsafeBufferPointer<UInt8>, zone: Zone) -> Instant? {
        var i = 0
        func number(_ count: Int) -> Int? {
            guard i + count <= s.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let byte = s[i]
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
                i += 1
            }
            return value
        }
        func expect(_ byte: UInt8) -> Bool {
            guard i < s.count, s[i] == byte else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D), let day = number(2),
            expect(0x54) || expect(0x74) || expect(0x20),
            let hour = number(2), expect(0x3A), let minute = number(2), expect(0x3A), let second = number(2)
        else { return nil }
        var micros: Int64 = 0
        if expect(0x2E) {
            var digits = 0
            var roundUp = false
            while i < s.count, s[i] >= 48, s[i] <= 57 {
                if digits < 6 {
                    micros = micros * 10 + Int64(s[i] - 48)
                } else if digits == 6 {
                    roundUp = s[i] >= 53
                }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 6)..<6 { micros *= 10 }
            if roundUp { micros += 1 }
        }
        var offsetSeconds = 0
        if i == s.count {
            guard case .optional = zone else { return nil }
        } else if expect(0x5A) || expect(0x7A) {
            // UTC
        } else if s[i] == 0x2B || s[i] == 0x2D {
            let sign = s[i] == 0x2D ? -1 : 1
            i += 1
            guard let hours = number(2), hours < 24 else { return nil }
            var minutes = 0
            var seconds = 0
            if i < s.count {
                let colon = expect(0x3A)
                guard let m = number(2), m < 60 else { return nil }
                minutes = m
                if colon, expect(0x3A) {
                    guard let sec = number(2), sec < 60 else { return nil }
                    seconds = sec
                }
            }
            offsetSeconds = sign * (hours * 3600 + minutes * 60 + seconds)
        } else {
            return nil
        }
        guard i == s.count, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60 else {
            return nil
        }
        let days = CivilDate.daysSinceEpoch(year: year, month: month, day: day)
        guard CivilDate(daysSinceEpoch: days).day == day else { return nil }  // 31 April, 29 February 2025
        var wholeSeconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second - offsetSeconds)
        if micros == 1_000_000 {
            micros = 0
            wholeSeconds += 1
        }
        return Instant(seconds: wholeSeconds, microseconds: micros)
    }

    /// `2025-05-01T12:00:00Z`, with `.123` milliseconds when `milliseconds` is not 0: the form
    /// of every time OrderFlow shows or renders for people and apps.
    public static func format(seconds: Int64, milliseconds: Int = 0) -> String {
        let (date, secondOfDay) = CivilDate.split(seconds)
        let fraction = milliseconds > 0 ? (value: milliseconds, digits: 3) : nil
        return write(date, separator: UInt8(ascii: "T"), secondOfDay: secondOfDay, fraction: fraction, zone: "Z")
    }

    /// `2026-11-22 13:07:22.500000+00`: what PostgreSQL parses exactly into a `timestamptz`.
    public static func formatForPostgres(_ instant: Instant) -> String {
        let (date, secondOfDay) = CivilDate.split(instant.seconds)
        return write(date, separator: UInt8(ascii: " "), secondOfDay: secondOfDay,
                     fraction: (Int(instant.microseconds), 6), zone: "+00")
    }

    /// Written byte by byte into the string's own storage: every advance binds a time and every
    /// render formats several.
    private static func write(
        _ date: CivilDate, separator: UInt8, secondOfDay: Int, fraction: (value: Int, digits: Int)?, zone: StaticString
    ) -> String {
        // Years past four digits (which no order reaches) get a sign and as many digits as they need.
        let yearDigits = max(4, String(abs(date.year)).utf8.count) + (date.year < 0 ? 1 : 0)
        let capacity = yearDigits + 15 + (fraction.map { $0.digits + 1 } ?? 0) + zone.utf8CodeUnitCount
        return String(unsafeUninitializedCapacity: capacity) { buffer in
            var index = 0
            func put(_ value: Int, digits: Int) {
                var value = value
                for position in stride(from: index + digits - 1, through: index, by: -1) {
                    buffer[position] = UInt8(48 + value % 10)
                    value /= 10
                }
                index += digits
            }
            func put(_ byte: UInt8) {
                buffer[index] = byte
                index += 1
            }
            if date.year < 0 { put(UInt8(ascii: "-")) }
            put(abs(date.year), digits: yearDigits - (date.year < 0 ? 1 : 0))
            put(UInt8(ascii: "-")); put(date.month, digits: 2); put(UInt8(ascii: "-")); put(date.day, digits: 2)
            put(separator)
            put(secondOfDay / 3600, digits: 2); put(UInt8(ascii: ":"))
            put(secondOfDay % 3600 / 60, digits: 2); put(UInt8(ascii: ":"))
            put(secondOfDay % 60, digits: 2)
            if let fraction {
                put(UInt8(ascii: "."))
                put(fraction.value, digits: fraction.digits)
            }
            for byte in UnsafeBufferPointer(start: zone.utf8Start, count: zone.utf8CodeUnitCount) { put(byte) }
            return index
        }
    }
}

/// A day of the proleptic Gregorian calendar (the one PostgreSQL uses for every year).
public struct CivilDate: Sendable, Hashable {
    public var year: Int
    public var month: Int
    public var day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// Days since 1970-01-01 of a date (H. Hinnant's `days_from_civil`); months and days out of
    /// range carry over as the formula does, so check with ``init(daysSinceEpoch:)``.
    public static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day since 1970-01-01 (H. Hinnant's `civil_from_days`).
    public init(daysSinceEpoch days: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// The date and the second of the day (0 ..< 86,400) of whole seconds since 1970 UTC.
    static func split(_ seconds: Int64) -> (date: CivilDate, secondOfDay: Int) {
        let whole = Int(seconds)
        let days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        return (CivilDate(daysSinceEpoch: days), whole - days * 86_400)
    }
}
