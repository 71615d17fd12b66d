import APNS
import Foundation
import WorkflowKit

/// Checks of what callers give, made before any statement runs: a refused request changes
/// nothing, and says what is wrong in words rather than as a database error.
extension OrderFlowEngine {
    /// Ids, names and keys (order id, device id, idempotency key, state name, …) are stored as
    /// text, and several are indexed: at most this many characters.
    static let maximumIdentifierLength = 200

    /// The characters an id, a name or a key may use besides ASCII letters and digits: enough
    /// for UUIDs, base64 and namespaced ids (`pos:1042`, `shop/1042`, `#1042`, `anna@shop`),
    /// none that a shell, SQL or a terminal reads specially.
    public static let identifierPunctuation = "-_.:@#/+=~"

    /// The text policy for ids, names and keys: 1 to 200 ASCII letters, digits and
    /// ``identifierPunctuation``. ASCII only, because an id is a key that people copy, compare
    /// and type: non-ASCII letters bring look-alikes (Cyrillic `а` for Latin `a`) and forms that
    /// Swift calls equal and PostgreSQL does not (`é` as one code point or two); spaces, quotes
    /// and control or direction characters make an id that prints as something else.
    static func validateIdentifier(_ value: String, what: String, allowEmpty: Bool = false) throws {
        if isPlainIdentifier(value, allowEmpty: allowEmpty) { return }
        try validateStoredIdentifier(value, what: what, allowEmpty: allowEmpty)
        let scalars = Array(value.unicodeScalars)
        if let index = scalars.firstIndex(where: { !($0.isASCII && isIdentifierByte(UInt8($0.value))) }) {
            let scalar = scalars[index]
            let character = scalar.isASCII ? "`\(scalar)` (\(codePoint(scalar)))" : codePoint(scalar)
            throw OrderFlowError(
                .invalidInput,
                "the \(what) \"\(shown(value))\" has \(character) at position \(index + 1); ids, names and keys use only ASCII letters, digits and \(identifierPunctuation.map { String($0) }.joined(separator: " ")) (1 to \(maximumIdentifierLength) characters): use only those")
        }
    }

    /// Whether `value` passes ``validateIdentifier(_:what:allowEmpty:)`` on its fast path: ASCII
    /// identifier bytes only (so nothing to trim either), not too long.
    static func isPlainIdentifier(_ value: String, allowEmpty: Bool = false) -> Bool {
        value.utf8.count <= maximumIdentifierLength && value.utf8.allSatisfy(isIdentifierByte) && (allowEmpty || !value.isEmpty)
    }

