import Crypto
import Foundation

extension OrderFlowEngine {
    /// Runs a call that keeps no exactly-once record of its own (applying a workflow, retrying
    /// a dead letter) under an idempotency key: the key's first use runs `body` and records its
    /// result; the same key again with the same `operation` and `request` answers that result
    /// without running anything; the same key for anything else is `conflict`. Without a key,
    /// `body` just runs. Keys are the merchant's, kept for a day.
    ///
    /// - Returns: the result, and whether it was a replay.
    public func idempotent<Result: Codable & Sendable>(
        key: String?, operation: String, request: Data, _ body: () async throws -> Result
    ) async throws -> (result: Result, replayed: Bool) {
        guard let key else { return (try await body(), false) }
        return try await translatingErrors {
            try Self.validateIdentifier(key, what: "idempotency key")
            let digest = Data(SHA256.hash(data: Data(operation.utf8) + [0] + request))
            let store = RequestKeyStore(pool: pool, merchantID: merchantID)
            if let used = try await store.used(key: key) {
                return (try Self.replayed(used, key: key, operation: operation, digest: digest), true)
            }
            let result = try await body()
            let encoded = String(decoding: try JSONEncoder().encode(result), as: UTF8.self)
            if try await store.record(key: key, operation: operation, digest: digest, result: encoded) {
                return (result, false)
            }
            // The same key was recorded by a call running beside this one.
            guard let used = try await store.used(key: key) else { return (result, false) }
            return (try Self.replayed(used, key: key, operation: operation, digest: digest), true)
        }
    }

    private static func replayed<Result: Decodable>(_ used: RequestKeyStore.Used, key: String, operation: String,
                                                    digest: Data) throws -> Result {
        guard used.operation == operation, constantTimeEqual(used.digest, digest) else {
            throw OrderFlowError(.conflict,
                "the idempotency key \(shown(key)) was already used for another request (\(used.operation == operation ? "other content" : used.operation)); nothing was done. Use a new key for a different request")
        }
        return try JSONDecoder().decode(Result.self, from: Data(used.result.utf8))
    }
}
