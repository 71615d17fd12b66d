import APNS
import Foundation
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing
import WorkflowKit

/// The worker against a real PostgreSQL and the local APNs stand-in, one test at a time (each
/// runs several workers' worth of tasks on a two-core machine).
@Suite("Worker: claiming, merging and sending", .serialized)
struct WorkerIntegrationTests {
    @Test func anOrderGetsOneStartItsUpdatesAndOneEnd() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let startToken = EngineFixture.token(1)
        let activityToken = EngineFixture.token(2)
        try await h.engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttributes", token: startToken)
        try await h.createFoodOrder("1042")
        try await h.engine.follow(orderID: "1042", deviceID: "phone")

        let start = try await h.apns.waitForPushes(count: 1)[0]
        #expect(start.deviceToken == startToken)
        #expect(start.topic == WorkerHarness.bundleID + ".push-type.liveactivity")
        #expect(start.event == "start")
        #expect(start.aps?["attributes-type"]?.stringValue == "FoodOrderAttributes")
        #expect(start.aps?["attributes"]?["orderNumber"]?.stringValue == "1042")
        #expect(start.aps?["input-push-token"]?.integerValue == 1)
        #expect(start.alertTitle == "Order 1042 received")
        #expect(start.content?["status"]?.stringValue == "received")
        try await eventually("the start is recorded") { try await h.activity("1042", "phone").status == "starting" }

        // The app reports the started activity's token: it already shows the current state.
        try await h.engine.registerActivityToken(orderID: "1042", deviceID: "phone", token: activityToken)
        try await eventually("the token is handled") { try await h.pendingCommands("1042") == 0 }

        let steps: [(String, JSONValue)] = [
            ("accept", ["eta": "+20m"]), ("ready", [:]), ("dispatch", ["eta": "+10m", "driver": "Sam"]), ("deliver", [:]),
        ]
        for (index, (target, input)) in steps.enumerated() {
            _ = try await h.engine.advance("1042", to: target, input: input)
            try await h.apns.waitForPushes(count: 2 + index)
        }
        try await running.stop()

