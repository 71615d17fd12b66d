import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// `orderflow purge` and `orderflow merchant retention` as an operator meets them: a dry run
/// that changes nothing, the purge, a merchant's retention set and shown, and every wrong way
/// refused in one line with nothing changed.
@Suite("Retention on the command line", .serialized)
struct RetentionCLITests {
    @Test("merchant retention set and shown; purge --dry-run changes nothing, purge deletes; wrong ways refused",
          .timeLimit(.minutes(3)))
    func purgeAndRetention() async throws {
        let database = try await TestDatabase.fresh(prefix: "retention")
        _ = try await Schema.migrate(database)
        let cli = try CLI(databaseURL: database.connectionString)
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database))
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        for id in ["old-1", "old-2", "fresh"] {
            _ = try await engine.createOrder(NewOrder(
                orderID: id, workflow: "food-order", attributes: ["merchantName": "Luigi's", "orderNumber": .string(id), "itemCount": 1]))
            _ = try await engine.cancel(id)
        }
        try await engine.pool.query(PostgresQuery("DELETE FROM activity_commands"))
        try await engine.pool.query(PostgresQuery(
            "UPDATE orders SET state_entered_at = now() - interval '40 days' WHERE order_id IN ('old-1', 'old-2')"))

        let added = try await cli.run("merchant", "add", "luigis")
        #expect(added.status == 0, "\(added)")
        let set = try await cli.run("merchant", "retention", "luigis", "45d")
        #expect(set.status == 0 && set.stdout.contains("merchant luigis keeps its finished orders for 45d"), "\(set)")
        let shown = try await cli.run("merchant", "retention", "luigis")
        #expect(shown.status == 0 && shown.stdout.contains("for 45d"), "\(shown)")
        let reset = try await cli.run("merchant", "retention", "luigis", "--default")
        #expect(reset.status == 0 && reset.stdout.contains("the purge's default"), "\(reset)")
        let ownMerchant = try await cli.run("merchant", "retention", "default", "2m")
        #expect(ownMerchant.status == 0 && ownMerchant.stdout.contains("for 2m"), "the CLI's own merchant needs no `merchant add`: \(ownMerchant)")
        _ = try await cli.run("merchant", "retention", "default", "--default")

        // Every wrong way: one line, the documented status, nothing changed.
        let before = try await TableContents.read(database)
        let check = CLIBadInputChecker()
        let cases: [(String, [String], Int32, [String])] = [
            ("a duration without a unit", ["purge", "--older-than", "30"], 64, ["--older-than", "`30` is not a duration", "30d"]),
            ("an unknown unit", ["purge", "--older-than", "4w", "--dry-run"], 64, ["`4w` is not a duration", "s, m, h or d"]),
            ("words", ["purge", "--older-than", "a month"], 64, ["`a month` is not a duration"]),
            ("too short", ["purge", "--older-than", "30s"], 65, ["--older-than", "1 minute", "30s"]),
            ("too long", ["purge", "--older-than", "40000d"], 65, ["100 years"]),
            ("unknown merchant", ["merchant", "retention", "nobody", "45d"], 66, ["nobody", "orderflow merchant add"]),
            ("unknown merchant shown", ["merchant", "retention", "nobody"], 66, ["nobody"]),
            ("no merchant", ["merchant", "retention"], 64, ["<id>"]),
            ("a retention without a unit", ["merchant", "retention", "luigis", "45"], 64, ["`45` is not a duration"]),
            ("a zero retention", ["merchant", "retention", "luigis", "0d"], 64, ["`0d` is not a duration"]),
            ("a retention under a minute", ["merchant", "retention", "luigis", "59s"], 65, ["1 minute"]),
            ("a retention and --default", ["merchant", "retention", "luigis", "45d", "--default"], 64, ["either"]),
            ("a bad purge interval", ["worker", "run", "--purge-interval", "soon"], 64, ["--purge-interval", "`soon`"]),
        ]
        for (label, arguments, status, fragments) in cases {
            let result = try await cli.run(arguments)
            check.expect(label, category: "retention", result, status: status, mentioning: fragments)
        }
        let dryRun = try await cli.run("purge", "--dry-run")
        #expect(dryRun.status == 0 && dryRun.stdout.contains("would delete"), "\(dryRun)")
        #expect(dryRun.stdout.contains("2 ") && dryRun.stdout.contains("finished orders"), "\(dryRun)")
        #expect(TableContents.changes(before, try await TableContents.read(database)).isEmpty,
                "a refused command or the dry run changed what is stored")
        print(check.summary)
        #expect(check.failures == 0)

        let purged = try await cli.run("purge")
        #expect(purged.status == 0 && purged.stdout.contains("deleted 6 rows, 2 of them finished orders"), "\(purged)")
        let again = try await cli.run("purge", "--json")
        #expect(again.status == 0 && again.stdout.contains("\"batches\""), "\(again)")
        let nothing = try await cli.run("purge")
        #expect(nothing.stdout.contains("nothing purged"), "\(nothing)")
        let left = try await engine.pool.query(PostgresQuery("SELECT string_agg(order_id, ',' ORDER BY order_id) AS ids FROM orders"))
            .single().decode("ids", as: String.self)
        #expect(left == "fresh")
        await engine.shutdown()
    }
}
