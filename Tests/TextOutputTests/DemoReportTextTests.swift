import ConsoleOutput
import Foundation
import APNSCore
@testable import LocalAPNS
@testable import OrderFlow
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
        // A push as the stand-in recorded it, carrying hostile text where only a payload can:
        // the alert's title and the card's content (driver, status).
        let token = EngineFixture.token(7)
        let apnsID = UUID()
        let payload: JSONValue = ["aps": [
            "event": "update", "timestamp": 1_795_000_000,
            "alert": ["title": .string(HostileText.escapes), "body": "b"],
            "content-state": ["status": .string(HostileText.override), "driverName": .string(HostileText.controls)],
        ]]
        let push = LocalAPNSPush(
            deviceToken: token, apnsID: apnsID, topic: "com.example.orders", pushType: "liveactivity", priority: 10,
            expiration: nil, collapseID: nil, keyID: "KEY1234567", headers: [:], payload: payload,
            rawPayload: payload.serialized, receivedAt: Date())
        history.deliveries.append(DeliveryRecord(
            id: 1, orderID: history.order.orderID, deviceID: "alice-iphone", seq: 2, merged: 1, event: "update",
            tokenKind: "activity", tokenSuffix: String(token.suffix(8)), priority: 10, apsTimestamp: 1_795_000_000,
            alertTitle: HostileText.escapes, apnsID: apnsID, status: 200, reason: nil, outcome: .sent, attemptedAt: Date()))
        let report = DemoReport(
            orders: [DemoReport.Order(label: "A", story: "a story", history: history, activities: activities)],
            pushes: [push], holders: [token: TokenHolder(device: HostileText.shortEscape, kind: "activity")],
            merchantID: HostileText.escapes, elapsed: .seconds(1))

        for terminal in [Terminal(isInteractive: false, usesColor: false), Terminal(isInteractive: true, usesColor: true)] {
            let text = (report.lines(terminal) + [report.problem ?? ""]).joined(separator: "\n")
            let found = HostileText.terminalControls(in: HostileText.withoutStyles(text))
            #expect(found.isEmpty, "the report printed \(found.joined(separator: ", ")) raw:\n\(text.debugDescription)")
            for shown in ["0\\u{1B}[2J\\u{202E}order", "\\u{2067}שלום\\u{2069} Pizza", "\\u{202E}fdp.exe",
                          "phoneesc\\u{1B}[2J", "ORDERFLOW_MERCHANT='esc\\u{1B}[2J",
                          "“esc\\u{1B}[2J", "abc\\u{202E}fdp.exe · ctl\\u{1}", "\\u{1B}[2J#42"] {
                #expect(text.contains(shown), "the report lacks \(shown):\n\(text)")
            }
        }
        await fixture.shutdown()
    }
}
