import APNSCore
import Foundation
import OrderFlow

/// The master key that seals merchants' APNs keys, read at the edge: `ORDERFLOW_SECRET_KEY`
/// (its base64 text) or `ORDERFLOW_SECRET_KEY_FILE` (a file holding that text). The CLI and the
/// demo read it alike.
public enum MasterKeySetting {
    /// The key when one is configured, nil when neither variable is set.
    /// - Throws: a usage error naming the variable when the key is unusable.
    /// - Parameter environment: The process's environment.
    /// - Returns: The key, or nil.
    public static func optional(_ environment: [String: String]) throws -> MasterKey? {
        if let text = environment["ORDERFLOW_SECRET_KEY"], !text.isEmpty {
            return try key(text, source: "ORDERFLOW_SECRET_KEY")
        }
        if let path = environment["ORDERFLOW_SECRET_KEY_FILE"], !path.isEmpty {
            let text: String
            do {
                text = try SmallTextFile.read(path, maximumBytes: 4096)
            } catch {
                throw CLIError(.usage, "ORDERFLOW_SECRET_KEY_FILE names \(path), which cannot be read (\(error))",
                               remedy: "give the path of a readable file holding the master key; \(MasterKey.howToMakeOne)")
            }
            return try key(text, source: "the master key file \(path) (ORDERFLOW_SECRET_KEY_FILE)")
        }
        return nil
    }

    /// The key, which the command needs.
    /// - Parameter environment: The process's environment.
    /// - Returns: The key.
    public static func required(_ environment: [String: String]) throws -> MasterKey {
        guard let key = try optional(environment) else {
            throw CLIError(.usage, "no master key to seal the APNs key with", remedy: MasterKey.howToMakeOne)
        }
        return key
    }

    private static func key(_ text: String, source: String) throws -> MasterKey {
        do {
            return try MasterKey(base64: text, source: source)
        } catch let error as OrderFlowError {
            throw CLIError(.usage, error.message)
        }
    }
}
