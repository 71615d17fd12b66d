import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// The purge against PostgreSQL: what is old enough goes with every row that names it, and every
/// other row is the same before and after (each table compared).
@Suite("Retention: the purge", .serialized)
struct RetentionPurgeTests {
    @Test("old finished orders vanish with every row that names them; unfinished, recent, busy and other merchants' rows stay")
    func finishedOrdersGo() async throws {
        let world = try await RetentionWorld.make()
        let engine = world.fixture.engine
        try await world.finishedOrder(engine, "gone-1", daysAgo: 40)
        try await world.finishedOrder(engine, "gone-2", daysAgo: 31, device: "gone-2-phone")
        try await world.finishedOrder(engine, "recent", daysAgo: 0)
        try await world.finishedOrder(engine, "still-sending", daysAgo: 40, keepCommands: true)
        try await world.fixture.createFoodOrder("open-old")
        try await world.backdate(engine, "open-old", seconds: 40 * 86_400)
        // Another merchant keeps its finished orders 60 days: the same id 40 days old stays there.
        try await world.finishedOrder(world.other, "gone-1", daysAgo: 40)
        try await world.finishedOrder(world.other, "other-older", daysAgo: 70)
        // A device registered through gone-1's client secret forgets the order, not the device.
        try await world.sql("""
            INSERT INTO devices (merchant_id, device_id, alert_token, registered_by_order)
            VALUES ('default', 'registered-phone', 'feedface', 'gone-1')
            """)

        let before = try await TableContents.read(world.fixture.database)
        let purged = try await engine.purge()
        let after = try await TableContents.read(world.fixture.database)

        #expect(purged[.orders] == 3, "\(purged)")
        #expect(purged[.transitions] == 6 && purged[.deliveries] == 6 && purged[.activities] == 3 && purged[.followers] == 3,
                "\(purged)")
        let gone = ["(default,gone-1,", "(default,gone-2,", "(other,other-older,"]
        for table in after.keys.sorted() {
            var expected = RetentionWorld.lines(of: before[table]) { line in !gone.contains { line.hasPrefix($0) } }
            if table == "devices" {
                // registered_by_order is forgotten; the columns after it (added by later migrations) stay.
                expected = expected.replacingOccurrences(of: ",gone-1(,*\\))", with: ",$1", options: .regularExpression)
            }
            #expect(after[table] == expected, "table \(table) after the purge:\n\(after[table] ?? "")\nexpected:\n\(expected)")
        }
        for id in ["gone-2", "other-older"] {
            for (table, rows) in after where rows.contains(id) {
                Issue.record("\(id) survives in \(table): \(rows)")
            }
        }
        #expect(try await engine.purge().total == 0, "a second purge finds nothing")
        await world.shutdown()
    }

    @Test("a dry run counts exactly what the purge then deletes, and changes nothing")
    func dryRunChangesNothing() async throws {
        let world = try await RetentionWorld.make()
        let engine = world.fixture.engine
        try await world.finishedOrder(engine, "gone-1", daysAgo: 40)
        try await world.finishedOrder(world.other, "other-older", daysAgo: 70)
        try await world.oldLeftovers()

        let before = try await TableContents.read(world.fixture.database)
        let counted = try await engine.purgeable()
        #expect(TableContents.changes(before, try await TableContents.read(world.fixture.database)).isEmpty)
        let purged = try await engine.purge()
        #expect(counted.rows.filter { $0.value > 0 } == purged.rows.filter { $0.value > 0 }, "counted \(counted), purged \(purged)")
        #expect(counted.batches == 0 && purged[.orders] == 2 && purged[.devices] == 2 && purged[.deadLetters] == 1)
        await world.shutdown()
    }

    @Test("small batches: several run, with pauses, until every old order is gone")
    func batches() async throws {
        let world = try await RetentionWorld.make()
        for index in 1...7 { try await world.finishedOrder(world.fixture.engine, "batch-\(index)", daysAgo: 40) }
        var policy = RetentionPolicy()
        policy.batchSize = 2
        policy.pause = .milliseconds(1)
        let batchSizes = LockedValue<[Int]>([])
        let purged = try await world.fixture.engine.purge(policy) { counts in
            if let orders = counts[.orders] { batchSizes.withLock { $0.append(orders) } }
        }
        #expect(purged[.orders] == 7)
        #expect(batchSizes.withLock { $0 } == [2, 2, 2, 1], "orders per batch")
        #expect(try await world.count("SELECT count(*) AS n FROM orders WHERE order_id LIKE 'batch-%'") == 0)
        await world.shutdown()
    }

    @Test("two purges at once share the work: every old order deleted once, none left, no error")
    func twoPurgersAtOnce() async throws {
        let world = try await RetentionWorld.make()
        for index in 1...30 { try await world.finishedOrder(world.fixture.engine, "both-\(index)", daysAgo: 40) }
        var policy = RetentionPolicy()
        policy.batchSize = 3
        policy.pause = .zero
        let engine = world.fixture.engine
        async let first = engine.purge(policy)
        async let second = engine.purge(policy)
        let (a, b) = try await (first, second)
        #expect(a[.orders] + b[.orders] == 30, "\(a) \(b)")
        #expect(a[.transitions] + b[.transitions] == 60)
        #expect(try await world.count("SELECT count(*) AS n FROM orders") == 0)
        #expect(try await world.count("SELECT count(*) AS n FROM order_transitions") == 0)
        await world.shutdown()
    }

    @Test("dead letters, commands never sent, tokenless devices and day-old keys go after their age; live ones stay")
    func leftoversGo() async throws {
        let world = try await RetentionWorld.make()
        try await world.oldLeftovers()
        let before = try await TableContents.read(world.fixture.database)
        let purged = try await world.fixture.engine.purge()
        #expect(purged[.deadLetters] == 1 && purged[.staleCommands] == 1 && purged[.requestKeys] == 1, "\(purged)")
        #expect(purged[.devices] == 2 && purged[.pushToStartTokens] == 2, "\(purged)")
        #expect(purged[.orders] == 0)
        let after = try await TableContents.read(world.fixture.database)
        let gone = ["dead-40d", "tokenless-40d", "p2s-only-40d", "stale-key"]
        for table in after.keys.sorted() {
            let expected = RetentionWorld.lines(of: before[table]) { line in
                !gone.contains { line.contains($0) } && !(table == "activity_commands" && line.contains("\"2020-"))
            }
            #expect(after[table] == expected, "table \(table):\n\(after[table] ?? "")\nexpected:\n\(expected)")
        }
        await world.shutdown()
    }

    @Test("history stays append-only outside the purge: a plain DELETE of a transition is refused")
    func historyStaysAppendOnly() async throws {
        let world = try await RetentionWorld.make()
        try await world.fixture.createFoodOrder("kept")
        await #expect(throws: PostgresError.self) {
            try await world.sql("DELETE FROM order_transitions WHERE order_id = 'kept'")
        }
        await #expect(throws: PostgresError.self) {
            try await world.sql("UPDATE order_transitions SET actor = 'x' WHERE order_id = 'kept'")
        }
        #expect(try await world.count("SELECT count(*) AS n FROM order_transitions WHERE order_id = 'kept'") == 1)
        await world.shutdown()
    }

    @Test("a merchant's retention: set, read, as short as a minute, cleared; out of bounds and unknown merchants refused")
    func merchantRetention() async throws {
        let world = try await RetentionWorld.make()
        let engine = world.fixture.engine
        #expect(try await engine.retention(merchantID: "default").own == nil, "the engine's own merchant needs no row")
        try await engine.setRetention(.seconds(60), merchantID: "default")
        #expect(try await engine.retention(merchantID: "default").own == .seconds(60))
        #expect(try await engine.retention(merchantID: "other").own == .seconds(60 * 86_400))

        // A minute: an order finished 90 seconds ago goes, one finished 30 seconds ago stays.
        try await world.finishedOrder(engine, "ninety-seconds", daysAgo: 0)
        try await world.backdate(engine, "ninety-seconds", seconds: 90)
        try await world.finishedOrder(engine, "thirty-seconds", daysAgo: 0)
        try await world.backdate(engine, "thirty-seconds", seconds: 30)
        #expect(try await engine.purge()[.orders] == 1)
        #expect(try await world.count("SELECT count(*) AS n FROM orders WHERE order_id = 'thirty-seconds'") == 1)

        let before = try await TableContents.read(world.fixture.database)
        for (retention, merchant, code) in [(Duration.seconds(59), "default", OrderFlowError.Code.invalidInput),
                                            (.seconds(200 * 366 * 86_400), "default", .invalidInput),
                                            (.seconds(3_600), "nobody", .notFound), (.seconds(3_600), "", .invalidInput)] {
            await #expect { try await engine.setRetention(retention, merchantID: merchant) } throws: { error in
                (error as? OrderFlowError)?.code == code
            }
        }
        await #expect { _ = try await engine.retention(merchantID: "nobody") } throws: { error in
            (error as? OrderFlowError)?.code == .notFound
        }
        var tooShort = RetentionPolicy()
        tooShort.deadLetterAge = .seconds(10)
        await #expect { try await engine.purge(tooShort) } throws: { ($0 as? OrderFlowError)?.code == .invalidInput }
        await #expect { _ = try await engine.purgeable(tooShort) } throws: { ($0 as? OrderFlowError)?.code == .invalidInput }
        #expect(TableContents.changes(before, try await TableContents.read(world.fixture.database)).isEmpty)

        try await engine.setRetention(nil, merchantID: "default")
        #expect(try await engine.retention(merchantID: "default").own == nil)
        await world.shutdown()
    }

    @Test("durations as people write them: s, m, h, d and combinations; nonsense refused")
    func durationText() {
        #expect(RetentionText.parse("30d") == .seconds(30 * 86_400))
        #expect(RetentionText.parse("1d12h") == .seconds(36 * 3_600))
        #expect(RetentionText.parse("2m") == .seconds(120))
        #expect(RetentionText.parse(" 90S ") == .seconds(90))
        for nonsense in ["", "30", "d", "0d", "-1d", "1.5d", "1w", "1d 2h", "abc", "99999999999999d", "1d2"] {
            #expect(RetentionText.parse(nonsense) == nil, "\(nonsense)")
        }
        #expect(RetentionText.describe(.seconds(36 * 3_600 + 61)) == "1d12h1m1s")
        #expect(RetentionText.describe(.seconds(120)) == "2m")
    }
}
