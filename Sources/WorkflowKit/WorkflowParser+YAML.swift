import Foundation
import Yams

/// libyaml's own errors as diagnostics, at the line and column libyaml counts.
extension WorkflowParser {
    mutating func reportYAMLError(_ yamlError: YamlError) {
        switch yamlError {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let contextText = context.map { " (\($0.text) at line \($0.mark.line))" } ?? ""
            error("YAML syntax error: \(problem)\(contextText); check indentation and quoting (a value containing `: `, `#` or starting with `{`, `*` or `&` must be quoted)",
                  at: SourcePosition(line: mark.line, column: mark.column))
        case .duplicatedKeysInMapping(let duplicates, let context):
            error("key \(codeList(duplicates)) appears more than once in the same mapping; keep one",
                  at: SourcePosition(line: context.mark.line, column: context.mark.column))
        case .reader(let problem, let offset, let value, _):
            // libyaml refuses control characters (NUL, ESC, …) anywhere in the text, even in comments.
            let character = Unicode.Scalar(UInt32(truncatingIfNeeded: value)).map { " (U+\(String(format: "%04X", $0.value)))" } ?? ""
            error("the file is not readable text: \(problem)\(character); remove the character, or in a double-quoted string write it as an escape like `\\u0007`",
                  at: offset.map(position(ofCharacterOffset:)) ?? .start)
        default:
            error("cannot read the YAML: \(yamlError)", at: .start)
        }
    }

    /// The line and column of the character `offset` characters into the file, counted as
    /// libyaml counts: lines break at LF, CR, CRLF, NEL, LS and PS; columns are Unicode scalars.
    func position(ofCharacterOffset offset: Int) -> SourcePosition {
        guard let end = yaml.index(yaml.startIndex, offsetBy: offset, limitedBy: yaml.endIndex) else { return .start }
        var position = SourcePosition.start
        var previous: Unicode.Scalar?
        for scalar in yaml.unicodeScalars[..<end] {
            defer { previous = scalar }
            switch scalar {
            case "\n" where previous == "\r":
                continue
            case "\n", "\r", "\u{85}", "\u{2028}", "\u{2029}":
                position.line += 1
                position.column = 1
            default:
                position.column += 1
            }
        }
        return position
    }
}
