import Foundation
import Logging
import PGKit

/// Runs a purge: each kind in small batches until a batch comes back short, pausing between
/// batches. Request keys, dead letters and stale commands first (a finished order waits for its
/// commands), then finished orders, then the devices the orders no longer hold.
struct Purger: Sendable {
    let store: RetentionStore
    let policy: RetentionPolicy
    let logger: Logger

    /// Every batch's rows go to `onBatch` as they are deleted (the worker's metric).
    func run(onBatch: @Sendable ([PurgedRows.Kind: Int]) -> Void = { _ in }) async throws -> PurgedRows {
        let merchants = policy.merchants.boundMerchantIDs
        let limit = policy.batchSize
        let store = self.store
        let policy = self.policy
        // Each step deletes one batch and says which kind tells whether the batch was full.
        let steps: [(kind: PurgedRows.Kind, batch: @Sendable () async throws -> [PurgedRows.Kind: Int])] = [
            (.requestKeys, { try await store.purgeRequestKeys(merchants: merchants, limit: limit) }),
            (.deadLetters, { try await store.purgeDeadLetters(age: policy.deadLetterAge.inSeconds, merchants: merchants, limit: limit) }),
            (.staleCommands, { try await store.purgeStaleCommands(age: policy.deadLetterAge.inSeconds, merchants: merchants, limit: limit) }),
            (.orders, {
                try await store.purgeFinishedOrders(defaultRetention: policy.defaultRetention.inSeconds, merchants: merchants, limit: limit)
            }),
            (.devices, { try await store.purgeTokenlessDevices(age: policy.tokenlessDeviceAge.inSeconds, merchants: merchants, limit: limit) }),
        ]
        var purged = PurgedRows()
        for step in steps {
            while true {
                try Task.checkCancellation()
                let counts = try await batchRetryingOnce(step.batch)
                purged.batches += 1
                purged.add(counts)
                if counts.values.contains(where: { $0 > 0 }) { onBatch(counts) }
                guard (counts[step.kind] ?? 0) >= limit else { break }
                try await Task.sleep(for: policy.pause)
            }
        }
        return purged
    }

    /// A batch that met a concurrent change — a row someone held past the lock timeout, a
    /// command added to an order being purged — is tried once more after the pause: the second
    /// read passes over what changed.
    private func batchRetryingOnce(
        _ batch: @Sendable () async throws -> [PurgedRows.Kind: Int]
    ) async throws -> [PurgedRows.Kind: Int] {
        do {
            return try await batch()
        } catch let error as PostgresError where Self.isConcurrentChange(error) {
            logger.debug("purge batch met a concurrent change; trying once more", metadata: ["orderflow.error": "\(error)"])
            try await Task.sleep(for: policy.pause)
            return try await batch()
        }
    }

    /// Lock timeout, foreign key (a row added meanwhile), deadlock, serialization.
    private static func isConcurrentChange(_ error: PostgresError) -> Bool {
        ["55P03", "23503", "40P01", "40001"].contains(error.sqlState ?? "")
    }
}
