import Foundation
import Logging

/// Where output goes and how it looks: aligned, coloured text for a person at a terminal; plain
/// text when piped (or when `NO_COLOR` is set); JSON when a command is given `--json`.
public struct Terminal: Sendable {
    /// Standard output is a terminal.
    public let isInteractive: Bool
    /// ANSI colours are used: a terminal, `NO_COLOR` unset, and `TERM` not `dumb`.
    public let usesColor: Bool

    public init(isInteractive: Bool, usesColor: Bool) {
        self.isInteractive = isInteractive
        self.usesColor = usesColor
    }

    /// Decides from the process: `isatty(1)`, `NO_COLOR` (https://no-color.org) and `TERM`.
    public static func current(environment: [String: String] = ProcessInfo.processInfo.environment) -> Terminal {
        let interactive = isatty(STDOUT_FILENO) == 1
        let noColor = environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        let dumb = environment["TERM"] == "dumb"
        return Terminal(isInteractive: interactive, usesColor: interactive && !noColor && !dumb)
    }

    public enum Style: String, Sendable {
        case bold = "1"
        case dim = "2"
        case red = "31"
        case green = "32"
        case yellow = "33"
        case blue = "34"
        case magenta = "35"
        case cyan = "36"
    }

    /// `text` in `styles` when colours are on; unchanged otherwise.
    public func styled(_ text: String, _ styles: Style...) -> String {
        guard usesColor, !styles.isEmpty, !text.isEmpty else { return text }
        return "\u{1B}[\(styles.map(\.rawValue).joined(separator: ";"))m\(text)\u{1B}[0m"
    }

    /// Writes one line (or several) to standard output.
    public func write(_ text: String = "", terminator: String = "\n") {
        print(text, terminator: terminator)
    }

    /// Writes `value` as pretty-printed JSON with sorted keys and ISO-8601 dates.
    public func writeJSON(_ value: some Encodable) throws {
        write(try Self.json(value))
    }

    public static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return inert(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// `json` with the characters JSON may carry raw but a terminal acts on — DEL, C1
    /// controls, line and paragraph separators, direction controls — written as `\uXXXX`:
    /// the same JSON value, inert on a screen. (The encoder escapes everything below U+0020
    /// in strings already; what is left below it is the layout's own line breaks and indent.)
    static func inert(_ json: String) -> String {
        func escapes(_ scalar: Unicode.Scalar) -> Bool { scalar.value >= 0x7F && Formatting.isEscaped(scalar) }
        guard json.unicodeScalars.contains(where: escapes) else { return json }
        var result = ""
        for scalar in json.unicodeScalars {
            if escapes(scalar) {
                // All of them lie in the Basic Multilingual Plane: one \uXXXX each.
                let hex = String(scalar.value, radix: 16, uppercase: true)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Writes a line to standard error: as it is, or under `--log-format json` as a JSON log
    /// line (`JSONLogHandler`'s fields, logger `orderflow`) without its `orderflow: ` prefix, at
    /// `level` — `warning` for a line that starts `warning: `.
    public static func writeError(_ text: String, level: Logger.Level = .notice) {
        guard LogFormat.process == .json else {
            FileHandle.standardError.write(Data((text + "\n").utf8))
            return
        }
        var message = Substring(text)
        if message.hasPrefix("orderflow: ") { message = message.dropFirst("orderflow: ".count) }
        var level = level
        if message.hasPrefix("warning: ") {
            message = message.dropFirst("warning: ".count)
            level = max(level, .warning)
        }
        StandardErrorLines.write(JSONLogHandler.line(
            timestamp: Date(), level: level, label: "orderflow", message: String(message), source: "orderflow", metadata: [:]))
    }

    /// Clears the screen and moves the cursor home (for `watch` on a terminal).
    public func clearScreen() {
        guard isInteractive else { return }
        print("\u{1B}[H\u{1B}[2J", terminator: "")
    }
}

/// Columns aligned by their visible width (colour escapes do not count).
public struct TextTable: Sendable {
    public var header: [String]
    public var rows: [[String]] = []
    /// Columns whose text is aligned right (numbers).
    public var rightAligned: Set<Int> = []

    public init(header: [String], rightAligned: Set<Int> = []) {
        self.header = header
        self.rightAligned = rightAligned
    }

    public mutating func append(_ row: [String]) {
        rows.append(row)
    }

    /// The lines of the table; the header styled by `terminal`, columns two spaces apart.
    public func render(_ terminal: Terminal, indent: String = "") -> [String] {
        let all = [header] + rows
        let count = all.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: count)
        for row in all {
            for (column, cell) in row.enumerated() { widths[column] = max(widths[column], visibleWidth(cell)) }
        }
        func line(_ row: [String], isHeader: Bool) -> String {
            var cells: [String] = []
            for (column, cell) in row.enumerated() {
                let padding = String(repeating: " ", count: widths[column] - visibleWidth(cell))
                let isLast = column == row.count - 1
                let shown = isHeader ? terminal.styled(cell, .dim) : cell
                if rightAligned.contains(column) {
                    cells.append(padding + shown)
                } else {
                    cells.append(isLast ? shown : shown + padding)
                }
            }
            var text = indent + cells.joined(separator: "  ")
            while text.hasSuffix(" ") { text.removeLast() }  // an empty last column
            return text
        }
        return [line(header, isHeader: true)] + rows.map { line($0, isHeader: false) }
    }
}

/// The number of characters a terminal shows for `text`, ignoring ANSI escape sequences.
public func visibleWidth(_ text: String) -> Int {
    var width = 0
    var inEscape = false
    for scalar in text.unicodeScalars {
        if inEscape {
            if scalar == "m" { inEscape = false }
        } else if scalar == "\u{1B}" {
            inEscape = true
        } else {
            width += 1
        }
    }
    return width
}
