import Foundation
import Logging

/// How the process writes its log lines (and its other lines on standard error): `text` for a
/// person, `json` — one JSON object per line — for a log shipper (journald's JSON export,
/// Vector, Fluent Bit, Loki's promtail).
public enum LogFormat: String, CaseIterable, Sendable {
    case text
    case json

    /// `value` read as a format, case-insensitively; nil for anything else.
    public init?(setting value: String) {
        self.init(rawValue: value.trimmingCharacters(in: .whitespaces).lowercased())
    }

    /// The values a setting may take, for messages: "text or json".
    public static var choices: String { allCases.map(\.rawValue).joined(separator: " or ") }

    /// The process's format, chosen once by the program's `main` before anything logs; `text`
    /// until then. `Terminal.writeError` follows it, so that every line on standard error has
    /// one shape.
    public static var process: LogFormat {
        get { processFormat.withLock { $0 } }
        set { processFormat.withLock { $0 = newValue } }
    }

    private static let processFormat = LockedFormat()

    /// The handler for a logger labelled `label` in this format, on standard error.
    public func handler(label: String, level: Logger.Level) -> any LogHandler {
        switch self {
        case .text: EscapingLogHandler(label: label, level: level)
        case .json: JSONLogHandler(label: label, level: level)
        }
    }
}

/// A lock around the process's format (set once at start, read at every line on stderr).
private final class LockedFormat: @unchecked Sendable {
    private let lock = NSLock()
    private var format = LogFormat.text

    func withLock<T>(_ body: (inout LogFormat) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&format)
    }
}
