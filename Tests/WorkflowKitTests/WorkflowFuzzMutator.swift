import Foundation
import WorkflowKit

/// Changes a YAML document the way typos, bad merges and hostile input do.
struct Mutator {
    var rng: SplitMix64

    typealias Mutation = @Sendable (inout Mutator, String) -> String

    static let mutations: [(name: String, apply: Mutation)] = [
        ("delete line", { m, s in m.editLines(s) { m, lines in lines.remove(at: m.rng.below(lines.count)) } }),
        ("duplicate line", { m, s in m.editLines(s) { m, lines in let i = m.rng.below(lines.count); lines.insert(lines[i], at: i) } }),
        ("swap lines", { m, s in m.editLines(s) { m, lines in lines.swapAt(m.rng.below(lines.count), m.rng.below(lines.count)) } }),
        ("move line", { m, s in m.editLines(s) { m, lines in let line = lines.remove(at: m.rng.below(lines.count)); lines.insert(line, at: m.rng.below(lines.count + 1)) } }),
        ("reindent", { m, s in m.reindent(s) }),
        ("truncate", { m, s in m.truncate(s) }),
        ("insert junk", { m, s in m.insertJunk(s) }),
        ("wrong type", { m, s in let value = m.rng.pick(Mutator.wrongValues); return m.replaceValue(s, with: value) }),
        ("huge number", { m, s in m.hugeNumber(s) }),
        ("rename key", { m, s in m.renameKey(s) }),
        ("drop block", { m, s in m.dropBlock(s) }),
        ("duplicate key", { m, s in m.duplicateKey(s) }),
        ("mutate type", { m, s in m.mutateType(s) }),
        ("mutate template", { m, s in m.mutateTemplate(s) }),
        ("long string", { m, s in m.longString(s) }),
        ("deep nesting", { m, s in m.deepNesting(s) }),
        ("anchors and aliases", { m, s in m.aliases(s) }),
        ("alias bomb", { m, s in m.aliasBomb(s) }),
        ("line endings", { m, s in m.lineEndings(s) }),
        ("flow style", { m, s in m.flowStyle(s) }),
        ("odd unicode", { m, s in m.oddUnicode(s) }),
    ]

    mutating func mutate(_ text: String, times: Int) -> (String, [String]) {
        var text = text
        var applied: [String] = []
        for _ in 0..<times {
            let mutation = rng.pick(Self.mutations)
            text = mutation.apply(&self, text)
            applied.append(mutation.name)
        }
        return (text, applied)
    }

    // MARK: Lines

    func lines(_ text: String) -> [String] { text.components(separatedBy: "\n") }

    mutating func editLines(_ text: String, _ edit: (inout Mutator, inout [String]) -> Void) -> String {
        var lines = lines(text)
        guard !lines.isEmpty else { return text }
        edit(&self, &lines)
        return lines.joined(separator: "\n")
    }

    /// Index of a random line that is `key: value` or `key:` (not a comment), if any.
    mutating func keyLine(in lines: [String], where predicate: (String) -> Bool = { _ in true }) -> Int? {
        let candidates = lines.indices.filter { index in
            let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
            return !trimmed.hasPrefix("#") && (trimmed.contains(": ") || trimmed.hasSuffix(":")) && predicate(lines[index])
        }
        return candidates.isEmpty ? nil : rng.pick(candidates)
    }

    static func indentation(of line: String) -> Int { line.prefix { $0 == " " }.count }

    mutating func reindent(_ text: String) -> String {
        editLines(text) { m, lines in
            let index = m.rng.below(lines.count)
            let line = lines[index]
            switch m.rng.below(4) {
            case 0: lines[index] = String(repeating: " ", count: m.rng.int(1...3)) + line
            case 1: lines[index] = String(line.dropFirst(min(Self.indentation(of: line), m.rng.int(1...2))))
            case 2: lines[index] = "\t" + line.drop { $0 == " " }
            default:
                // Shift a whole block.
                let end = min(lines.count, index + m.rng.int(2...8))
                for i in index..<end { lines[i] = "  " + lines[i] }
            }
        }
    }

