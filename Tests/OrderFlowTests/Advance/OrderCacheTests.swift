import Foundation
@testable import OrderFlow
import OrderFlowTesting
import Testing

@Suite("Engine: the order cache")
struct OrderCacheTests {
    static func entry(_ seq: Int) -> OrderCache.Entry {
        OrderCache.Entry(workflowName: "food-order", workflowVersion: 1, state: "received", seq: seq,
                         attributes: [:], content: [:], createdAt: Date(timeIntervalSince1970: 0))
    }

    @Test func recentlyUsedOrdersStayWhenItOverflows() {
        let cache = OrderCache(capacity: 10)   // two generations of 5
        for index in 0..<5 { cache.store(Self.entry(index), for: "old-\(index)") }
        cache.store(Self.entry(100), for: "new-0")   // the old ones become the older generation
        // One old order is used again: it moves to the newer generation.
        #expect(cache.entry(for: "old-2")?.seq == 2)
        for index in 1...4 { cache.store(Self.entry(100 + index), for: "new-\(index)") }
        #expect(cache.count <= 10)
        #expect(cache.entry(for: "new-4")?.seq == 104, "the newest order stays")
        #expect(cache.entry(for: "old-2")?.seq == 2, "the order used again stays")
        #expect(cache.entry(for: "new-0")?.seq == 100)
        #expect(cache.entry(for: "old-0") == nil, "the least recently used go first")
        #expect(cache.entry(for: "old-4") == nil)
    }

    @Test func aZeroCapacityRemembersNothing() {
        let cache = OrderCache(capacity: 0)
        cache.store(Self.entry(1), for: "a")
        #expect(cache.entry(for: "a") == nil)
        #expect(cache.count == 0)
    }

    @Test func storingAgainReplacesAndForgettingRemoves() {
        let cache = OrderCache(capacity: 4)
        cache.store(Self.entry(1), for: "a")
        cache.store(Self.entry(2), for: "b")
        cache.store(Self.entry(3), for: "c")   // a and b move to the older generation
        cache.store(Self.entry(4), for: "a")   // the newer "a" replaces the older one
        #expect(cache.entry(for: "a")?.seq == 4)
        #expect(cache.count == 3)
        cache.forget("a")
        cache.forget("b")
        #expect(cache.entry(for: "a") == nil && cache.entry(for: "b") == nil)
        #expect(cache.count == 1)
    }

    @Test func anOrderInAFinalStateIsNotKept() async throws {
        let fixture = try await EngineFixture.make()
        _ = try await fixture.createFoodOrder("c-1")
        _ = try await fixture.createFoodOrder("c-2")
        for step in ["accept", "ready", "dispatch", "deliver"] {
            _ = try await fixture.engine.advance("c-1", to: step, input: step == "dispatch" ? ["eta": "+15m"] : [:])
        }
        _ = try await fixture.engine.advance("c-2", to: "accept")
        #expect(fixture.engine.orderCache.entry(for: "c-1") == nil, "delivered: nothing moves it again")
        #expect(fixture.engine.orderCache.entry(for: "c-2")?.state == "in_progress")
        // And a final order is still refused for what it is, from the database.
        await #expect(throws: OrderFlowError.self) { _ = try await fixture.engine.advance("c-1", to: "cancel") }
        await fixture.shutdown()
    }
}