    /// The checks an id passed before the text policy: what the database can hold and index
    /// (1 to 200 code points, no control character). For values the engine itself handed out
    /// (a page cursor is an order id), which orders stored before the policy may not meet.
    static func validateStoredIdentifier(_ value: String, what: String, allowEmpty: Bool = false) throws {
        let length = value.unicodeScalars.count
        if length == 0, !allowEmpty {
            throw OrderFlowError(.invalidInput, "the \(what) is empty; give 1 to \(maximumIdentifierLength) characters")
        }
        if length > maximumIdentifierLength {
            throw OrderFlowError(
                .invalidInput,
                "the \(what) is \(length) characters long (Unicode code points); at most \(maximumIdentifierLength) are allowed, shorten it")
        }
        if let control = value.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            let name = control == "\u{0}" ? "a NUL character (U+0000)" : "the control character \(codePoint(control))"
            throw OrderFlowError(.invalidInput, "the \(what) \"\(shown(value))\" contains \(name), which it cannot hold; remove it")
        }
    }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return identifierPunctuation.utf8.contains(byte)
        }
    }

    static func validateIdentifier(_ value: String?, what: String) throws {
        if let value { try validateIdentifier(value, what: what) }
    }

    /// `U+000A`.
    static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// A caller's value quoted in a message: shortened, with control characters made visible.
    static func shown(_ value: String) -> String {
        MessageText.excerpt(value)
    }

    // MARK: Content values

    /// The text policy for content values: every string in the attributes and the inputs of
    /// a creation or a transition (a driver's name, a cancel reason), which become the Live
    /// Activity's text and its alerts. They are one line of printable text. Refused: control
    /// characters (C0 including tab, DEL, C1: they show as boxes or nothing on a phone and can
    /// drive a terminal), line breaks (LF, CR, U+2028, U+2029: a Lock Screen line is one line,
    /// a break pushes the rest of the card out of its fixed height), and direction embeddings,
    /// overrides and isolates (U+202A–U+202E, U+2066–U+2069) unless each is closed within the
    /// value, in order: closed, they set right-to-left text apart; left open, they reverse the
    /// text that follows them in the alert or message ("Trojan Source"). Everything else
    /// printable is accepted: any script, emoji, zero-width joiners, marks.
    static func validateContentText(_ value: JSONValue, what: String, path: String = "") throws {
        switch value {
        case .string(let text):
            if let problem = contentTextProblem(text) {
                let field = path.isEmpty ? "" : " \(path)"
                throw OrderFlowError(
                    .invalidInput,
                    "the \(what)\(field) \"\(shown(text))\" \(problem); content values are one line of printable text")
            }
        case .array(let items):
            for (index, item) in items.enumerated() { try validateContentText(item, what: what, path: "\(path)[\(index)]") }
        case .object(let members):
            for key in members.keys.sorted() {
                try validateContentText(members[key]!, what: what, path: path.isEmpty ? key : "\(path).\(key)")
            }
        case .null, .bool, .int, .double:
            return
        }
    }

    /// A name for people (a merchant's, an API key's): one line of printable text, as content
    /// values are ("Luigi's Pizza & Pasta" is a name, not an id), 1 to 200 code points.
    static func validateName(_ value: String?, what: String) throws {
        guard let value else { return }
        let length = value.unicodeScalars.count
        guard (1...maximumIdentifierLength).contains(length) else {
            throw OrderFlowError(.invalidInput, "the \(what) is \(length) characters long; give 1 to \(maximumIdentifierLength)")
        }
        if let problem = contentTextProblem(value) {
            throw OrderFlowError(.invalidInput, "the \(what) \"\(shown(value))\" \(problem); names are one line of printable text")
        }
    }

    /// Why `text` breaks the content policy, or nil.
    static func contentTextProblem(_ text: String) -> String? {
        // Closers still owed, innermost last: U+202C for an embedding or override, U+2069 for an isolate.
        var open: [(opener: Unicode.Scalar, closer: Unicode.Scalar)] = []
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A, 0x0D, 0x2028, 0x2029:
                return "contains a line break (\(codePoint(scalar))): write it on one line"
            case 0x202A, 0x202B, 0x202D, 0x202E:
                open.append((scalar, "\u{202C}"))
            case 0x2066, 0x2067, 0x2068:
                open.append((scalar, "\u{2069}"))
            case 0x202C, 0x2069:
                guard let last = open.last, last.closer == scalar else {
                    return "contains \(codePoint(scalar)), which closes no direction override or isolate opened before it in the value: remove it"
                }
                open.removeLast()
            default:
                if scalar.properties.generalCategory == .control {
                    return "contains the control character \(codePoint(scalar)): remove it"
                }
            }
        }
        if let unclosed = open.last {
            return "opens a direction override or isolate (\(codePoint(unclosed.opener))) that it does not close (with \(codePoint(unclosed.closer))), which would reverse the text shown after it: close it or remove it"
        }
        return nil
    }

    // MARK: Push tokens

    /// APNs tokens as the app gets them (`Data`, shown as hex): at least 32 bytes (a device token
    /// is exactly that; Live Activity tokens are longer), at most 512. Surrounding whitespace
    /// (from copying) is dropped; the token is stored lower-case. Messages never quote the
    /// token: it is a credential for the device.
    static let tokenHexDigits = 64...1024

    static func normalizedToken(_ token: String) throws -> String {
        let trimmed = token.trimmingCharacters(in: .whitespacesAndNewlines)
        let advice = "pass the token the app received (pushToStartToken, pushTokenUpdates or the device token) as hexadecimal text"
        if trimmed.isEmpty {
            throw OrderFlowError(.invalidInput, "the push token is empty; \(advice)")
        }
        // ASCII only: `Character.isHexDigit` also accepts fullwidth digits, which APNs does not.
        let scalars = Array(trimmed.unicodeScalars)
        if let index = scalars.firstIndex(where: { !isASCIIHexDigit($0) }) {
            let what = scalars[index].properties.isWhitespace ? "whitespace" : "a character that is not a hexadecimal digit"
            throw OrderFlowError(
                .invalidInput,
                "the push token has \(what) at position \(index + 1) of \(scalars.count); a token is hexadecimal (0-9, a-f) only: \(advice)")
        }
        if !scalars.count.isMultiple(of: 2) {
            throw OrderFlowError(
                .invalidInput,
                "the push token has an odd number of hexadecimal digits (\(scalars.count)); every byte takes two, so it was probably cut off: \(advice)")
        }
        guard tokenHexDigits.contains(scalars.count) else {
            throw OrderFlowError(
                .invalidInput,
                "the push token has \(scalars.count) hexadecimal digits; APNs tokens have \(tokenHexDigits.lowerBound) to \(tokenHexDigits.upperBound) (32 to 512 bytes): \(advice)")
        }
        return trimmed.lowercased()
    }

    static func isASCIIHexDigit(_ scalar: Unicode.Scalar) -> Bool {
        ("0"..."9").contains(scalar) || ("a"..."f").contains(scalar) || ("A"..."F").contains(scalar)
    }
}