    mutating func truncate(_ text: String) -> String {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return text }
        // Cutting inside a multi-byte character leaves U+FFFD: Swift strings are always valid Unicode.
        return String(decoding: bytes.prefix(rng.below(bytes.count)), as: UTF8.self)
    }

    static let junk: [String] = [
        "\0", "\t", "\r", "\r\n", "\u{1}", "\u{7}", "\u{8}", "\u{1B}[31m", "\u{7F}", "\u{85}", "\u{A0}", "\u{2028}", "\u{2029}",
        "\u{FEFF}", "\u{200B}", "\u{202E}", "\u{FFFD}", "\u{FFFE}", "\u{10FFFF}", "\u{E000}", "e\u{301}", "👩‍👩‍👧‍👦", "🇺🇳", "𝔘𝔫𝔦",
        ":", ": ", " :", "-", "- ", "? ", "{", "}", "[", "]", ",", "&", "&a ", "*", "*a", "!", "!!str ", "!!map ", "!<tag:x> ",
        "|", ">", "|-", "'", "\"", "%", "%YAML 1.1\n", "@", "`", "#", " # comment", "---", "\n---\n", "...", "\n...\n", "{{", "}}",
        "{{#", "{{/", "\\", "\\u", "\"\\x\"", "\"\\uD800\"", "~", "null", "<<: ", "=", "'''",
    ]

    mutating func insertJunk(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        var result = String.UnicodeScalarView()
        let at = rng.below(scalars.count + 1)
        result.append(contentsOf: scalars[..<at])
        for _ in 0..<rng.int(1...3) { result.append(contentsOf: rng.pick(Self.junk).unicodeScalars) }
        result.append(contentsOf: scalars[at...])
        return String(result)
    }

    static let wrongValues: [String] = [
        "[a, b]", "[]", "{x: 1}", "{}", "42", "-1", "0", "3.5", "-0.0", "1e400", "-1e400", ".nan", ".inf", "-.inf", "0x1F", "0o17",
        "true", "false", "yes", "no", "on", "null", "~", "", "\"\"", "''", "2025-05-01", "2025-05-01T12:00:00Z", "12:30:00",
        "!!binary aGVsbG8=", "!!int \"12\"", "!!str 12", "!custom x", "!!set {a, b}", "&anchor value", "*undefined", "|\n  block",
        ">-\n  folded", "\"unterminated", "'single", "[unclosed", "{unclosed: 1", "- item", "a: b: c", "? complex", "@reserved", "`tick`",
        "99999999999999999999999999", "-9223372036854775809", "9223372036854775807", "1_000", "+15m", "now", "-1h", "0s", "00:00",
        "any", "none", "immediate", "after 30m", "push-to-start", "restart", "enum(a, b)", "string(0)", "\"{{input.x}}\"",
        "\"{{attributes.nope}}\"", "\"{{previous.status}}\"", "\"{{#a}}\"", "\"\\0\\a\\e\"",
    ]

    mutating func replaceValue(_ text: String, with value: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines) else { return }
            let line = lines[index]
            let colon = line.range(of: ": ") ?? line.range(of: ":", options: .backwards)!
            lines[index] = String(line[..<colon.lowerBound]) + ": " + value
        }
    }

    mutating func hugeNumber(_ text: String) -> String {
        let huge = [
            "9223372036854775807", "9223372036854775806", "4611686018427387904", "99999999999999999999", "18446744073709551615",
            "2147483648", "4097", "100000",
        ]
        let number = rng.pick(huge)
        // Into a type (max length, array count), a duration or a plain number.
        let replacements: [(String, String)] = [
            ("string(", "string(\(number)"), ("; ", "; \(number)"), ("after: ", "after: \(number)"), ("after ", "after \(number)"),
            ("relevance: ", "relevance: \(number)"), ("priority: ", "priority: \(number)"), ("+", "+\(number)"),
        ]
        let (old, new) = rng.pick(replacements)
        let ranges = ranges(of: old, in: text)
        guard !ranges.isEmpty else {
            let value = rng.pick(["\(number)", "string(\(number))", "\"[int; \(number)]\""])
            return replaceValue(text, with: value)
        }
        var text = text
        let range = rng.pick(ranges)
        // `string(40)` becomes `string(999…40)`: the digits stay a number, just far larger.
        text.replaceSubrange(range, with: new)
        return text
    }

    func ranges(of needle: String, in text: String) -> [Range<String.Index>] {
        var result: [Range<String.Index>] = []
        var start = text.startIndex
        while let range = text.range(of: needle, range: start..<text.endIndex) {
            result.append(range)
            start = range.upperBound
        }
        return result
    }

    static let keyTypos: [@Sendable (String) -> String] = [
        { $0 + "s" }, { String($0.dropLast()) }, { $0.uppercased() }, { $0.capitalized }, { $0 + "_" }, { "_" + $0 },
        { _ in "" }, { _ in "default" }, { _ in "any" }, { _ in "self" }, { _ in "ContentState" }, { _ in "1abc" }, { _ in "a-b" },
        { _ in "\"quoted key\"" }, { _ in "ключ" }, { _ in "🔑" }, { _ in "? [a, b]" }, { _ in "[a, b]" }, { _ in "{a: b}" },
        { _ in "*undefined" }, { _ in "!!int 1" }, { _ in "null" }, { _ in "true" }, { _ in "<<" },
        { String($0.reversed()) }, { $0.replacingOccurrences(of: "-", with: "_") }, { $0.replacingOccurrences(of: "_", with: "-") },
    ]

    mutating func renameKey(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines) else { return }
            let line = lines[index]
            let indent = line.prefix { $0 == " " || $0 == "-" }
            let rest = line.dropFirst(indent.count)
            guard let colon = rest.firstIndex(of: ":") else { return }
            let key = String(rest[..<colon])
            lines[index] = String(indent) + m.rng.pick(Self.keyTypos)(key) + String(rest[colon...])
        }
    }

    /// Deletes a key line and everything indented under it: drops required keys and whole sections.
    mutating func dropBlock(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines) else { return }
            let indent = Self.indentation(of: lines[index])
            var end = index + 1
            while end < lines.count, lines[end].trimmingCharacters(in: .whitespaces).isEmpty || Self.indentation(of: lines[end]) > indent {
                end += 1
            }
            lines.removeSubrange(index..<end)
        }
    }

    mutating func duplicateKey(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines, where: { $0.trimmingCharacters(in: .whitespaces).hasSuffix(":") == false }) else { return }
            var copy = lines[index]
            if copy.trimmingCharacters(in: .whitespaces).hasPrefix("- ") {
                // The key of a list item: repeat it on the next line, at the item's key indentation.
                let dash = copy.range(of: "- ")!
                copy.replaceSubrange(dash, with: "  ")
            }
            lines.insert(copy, at: index + 1)
        }
    }

    static let types: [String] = [
        "string", "string(1)", "string(0)", "string(-1)", "string()", "string(x)", "string(40", "int", "int?", "int??", "double",
        "bool", "date", "date?", "enum(a)", "enum()", "enum(a,,b)", "enum(a, a)", "enum(default, case)", "enum(1a, b)",
        "\"enum(a, b)\"", "\"enum(a, b)?\"", "enum(a, b", "[int]", "\"[int; 0]\"", "\"[int; 3]\"", "\"[[int]]\"", "\"[int?; 2]?\"",
        "\"[enum(x, y); 2]\"", "[string(10); 3]", "\"[string(10); 3\"", "strng", "String", "integer", "float", "any", "?", "[]", "{}",
        "\"string(4096)\"", "\"string(9223372036854775807)\"", "\"[string(4000); 9223372036854775807]\"", "\"[[[[[[[[[[int]]]]]]]]]]\"",
        "\"enum(\(String(repeating: "v", count: 300)), b)\"", "\"string(\u{0663})\"", "\"enum(é, ü)\"", "\"enum(a-b, c)\"",
    ]

    mutating func mutateType(_ text: String) -> String {
        let needles = ["string(", "int", "date", "enum(", "double", "bool", "[string"]
        let candidates = needles.flatMap { ranges(of: ": " + $0, in: text) }
        guard !candidates.isEmpty else {
            let type = rng.pick(Self.types)
            return replaceValue(text, with: type)
        }
        let range = rng.pick(candidates)
        let lineEnd = text[range.lowerBound...].firstIndex { $0 == "\n" || $0 == "," || $0 == "}" } ?? text.endIndex
        var text = text
        text.replaceSubrange(range.lowerBound..<lineEnd, with: ": " + rng.pick(Self.types))
        return text
    }

    static let templateEdits: [(old: String, new: String)] = [
        ("}}", ""), ("}}", "}"), ("{{", "{{{"), ("{{", "{{#"), ("{{", "{{^"), ("{{", "{{/"), ("{{", "{{!"), ("{{", "{{>"),
        ("{{", "{{="), ("{{", "{{%"), ("{{", "{{&"), ("{{", "{{$"), ("{{", "{{<"), ("{{", "{{ "), ("{{/", "{{#"), ("{{#", "{{/"),
        ("attributes.", "attributes.x"), ("attributes.", "attribute."), ("input.", "input.zz"), ("input.", "previous."),
        ("previous.", "input."), ("previous.", "attributes."), ("{{", "{{uppercased("), ("{{", "{{nosuch("), ("}}", ")}}"),
        ("}}", ".x}}"), ("{{", "{{."), ("{{", "{{now}}{{"), ("{{", "{{.}}{{"), ("{{", "{{#input.x}}{{"), ("{{", "{{{{"),
        ("}}", "}}}}"), ("{{", "{{ \u{0}"), ("{{", "{{attributes}}{{"), ("{{", "{{input..x}}{{"),
    ]

    mutating func mutateTemplate(_ text: String) -> String {
        var candidates: [(Range<String.Index>, String)] = []
        for (old, new) in Self.templateEdits {
            for range in ranges(of: old, in: text) { candidates.append((range, new)) }
        }
        guard !candidates.isEmpty else {
            let value = rng.pick(["\"{{\"", "\"{{#input.x}}\"", "\"{{input.eta}\"", "\"}}{{\"", "\"{{uppercased(attributes.x}}\""])
            return replaceValue(text, with: value)
        }
        let (range, new) = rng.pick(candidates)
        var text = text
        text.replaceSubrange(range, with: new)
        return text
    }

    mutating func longString(_ text: String) -> String {
        let length = rng.pick([300, 4_097, 20_000, 200_000])
        let unit = rng.pick(["x", "é", "🍕", "{{attributes.merchantName}}", "ab ", "\\n"])
        let body = String(repeating: unit, count: max(1, length / unit.count))
        if rng.chance(0.2) {
            // A very long key.
            return editLines(text) { m, lines in
                guard let index = m.keyLine(in: lines) else { return }
                let line = lines[index]
                let indent = line.prefix { $0 == " " }
                lines.insert(String(indent) + String(repeating: "k", count: length) + ": 1", at: index)
            }
        }
        let value = rng.chance(0.5) ? "\"\(body)\"" : body
        return replaceValue(text, with: value)
    }

    mutating func deepNesting(_ text: String) -> String {
        let depth = rng.pick([50, 500, 999, 1_001, 5_000])
        let nested: String
        switch rng.below(5) {
        case 0: nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        case 1: nested = String(repeating: "{a: ", count: depth) + "1" + String(repeating: "}", count: depth)
        case 2: nested = String(repeating: "[", count: depth)  // never closed
        case 3: nested = "\"" + String(repeating: "{{#input.eta}}", count: depth) + String(repeating: "{{/input.eta}}", count: depth) + "\""
        default: nested = "\"" + String(repeating: "[", count: depth) + "int" + String(repeating: "]", count: depth) + "\""
        }
        if rng.chance(0.3) {
            // Block nesting: every `- ` on one line opens a sequence.
            return text + "\nextra:\n  " + String(repeating: "- ", count: min(depth, 2_000)) + "x\n"
        }
        return replaceValue(text, with: nested)
    }

    mutating func aliases(_ text: String) -> String {
        // Anchor a random value and refer to it elsewhere: legal YAML that puts a copy of a value
        // where a different shape may be expected.
        editLines(text) { m, lines in
            guard let source = m.keyLine(in: lines), let target = m.keyLine(in: lines) else { return }
            let name = m.rng.pick(["a", "x", "anchor", "a1"])
            let line = lines[source]
            if let colon = line.range(of: ": ") {
                lines[source] = String(line[..<colon.upperBound]) + "&\(name) " + String(line[colon.upperBound...])
            } else {
                lines[source] = line + " &\(name)"
            }
            let targetLine = lines[target]
            if m.rng.chance(0.2) {
                lines.insert(String(repeating: " ", count: Self.indentation(of: targetLine)) + "<<: *\(name)", at: target + 1)
            } else if let colon = targetLine.range(of: ": ") {
                lines[target] = String(targetLine[..<colon.upperBound]) + "*\(name)"
            } else {
                lines[target] = targetLine + " *\(name)"
            }
        }
    }

    mutating func aliasBomb(_ text: String) -> String {
        let levels = rng.int(3...10)
        let width = rng.int(2...10)
        var bomb = "lol0: &l0 [" + Array(repeating: "\"lol\"", count: width).joined(separator: ", ") + "]\n"
        for level in 1..<levels {
            bomb += "lol\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: width).joined(separator: ", ") + "]\n"
        }
        let top = "*l\(levels - 1)"
        switch rng.below(4) {
        case 0: return bomb + text  // unknown root keys holding the bomb
        case 1: return bomb + text + "\n? \(top)\n: boom\n"  // the bomb as a mapping key
        case 2: return bomb + text.replacingOccurrences(of: "\nstates:\n", with: "\nstates:\n  ? \(top)\n  : {final: true}\n")
        default: return bomb + replaceValue(text, with: top)
        }
    }

    mutating func lineEndings(_ text: String) -> String {
        switch rng.below(4) {
        case 0: return text.replacingOccurrences(of: "\n", with: "\r\n")
        case 1: return text.replacingOccurrences(of: "\n", with: "\r")
        case 2: return "\u{FEFF}" + text
        default: return text.replacingOccurrences(of: "\n", with: "\u{2028}")
        }
    }

    /// Rewrites a `key:` block header with its children as one `{…}` flow mapping (often wrongly).
    mutating func flowStyle(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines, where: { $0.hasSuffix(":") }) else { return }
            let indent = Self.indentation(of: lines[index])
            var end = index + 1
            var children: [String] = []
            while end < lines.count, Self.indentation(of: lines[end]) > indent, !lines[end].trimmingCharacters(in: .whitespaces).isEmpty {
                children.append(lines[end].trimmingCharacters(in: .whitespaces))
                end += 1
            }
            guard !children.isEmpty else { return }
            lines.replaceSubrange(index..<end, with: [lines[index] + " {" + children.joined(separator: ", ") + "}"])
        }
    }

    mutating func oddUnicode(_ text: String) -> String {
        let odd = ["\u{0}", "\u{1F}", "\u{7F}", "\u{9F}", "\u{200D}", "\u{2066}", "\u{FE0F}", "\u{1F9D1}\u{200D}\u{1F373}", "\u{E0041}",
                   "\u{D7FF}", "\u{FFFF}", "İ", "ß", "ﬁ", "\u{0130}"]
        let scalars = Array(text.unicodeScalars)
        guard !scalars.isEmpty else { return rng.pick(odd) }
        // Replace a letter of a key or value.
        let letters = scalars.indices.filter { scalars[$0].properties.isAlphabetic }
        guard !letters.isEmpty else { return text + rng.pick(odd) }
        let index = rng.pick(letters)
        var result = String.UnicodeScalarView(scalars[..<index])
        result.append(contentsOf: rng.pick(odd).unicodeScalars)
        result.append(contentsOf: scalars[(index + 1)...])
        return String(result)
    }
}
