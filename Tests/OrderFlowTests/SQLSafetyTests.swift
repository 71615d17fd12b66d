import Foundation
import OrderFlowTesting
import Testing

/// No SQL is built from input: `PostgresQuery` takes a `StaticString` (no interpolation is
/// possible), so the only way to run other text is the loudly named `unsafeSQL:` entry point.
/// This test keeps its uses to the reviewed few, and finds SQL assembled any other way.
@Suite("SQL is never built from input")
struct SQLSafetyTests {
    /// Each reviewed use: the file and why its text is not input.
    static let reviewedUnsafeSQL: [String: String] = [
        "Sources/PGKit/Migrator.swift": "migration files shipped with OrderFlow",
        "Sources/PostgresTesting/TestDatabase.swift": "CREATE DATABASE with a name generated from a UUID",
        "Sources/orderflow-bench/BenchDatabase.swift": "CREATE DATABASE with a name generated from the clock",
    ]

    static func sourceFiles() throws -> [(path: String, text: String)] {
        let root = EngineFixture.repositoryRoot
        let enumerator = FileManager.default.enumerator(atPath: root.appendingPathComponent("Sources").path)
        var files: [(String, String)] = []
        while let relative = enumerator?.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            let path = "Sources/" + relative
            files.append((path, try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)))
        }
        return files
    }

    @Test func unsafeSQLOnlyWhereReviewed() throws {
        let files = try Self.sourceFiles()
        #expect(files.count > 20, "found the sources")
        for (path, text) in files where path != "Sources/PGKit/PostgresQuery.swift" {
            let uses = text.components(separatedBy: "unsafeSQL:").count - 1
            if uses > 0 {
                #expect(Self.reviewedUnsafeSQL[path] != nil, "\(path) runs SQL text through unsafeSQL: review it and list it here")
            }
        }
    }

    @Test func noSQLAssembledFromStrings() throws {
        // SQL keywords next to string interpolation or concatenation, outside the reviewed files.
        let suspicious = try NSRegularExpression(
            pattern: #"\"[^\"\n]*\b(SELECT|INSERT|UPDATE|DELETE|WHERE|VALUES)\b[^\"\n]*\\\("#, options: [.caseInsensitive])
        let concatenated = try NSRegularExpression(
            pattern: #"\"[^\"\n]*\b(SELECT|INSERT INTO|UPDATE|DELETE FROM)\b[^\"\n]*\"\s*\+"#, options: [])
        for (path, text) in try Self.sourceFiles() where Self.reviewedUnsafeSQL[path] == nil {
            let range = NSRange(text.startIndex..., in: text)
            for regex in [suspicious, concatenated] {
                for match in regex.matches(in: text, range: range) {
                    let line = text[..<Range(match.range, in: text)!.lowerBound].filter { $0 == "\n" }.count + 1
                    let snippet = String(text[Range(match.range, in: text)!])
                    // Human messages may mention a state "update"; only flag what looks like SQL.
                    guard snippet.range(of: #"\b(FROM|INTO|SET|WHERE)\b"#, options: .regularExpression) != nil else { continue }
                    Issue.record("\(path):\(line) looks like SQL built from strings: \(snippet)")
                }
            }
        }
    }
}
