import Foundation

/// Base64 with the URL-safe alphabet and no padding (RFC 4648 §5), as JWTs — APNs provider
/// tokens — use it; also the form of OrderFlow's secrets that travel in URLs and headers.
public enum Base64URL {
    /// On bytes: it runs for every order created and every client secret shown, and Foundation's
    /// `replacingOccurrences` on the text costs more than the encoding itself.
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let base64 = Data(bytes).base64EncodedData()
        var text: [UInt8] = []
        text.reserveCapacity(base64.count)
        for byte in base64 {
            switch byte {
            case UInt8(ascii: "+"): text.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): text.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): break
            default: text.append(byte)
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes, or nil for text with a character outside the URL-safe alphabet (padding
    /// included) or of an impossible length.
    public static func decode(_ text: some StringProtocol) -> Data? {
        guard text.utf8.allSatisfy(isAlphabet) else { return nil }
        var base64: [UInt8] = []
        base64.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): base64.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): base64.append(UInt8(ascii: "/"))
            default: base64.append(byte)
            }
        }
        while base64.count % 4 != 0 { base64.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(base64))
    }

    private static func isAlphabet(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }
}
