import Foundation
import OrderFlowTesting
import PGKit
import Testing

/// `orderflow device forget` and `orderflow order redact`: the merchant's own only, finished
/// orders only, and a refusal changes nothing.
@Suite("Erasure on the command line")
struct ErasureCLITests {
    @Test("device forget and order redact: another merchant's, unknown and live are refused with nothing changed")
    func forgetAndRedact() async throws {
        let cli = try await CLI.withFreshDatabase()
        #expect(try await cli.run("workflow", "apply", Fixtures.foodOrder).status == 0)
        for order in ["1042", "1043"] {
            let created = try await cli.run("order", "create", order, "--workflow", "food-order", "--attr", "merchantName=Zebediah's",
                                            "--attr", "orderNumber=\(order)", "--attr", "itemCount=3")
            #expect(created.status == 0, "\(created)")
        }
        #expect(try await cli.run("follow", "1042", "zeb-iphone").status == 0)
        #expect(try await cli.run("cancel", "1042").status == 0)
        let database = try PostgresConfiguration(try #require(cli.databaseURL))
        let other = ["ORDERFLOW_MERCHANT": "elsewhere"]
        #expect(try await cli.run("merchant", "add", "elsewhere").status == 0)

        let before = try await TableContents.read(database)
        for (arguments, environment, status, fragment) in [
            (["device", "forget", "zeb-iphone"], other, Int32(66), "is not known"),
            (["device", "forget", "nobody"], [:], 66, "is not known"),
            (["order", "redact", "1042"], other, 66, "1042"),
            (["order", "redact", "1043"], [:], 67, "Cancel it first"),
        ] as [([String], [String: String], Int32, String)] {
            let refused = try await cli.run(arguments, environment: environment)
            #expect(refused.status == status && refused.stderr.contains(fragment), "\(arguments): \(refused)")
        }
        #expect(TableContents.changes(before, try await TableContents.read(database)).isEmpty, "a refusal changes nothing")

        let forgotten = try await cli.run("device", "forget", "zeb-iphone")
        #expect(forgotten.status == 0 && forgotten.stdout.contains("forgotten"), "\(forgotten)")
        #expect(try await cli.run("device", "forget", "zeb-iphone").status == 66)
        let redacted = try await cli.run("order", "redact", "1042")
        #expect(redacted.status == 0 && redacted.stdout.contains("redacted"), "\(redacted)")
        let once = try await TableContents.read(database)
        #expect(try await cli.run("order", "redact", "1042").status == 0)
        #expect(TableContents.changes(once, try await TableContents.read(database)).isEmpty, "redacting twice changes nothing")
        let shown = try await cli.run("show", "1042", "--json")
        #expect(shown.status == 0 && !shown.stdout.contains("Zebediah") && shown.stdout.contains("cancelled"), "\(shown)")
    }
}
