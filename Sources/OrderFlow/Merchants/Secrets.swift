import APNSCore
import Crypto
import Foundation

/// The random bearer secrets OrderFlow hands out (device credentials; the HTTP door's board
/// sign-in links and sessions): a scheme and 256 random bits, stored only as their SHA-256.
extension OrderFlowEngine {
    /// 32 bytes from the system's generator, as URL-safe base64 without padding (43 characters).
    public static func randomSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Base64URL.encode(bytes)
    }

    /// The scheme and 43 URL-safe base64 characters: anything else is not looked up.
    public static func isSecret(_ text: String, scheme: String) -> Bool {
        guard text.hasPrefix(scheme) else { return false }
        let rest = text.utf8.dropFirst(scheme.utf8.count)
        return rest.count == 43 && rest.allSatisfy {
            (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
        }
    }

    /// The stored form: the secrets are 256 random bits, so a plain SHA-256 cannot be reversed,
    /// and finding the row by it says nothing about other secrets.
    public static func secretHash(_ secret: String) -> Data {
        Data(SHA256.hash(data: Data(secret.utf8)))
    }
}
