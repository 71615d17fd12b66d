import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

@Suite("Engine: orders, transitions, commands")
struct EngineTests {
    @Test func orderMovesThroughItsStatesWithGaplessHistoryAndCommands() async throws {
        let fixture = try await EngineFixture.make()
        let created = try await fixture.createFoodOrder("1042")
        #expect(created.state == "received")
        #expect(created.seq == 1)
        #expect(created.content["status"] == "received")

        _ = try await fixture.engine.advance("1042", to: "accept", input: ["eta": "+20m"], actor: "test")
        _ = try await fixture.engine.advance("1042", to: "ready")
        let dispatched = try await fixture.engine.advance("1042", to: "out", input: ["eta": "+15m", "driver": "Sam"])
        #expect(dispatched.order.state == "out_for_delivery")
        #expect(dispatched.transition.rendered.content["driverName"] == "Sam")
        #expect(dispatched.transition.rendered.alert != nil)
        #expect(dispatched.transition.rendered.priority == 10)
        let delivered = try await fixture.engine.advance("1042", to: "deliver")
        #expect(delivered.order.isFinal)
        #expect(delivered.transition.rendered.event == .end)
        #expect(delivered.transition.rendered.content["driverName"] == "Sam", "carried over from the previous step")

        let history = try await fixture.engine.history("1042")
        #expect(history.transitions.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(history.transitions.map(\.to) == ["received", "in_progress", "ready", "out_for_delivery", "delivered"])
        #expect(history.transitions[1].actor == "test")
        let kinds = try await fixture.engine.pool.query(PostgresQuery(
            "SELECT kind FROM activity_commands WHERE order_id = $1 ORDER BY id", "1042")).map { try $0.decode("kind", as: String.self) }
        #expect(kinds == ["start", "update", "update", "update", "end"])
        await fixture.shutdown()
    }

