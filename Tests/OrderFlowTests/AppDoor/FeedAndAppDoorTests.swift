import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// The merchant's event feed (what `GET /v1/events` streams), the customer's app's credential
/// (order-scoped client secrets) and what the app reports of its activity.
@Suite("Feed, client secrets and app reports")
struct FeedAndAppDoorTests {
    @Test("the feed gives transitions and pushes in commit order, and resumes after any event without a gap or a repeat")
    func feedResumes() async throws {
        let fixture = try await EngineFixture.make()
        let engine = fixture.engine
        let start = try await engine.feedCursorNow()
        try await fixture.createFoodOrder("F1")
        _ = try await engine.advance("F1", to: "in_progress")
        try await fixture.createFoodOrder("F2")
        _ = try await engine.cancel("F2", reason: nil)

        var all: [FeedEvent] = []
        try await eventually("the four transitions are in the feed") {
            all = try await engine.feedEvents(after: start).events
            return all.count == 4
        }
        #expect(all.map { "\($0.orderID)#\($0.seq) \($0.to ?? "-")" } == ["F1#1 received", "F1#2 in_progress", "F2#1 received", "F2#2 cancelled"])
        #expect(all.allSatisfy { $0.kind == .transition && $0.workflow == "food-order" })
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.cursor < $1.cursor }, "cursors increase")
        for (index, event) in all.enumerated() {
            let cursor = try #require(FeedCursor(event.cursor.description), "the id round-trips as text")
            let rest = try await engine.feedEvents(after: cursor).events
            #expect(rest.map(\.cursor) == all.dropFirst(index + 1).map(\.cursor), "resuming after event \(index)")
        }
        let paged = try await engine.feedEvents(after: start, limit: 3)
        #expect(paged.events.count == 3 && paged.cursor == all[2].cursor)
        #expect(try await engine.feedEvents(after: paged.cursor).events.map(\.cursor) == [all[3].cursor])
        // Another merchant's orders never show.
        let other = try engine.forMerchant("someone-else")
        _ = try await other.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        _ = try await other.createOrder(NewOrder(orderID: "X1", workflow: "food-order",
            attributes: ["merchantName": "Other", "orderNumber": "X1", "itemCount": 1]))
        #expect(try await Self.orderIDsInFeed(of: other, after: start, count: 1, "the other merchant's order is in its feed") == ["X1"])
        #expect(try await engine.feedEvents(after: all[3].cursor).events.isEmpty, "and never in ours")
        #expect(FeedCursor("12") == nil && FeedCursor("a.b") == nil && FeedCursor("1.-2") == nil && FeedCursor("0.-1") == .beginning)
        await fixture.shutdown()
    }

    @Test("a transaction that commits after a younger one is never skipped by a reader that saw the younger one")
    func lateCommitIsNotSkipped() async throws {
        let fixture = try await EngineFixture.make()
        let engine = fixture.engine
        try await fixture.createFoodOrder("OLD")
        let start = try await engine.feedCursorNow()
        try await engine.pool.withConnection { connection in
            // An older transaction takes its id, then a younger one (the creation of NEW) commits.
            try await Self.beginWithTransactionID(on: connection)
            try await fixture.createFoodOrder("NEW")
            try await Task.sleep(for: .milliseconds(300))
            // (A cursor of "now" may also give what committed just before it, as OLD's creation.)
            #expect(!(try await engine.feedEvents(after: start).events.contains { $0.orderID == "NEW" }),
                    "nothing past a transaction still running is given out")
            try await connection.query(PostgresQuery("""
                INSERT INTO order_transitions (merchant_id, order_id, seq, from_state, to_state, rendered, actor, occurred_at)
                VALUES ('default', 'OLD', 2, 'received', 'in_progress', '{}', 'older transaction', now())
                """))
            try await connection.query(PostgresQuery("COMMIT"))
        }
        var events: [String] = []
        try await eventually("both transactions' events are in the feed") {
            events = try await engine.feedEvents(after: start).events.filter { $0.seq == 2 || $0.orderID == "NEW" }
                .map { "\($0.orderID)#\($0.seq)" }
            return events.count == 2
        }
        #expect(events == ["OLD#2", "NEW#1"], "in the order of the transactions, the late one first")
        await fixture.shutdown()
    }

    @Test("a long transaction in another database of the server does not hold the feed back; one in this database does")
    func otherDatabasesDoNotHoldTheFeed() async throws {
        let fixture = try await EngineFixture.make()
        let engine = fixture.engine
        let start = try await engine.feedCursorNow()
        let elsewhere = try await PostgresConnection.connect(try await TestDatabase.fresh(prefix: "elsewhere"))
        // Another application's long batch job: a transaction with an id, open for the whole test.
        try await Self.beginWithTransactionID(on: elsewhere)
        try await fixture.createFoodOrder("A1")
        // A transaction of another database that ends between a read's snapshot and its look at
        // pg_stat_activity cannot be told from one of this database and holds that one read back
        // (erring early is safe); on a busy server (CI: every test its own database) that happens,
        // so the event must come while the long one still runs, not necessarily at the first read.
        #expect(try await Self.orderIDsInFeed(of: engine, after: start, count: 1, within: .seconds(3),
                                              "the event is in the feed though a transaction older than the creation is still running elsewhere") == ["A1"])
        let later = try await engine.feedCursorNow()
        // The same in this database holds it back until it ends: it could still write an event.
        try await engine.pool.withConnection { connection in
            try await Self.beginWithTransactionID(on: connection)
            try await fixture.createFoodOrder("A2")
            #expect(try await engine.feedEvents(after: later).events.isEmpty)
            try await connection.query(PostgresQuery("COMMIT"))
        }
        #expect(try await Self.orderIDsInFeed(of: engine, after: later, count: 1, within: .seconds(3),
                                              "the event is in the feed once this database's transaction ended") == ["A2"])
        try await elsewhere.query(PostgresQuery("COMMIT"))
        await elsewhere.close()
        await fixture.shutdown()
    }

    @Test("a read never gives fewer events than one before it, though the server's horizon reads lower")
    func feedHorizonNeverGoesBack() async throws {
        let fixture = try await EngineFixture.make()
        let engine = fixture.engine
        let start = try await engine.feedCursorNow()
        try await fixture.createFoodOrder("M1")
        try await fixture.createFoodOrder("M2")
        let seen = try await Self.orderIDsInFeed(of: engine, after: start, count: 2, "both creations are in the feed")
        #expect(seen == ["M1", "M2"])
        // The horizon reads lower now, as when a transaction of another database ends during the
        // read and so still counts: what was given stays given.
        try await engine.pool.query(PostgresQuery(
            "CREATE OR REPLACE FUNCTION orderflow_feed_horizon() RETURNS xid8 LANGUAGE sql STABLE AS $$ SELECT '3'::xid8 $$"))
        #expect(try await engine.feedEvents(after: start).events.map(\.orderID) == seen)
        #expect(try await engine.feedCursorNow() > start, "and \"now\" does not move back either")
        await fixture.shutdown()
    }

    /// The order ids of the feed's events after `cursor`, read again until there are `count` of
    /// them: a read may be held back once (see `otherDatabasesDoNotHoldTheFeed`), so a test waits
    /// for the events rather than reading once.
    static func orderIDsInFeed(of engine: OrderFlowEngine, after cursor: FeedCursor, count: Int,
                               within timeout: Duration = .seconds(10), _ what: String) async throws -> [String] {
        var ids: [String] = []
        try await eventually(what, timeout: timeout) {
            ids = try await engine.feedEvents(after: cursor).events.map(\.orderID)
            return ids.count >= count
        }
        return ids
    }

    /// Opens a transaction that has its id already: from here on it holds back the feed of the
    /// database it runs in, until it ends.
    static func beginWithTransactionID(on connection: PostgresConnection) async throws {
        try await connection.query(PostgresQuery("BEGIN"))
        try await connection.query(PostgresQuery("SELECT pg_current_xact_id()"))
    }

    @Test("a client secret grants its order only; altered, it grants nothing")
    func clientSecrets() async throws {
        let fixture = try await EngineFixture.make()
        let engine = fixture.engine
        let secret = try await engine.clientSecret(forOrder: "1042")
        #expect(secret.hasPrefix("of_cs_"))
        #expect(try await engine.clientSecret(forOrder: "1042") == secret, "the same order always gets the same secret")
        #expect(try await engine.clientSecret(forOrder: "1043") != secret)
        #expect(try await engine.resolveClientSecret(secret) == ClientSecretGrant(merchantID: "default", orderID: "1042"))
        let other = try engine.forMerchant("another")
        let theirs = try await other.clientSecret(forOrder: "1042")
        #expect(theirs != secret)
        #expect(try await engine.resolveClientSecret(theirs) == ClientSecretGrant(merchantID: "another", orderID: "1042"))
        // Someone who swaps the order id (or the merchant) inside a secret gets nothing.
        let parts = secret.dropFirst(6).split(separator: ".")
        let swapped = "of_cs_\(parts[0]).\(Data("1043".utf8).base64EncodedString()).\(parts[2])"
        for forged in [swapped, secret + "A", String(secret.dropLast()), "of_cs_", "of_cs_...", "of_live_x"] {
            #expect(try await engine.resolveClientSecret(forged) == nil, "\(forged)")
        }
        // A second engine on the same database (another replica) accepts it: the key is stored.
        let replica = OrderFlowEngine(configuration: OrderFlowConfiguration(database: fixture.database))
        #expect(try await replica.resolveClientSecret(secret)?.orderID == "1042")
        await replica.shutdown()
        await fixture.shutdown()
    }

    @Test("replicas that make a merchant's first client secret at once agree on its key, without an error")
    func firstClientSecretsAtOnce() async throws {
        let fixture = try await EngineFixture.make()
        // Each replica has an empty memory, so each goes to the database for the key; the
        // statements that lose the insert race must still read the winner's key.
        let replicas = (0..<16).map { _ in
            OrderFlowEngine(configuration: OrderFlowConfiguration(database: fixture.database, merchantID: "first-use", maximumConnections: 2))
        }
        let secrets = try await withThrowingTaskGroup(of: String.self) { group in
            for replica in replicas { group.addTask { try await replica.clientSecret(forOrder: "1042") } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(secrets.count == 16)
        #expect(Set(secrets).count == 1, "every replica signs with the one stored key")
        for replica in replicas { await replica.shutdown() }
        await fixture.shutdown()
    }

    @Test("an activity the customer dismissed is sent nothing more; applied content is recorded")
    func dismissedActivityIsLeftAlone() async throws {
        let h = try await WorkerHarness.make()
        let token = EngineFixture.token(71)
        _ = try await h.createFoodOrder("D1")
        try await h.engine.registerActivityToken(orderID: "D1", deviceID: "phone", token: token)
        let worker = h.start(h.configuration())
        try await eventually("the current state is sent and recorded") {
            let recorded = try await h.outcomes("D1")
            return !h.pushes(token).isEmpty && !recorded.isEmpty
        }

        let applied = try await h.engine.reportActivityState(orderID: "D1", deviceID: "phone", state: .active, appliedAt: Date())
        #expect(applied.appState == "active" && applied.appAppliedSeq == 1 && applied.status == "active", "\(applied)")

        let dismissed = try await h.engine.reportActivityState(orderID: "D1", deviceID: "phone", state: .dismissed)
        #expect(dismissed.appState == "dismissed" && dismissed.status == "ended", "\(dismissed)")
        let sent = h.pushes(token).count
        _ = try await h.engine.advance("D1", to: "in_progress")
        _ = try await h.engine.advance("D1", to: "ready")
        try await eventually("the worker handled the transitions") { try await h.pendingCommands("D1") == 0 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(h.pushes(token).count == sent, "nothing is pushed to a dismissed activity")
        // A token the app reports again (a rotation racing the dismissal) does not revive it.
        try await h.engine.registerActivityToken(orderID: "D1", deviceID: "phone", token: EngineFixture.token(72))
        let details = try await h.engine.order("D1")
        #expect(details.activities.first?.status == "ended" && details.activities.first?.appState == "dismissed")

        await #expect(throws: OrderFlowError.self) {
            try await h.engine.reportActivityState(orderID: "D1", deviceID: "nobody", state: .active)
        }
        try await worker.stop()
        await h.shutdown()
    }
}