        #expect(h.pushes(startToken).count == 1, "exactly one start")
        let updates = h.pushes(activityToken)
        #expect(updates.map(\.event) == ["update", "update", "update", "end"])
        #expect(updates.map { $0.content?["status"]?.stringValue } == ["preparing", "ready", "outForDelivery", "delivered"])
        #expect(updates.map(\.alertTitle) == [nil, "Order 1042 is ready", "On the way", "Delivered"])
        #expect(updates.map(\.priority) == [5, 10, 10, 10])
        #expect(updates.last?.aps?["dismissal-date"]?.integerValue != nil)
        let timestamps = ([start] + updates).compactMap(\.apsTimestamp)
        #expect(timestamps.count == 5)
        #expect(zip(timestamps, timestamps.dropFirst()).allSatisfy { $0 < $1 }, "aps timestamps strictly increase: \(timestamps)")
        let activity = try await h.activity("1042", "phone")
        #expect(activity.status == "ended")
        #expect(activity.lastSeq == 5)
        #expect(try await h.outcomes("1042") == Array(repeating: "sent", count: 5))
        #expect(try await h.leaseOwners().isEmpty)
        await h.shutdown()
    }

    @Test func whileStartingNothingIsSentThenTheCurrentStateOnce() async throws {
        let h = try await WorkerHarness.make()
        let running = h.start(h.configuration())
        let startToken = EngineFixture.token(11)
        let activityToken = EngineFixture.token(12)
        try await h.engine.registerPushToStartToken(deviceID: "phone", attributesType: "FoodOrderAttributes", token: startToken)
        try await h.createFoodOrder("55")
        try await h.engine.follow(orderID: "55", deviceID: "phone")
        try await h.apns.waitForPushes(count: 1)
        // The app has not reported the activity's token yet: transitions wait.
        _ = try await h.engine.advance("55", to: "accept")
        _ = try await h.engine.advance("55", to: "ready")
        try await eventually("the transitions are handled") { try await h.pendingCommands("55") == 0 }
        #expect(h.apns.acceptedCount == 1)

        try await h.engine.registerActivityToken(orderID: "55", deviceID: "phone", token: activityToken)
        let update = try await h.apns.waitForPushes(count: 2)[1]
        try await Task.sleep(for: .milliseconds(100))
        try await running.stop()
        #expect(h.apns.acceptedCount == 2, "one update, not a replay of every step")
        #expect(update.deviceToken == activityToken)
        #expect(update.event == "update")
        #expect(update.content?["status"]?.stringValue == "ready")
        #expect(update.alertTitle == "Order 55 is ready")
        #expect(try await h.activity("55", "phone").status == "active")
        await h.shutdown()
    }

    /// A claim reads its orders in its statement's snapshot but locks their newest rows. Here a
    /// trigger (this test's database only) holds the slow claim for 1.5 s after it leased its
    /// first order; meanwhile another claim takes the second order, and its completion deletes
    /// the order's command and ends its lease. When the slow claim then locks that order, what
    /// its snapshot holds is stale (the command is still there): sending it would repeat the
    /// push. It must come back as changed, unread.
    @Test func anOrderChangedAfterTheClaimsSnapshotIsNotReadFromIt() async throws {
        let h = try await WorkerHarness.make()
        for id in ["s1", "s2"] {
            try await h.createTicker(id, activityToken: EngineFixture.token(id == "s1" ? 71 : 72))
        }
        // With statistics, as a running database has them, the claim's update takes the locked
        // orders one at a time (a plan without them may lock every candidate before the first
        // update, and then the other claim finds nothing to race with: the #require below).
        try await h.pool.query(PostgresQuery("ANALYZE"))
        try await h.pool.query(PostgresQuery("""
            CREATE FUNCTION test_hold_slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.dispatch_owner = 'slow' AND current_setting('test.held', true) IS DISTINCT FROM 'yes' THEN
                    PERFORM set_config('test.held', 'yes', true);
                    PERFORM pg_sleep(1.5);
                END IF;
                RETURN NEW;
            END $$
            """))
        try await h.pool.query(PostgresQuery(
            "CREATE TRIGGER hold_slow_claim BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION test_hold_slow_claim()"))
        let store = OutboxStore(pool: h.pool)
        let slow = Task {
            try await store.claim(workerID: "slow", limit: 10, lease: .seconds(30), merchants: .all, maximumTransitions: 10)
        }
        try await Task.sleep(for: .milliseconds(500))  // the slow claim has leased one order and waits
        let fast = try await store.claim(workerID: "fast", limit: 10, lease: .seconds(30), merchants: .all, maximumTransitions: 10)
        let raced = try #require(fast.orders.first, "the other claim took the order the slow one had not reached")
        #expect(fast.orders.count == 1 && fast.changed.isEmpty)
        var completion = OutboxStore.Completion()
        completion.handledCommands = raced.commands.map { .init(merchantID: raced.merchantID, orderID: raced.orderID, id: $0.id) }
        completion.released = [.init(merchantID: raced.merchantID, orderID: raced.orderID)]
        try await store.complete(workerID: "fast", completion)

        let held = try await slow.value
        #expect(held.orders.map(\.orderID) == ["s1", "s2"].filter { $0 != raced.orderID }, "the order it leased first is read")
        #expect(held.changed.map(\.orderID) == [raced.orderID], "the raced order is not read from the stale snapshot")
        #expect(held.orders.allSatisfy { !$0.commands.isEmpty })
        await h.shutdown()
    }

    /// A batch whose record loses a race (PostgreSQL breaks a deadlock by failing one side: under
    /// overload, a worker ending its leases and an engine's group of advances on the same
    /// orders) is recorded again, at once: its push is not sent a second time when the lease
    /// runs out. The first record here fails as a deadlock's victim does.
    @Test func aBatchWhoseRecordLostARaceIsRecordedAgainNotSentAgain() async throws {
        let h = try await WorkerHarness.make()
        let token = EngineFixture.token(91)
        try await h.createTicker("r1", activityToken: token)
        _ = try await h.engine.advance("r1", to: "s1")
        try await h.pool.query(PostgresQuery("CREATE SEQUENCE test_records"))
        try await h.pool.query(PostgresQuery("""
            CREATE FUNCTION test_lose_first_race() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF nextval('test_records') = 1 THEN
                    RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01';
                END IF;
                RETURN NULL;
            END $$
            """))
        try await h.pool.query(PostgresQuery("""
            CREATE TRIGGER lose_first_race BEFORE INSERT ON deliveries
            FOR EACH STATEMENT EXECUTE FUNCTION test_lose_first_race()
            """))
        // A lease short enough to run out within the test, long enough for a loaded machine to
        // claim, send and record the batch well inside it.
        let running = h.start(h.configuration { $0.lease = .seconds(4) })
        try await h.apns.waitForPushes(count: 1)
        try await eventually("the batch is recorded") { try await h.pendingCommands("r1") == 0 }
        // Past the lease: a batch left unrecorded would have been claimed and sent again by now.
        try await Task.sleep(for: .seconds(5))
        try await running.stop()
        #expect(h.pushes(token).count == 1, "sent once")
        #expect(try await h.outcomes("r1") == ["sent"])
        #expect(try await h.leaseOwners().isEmpty)
        let records = try await h.pool.query(PostgresQuery("SELECT last_value FROM test_records")).single()
        #expect(try records.decode("last_value", as: Int.self) >= 2, "the failed record was tried again")
        await h.shutdown()
    }

    /// A claim's candidates are orders, not commands: 40 orders with several commands waiting
    /// each (created and advanced three times before any worker runs) go out in four full
    /// batches of 10. (Counted in commands, the 40 candidates of a claim were 8 orders here:
    /// five claims of 8.) One lane, so that the claims follow each other.
    @Test func everyClaimIsFullThoughOrdersHaveSeveralCommandsWaiting() async throws {
        let h = try await WorkerHarness.make()
        for index in 0..<40 {
            try await h.createTicker("q\(index)", activityToken: EngineFixture.token(2000 + index))
            for step in 1...3 { _ = try await h.engine.advance("q\(index)", to: "s\(step)") }
        }
        // Every claim (an update that sets a lease where there was none), by its transaction.
        try await h.pool.query(PostgresQuery("CREATE TABLE test_claims (tx xid8, order_id text)"))
        try await h.pool.query(PostgresQuery("""
            CREATE FUNCTION test_record_claim() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.dispatch_lease_until IS NOT NULL AND OLD.dispatch_lease_until IS NULL THEN
                    INSERT INTO test_claims VALUES (pg_current_xact_id(), NEW.order_id);
                END IF;
                RETURN NEW;
            END $$
            """))
        try await h.pool.query(PostgresQuery(
            "CREATE TRIGGER record_claim BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION test_record_claim()"))
        let running = h.start(h.configuration { $0.batchSize = 10; $0.concurrentBatches = 1 })
        try await eventually("every command is sent") {
            try await h.pool.query(PostgresQuery("SELECT count(*)::int AS n FROM activity_commands"))[0].decode("n", as: Int.self) == 0
        }
        try await running.stop()
        let sizes = try await h.pool.query(PostgresQuery(
            "SELECT count(*)::int AS size FROM test_claims GROUP BY tx ORDER BY tx")).map { try $0.decode("size", as: Int.self) }
        #expect(sizes == [10, 10, 10, 10])
        await h.shutdown()
    }

    @Test func threeWorkersNeverSendTheSamePushTwiceAndLeaveNothingUnsent() async throws {
        let h = try await WorkerHarness.make()
        let pools = (1...3).map { _ in PostgresPool(.init(connection: h.fixture.database, maximumConnections: 4)) }
        let workers = (1...3).map { index in
            h.start(h.configuration("w\(index)") { $0.batchSize = 5; $0.concurrentBatches = 2 }, pool: pools[index - 1])
        }
        let orders = 40
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<orders {
                group.addTask {
                    let id = "m\(index)"
                    try await h.createTicker(id, activityToken: EngineFixture.token(1000 + index))
                    for step in 1...10 { _ = try await h.engine.advance(id, to: "s\(step)") }
                    _ = try await h.engine.advance(id, to: "done")
                }
            }
            try await group.waitForAll()
        }
        try await eventually("every order's end is delivered", timeout: .seconds(30)) {
            try await h.pool.query(PostgresQuery("SELECT count(*) AS n FROM activities WHERE status = 'ended'"))
                .single().decode("n", as: Int.self) == orders
        }
        try await eventually("every command is handled") { try await h.pendingCommands() == 0 }
        for worker in workers { try await worker.stop() }
        for pool in pools { await pool.close() }

        #expect(try await h.pendingCommands() == 0, "nothing left unsent")
        #expect(try await h.leaseOwners().isEmpty)
        var senders = Set<String>()
        for index in 0..<orders {
            let pushes = h.pushes(EngineFixture.token(1000 + index))
            let timestamps = pushes.compactMap(\.apsTimestamp)
            #expect(zip(timestamps, timestamps.dropFirst()).allSatisfy { $0 < $1 }, "order m\(index): no push twice, in order")
            #expect(pushes.filter { $0.event == "end" }.count == 1, "order m\(index): exactly one end")
            #expect(pushes.last?.event == "end")
            #expect(pushes.last?.content?["step"]?.integerValue == 11)
        }
        let duplicates = try await h.pool.query(PostgresQuery("""
            SELECT count(*) AS n FROM (SELECT order_id, aps_timestamp FROM deliveries GROUP BY order_id, aps_timestamp HAVING count(*) > 1) d
            """)).single().decode("n", as: Int.self)
        #expect(duplicates == 0)
        for record in h.logs.records where record.message == "push sent" {
            if let worker = record.metadata["orderflow.worker"] { senders.insert(worker.description) }
        }
        #expect(senders.count >= 2, "the work was shared: \(senders)")
        await h.shutdown()
    }

    @Test func aCrashedWorkersOrdersAreReclaimedWhenTheLeaseExpires() async throws {
        let h = try await WorkerHarness.make()
        let token = EngineFixture.token(7)
        try await h.createTicker("t5", activityToken: token)
        h.apns.setResponseDelay(.seconds(5))
        let doomed = h.start(h.configuration("doomed") { $0.lease = .seconds(1) })
        try await h.apns.waitForPushes(count: 1)  // in flight: APNs has it, the worker waits for the answer
        // The lease was taken just before this push went out: it expires about 1 s from here
        // (measured here, not after the checks below, which a loaded machine can stretch).
        let claimedAt = ContinuousClock.now
        await doomed.crash()
        #expect(try await h.leaseOwners() == ["doomed"], "the crashed worker's lease is left behind")
        #expect(try await h.outcomes("t5").isEmpty)

        h.apns.clearFaults()
        let rescuer = h.start(h.configuration("rescuer"))
        try await eventually("the other worker delivers") { try await h.outcomes("t5") == ["sent"] }
        try await rescuer.stop()
        #expect(ContinuousClock.now - claimedAt >= .milliseconds(200), "not before the lease expired")
        #expect(try await h.activity("t5", "phone").lastSeq == 1)
        #expect(try await h.pendingCommands("t5") == 0)
        #expect(try await h.leaseOwners().isEmpty)
        await h.shutdown()
    }

    @Test func gracefulShutdownFinishesInFlightSendsAndReleasesTheRest() async throws {
        let h = try await WorkerHarness.make()
        for index in 0..<3 {
            try await h.createTicker("g\(index)", activityToken: EngineFixture.token(20 + index))
        }
        // The answer takes 2 s (inside the 5 s grace period), so the shutdown surely begins while
        // the first send is in flight, however slowly this test gets there.
        h.apns.setResponseDelay(.seconds(2))
        let running = h.start(h.configuration("stopping") { $0.concurrentSends = 1; $0.concurrentBatches = 1 })
        try await h.apns.waitForPushes(count: 1)
        try await running.stop()

        #expect(h.apns.acceptedCount == 1, "only the send in flight went out")
        #expect(try await h.leaseOwners().isEmpty, "every lease was given back")
        let sent = try await h.pool.query(PostgresQuery("SELECT count(*) AS n FROM deliveries WHERE outcome = 'sent'"))
            .single().decode("n", as: Int.self)
        #expect(sent == 1, "the in-flight send finished and was recorded")
        #expect(try await h.ordersWithPendingCommands() == 2, "the unsent orders keep their commands")

        h.apns.clearFaults()
        let next = h.start(h.configuration("next"))
        try await h.apns.waitForPushes(count: 3)
        try await next.stop()
        #expect(try await h.pendingCommands() == 0)
        await h.shutdown()
    }

    @Test func aBatchPastHalfItsLeaseStartsNoMorePushes() async throws {
        let h = try await WorkerHarness.make()
        for index in 0..<2 {
            try await h.createTicker("h\(index)", activityToken: EngineFixture.token(60 + index))
        }
        // One push at a time, each answered after 1.2 s: the batch's second push would start
        // past half of its 2 s lease, when another worker could soon claim the order.
        h.apns.setResponseDelay(.milliseconds(1200))
        let running = h.start(h.configuration("halfway") {
            $0.lease = .seconds(2)
            $0.concurrentSends = 1
            $0.concurrentBatches = 1
        })
        try await h.apns.waitForPushes(count: 2, timeout: .seconds(15))
        try await eventually("both are recorded") { try await h.pendingCommands() == 0 }
        try await running.stop()
        let warnings = h.logs.records.filter { $0.level == .warning && $0.message.contains("half its lease") }
        #expect(warnings.count == 1, "said for the one batch that ran out: \(warnings.map(\.message))")
        #expect(h.apns.acceptedCount == 2, "each push once")
        let attempts = try await h.pool.query(PostgresQuery("SELECT count(*) AS n FROM deliveries"))
            .single().decode("n", as: Int.self)
        #expect(attempts == 2, "the push left over was sent by the next claim, not recorded as failed")
        #expect(try await h.leaseOwners().isEmpty)
        await h.shutdown()
    }
}
