import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// `orderflow show` tells staff what a customer whose phone could show no Live Activity got:
/// the ordinary notification, under the transition it carried, and the device in `alerts`.
@Suite("orderflow show: the ordinary-alert fallback")
struct ShowAlertFallbackTests {
    @Test(.timeLimit(.minutes(2)))
    func showListsTheNotificationThatStoodInForTheActivity() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "showalert")
        let engine = setup.engine
        // A push-to-start token for another workflow's type only: nothing can show the food order.
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("ride"), file: "ride.yaml")
        let deviceToken = EngineFixture.token(81)
        try await engine.registerDeviceToken(deviceID: "alice-phone", token: deviceToken)
        try await engine.registerPushToStartToken(deviceID: "alice-phone", attributesType: "RideAttributes", token: EngineFixture.token(82))
        _ = try await engine.createOrder(NewOrder(orderID: "1042", workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": "1042", "itemCount": 1]))
        try await engine.follow(orderID: "1042", deviceID: "alice-phone")
        _ = try await engine.cancel("1042", reason: "Out of dough")

        let worker = try setup.cli.start(setup.workerArguments)
        let push = try await setup.apns.waitForPushes(count: 1, timeout: .seconds(60))[0]
        try await setup.waitUntilDrained(timeout: .seconds(30))
        worker.interrupt()
        _ = try await worker.finish()
        #expect(push.deviceToken == deviceToken && push.pushType == "alert")

        let show = try await setup.cli.run("show", "1042")
        expectStatus(show, 0)
        let suffix = String(deviceToken.suffix(8))
        let line = try #require(show.stdout.split(separator: "\n").first { $0.contains("↳ alice-phone") }, "\(show.stdout)")
        for fragment in ["alert", "p10", "device …\(suffix)", "sent 200", "\"Order cancelled\"",
                         "(a notification: the device shows no Live Activity)"] {
            #expect(line.contains(fragment), "the delivery line lacks \(fragment): \(line)")
        }
        let devices = try #require(show.stdout.split(separator: "\n").last { $0.hasPrefix("alice-phone") }, "\(show.stdout)")
        #expect(devices.contains("alerts"), "\(devices)")
        #expect(!show.stdout.contains(deviceToken), "the token never whole")

        let json = try #require(try (try await setup.cli.run("show", "1042", "--json")).json() as? [String: Any])
        let deliveries = try #require(json["deliveries"] as? [[String: Any]])
        #expect(deliveries.count == 1)
        #expect(deliveries.first?["event"] as? String == "alert")
        #expect(deliveries.first?["tokenKind"] as? String == "device")
        #expect(deliveries.first?["alertTitle"] as? String == "Order cancelled")
        #expect(deliveries.first?["outcome"] as? String == "sent")
        try await setup.shutdown()
    }
}
