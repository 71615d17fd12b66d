import APNSCore
import Foundation
import Testing

@Suite("Base64URL (RFC 4648 §5, no padding)")
struct Base64URLTests {
    /// The reference: Foundation's Base64 with the two characters swapped and the padding cut.
    static func reference(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    @Test("every length from 0 to 64 bytes encodes as the reference and decodes back")
    func roundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for length in 0...64 {
            for _ in 0..<8 {
                let bytes = (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
                let text = Base64URL.encode(bytes)
                #expect(text == Self.reference(bytes))
                #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
                #expect(Base64URL.decode(text) == Data(bytes), "length \(length): \(text)")
            }
        }
    }

    @Test("bytes that need both URL-safe characters")
    func urlSafeCharacters() {
        // 0xFB 0xFF 0xBF is "+/+/" in standard Base64.
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == Data([0xFB, 0xFF, 0xBF]))
    }

    @Test("text outside the URL-safe alphabet or of an impossible length is refused", arguments: [
        "-_-_=", "+/+/", "ab cd", "a", "abcde", "é",
    ])
    func refused(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }
}
