import Foundation
import TestTags
import Testing

/// How long `orderflow advance` takes, start to exit: printed, not asserted; timed, so it runs alone.
@Suite("Timing: orderflow advance", .tags(.timing))
struct TimingAdvanceCommandTests {
    @Test("advance is quick against a running database (informational)")
    func advanceTiming() async throws {
        let cli = try await CLI.withFreshDatabase()
        expectStatus(try await cli.run("workflow", "apply", Fixtures.foodOrder), 0)
        expectStatus(try await cli.run(["order", "create", "1042", "--workflow", "food-order"] + foodAttributes), 0)
        var timings: [Double] = []
        for target in ["accept", "ready", "dispatch", "deliver"] {
            var arguments = ["advance", "1042", target]
            if target == "dispatch" { arguments += ["--eta", "15m"] }
            let result = try await cli.run(arguments)
            expectStatus(result, 0)
            timings.append(result.seconds * 1000)
        }
        let shown = timings.map { String(format: "%.0f ms", $0) }.joined(separator: ", ")
        print("orderflow advance wall-clock times (process start to exit): \(shown)")
    }
}
