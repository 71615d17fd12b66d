import ConsoleOutput
import Foundation
import Logging
import Testing

/// `JSONLogHandler`: one JSON object per line, whose values read back exactly as logged, with
/// nothing on the line a terminal would act on.
@Suite("JSON log lines")
struct JSONLogLinesTests {
    final class Lines: TextOutputStream, @unchecked Sendable {
        private let lock = NSLock()
        private var text = ""
        func write(_ string: String) { lock.withLock { text += string } }
        var written: String { lock.withLock { text } }
    }

    struct Refusal: Error, CustomStringConvertible {
        var description: String { "refused \u{1B}]0;title\u{7}" }
    }

    static let hostile = "quote\" back\\slash \u{1B}[31m nl\n cr\r tab\t nul\u{0} del\u{7F} c1\u{9B} ls\u{2028} rlo\u{202E} 🍕 Zoë"

    @Test("the fixed fields, then every metadata value as a field; values read back exactly; line inert")
    func fieldsAndEscaping() throws {
        let lines = Lines()
        let provider = Logger.MetadataProvider { ["provided": "by the provider"] }
        var logger = Logger(label: "orderflow.worker") { label in
            JSONLogHandler(label: label, level: .info, stream: lines, metadataProvider: provider)
        }
        logger[metadataKey: "orderflow.worker"] = "host:1:ab"
        logger.info("moved \(Self.hostile)", metadata: [
            "order": .string(Self.hostile), "level": "a key named like a fixed field",
            "list": ["a", "b\u{2029}"], "map": ["k": "v"],
        ])
        logger.log(level: .warning, "failed", error: Refusal())
        logger.debug("below the level")

        let written = lines.written
        let raw = written.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(raw.count == 3 && raw.last == "", "two lines, each ended by a line break: \(written.debugDescription)")
        #expect(!written.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || Formatting.isEscaped($0) && $0 != "\n" },
                "nothing on a line that a terminal acts on: \(written.debugDescription)")
        let objects = try raw.dropLast().map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
        let first = objects[0]
        #expect(first["level"] as? String == "info" && first["logger"] as? String == "orderflow.worker")
        #expect(first["message"] as? String == "moved \(Self.hostile)")
        #expect(first["order"] as? String == Self.hostile, "the value reads back exactly")
        #expect(first["metadata.level"] as? String == "a key named like a fixed field" && first["level"] as? String == "info")
        #expect(first["list"] as? [String] == ["a", "b\u{2029}"] && first["map"] as? [String: String] == ["k": "v"])
        #expect(first["provided"] as? String == "by the provider" && first["orderflow.worker"] as? String == "host:1:ab")
        #expect(first["source"] as? String == "TextOutputTests", "the module that logged")
        let timestamp = try #require(first["timestamp"] as? String)
        #expect(timestamp.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil, "\(timestamp)")
        let parsed = try #require(ISO8601DateFormatter.withFractionalSeconds.date(from: timestamp))
        #expect(abs(parsed.timeIntervalSinceNow) < 60)
        #expect(objects[1]["level"] as? String == "warning" && objects[1]["error.message"] as? String == "refused \u{1B}]0;title\u{7}")
    }

    @Test("RFC 3339 in UTC with milliseconds, leap day and the epoch")
    func timestamps() {
        #expect(JSONLogHandler.rfc3339(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(JSONLogHandler.rfc3339(Date(timeIntervalSince1970: 1_709_164_800.125)) == "2024-02-29T00:00:00.125Z")
        #expect(JSONLogHandler.rfc3339(Date(timeIntervalSince1970: 1_798_761_599.9999)) == "2026-12-31T23:59:59.999Z")
    }

    @Test("a format is text or json, in any case; anything else is not one")
    func formats() {
        #expect(LogFormat(setting: "JSON") == .json && LogFormat(setting: " text ") == .text)
        #expect(LogFormat(setting: "xml") == nil && LogFormat(setting: "") == nil)
    }
}

extension ISO8601DateFormatter {
    static var withFractionalSeconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
