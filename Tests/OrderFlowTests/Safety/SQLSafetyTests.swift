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
        "Sources/PGKit/PostgresListener.swift": "LISTEN takes no parameters: channel names quoted by libpq (PQescapeIdentifier)",
        "Sources/PostgresTesting/TestDatabase.swift": "CREATE DATABASE with a name generated from a UUID",
        "Sources/orderflow-bench/BenchDatabase.swift": "CREATE DATABASE with a name generated from the clock",
        "Sources/OrderFlowTesting/TableContents.swift": "tests only: every row of each table pg_tables names, the name quoted",
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

    /// Multi-line and raw string literals (`"""`, `#"…"#`) and `String(format:)`: SQL there is as
    /// built from input as SQL in a `"…\(x)…"`, which the check above sees only on one line.
    @Test func noSQLInFormatsOrMultiLineLiterals() throws {
        for (path, text) in try Self.sourceFiles() where Self.reviewedUnsafeSQL[path] == nil {
            for finding in Self.builtSQL(in: text) {
                Issue.record("\(path):\(finding.line) \(finding.what): \(finding.snippet)")
            }
        }
    }

    /// The check above finds what it should, and nothing in SQL that cannot be built from input.
    @Test func builtSQLDetectorFindsWhatItShould() {
        let built = [
            "let q = \"\"\"\n    SELECT * FROM orders\n    WHERE order_id = '\\(id)'\n    \"\"\"",
            "let q = #\"\"\"\n    DELETE FROM orders WHERE id = \\#(id)\n    \"\"\"#",
            "let q = #\"UPDATE orders SET state = '\\#(state)'\"#",
            "let q = \"SELECT a FROM t WHERE b = \\(b)\"",
            "let q = String(format: \"SELECT * FROM orders WHERE id = '%@'\", id)",
            "let q = String(format: \"\"\"\n    INSERT INTO devices VALUES ('%@')\n    \"\"\", token)",
            "let q = \"\"\"\n    SELECT n FROM t\n    \"\"\" + clause",
            "let q = where + \"\"\"\n    DELETE FROM t\n    \"\"\"",
        ]
        for source in built {
            #expect(Self.builtSQL(in: source).count == 1, "not found in:\n\(source)")
        }
        let fine = [
            // Static SQL, as `PostgresQuery` takes it; parameters are bound.
            "PostgresQuery(\"\"\"\n    SELECT seq FROM orders WHERE merchant_id = $1\n    \"\"\", merchantID)",
            // Prose with interpolation and words that are also SQL keywords.
            "let help = \"\"\"\n    Select an order from the list, update it and delete it where \\(place) says.\n    \"\"\"",
            "print(String(format: \"%.1f s to update %ld orders\", seconds, count))",
            // An interpolation whose own text holds a string literal, then static SQL.
            "let a = \"\\(f(\"x\"))\"; let q = PostgresQuery(\"SELECT 1 FROM t\")",
            "// let q = \"\"\" SELECT * FROM t WHERE a = \\(a) \"\"\" (a comment)",
        ]
        for source in fine {
            #expect(Self.builtSQL(in: source).isEmpty, "wrongly found in:\n\(source)")
        }
    }

    // MARK: Finding SQL in string literals

    struct Finding {
        var line: Int
        var what: String
        var snippet: String
    }

    /// A statement, not a word: `SELECT … FROM`, `INSERT INTO`, `UPDATE t SET`, `DELETE FROM`, in
    /// capitals as all SQL in these sources is written (prose says "select … from" too).
    static var statement: NSRegularExpression {
        try! NSRegularExpression(
            pattern: #"\bSELECT\b[\s\S]*?\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"#)
    }
    /// Keywords alone, for format strings (which have no other reason to hold them).
    static var keyword: NSRegularExpression {
        try! NSRegularExpression(pattern: #"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|VALUES)\b"#)
    }

    static func matches(_ regex: NSRegularExpression, _ text: String) -> Bool {
        regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    /// Literals of any kind with SQL and an interpolation, SQL format strings, and SQL literals
    /// joined with `+`.
    static func builtSQL(in text: String) -> [Finding] {
        let source = Array(text)
        let (statement, keyword) = (Self.statement, Self.keyword)
        var findings: [Finding] = []
        for literal in SwiftLiterals.scan(source) {
            let body = String(source[literal.bodyRange])
            let isSQL = matches(statement, body)
            let snippet = body.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: " ⏎ ")
            let before = String(source[max(0, literal.range.lowerBound - 40)..<literal.range.lowerBound])
            let after = String(source[literal.range.upperBound..<min(source.count, literal.range.upperBound + 10)])
            if isSQL, literal.hasInterpolation {
                findings.append(Finding(line: literal.line, what: "interpolates into SQL", snippet: String(snippet.prefix(120))))
            } else if before.range(of: #"String\(\s*format:\s*$"#, options: .regularExpression) != nil,
                      isSQL || matches(keyword, body)
            {
                findings.append(Finding(line: literal.line, what: "formats SQL with String(format:)", snippet: String(snippet.prefix(120))))
            } else if isSQL,
                      after.range(of: #"^\s*\+"#, options: .regularExpression) != nil
                        || before.range(of: #"\+\s*$"#, options: .regularExpression) != nil
            {
                findings.append(Finding(line: literal.line, what: "joins SQL with +", snippet: String(snippet.prefix(120))))
            }
        }
        return findings
    }
}

/// The string literals of Swift source text: plain, multi-line and raw, outside comments, with
/// interpolations (and the literals inside them) skipped over.
enum SwiftLiterals {
    struct Literal {
        /// The whole literal, delimiters included.
        var range: Range<Int>
        /// Between the delimiters.
        var bodyRange: Range<Int>
        var line: Int
        var isMultiLine: Bool
        var isRaw: Bool
        var hasInterpolation: Bool
    }

    static func scan(_ source: [Character]) -> [Literal] {
        var literals: [Literal] = []
        var index = 0
        var line = 1
        while index < source.count {
            let character = source[index]
            if character == "\n" {
                line += 1
                index += 1
            } else if character == "/", index + 1 < source.count, source[index + 1] == "/" {
                while index < source.count, source[index] != "\n" { index += 1 }
            } else if character == "/", index + 1 < source.count, source[index + 1] == "*" {
                index = skipBlockComment(source, from: index, line: &line)
            } else if character == "#" || character == "\"" {
                var hashes = 0
                while index + hashes < source.count, source[index + hashes] == "#" { hashes += 1 }
                guard index + hashes < source.count, source[index + hashes] == "\"" else {
                    index += max(1, hashes)
                    continue
                }
                let literal = readLiteral(source, from: index, hashes: hashes, line: &line)
                literals.append(literal)
                index = literal.range.upperBound
            } else {
                index += 1
            }
        }
        return literals
    }

    private static func skipBlockComment(_ source: [Character], from start: Int, line: inout Int) -> Int {
        var index = start + 2
        var depth = 1
        while index < source.count, depth > 0 {
            if source[index] == "\n" { line += 1 }
            if source[index] == "/", index + 1 < source.count, source[index + 1] == "*" {
                depth += 1
                index += 2
            } else if source[index] == "*", index + 1 < source.count, source[index + 1] == "/" {
                depth -= 1
                index += 2
            } else {
                index += 1
            }
        }
        return index
    }

    /// The literal whose opening `#…"` starts at `start`.
    private static func readLiteral(_ source: [Character], from start: Int, hashes: Int, line: inout Int) -> Literal {
        let startLine = line
        let quote = start + hashes
        let isMultiLine = quote + 2 < source.count && source[quote + 1] == "\"" && source[quote + 2] == "\""
        let bodyStart = quote + (isMultiLine ? 3 : 1)
        let closing = (isMultiLine ? "\"\"\"" : "\"") + String(repeating: "#", count: hashes)
        let escape = "\\" + String(repeating: "#", count: hashes)
        var index = bodyStart
        var interpolated = false
        while index < source.count {
            if has(source, escape, at: index) {
                let next = index + escape.count
                if next < source.count, source[next] == "(" {
                    interpolated = true
                    index = skipInterpolation(source, from: next, line: &line)
                } else {
                    if next < source.count, source[next] == "\n" { line += 1 }
                    index = next + 1
                }
            } else if has(source, closing, at: index) {
                return Literal(range: start..<index + closing.count, bodyRange: bodyStart..<index, line: startLine,
                               isMultiLine: isMultiLine, isRaw: hashes > 0, hasInterpolation: interpolated)
            } else {
                if source[index] == "\n" {
                    line += 1
                    // A single-line literal cannot span lines: stop at the line's end.
                    if !isMultiLine { break }
                }
                index += 1
            }
        }
        return Literal(range: start..<index, bodyRange: bodyStart..<index, line: startLine,
                       isMultiLine: isMultiLine, isRaw: hashes > 0, hasInterpolation: interpolated)
    }

    /// Past the `)` closing the interpolation whose `(` is at `start`, skipping literals inside.
    private static func skipInterpolation(_ source: [Character], from start: Int, line: inout Int) -> Int {
        var depth = 0
        var index = start
        while index < source.count {
            let character = source[index]
            if character == "(" {
                depth += 1
            } else if character == ")" {
                depth -= 1
                if depth == 0 { return index + 1 }
            } else if character == "\n" {
                line += 1
            } else if character == "\"" || character == "#" {
                var hashes = 0
                while index + hashes < source.count, source[index + hashes] == "#" { hashes += 1 }
                if index + hashes < source.count, source[index + hashes] == "\"" {
                    index = readLiteral(source, from: index, hashes: hashes, line: &line).range.upperBound
                    continue
                }
                index += max(1, hashes)
                continue
            }
            index += 1
        }
        return index
    }

    private static func has(_ source: [Character], _ text: String, at index: Int) -> Bool {
        var position = index
        for character in text {
            guard position < source.count, source[position] == character else { return false }
            position += 1
        }
        return true
    }
}
