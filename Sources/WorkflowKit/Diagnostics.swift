/// One problem found in a workflow file, at a 1-based line and column.
public struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    /// `file:line:column: error: message`, the format compilers use and editors link.
    public var description: String { "\(file):\(line):\(column): error: \(message)" }
}

/// Every problem found in a workflow file; thrown by `WorkflowLoader`.
public struct WorkflowValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let diagnostics: [Diagnostic]

    public init(diagnostics: [Diagnostic]) {
        self.diagnostics = diagnostics
    }

    /// One `file:line:column: error: message` per line.
    public var description: String {
        diagnostics.map(\.description).joined(separator: "\n")
    }
}

// MARK: - Helpers for messages

/// Levenshtein distance over Unicode scalars.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.unicodeScalars)
    let b = Array(b.unicodeScalars)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}

/// The candidate closest to `word` if it is close enough to be a likely typo.
public func closestMatch(to word: String, in candidates: some Sequence<String>) -> String? {
    // The distance costs length × length: a typo in a name this long is not worth minutes.
    let longest = 200
    let lowered = word.lowercased()
    let length = lowered.unicodeScalars.count
    guard length <= longest else { return nil }
    var best: (candidate: String, distance: Int)?
    for candidate in candidates {
        let loweredCandidate = candidate.lowercased()
        let candidateLength = loweredCandidate.unicodeScalars.count
        // The length difference is a lower bound of the distance: skip what cannot be closer.
        guard candidateLength <= longest, abs(candidateLength - length) < (best?.distance ?? Int.max) else { continue }
        let distance = editDistance(lowered, loweredCandidate)
        if distance < (best?.distance ?? Int.max) {
            best = (candidate, distance)
        }
    }
    guard let best else { return nil }
    // Up to 2 edits (a third of the length for long names), and never a rewrite of most of the word.
    let shorter = min(word.count, best.candidate.count)
    let allowed = max(2, shorter / 3)
    return best.distance <= allowed && best.distance * 2 <= shorter ? best.candidate : nil
}

/// ` (did you mean `ready`?)` when `word` is a likely typo of a candidate, else "".
public func didYouMean(_ word: String, in candidates: some Sequence<String>) -> String {
    closestMatch(to: word, in: candidates).map { " (did you mean `\($0)`?)" } ?? ""
}

func codeList(_ names: some Sequence<String>) -> String {
    let list = names.map { "`\($0)`" }
    return list.isEmpty ? "none" : list.joined(separator: ", ")
}

enum SwiftNames {
    /// Words Swift reserves, which cannot name a property, type or enum case without backticks.
    /// (Contextual keywords such as `open`, `some` or `async` remain usable as names.)
    static let keywords: Set<String> = [
        "associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func", "import", "init",
        "inout", "internal", "let", "operator", "private", "precedencegroup", "protocol", "public",
        "rethrows", "static", "struct", "subscript", "typealias", "var", "break", "case", "catch", "continue",
        "default", "defer", "do", "else", "fallthrough", "for", "guard", "if", "in", "repeat", "return",
        "throw", "switch", "where", "while", "Any", "as", "await", "false", "is", "nil", "self", "Self",
        "super", "throws", "true", "try", "_",
    ]

    /// An ASCII identifier (`[A-Za-z_][A-Za-z0-9_]*`).
    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first else { return false }
        func isLetter(_ s: Unicode.Scalar) -> Bool { ("a"..."z").contains(s) || ("A"..."Z").contains(s) || s == "_" }
        return isLetter(first) && name.unicodeScalars.allSatisfy { isLetter($0) || ("0"..."9").contains($0) }
    }

    /// Why `name` cannot be a Swift property/type/case name, or nil when it can.
    static func problem(with name: String) -> String? {
        if !isIdentifier(name) {
            return "`\(name)` is not a valid Swift identifier (letters, digits and `_`, not starting with a digit)"
        }
        if keywords.contains(name) {
            return "`\(name)` is a Swift keyword"
        }
        return nil
    }
}

/// Text callers gave, quoted in messages for people.
public enum MessageText {
    /// A caller's value as shown in a message: at most `limit` characters (and a few hundred
    /// code points), with control and bidirectional-override characters, which could garble a
    /// terminal, written as `\u{…}`.
    public static func excerpt(_ text: String, limit: Int = 60) -> String {
        var result = ""
        var characters = 0
        var scalars = 0
        for character in text {
            if characters == limit || scalars > limit * 4 {
                result += "…"
                break
            }
            characters += 1
            for scalar in character.unicodeScalars {
                scalars += 1
                let category = scalar.properties.generalCategory
                if category == .control || category == .lineSeparator || category == .paragraphSeparator
                    || scalar.properties.isBidiControl
                {
                    result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
    }
}

func excerpt(_ text: String, limit: Int = 60) -> String { MessageText.excerpt(text, limit: limit) }
