import Crypto
import Foundation

/// The operator's master key: 32 bytes (AES-256) that seal the merchants' APNs keys in the
/// database (AES-GCM). It never reaches the database; only ``id``, a digest, is stored beside
/// each sealed key, so that a key given by mistake is recognised before anything is decrypted or
/// written. The CLI reads it from `ORDERFLOW_SECRET_KEY` or a key file; the library never reads
/// the environment.
///
/// Never printed: `description` shows the id only.
public struct MasterKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let key: SymmetricKey
    /// A digest of the key, safe to show and store: 16 hex characters.
    public let id: String

    /// The key's length in bytes.
    public static let byteCount = 32

    /// A key from its base64 text (`openssl rand -base64 32`), as `ORDERFLOW_SECRET_KEY` holds it.
    /// - Parameters:
    ///   - text: 32 bytes in base64, surrounding whitespace ignored.
    ///   - source: names where the text came from, for the error (`ORDERFLOW_SECRET_KEY`).
    /// - Throws: `OrderFlowError.invalidConfiguration` saying what is wrong and how to make one.
    public init(base64 text: String, source: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bytes = Data(base64Encoded: trimmed) else {
            throw OrderFlowError(.invalidConfiguration,
                "\(source) is not base64; a master key is \(Self.byteCount) random bytes in base64: \(Self.howToMakeOne)")
        }
        guard bytes.count == Self.byteCount else {
            throw OrderFlowError(.invalidConfiguration,
                "\(source) holds \(bytes.count) bytes, a master key is \(Self.byteCount): \(Self.howToMakeOne)")
        }
        self.init(bytes: bytes)
    }

    /// A key from its 32 bytes.
    public init(bytes: Data) {
        precondition(bytes.count == Self.byteCount, "a master key is \(Self.byteCount) bytes")
        key = SymmetricKey(data: bytes)
        let digest = SHA256.hash(data: Data("orderflow master key id\u{0}".utf8) + bytes)
        id = digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// How an operator makes one, for messages.
    public static let howToMakeOne =
        "make one with `openssl rand -base64 32 > orderflow-secret.key && chmod 600 orderflow-secret.key` "
        + "and set ORDERFLOW_SECRET_KEY_FILE to its path (or ORDERFLOW_SECRET_KEY to its text); keep it safe, "
        + "the stored APNs keys cannot be read without it"

    /// Seals `plaintext` bound to `context` (the row it belongs to): the nonce, ciphertext and tag.
    func seal(_ plaintext: Data, context: String) throws -> Data {
        try AES.GCM.seal(plaintext, using: key, authenticating: Data(context.utf8)).combined!
    }

    /// Opens what ``seal(_:context:)`` made with this key for the same context; nil when it was
    /// sealed under another key, for another row, or changed.
    func open(_ sealed: Data, context: String) -> Data? {
        guard let box = try? AES.GCM.SealedBox(combined: sealed) else { return nil }
        return try? AES.GCM.open(box, using: key, authenticating: Data(context.utf8))
    }

    public var description: String { "MasterKey(id: \(id))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["id": id]) }
}
