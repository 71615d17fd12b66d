import ConsoleOutput
import Foundation
import OrderFlow
@testable import OrderFlowDemo
import OrderFlowTesting
import Testing

/// The demo's report prints what it reads back from the database: escaped, as the CLI does.
@Suite("The demo's report shows stored text as text")
struct DemoReportTextTests {
    @Test("hostile values in an order's rows reach the report's lines escaped, with and without colours")
    func hostileValuesAreEscaped() async throws {
        let fixture = try await EngineFixture.make()
        let engine = fixture.engine
        try await fixture.createFoodOrder("1042", merchant: "\u{2067}שלום\u{2069} Pizza")
        _ = try await engine.advance("1042", to: "accept")
        try await engine.follow(orderID: "1042", deviceID: "alice-iphone")
        try await HostileText.inject(into: fixture.database, merchantID: engine.configuration.merchantID, orderID: "1042")
        var history = try await engine.history("1042")
        // The id and the merchant as only old data could hold them (the policy refuses both).
        history.order.orderID = HostileText.orderID
        let activities = try await engine.order("1042").activities
        let report = DemoReport(
            orders: [DemoReport.Order(label: "A", story: "a story", history: history, activities: activities)],
            pushes: [], holders: [:], merchantID: HostileText.escapes, elapsed: .seconds(1))

        for terminal in [Terminal(isInteractive: false, usesColor: false), Terminal(isInteractive: true, usesColor: true)] {
            let text = (report.lines(terminal) + [report.problem ?? ""]).joined(separator: "\n")
            let found = HostileText.terminalControls(in: HostileText.withoutStyles(text))
            #expect(found.isEmpty, "the report printed \(found.joined(separator: ", ")) raw:\n\(text.debugDescription)")
            for shown in ["0\\u{1B}[2J\\u{202E}order", "\\u{2067}שלום\\u{2069} Pizza", "\\u{202E}fdp.exe",
                          "phoneesc\\u{1B}[2J", "ORDERFLOW_MERCHANT='esc\\u{1B}[2J"] {
                #expect(text.contains(shown), "the report lacks \(shown):\n\(text)")
            }
        }
        await fixture.shutdown()
    }
}
