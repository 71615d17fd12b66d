import Foundation
import Synchronization
import WorkflowKit

/// What this process last knew of an order, to skip reading it before the next advance.
///
/// Safe because the write is guarded by the order's sequence number: if another process moved
/// the order meanwhile, the guarded write changes nothing and the engine reads the order and
/// decides again. Bounded, least recently used out first: entries live in two generations of
/// at most `capacity / 2` each; a lookup moves an entry into the newer one, and when the newer
/// one is full the older one is dropped whole. An order used again within the last
/// `capacity / 2` orders touched stays (dropping an arbitrary half at once would lose the
/// orders of a turn under way as often as old ones). Orders that reached a final state are not
/// kept: nothing moves them again.
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

    private struct Generations {
        var newer: [String: Entry] = [:]
        var older: [String: Entry] = [:]
    }

    private let generations = Mutex(Generations())
    private let generationSize: Int

    init(capacity: Int) {
        self.generationSize = capacity > 0 ? max(1, capacity / 2) : 0
    }

    func entry(for orderID: String) -> Entry? {
        generations.withLock { generations in
            if let entry = generations.newer[orderID] { return entry }
            guard let entry = generations.older.removeValue(forKey: orderID) else { return nil }
            Self.insert(entry, for: orderID, into: &generations, generationSize: generationSize)
            return entry
        }
    }

    func store(_ entry: Entry, for orderID: String) {
        guard generationSize > 0 else { return }
        generations.withLock { generations in
            generations.older.removeValue(forKey: orderID)
            Self.insert(entry, for: orderID, into: &generations, generationSize: generationSize)
        }
    }

    func forget(_ orderID: String) {
        generations.withLock { generations in
            generations.newer.removeValue(forKey: orderID)
            generations.older.removeValue(forKey: orderID)
        }
    }

    /// How many orders are remembered (for tests).
    var count: Int {
        generations.withLock { $0.newer.count + $0.older.count }
    }

    private static func insert(_ entry: Entry, for orderID: String, into generations: inout Generations, generationSize: Int) {
        if generations.newer.count >= generationSize, generations.newer[orderID] == nil {
            generations.older = generations.newer
            generations.newer = Dictionary(minimumCapacity: generationSize)
        }
        generations.newer[orderID] = entry
    }
}