    @Test("a delivery window given at dispatch is pushed as [lower, upper] since 2001, shown as ISO text, and refused backwards")
    func deliveryWindowAtDispatch() async throws {
        let fixture = try await EngineFixture.make()
        _ = try await fixture.createFoodOrder("1042")
        for target in ["accept", "ready"] { _ = try await fixture.engine.advance("1042", to: target) }
        await #expect {
            _ = try await fixture.engine.advance("1042", to: "dispatch", input: ["eta": "+15m", "window": "+25m..+10m"])
        } throws: { error in
            (error as? OrderFlowError)?.code == .invalidInput && "\(error)".contains("ends before it starts")
        }
        #expect(try await fixture.engine.history("1042").transitions.count == 3, "nothing stored for the refused window")
        let dispatched = try await fixture.engine.advance("1042", to: "dispatch", input: ["eta": "+15m", "window": "+10m..+25m"])
        #expect(dispatched.transition.input["window"] == "+10m..+25m", "the input is stored as given")
        let bounds = dispatched.transition.rendered.content["deliveryWindow"]?.arrayValue?.compactMap { $0.doubleValue } ?? []
        let at = dispatched.transition.occurredAt.timeIntervalSinceReferenceDate
        #expect(bounds.count == 2 && abs(bounds[0] - (at + 600)) < 0.001 && abs(bounds[1] - (at + 1500)) < 0.001, "\(bounds) at \(at)")
        let workflow = try await fixture.engine.workflow(of: dispatched.order)
        let readable = try #require(dispatched.transition.readable(in: workflow).content["deliveryWindow"]?.stringValue)
        #expect(readable.wholeMatch(of: /\d{4}-\d\d-\d\dT[\d:.]+Z\.\.\d{4}-\d\d-\d\dT[\d:.]+Z/) != nil, "\(readable)")
        await fixture.shutdown()
    }

    @Test func errorsSayWhatIsWrong() async throws {
        let fixture = try await EngineFixture.make()
        try await fixture.createFoodOrder("7")
        await #expect { try await fixture.engine.advance("nope", to: "ready") } throws: { error in
            (error as? OrderFlowError)?.code == .notFound && "\(error)".contains("order nope does not exist")
        }
        await #expect { try await fixture.engine.advance("7", to: "delivered") } throws: { error in
            guard let error = error as? OrderFlowError else { return false }
            return error.code == .invalidTransition && error.currentState == "received" && error.message.contains("in_progress")
        }
        await #expect { try await fixture.engine.advance("7", to: "teleport") } throws: { error in
            guard let error = error as? OrderFlowError else { return false }
            return error.code == .notFound && error.message.contains("no state or event \"teleport\"")
        }
        _ = try await fixture.engine.cancel("7", reason: "kitchen closed")
        await #expect { try await fixture.engine.advance("7", to: "ready") } throws: { error in
            guard let error = error as? OrderFlowError else { return false }
            return error.code == .invalidTransition && error.message == "order 7 is cancelled, a final state; nothing can follow it"
        }
        await #expect { try await fixture.createFoodOrder("7") } throws: { error in
            (error as? OrderFlowError)?.code == .alreadyExists
        }
        // Bad attributes are refused and nothing is stored.
        await #expect {
            try await fixture.engine.createOrder(NewOrder(orderID: "8", workflow: "food-order",
                attributes: ["merchantName": "x", "orderNumber": "8", "itemCount": "three"]))
        } throws: { error in
            (error as? OrderFlowError)?.code == .invalidInput && "\(error)".contains("itemCount")
        }
        await #expect { try await fixture.engine.order("8") } throws: { ($0 as? OrderFlowError)?.code == .notFound }
        await #expect {
            try await fixture.engine.createOrder(NewOrder(orderID: "9", workflow: "pizza", attributes: [:]))
        } throws: { error in
            guard let error = error as? OrderFlowError else { return false }
            return error.code == .notFound && error.message.contains("food-order, ride")
        }
        await fixture.shutdown()
    }

    @Test func idempotencyKeysReturnTheFirstResult() async throws {
        let fixture = try await EngineFixture.make()
        let request = NewOrder(orderID: "55", workflow: "food-order",
                               attributes: ["merchantName": "Mo", "orderNumber": "55", "itemCount": 1], idempotencyKey: "create-55")
        let first = try await fixture.engine.createOrder(request)
        let again = try await fixture.engine.createOrder(request)
        // The first answer is built without reading the row back, the retry's is read: equal.
        #expect(first == again)
        #expect(try await fixture.engine.order("55").order == first)
        // The same key for a different creation is refused and changes nothing.
        var other = request
        other.attributes = ["merchantName": "Mo", "orderNumber": "55", "itemCount": 2]
        await #expect(throws: OrderFlowError.self) { try await fixture.engine.createOrder(other) }
        do {
            _ = try await fixture.engine.createOrder(other)
        } catch let error as OrderFlowError {
            #expect(error.code == .conflict)
            #expect(error.message.contains("other attributes"), "\(error.message)")
        }
        #expect(try await fixture.engine.order("55").order == first)

        let advanced = try await fixture.engine.advance("55", to: "in_progress", idempotencyKey: "k1")
        let replayed = try await fixture.engine.advance("55", to: "in_progress", idempotencyKey: "k1")
        #expect(!advanced.replayed)
        #expect(replayed.replayed)
        #expect(replayed.transition.seq == advanced.transition.seq)
        // Concurrent retries of one key: one transition, every caller gets it.
        let results = try await withThrowingTaskGroup(of: AdvanceResult.self) { group in
            for _ in 0..<8 { group.addTask { try await fixture.engine.advance("55", to: "ready", idempotencyKey: "k2") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(results.map(\.transition.seq)) == [3])
        #expect(results.filter { !$0.replayed }.count <= 1)
        let history = try await fixture.engine.history("55")
        #expect(history.transitions.map(\.seq) == [1, 2, 3])
        await fixture.shutdown()
    }

    @Test func merchantIDsTheEngineCannotStoreAreRefused() throws {
        #expect(throws: Never.self) { try OrderFlowConfiguration.validate(merchantID: "acme-berlin") }
        for bad in ["", "acme\u{0}", "a\nb", String(repeating: "m", count: 201)] {
            #expect(throws: OrderFlowError.self, "\(bad.debugDescription)") { try OrderFlowConfiguration.validate(merchantID: bad) }
        }
    }

    /// Also with the callers' tasks preferring the engine's executor, where they run on the
    /// thread that receives PostgreSQL's answers.
    @Test(arguments: [false, true])
    func fiftyConcurrentAdvancesOnOneOrder(onPreferredExecutor: Bool) async throws {
        let fixture = try await EngineFixture.make(maximumConnections: 16)
        try await fixture.createFoodOrder("race")
        // Everyone tries every step in order; only a step valid at the moment it commits wins.
        let steps = ["in_progress", "ready", "out_for_delivery", "delivered"]
        let executor = onPreferredExecutor ? fixture.engine.preferredExecutor : nil
        let outcomes = try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in 0..<50 {
                group.addTask(executorPreference: executor) {
                    var won: [String] = []
                    var pending = steps[...]
                    while let step = pending.first {
                        do {
                            let input: JSONValue = step == "out_for_delivery" ? ["eta": "+10m", "driver": .string("d\(worker)")] : [:]
                            _ = try await fixture.engine.advance("race", to: step, input: input)
                            won.append(step)
                        } catch let error as OrderFlowError where [OrderFlowError.Code.conflict, .invalidTransition].contains(error.code) {
                        } catch let error as OrderFlowError where error.code == .busy {
                            // Admission may refuse when a stalled machine makes the groups look
                            // slow; a client retries the same step after Retry-After.
                            try await Task.sleep(for: min(error.retryAfter ?? .milliseconds(100), .seconds(1)))
                            continue
                        }
                        pending = pending.dropFirst()
                    }
                    return won
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(outcomes.sorted() == steps.sorted(), "each step won exactly once: \(outcomes)")
        let history = try await fixture.engine.history("race")
        #expect(history.transitions.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(history.transitions.map(\.to) == ["received"] + steps)
        await fixture.shutdown()
    }

    @Test func concurrentAdvancesFromOneStateOneWinsOtherGetsConflict() async throws {
        let fixture = try await EngineFixture.make()
        try await fixture.createFoodOrder("fork")
        _ = try await fixture.engine.advance("fork", to: "in_progress")
        _ = try await fixture.engine.advance("fork", to: "ready")
        var conflicts = 0
        var wins = 0
        // ready → picked_up and ready → cancelled race, many times over fresh orders.
        for round in 0..<10 {
            let id = "fork-\(round)"
            try await fixture.createFoodOrder(id)
            _ = try await fixture.engine.advance(id, to: "in_progress")
            _ = try await fixture.engine.advance(id, to: "ready")
            async let a = attempt { try await fixture.engine.advance(id, to: "pickup", expectedState: "ready") }
            async let b = attempt { try await fixture.engine.advance(id, to: "cancel", expectedState: "ready") }
            for result in await [a, b] {
                switch result {
                case .success: wins += 1
                case .failure(let error as OrderFlowError):
                    #expect([OrderFlowError.Code.conflict, .invalidTransition].contains(error.code))
                    #expect(error.currentState == "picked_up" || error.currentState == "cancelled")
                    conflicts += 1
                case .failure(let error): Issue.record("unexpected \(error)")
                }
            }
        }
        #expect(wins == 10)
        #expect(conflicts == 10)
        await fixture.shutdown()
    }

    @Test func ordersStayPinnedToTheirWorkflowVersion() async throws {
        let fixture = try await EngineFixture.make()
        try await fixture.createFoodOrder("old")
        let original = try EngineFixture.shippedWorkflow("food-order")
        let unchanged = try await fixture.engine.applyWorkflow(yaml: "# a comment only\n" + original, file: "food-order.yaml")
        #expect(!unchanged.created)
        #expect(unchanged.version == 1)
        let changed = original.replacingOccurrences(of: "Your order is ready.", with: "Come and get it!")
        let applied = try await fixture.engine.applyWorkflow(yaml: changed, file: "food-order.yaml")
        #expect(applied.created)
        #expect(applied.version == 2)
        try await fixture.createFoodOrder("new")
        for id in ["old", "new"] {
            _ = try await fixture.engine.advance(id, to: "in_progress")
            _ = try await fixture.engine.advance(id, to: "ready")
        }
        #expect(try await fixture.engine.order("old").order.workflowVersion == 1)
        #expect(try await fixture.engine.order("old").order.content["message"] == "Your order is ready.")
        #expect(try await fixture.engine.order("new").order.content["message"] == "Come and get it!")
        // Stored versions are immutable.
        await #expect(throws: PostgresError.self) {
            try await fixture.engine.pool.query(PostgresQuery("UPDATE workflow_versions SET source = $1", "x"))
        }
        await fixture.shutdown()
    }

    @Test func durableTimersFireOnceEvenIfDueWhileNothingRan() async throws {
        let fixture = try await EngineFixture.make()
        try await fixture.createFoodOrder("late")
        _ = try await fixture.engine.advance("late", to: "in_progress")
        _ = try await fixture.engine.advance("late", to: "ready")
        #expect(try await fixture.engine.fireDueTimers() == 0, "not due yet")
        // As if the order had waited 46 minutes with no process running.
        let later = Date().addingTimeInterval(46 * 60)
        let firings = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<4 { group.addTask { try await fixture.engine.fireDueTimers(now: later) } }
            return try await group.reduce(0, +)
        }
        #expect(firings == 1, "exactly once across concurrent scanners")
        let order = try await fixture.engine.order("late").order
        #expect(order.state == "cancelled")
        #expect(try await fixture.engine.fireDueTimers(now: later) == 0)
        #expect(try await fixture.engine.history("late").transitions.last?.actor == "timer")
        await fixture.shutdown()
    }

    @Test func tokensAreCheckedAndRotate() async throws {
        let fixture = try await EngineFixture.make()
        try await fixture.createFoodOrder("t1")
        await #expect { try await fixture.engine.registerActivityToken(orderID: "t1", deviceID: "phone", token: "not-hex!") } throws: {
            ($0 as? OrderFlowError)?.code == .invalidInput
        }
        await #expect { try await fixture.engine.registerActivityToken(orderID: "missing", deviceID: "phone", token: EngineFixture.token(1)) } throws: {
            ($0 as? OrderFlowError)?.code == .notFound
        }
        try await fixture.engine.registerActivityToken(orderID: "t1", deviceID: "phone", token: EngineFixture.token(1))
        try await fixture.engine.registerActivityToken(orderID: "t1", deviceID: "phone", token: EngineFixture.token(2))
        try await fixture.engine.follow(orderID: "t1", deviceID: "ipad")
        try await fixture.engine.registerPushToStartToken(deviceID: "ipad", attributesType: "FoodOrderAttributes", token: EngineFixture.token(3))
        let details = try await fixture.engine.order("t1")
        #expect(details.activities.map(\.deviceID) == ["ipad", "phone"])
        #expect(details.activities.first { $0.deviceID == "phone" }?.tokenSuffix == String(EngineFixture.token(2).suffix(8)))
        #expect(details.activities.first { $0.deviceID == "phone" }?.status == "active")
        #expect(details.activities.first { $0.deviceID == "ipad" }?.status == "waiting")
        #expect(details.pendingCommands >= 3)
        await fixture.shutdown()
    }

    @Test("an order's read: the order, each device's activity in device order, the exact count of commands waiting; another merchant's finds nothing")
    func orderReadIsExact() async throws {
        let fixture = try await EngineFixture.make()
        try await fixture.createFoodOrder("r1")
        try await fixture.createFoodOrder("r2")
        try await fixture.engine.registerActivityToken(orderID: "r1", deviceID: "b-phone", token: EngineFixture.token(1))
        try await fixture.engine.follow(orderID: "r1", deviceID: "a-ipad")
        _ = try await fixture.engine.advance("r1", to: "accept", input: ["eta": "+20m"])
        func queued(_ orderID: String) async throws -> Int {
            try await fixture.engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM activity_commands WHERE order_id = $1", orderID))
                .single().decode("n")
        }
        let followed = try await fixture.engine.order("r1")
        #expect(followed.order.orderID == "r1" && followed.order.state == "in_progress" && followed.order.seq == 2)
        #expect(followed.activities.map(\.deviceID) == ["a-ipad", "b-phone"])
        #expect(followed.activities.map(\.status) == ["waiting", "active"])
        let waiting = try await queued("r1")
        #expect(followed.pendingCommands == waiting && waiting > 0)
        let alone = try await fixture.engine.order("r2")
        #expect(alone.order.orderID == "r2" && alone.activities.isEmpty)
        let waitingAlone = try await queued("r2")
        #expect(alone.pendingCommands == waitingAlone)
        _ = try await fixture.engine.addMerchant("other")
        await #expect { try await fixture.engine.forMerchant("other").order("r1") } throws: { ($0 as? OrderFlowError)?.code == .notFound }
        await #expect { try await fixture.engine.order("r3") } throws: { ($0 as? OrderFlowError)?.code == .notFound }
        await fixture.shutdown()
    }

    @Test func anotherProcessMovingTheOrderIsNoConflictForLaterCalls() async throws {
        // Engine A remembers the order it created; engine B (another process) moves it on.
        let fixture = try await EngineFixture.make()
        let other = OrderFlowEngine(configuration: OrderFlowConfiguration(database: fixture.database))
        try await fixture.createFoodOrder("shared")
        _ = try await other.advance("shared", to: "in_progress")
        _ = try await other.advance("shared", to: "ready")
        // A's knowledge ("received") is stale: "pickup" is valid from the real state, and the
        // expectation names the real state; neither may fail on the stale view.
        let result = try await fixture.engine.advance("shared", to: "pickup", expectedState: "ready")
        #expect(result.order.state == "picked_up")
        #expect(result.transition.seq == 4)
        #expect(result.transition.from == "ready")
        // B's own view is stale now: the database decides, and names the real state.
        await #expect { try await other.advance("shared", to: "pickup", expectedState: "ready") } throws: { error in
            (error as? OrderFlowError)?.code == .conflict && (error as? OrderFlowError)?.currentState == "picked_up"
        }
        await other.shutdown()
        await fixture.shutdown()
    }

    @Test func listPagesThroughOrdersByWorkflowAndState() async throws {
        let fixture = try await EngineFixture.make()
        for index in 0..<7 { try await fixture.createFoodOrder(String(format: "L%02d", index)) }
        _ = try await fixture.engine.advance("L03", to: "in_progress")
        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try await fixture.engine.orders(OrderQuery(workflow: "food-order", state: "received", after: cursor, limit: 4))
            seen += page.orders.map(\.order.orderID)
            cursor = page.nextCursor
        } while cursor != nil
        #expect(seen == ["L00", "L01", "L02", "L04", "L05", "L06"])
        await fixture.shutdown()
    }
}

private func attempt<T: Sendable>(_ body: @Sendable () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
