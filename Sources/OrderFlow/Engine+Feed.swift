import Foundation
import PGKit

/// Where a reader of the merchant's event feed stands: the transaction of the last event it saw
/// and that event's place among the transaction's events. Written `<transaction>.<index>` —
/// the `id:` of each Server-Sent Event, and what a client sends back as `Last-Event-ID`.
public struct FeedCursor: Sendable, Hashable, LosslessStringConvertible, Comparable {
    public var transaction: UInt64
    /// The place of the last event seen within its transaction; -1 when none of it was seen.
    public var index: Int

    public init(transaction: UInt64, index: Int) {
        self.transaction = transaction
        self.index = index
    }

    /// Before every event ever written.
    public static let beginning = FeedCursor(transaction: 0, index: -1)

    public init?(_ description: String) {
        let parts = description.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count <= 20, parts[1].count <= 9,
              let transaction = UInt64(parts[0]), let index = Int(parts[1]), index >= -1
        else { return nil }
        self.init(transaction: transaction, index: index)
    }

    public var description: String { "\(transaction).\(index)" }

    public static func < (lhs: FeedCursor, rhs: FeedCursor) -> Bool {
        (lhs.transaction, lhs.index) < (rhs.transaction, rhs.index)
    }
}

/// One event of the merchant's feed: a transition that committed, or a push attempt's outcome.
public struct FeedEvent: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable { case transition, push }

    public var cursor: FeedCursor
    public var kind: Kind
    public var orderID: String
    public var workflow: String
    /// The transition's sequence number; for a push, the newest transition it carried.
    public var seq: Int
    /// The transition's states (nil `from` for the creation); nil for a push.
    public var from: String?
    public var to: String?
    /// The transition's event, or the push's (`start`, `update`, `end`, `alert`).
    public var event: String?
    public var actor: String?
    /// When the transition occurred, or when the push was attempted.
    public var at: Date
    /// For a push: which, to which device, and what APNs said.
    public var deliveryID: Int64?
    public var deviceID: String?
    public var outcome: DeliveryOutcome?
    public var status: Int?
    public var reason: String?
}

/// A page of the feed, and where to read on.
public struct FeedPage: Sendable, Hashable {
    public var events: [FeedEvent]
    /// The cursor after the last event of the page (the one given when the page is empty).
    public var cursor: FeedCursor
}

extension OrderFlowEngine {
    /// A cursor a client sent back (an event's id, `Last-Event-ID`).
    /// - Throws: `invalidInput` naming the text when it is not a cursor of this feed.
    public func feedCursor(_ text: String) throws -> FeedCursor {
        guard let cursor = FeedCursor(text) else {
            throw OrderFlowError(.invalidInput,
                "the cursor \(Self.shown(text)) is not an event id of this feed (they look like 8123.0); reconnect without Last-Event-ID to start from now, or with after=0.-1 to replay everything")
        }
        return cursor
    }

    /// The cursor of "now": a feed read from it shows what commits from here on — and may
    /// begin with a few events that committed moments before, while an older transaction was
    /// still running (never one a reader of an earlier cursor would miss).
    public func feedCursorNow() async throws -> FeedCursor {
        try await translatingErrors {
            FeedCursor(transaction: try await feedStore.horizon(), index: -1)
        }
    }

    /// The merchant's transitions and push outcomes after `cursor`, in the order their
    /// transactions ended, at most `limit`. Nothing that commits later is ever placed before
    /// what a reader has already been given: a read stops before the oldest transaction of this
    /// database still running (a long one delays the feed, it never loses an event; those of
    /// other databases on the server do not count), and never gives less than a read before it.
    public func feedEvents(after cursor: FeedCursor, limit: Int = 100) async throws -> FeedPage {
        try await translatingErrors {
            let limit = min(max(1, limit), 1_000)
            let skipped = max(0, cursor.index + 1)
            let rows = try await feedStore.events(fromTransaction: cursor.transaction, limit: limit + skipped)
            var events: [FeedEvent] = []
            var current = cursor
            var previousTransaction: UInt64?
            var index = -1
            for row in rows {
                let transactionText: String = try row.decode("tx")
                guard let transaction = UInt64(transactionText) else { continue }
                index = transaction == previousTransaction ? index + 1 : 0
                previousTransaction = transaction
                let position = FeedCursor(transaction: transaction, index: index)
                guard position > cursor else { continue }
                let isTransition: Int = try row.decode("kind")
                events.append(FeedEvent(
                    cursor: position, kind: isTransition == 0 ? .transition : .push,
                    orderID: try row.decode("order_id"), workflow: try row.decode("workflow_name"), seq: try row.decode("seq"),
                    from: try row.decode("from_state", as: String?.self), to: try row.decode("to_state", as: String?.self),
                    event: try row.decode("event", as: String?.self), actor: try row.decode("actor", as: String?.self),
                    at: try row.decode("at"), deliveryID: try row.decode("delivery_id", as: Int64?.self),
                    deviceID: try row.decode("device_id", as: String?.self),
                    outcome: try row.decode("outcome", as: DeliveryOutcome?.self),
                    status: try row.decode("status", as: Int?.self), reason: try row.decode("reason", as: String?.self)))
                current = position
                if events.count == limit { break }
            }
            return FeedPage(events: events, cursor: current)
        }
    }

    var feedStore: FeedStore { FeedStore(pool: pool, merchantID: configuration.merchantID, floor: feedHorizonFloor) }
}
