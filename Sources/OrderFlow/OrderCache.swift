import Foundation
import Synchronization
import WorkflowKit

/// What this process last knew of an order, to skip reading it before the next advance.
///
/// Safe because the write is guarded by the order's sequence number: if another process moved
/// the order meanwhile, the guarded write changes nothing and the engine reads the order and
/// decides again. Bounded: past `capacity` entries, an arbitrary half is dropped.
final class OrderCache: Sendable {
    struct Entry: Sendable {
        var workflowName: String
        var workflowVersion: Int
        var state: String
        var seq: Int
        var attributes: JSONValue
        var content: JSONValue
        var createdAt: Date
        /// Bytes a push-to-start adds to the content for this order (attributes, start alert),
        /// once measured; see `checkPushToStartFits`.
        var startOverhead: Int? = nil
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    func entry(for orderID: String) -> Entry? {
        entries.withLock { $0[orderID] }
    }

    func store(_ entry: Entry, for orderID: String) {
        guard capacity > 0 else { return }
        entries.withLock { entries in
            if entries.count >= capacity, entries[orderID] == nil {
                for key in entries.keys.prefix(capacity / 2) { entries.removeValue(forKey: key) }
            }
            entries[orderID] = entry
        }
    }

    func forget(_ orderID: String) {
        _ = entries.withLock { $0.removeValue(forKey: orderID) }
    }
}
