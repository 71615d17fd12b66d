import Foundation
import Testing
import WorkflowKit

/// The Android data message derived from what the shipped food order already says, and its
/// `android:` overrides; every map is compared whole.
@Suite("Android rendering")
struct AndroidRenderingTests {
    let food: Workflow

    init() throws {
        food = try loadShipped("food-order")
    }

    /// Renders `from -> to` for iPhones, then for Android, as a sender would.
    func android(_ from: String, _ to: String, input: JSONValue = [:], previous: JSONValue? = nil) throws -> RenderedAndroidUpdate {
        let transition = try #require(food.transition(from: from, to: to))
        let update = try food.render(transition: transition, attributes: foodAttributes, input: input, previous: previous,
                                     at: transitionTime)
        return try food.renderAndroid(update, from: from, order: "A-1042", attributes: foodAttributes, input: input,
                                      previous: previous)
    }

    /// 2025-05-01T12:00:00Z in milliseconds, as the app reads `timestamp`.
    let now = "1746100800000"

    @Test func dispatchShowsTheAlertTheContentTheETAAndTheStateIcon() throws {
        let rendered = try android("ready", "out_for_delivery", input: ["eta": "2025-05-01T12:30:00Z", "driver": "Anna"])
        #expect(rendered.data == [
            "orderflow": "1", "order": "A-1042", "workflow": "food-order", "state": "out_for_delivery", "event": "update",
            "timestamp": now, "title": "On the way", "text": "Anna is on the way.",
            "segments": "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3", "progress": "300",
            "when": "1746102600000", "icon": "ic_delivery_car", "channel": "order_updates", "promote": "true", "alert": "true",
        ])
        #expect(rendered.priority == .high)
        #expect(rendered.ttlText == "600s")  // when the state's content goes stale (its mark-stale timer)
        #expect(rendered.collapseKey == "order:A-1042")
    }

    @Test func readyShowsItsChip() throws {
        let rendered = try android("in_progress", "ready")
        #expect(rendered.data == [
            "orderflow": "1", "order": "A-1042", "workflow": "food-order", "state": "ready", "event": "update",
            "timestamp": now, "title": "Order A-1042 is ready", "text": "Your order is ready.",
            "segments": "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3", "progress": "200",
            "chip": "Ready", "icon": "ic_food_bag", "channel": "order_updates", "promote": "true", "alert": "true",
        ])
        #expect(rendered.priority == .high)
        #expect(rendered.ttlText == "3600s")
    }

    @Test func aTransitionWithoutAlertIsNormalPriorityAndNamedByItsState() throws {
        let rendered = try android("received", "in_progress", input: ["eta": "2025-05-01T12:40:00Z"])
        #expect(rendered.data == [
            "orderflow": "1", "order": "A-1042", "workflow": "food-order", "state": "in_progress", "event": "update",
            "timestamp": now, "title": "In progress", "text": "Pizza Place is preparing your 3 items.",
            "segments": "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3", "progress": "100",
            "when": "1746103200000", "icon": "ic_food_bag", "channel": "order_updates", "promote": "true", "alert": "false",
        ])
        #expect(rendered.priority == .normal)
    }

    @Test func deliveryEndsWithAFullBarAndADismissalTime() throws {
        let rendered = try android("out_for_delivery", "delivered")
        #expect(rendered.data == [
            "orderflow": "1", "order": "A-1042", "workflow": "food-order", "state": "delivered", "event": "end",
            "timestamp": now, "title": "Delivered", "text": "Delivered. Enjoy your meal!",
            "segments": "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3", "progress": "400",
            "icon": "ic_food_bag", "channel": "order_updates", "promote": "false", "alert": "true",
            "dismiss": "at", "dismiss_at": "1746102600000",
        ])
        #expect(rendered.priority == .high)
        #expect(rendered.ttlText == "28800s")
    }

    @Test func aCancellationLeavesThePointWhereItWasAndCancelsAtOnce() throws {
        let rendered = try android("ready", "cancelled")
        #expect(rendered.data == [
            "orderflow": "1", "order": "A-1042", "workflow": "food-order", "state": "cancelled", "event": "end",
            "timestamp": now, "title": "Order cancelled", "text": "Your order was cancelled.",
            "segments": "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3", "progress": "200",
            "icon": "ic_food_bag", "channel": "order_updates", "promote": "false", "alert": "true", "dismiss": "now",
        ])
    }

    @Test func localizedAlertsTravelAsResourceNames() throws {
        let workflow = try load(androidWorkflowYAML().replacingOccurrences(
            of: "  - {from: cooking, to: done}",
            with: "  - {from: cooking, to: done, alert: {title: {loc-key: DONE_TITLE, loc-args: [\"{{attributes.code}}\"]}, body: Enjoy}}"))
        let transition = try #require(workflow.transition(from: "cooking", to: "done"))
        let attributes: JSONValue = ["code": "A1", "shop": "Pizza"]
        let update = try workflow.render(transition: transition, attributes: attributes, input: [:], at: transitionTime)
        let rendered = try workflow.renderAndroid(update, from: "cooking", order: "o-1", attributes: attributes, input: [:],
                                                  previous: nil)
        #expect(rendered.data["title_loc_key"] == "DONE_TITLE")
        #expect(rendered.data["title_loc_args"] == "[\"A1\"]")
        #expect(rendered.data["title"] == nil)
        #expect(rendered.data["text"] == "Done")
        #expect(rendered.data["channel"] == "kitchen")
        #expect(rendered.data["dismiss"] == "default")
    }

    @Test func aDerivedTextIsCutButAWrittenOneIsNot() throws {
        let yaml = androidWorkflowYAML(state: "title: \"{{attributes.shop}}\"")
            .replacingOccurrences(of: "message: string(60)", with: "message: string(300)")
            .replacingOccurrences(of: "content: {message: Cooking}", with: "content: {message: \"\(String(repeating: "é", count: 300))\"}")
        let workflow = try load(yaml)
        let attributes: JSONValue = ["code": "A1", "shop": .string(String(repeating: "s", count: 40))]
        let update = try workflow.render(transition: try #require(workflow.transition(from: "placed", to: "cooking")),
                                         attributes: attributes, input: [:], at: transitionTime)
        let rendered = try workflow.renderAndroid(update, from: "placed", order: "o-1", attributes: attributes, input: [:], previous: nil)
        #expect(rendered.data["text"] == String(repeating: "é", count: 239) + "…")
        #expect(rendered.data["title"] == String(repeating: "s", count: 40))
        #expect(rendered.data["when"] == nil)
    }

    /// The load-time bound holds for what is actually rendered, and FCM's rules for data hold.
    @Test func everyShippedTransitionFitsItsBound() throws {
        for name in ["food-order", "ride", "f1-race"] {
            let workflow = try loadShipped(name)
            for transition in workflow.transitions {
                let bound = workflow.maximumAndroidDataSize(for: transition)
                #expect(bound <= RenderedAndroidUpdate.maximumDataSize, "\(name) \(transition)")
            }
        }
        let rendered = try android("ready", "out_for_delivery", input: ["eta": "2025-05-01T12:30:00Z", "driver": "Anna"])
        #expect(rendered.dataSize <= food.maximumAndroidDataSize(for: try #require(food.transition(from: "ready", to: "out_for_delivery"))))
        for key in rendered.data.keys {
            #expect(!AndroidSectionTests.reservedKeys.contains(key) && !key.hasPrefix("google"), "reserved key \(key)")
        }
    }
}

extension AndroidSectionTests {
    /// Keys FCM refuses in `data`.
    static let reservedKeys: Set<String> = ["from", "gcm", "message_type"]
}
