import APNS
import Foundation
import WorkflowKit

/// Checks of what callers give, made before any statement runs: a refused request changes
/// nothing, and says what is wrong in words rather than as a database error.
extension OrderFlowEngine {
    /// Ids, names and keys (order id, device id, idempotency key, state name, …) are stored as
    /// text, and several are indexed: at most this many code points (PostgreSQL's `length`).
    static let maximumIdentifierLength = 200

    /// 1 to 200 code points, none of them a control character (NUL, a line break, …).
    static func validateIdentifier(_ value: String, what: String, allowEmpty: Bool = false) throws {
        // Printable ASCII, the usual id, holds no control character and counts one per byte.
        if value.utf8.count <= maximumIdentifierLength, value.utf8.allSatisfy({ (0x20..<0x7F).contains($0) }),
           allowEmpty || !value.isEmpty
        {
            return
        }
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
            throw OrderFlowError(.invalidInput, "the \(what) contains \(name), which it cannot hold; remove it")
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
