/// The callers waiting for a connection, first come first served. Under overload thousands
/// wait: taking the first is O(1) (an index moves; the array is compacted now and then), not
/// an `Array.removeFirst` that moves every other waiter on each release.
struct WaiterQueue {
    typealias Continuation = CheckedContinuation<PostgresConnection?, any Error>
    private var items: [(id: Int, deadline: ContinuousClock.Instant, continuation: Continuation)] = []
    private var head = 0

    var count: Int { items.count - head }
    var firstDeadline: ContinuousClock.Instant? { head < items.count ? items[head].deadline : nil }

    mutating func append(id: Int, deadline: ContinuousClock.Instant, _ continuation: Continuation) {
        items.append((id, deadline, continuation))
    }

    /// Queues a waiter ahead of every other (one that carries many callers' work: a commit group).
    mutating func prepend(id: Int, deadline: ContinuousClock.Instant, _ continuation: Continuation) {
        if head > 0 {
            head -= 1
            items[head] = (id, deadline, continuation)
        } else {
            items.insert((id, deadline, continuation), at: 0)
        }
    }

    /// Removes the waiters at the front whose deadline is not after `now`. (A waiter that
    /// queued again after a retry sits behind later deadlines and is told when it reaches the
    /// front: late, never early.)
    mutating func removeExpired(at now: ContinuousClock.Instant) -> [Continuation] {
        var expired: [Continuation] = []
        while head < items.count, items[head].deadline <= now, let first = removeFirst() {
            expired.append(first)
        }
        return expired
    }

    /// Removes the waiters at the back that cannot be served before their deadlines even at
    /// best: each of the `connections` could come back at once, and after that serves one
    /// caller per `holdPerConnection` seconds, so the waiter with `k` waiters ahead of it waits
    /// at least `k / connections` (rounded down) holds. The optimistic bound keeps callers that
    /// a pool which is merely slow (long holds, all started together) will serve; under
    /// overload, with thousands queued, it is within one hold of the expected wait.
    ///
    /// Only the back is looked at, up to the first waiter that can still make it: the cost is
    /// the number shed, not the queue's length (under overload thousands wait, and scanning
    /// them all under the pool's lock at every look would tax the callers being served). A
    /// waiter that queued again after a retry, ahead of later deadlines, is not shed; it times
    /// out as before.
    mutating func removeHopeless(at now: ContinuousClock.Instant, connections: Int, holdPerConnection: Double) -> [Continuation] {
        guard holdPerConnection > 0, connections > 0 else { return [] }
        let hold = Duration.seconds(holdPerConnection)
        var end = items.count
        while end > head, now + hold * ((end - 1 - head) / connections) > items[end - 1].deadline {
            end -= 1
        }
        guard end < items.count else { return [] }
        let hopeless = items[end...].map(\.continuation)
        items.removeSubrange(end...)
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
        return hopeless
    }

    mutating func removeFirst() -> Continuation? {
        guard head < items.count else { return nil }
        let first = items[head].continuation
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return first
    }

    /// Removes the waiter `id` (timed out or cancelled), if it still waits. Waiters time out in
    /// the order they came, so the search from the front is short.
    mutating func remove(id: Int) -> Continuation? {
        guard let index = items[head...].firstIndex(where: { $0.id == id }) else { return nil }
        return items.remove(at: index).continuation
    }

    mutating func removeAll() -> [Continuation] {
        defer { items = []; head = 0 }
        return items[head...].map(\.continuation)
    }
}
