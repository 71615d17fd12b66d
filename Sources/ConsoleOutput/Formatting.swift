import APNSCore
import Foundation

/// How values are shown to people: local times, short ages, masked secrets.
public enum Formatting {
    /// `2025-05-01 14:03:12` in the local time zone.
    public static func localTime(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: date)
    }

    /// `14:03:12` when `date` is today, else the full local time.
    public static func shortLocalTime(_ date: Date, now: Date = Date()) -> String {
        let full = localTime(date)
        return full.prefix(10) == localTime(now).prefix(10) ? String(full.dropFirst(11)) : full
    }

    /// A compact age: `12s`, `5m`, `1h05m`, `2d3h`.
    public static func age(since start: Date, now: Date = Date()) -> String {
        let seconds = max(0, Int(now.timeIntervalSince(start)))
        switch seconds {
        case ..<60: return "\(seconds)s"
        case ..<3_600: return "\(seconds / 60)m"
        case ..<86_400:
            let minutes = (seconds % 3_600) / 60
            return "\(seconds / 3_600)h" + (minutes > 0 ? String(format: "%02dm", minutes) : "")
        default:
            let hours = (seconds % 86_400) / 3_600
            return "\(seconds / 86_400)d" + (hours > 0 ? "\(hours)h" : "")
        }
    }

    /// A push token as it may be shown: `…` and its last 8 characters (the one rule of
    /// `APNSTokenRedaction`, shared with the worker's and the APNs client's logs and errors).
    public static func maskedToken(_ token: String) -> String {
        APNSTokenRedaction.redacted(token)
    }

    /// A stored token suffix (already the last characters) shown like a masked token.
    public static func tokenSuffix(_ suffix: String?) -> String {
        guard let suffix, !suffix.isEmpty else { return "-" }
        // Read back from the database: written by the engine as hex, but shown as text.
        return escaped(APNSTokenRedaction.redacted(suffix: suffix))
    }

    /// `text` with every run of 16 or more hexadecimal characters (a push token, as far as
    /// anyone can tell) shown as a masked token.
    public static func maskingTokens(in text: String) -> String {
        var result = ""
        var run = ""
        for character in text {
            if character.isHexDigit {
                run.append(character)
                continue
            }
            result += run.count >= 16 ? maskedToken(run) : run
            run = ""
            result.append(character)
        }
        return result + (run.count >= 16 ? maskedToken(run) : run)
    }

    /// A database URL with its password replaced by `***` (URL or `key=value` form).
    public static func maskedDatabaseURL(_ url: String) -> String {
        if let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@") {
            let userInfo = url[scheme.upperBound..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                return String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
            }
            return url
        }
        // conninfo: password=secret
        return url.replacingOccurrences(of: #"password\s*=\s*('[^']*'|\S+)"#, with: "password=***", options: .regularExpression)
    }

    /// `text` as one word for a POSIX shell: unchanged when it is made of characters no shell
    /// reads specially, else in single quotes (a quote inside written `'\''`). For hints that
    /// show a command to copy.
    public static func shellQuoted(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_./:@%+=,".unicodeScalars.contains($0))
        }
        return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// `text` as it may be printed for people: every character a terminal would act on, or
    /// that changes how the line around it reads, written as `\u{1B}` — control characters
    /// (C0 including line breaks and tab, DEL, C1), line and paragraph separators, and the
    /// direction marks, embeddings, overrides and isolates. Escape a stored or given value
    /// before styling it (styles are escape sequences too) and before padding it in a table
    /// (one line per row). A backslash is left as it is.
    public static func escaped(_ text: String) -> String {
        // Printable ASCII — ids, paths, numbers, most of every log line — has nothing to
        // escape, and telling so from its bytes is far cheaper than asking every scalar's
        // Unicode properties (which showed in the profile of a server logging each request).
        guard text.utf8.contains(where: { $0 < 0x20 || $0 >= 0x7F }) else { return text }
        guard text.unicodeScalars.contains(where: isEscaped) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if isEscaped(scalar) {
                result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Whether ``escaped(_:)`` writes `scalar` as `\u{…}`.
    public static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        default: return scalar.properties.isBidiControl
        }
    }

    /// A value as one word of a command shown to copy: quoted for a POSIX shell
    /// (``shellQuoted(_:)``), then ``escaped(_:)``.
    public static func commandWord(_ text: String) -> String {
        escaped(shellQuoted(text))
    }

    /// `1 order`, `3 orders`.
    public static func count(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
    }
}
