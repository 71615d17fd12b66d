import Foundation
import PGKit

/// The worker's SQL for broadcast channels (`order_channels`, migration 5).
extension OutboxStore {
    /// Records a channel APNs just created, at once and on its own: were the batch's record
    /// lost, the channel would otherwise exist at APNs with its id known nowhere.
    func recordChannelCreated(merchantID: String, orderID: String, channelID: String, bundleID: String) async throws {
        try await pool.query(PostgresQuery("""
            UPDATE order_channels
            SET channel_id = $3, bundle_id = $4, state = 'open', generation = generation + 1, opened_at = now(),
                failures = 0, next_attempt_at = NULL, reason = CASE WHEN generation = 0 THEN NULL ELSE reason END
            WHERE merchant_id = $1 AND order_id = $2
            """, merchantID, orderID, channelID, bundleID))
    }

    /// Writes the channels' rows back (the orders are leased to this worker: nobody else writes them).
    func writeChannels(_ rows: [ChannelRow]) async throws {
        guard !rows.isEmpty else { return }
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        try await pool.query(PostgresQuery("""
            UPDATE order_channels c SET
                state = r.state, channel_id = r.channel_id, bundle_id = r.bundle_id, generation = r.generation,
                last_seq = GREATEST(c.last_seq, r.last_seq), last_timestamp = GREATEST(c.last_timestamp, r.last_timestamp),
                last_pushed_at = to_timestamp(r.last_pushed_at), next_attempt_at = to_timestamp(r.next_attempt_at),
                failures = r.failures, reason = r.reason, delete_after = to_timestamp(r.delete_after),
                deleted_at = to_timestamp(r.deleted_at)
            FROM jsonb_to_recordset($1::jsonb) AS r(
                merchant_id text, order_id text, state text, channel_id text, bundle_id text, generation integer,
                last_seq integer, last_timestamp bigint, last_pushed_at double precision, next_attempt_at double precision,
                failures integer, reason text, delete_after double precision, deleted_at double precision)
            WHERE c.merchant_id = r.merchant_id AND c.order_id = r.order_id
            """, PostgresJSON(String(decoding: try encoder.encode(rows), as: UTF8.self))))
    }

    struct ChannelRow: Sendable, Encodable {
        var merchantID: String
        var orderID: String
        var state: String
        var channelID: String?
        var bundleID: String?
        var generation: Int
        var lastSeq: Int
        var lastTimestamp: Int
        var lastPushedAt: Double?
        var nextAttemptAt: Double?
        var failures: Int
        var reason: String?
        var deleteAfter: Double?
        var deletedAt: Double?

        init(merchantID: String, orderID: String, _ channel: OutboxChannel) {
            self.merchantID = merchantID
            self.orderID = orderID
            state = channel.state.rawValue
            channelID = channel.channelID
            bundleID = channel.bundleID
            generation = channel.generation
            lastSeq = channel.lastSeq
            lastTimestamp = channel.lastTimestamp
            lastPushedAt = channel.lastPushedAt
            nextAttemptAt = channel.nextAttemptAt
            failures = channel.failures
            reason = channel.reason.map { String($0.prefix(300)) }
            deleteAfter = channel.deleteAfter
            deletedAt = channel.deletedAt
        }
    }
}
