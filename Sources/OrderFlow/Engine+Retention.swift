import Foundation

extension OrderFlowEngine {
    /// The SQL of the purge and of merchants' retention.
    var retentionStore: RetentionStore { RetentionStore(pool: pool) }

    /// Deletes what ``RetentionPolicy`` says is old enough, every merchant's (or those of
    /// `policy.merchants`), each merchant's finished orders after its own retention. In small
    /// batches, each its own short transaction, with a pause between them: the feed, the claim
    /// and advances go on meanwhile, and two purges at once share the work. Safe to stop at any
    /// point and to run again.
    /// - Parameters:
    ///   - policy: the default retention, the ages of dead letters and tokenless devices, and
    ///     whose rows (every merchant's unless it names some).
    ///   - onBatch: each batch's deleted rows, as they go.
    /// - Returns: the rows deleted, by kind.
    /// - Throws: `OrderFlowError.invalidInput` for a policy out of bounds (nothing is deleted);
    ///   database errors as `OrderFlowError` (what was deleted before stays deleted).
    @discardableResult
    public func purge(
        _ policy: RetentionPolicy = RetentionPolicy(), onBatch: @Sendable ([PurgedRows.Kind: Int]) -> Void = { _ in }
    ) async throws -> PurgedRows {
        try await translatingErrors {
            try policy.validate()
            return try await Purger(store: retentionStore, policy: policy, logger: logger).run(onBatch: onBatch)
        }
    }

    /// What ``purge(_:onBatch:)`` with `policy` would delete now, counted: nothing is changed
    /// or locked.
    public func purgeable(_ policy: RetentionPolicy = RetentionPolicy()) async throws -> PurgedRows {
        try await translatingErrors {
            try policy.validate()
            return PurgedRows(rows: try await retentionStore.purgeable(
                defaultRetention: policy.defaultRetention.inSeconds, deadLetterAge: policy.deadLetterAge.inSeconds,
                deviceAge: policy.tokenlessDeviceAge.inSeconds, merchants: policy.merchants.boundMerchantIDs))
        }
    }

    /// Sets how long a merchant's finished orders are kept (1 minute to 100 years); nil gives
    /// it the purge's default back. The next purge applies it.
    /// - Throws: `OrderFlowError.invalidInput` for a retention out of bounds or an unusable id,
    ///   `.notFound` for a merchant that does not exist (the engine's own merchant always does).
    public func setRetention(_ retention: Duration?, merchantID: String) async throws {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            if let retention { try RetentionPolicy.validate(retention, what: "a merchant's retention") }
            guard try await retentionStore.setRetention(
                merchantID: merchantID, seconds: retention?.inSeconds, ensureRow: merchantID == self.merchantID)
            else { throw Self.unknownMerchant(merchantID) }
        }
    }

    /// A merchant's retention of finished orders.
    /// - Throws: `OrderFlowError.notFound` for a merchant that does not exist.
    public func retention(merchantID: String) async throws -> MerchantRetention {
        try await translatingErrors {
            try Self.validateIdentifier(merchantID, what: "merchant id")
            switch try await retentionStore.retention(merchantID: merchantID) {
            case .some(let seconds):
                return MerchantRetention(merchantID: merchantID, own: seconds.map { .seconds($0) })
            case .none where merchantID == self.merchantID:
                return MerchantRetention(merchantID: merchantID, own: nil)
            case .none:
                throw Self.unknownMerchant(merchantID)
            }
        }
    }
}
