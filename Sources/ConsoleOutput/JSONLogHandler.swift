import Foundation
import Logging

/// Log lines for log shippers: one JSON object per line on standard error, with
/// `timestamp` (RFC 3339, UTC, milliseconds), `level`, `logger` (the label), `message`,
/// `source` (the module that logged) and each metadata value as a field of its own. A
/// metadata key that would take one of these names is written `metadata.<key>` instead.
///
/// What reaches a line is what reaches the text handler (`EscapingLogHandler`), merged in the
/// same order: push tokens are already in their shown form (`…` and the last 8 characters)
/// and keys never logged. Strings are JSON-escaped, and the characters JSON may carry raw but
/// a terminal acts on (DEL, C1 controls, line and paragraph separators, direction controls)
/// are written `\uXXXX` too: the same value, inert when someone `tail`s the file.
public struct JSONLogHandler: LogHandler {
    /// The fields every line has, in the order they are written.
    public static let fixedFields = ["timestamp", "level", "logger", "message", "source"]

    private let label: String
    private let write: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level) {
        self.label = label
        logLevel = level
        metadataProvider = LoggingSystem.metadataProvider
        write = { line in StandardErrorLines.write(line) }
    }

    /// Lines to `stream` instead (for tests).
    public init(label: String, level: Logger.Level, stream: any TextOutputStream & Sendable,
                metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        logLevel = level
        self.metadataProvider = metadataProvider
        let box = StreamBox(stream)
        write = { line in box.write(line) }
    }

    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    public var metadata: Logger.Metadata = [:]

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = LogMetadataMerge.merged(handler: metadata, provider: metadataProvider, event: event)
        write(Self.line(timestamp: Date(), level: event.level, label: label, message: event.message.description,
                        source: event.source, metadata: merged))
    }

    /// One line (with its line break) as this handler writes it.
    public static func line(timestamp: Date, level: Logger.Level, label: String, message: String, source: String,
                            metadata: Logger.Metadata) -> String {
        var json = "{\"timestamp\":\"\(rfc3339(timestamp))\",\"level\":\"\(level.rawValue)\""
        json += ",\"logger\":" + JSONText.string(label)
        json += ",\"message\":" + JSONText.string(message)
        json += ",\"source\":" + JSONText.string(source)
        for key in metadata.keys.sorted() {
            let name = fixedFields.contains(key) ? "metadata." + key : key
            json += "," + JSONText.string(name) + ":" + JSONText.value(metadata[key]!)
        }
        return json + "}\n"
    }

    /// `date` as RFC 3339 in UTC with milliseconds: `2026-03-01T09:30:00.125Z`.
    public static func rfc3339(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(interval.rounded(.down))
        let milliseconds = min(999, Int((interval - Double(seconds)) * 1000))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func padded(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.tm_year + 1900, 4))-\(padded(parts.tm_mon + 1, 2))-\(padded(parts.tm_mday, 2))"
            + "T\(padded(parts.tm_hour, 2)):\(padded(parts.tm_min, 2)):\(padded(parts.tm_sec, 2))"
            + ".\(padded(Int32(milliseconds), 3))Z"
    }
}

/// JSON text for log lines, written by hand: a line is built for every record, and the values
/// are strings, lists and maps of strings only.
enum JSONText {
    static func value(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): string(text)
        case .stringConvertible(let convertible): string(convertible.description)
        case .array(let values): "[" + values.map(Self.value).joined(separator: ",") + "]"
        case .dictionary(let values):
            "{" + values.keys.sorted().map { string($0) + ":" + Self.value(values[$0]!) }.joined(separator: ",") + "}"
        }
    }

    /// `text` as a JSON string: quotes, backslashes and controls escaped as JSON requires, and
    /// what `Formatting.escaped` would escape for a terminal written `\uXXXX` as well.
    static func string(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 || Formatting.isEscaped(scalar) {
                    // Every character escaped here lies in the Basic Multilingual Plane.
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}

/// The one way both handlers merge a record's metadata, as swift-log's stream handler does: the
/// logger's, then the provider's, then the line's own, then the error's (`error.message`,
/// `error.type`).
enum LogMetadataMerge {
    static func merged(handler: Logger.Metadata, provider: Logger.MetadataProvider?, event: LogEvent) -> Logger.Metadata {
        var merged = handler
        if let provided = provider?.get(), !provided.isEmpty { merged.merge(provided) { _, provided in provided } }
        if let own = event.metadata { merged.merge(own) { _, line in line } }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        return merged
    }
}

/// Whole lines to standard error, one `write` each under a lock: lines of concurrent tasks
/// never interleave, which a shipper reading one object per line relies on.
public enum StandardErrorLines {
    private static let lock = NSLock()

    public static func write(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                Foundation.write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}

/// A test's stream, written under a lock.
private final class StreamBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stream: any TextOutputStream & Sendable

    init(_ stream: any TextOutputStream & Sendable) { self.stream = stream }

    func write(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        stream.write(line)
    }
}
