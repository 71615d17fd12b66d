import Foundation
import Testing

// What the command tests expect of every run, said once.

/// Shorthand: `#expect` on a result, printing the whole run when it fails.
func expectStatus(_ result: CLI.Result, _ status: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(result.status == status, "\(result)", sourceLocation: sourceLocation)
}

/// Errors are one line on stderr: `orderflow: …`.
func expectOneLineError(_ result: CLI.Result, containing fragments: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(result.stderrLines.count == 1, "\(result)", sourceLocation: sourceLocation)
    #expect(result.stderr.hasPrefix("orderflow: "), "\(result)", sourceLocation: sourceLocation)
    for fragment in fragments {
        #expect(result.stderr.contains(fragment), "expected \"\(fragment)\" in:\n\(result)", sourceLocation: sourceLocation)
    }
}

/// An ISO-8601 time with or without fractional seconds.
func isoDate(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions.insert(.withFractionalSeconds)
    return formatter.date(from: text)
}

let foodAttributes = ["--attr", "merchantName=Luigi's", "--attr", "orderNumber=1042", "--attr", "itemCount=3"]
