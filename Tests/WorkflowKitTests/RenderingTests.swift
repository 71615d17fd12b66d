import Foundation
import Testing
import WorkflowKit

/// A workflow with one field of every type, used to check typed conversion.
let typesWorkflowYAML = """
    name: types
    activity:
      attributes-type: TypesAttributes
      attributes:
        name: string(40)
        since: date
      content-state:
        greeting: string(20)
        count: int
        ratio: double
        flag: bool
        due: date
        level: enum(low, high)
        note: string(30)?
        tags: [string(10); 3]
        when: date?
    lifecycle:
      start: app
    states:
      a:
        initial: true
        content: {greeting: hi, count: 0, ratio: 0.5, flag: false, due: now, level: low, tags: []}
      b:
        final: true
    transitions:
      - from: a
        to: b
        input: {n: string, r: string, f: string, lvl: string, due: date, note: string?, tags: "[string(10); 3]"}
        content:
          greeting: "Hi {{attributes.name}}"
          count: "{{input.n}}"
          ratio: "{{input.r}}"
          flag: "{{input.f}}"
          due: "{{input.due}}"
          level: "{{input.lvl}}"
          note: "{{input.note}}"
          tags: "{{input.tags}}"
          when: "+15m"
    """

@Suite("Rendering")
struct RenderingTests {
    let types: Workflow
    let food: Workflow

    init() throws {
        types = try WorkflowLoader.load(yaml: typesWorkflowYAML, file: "types.yaml")
        food = try loadShipped("food-order")
    }

    var typesTransition: TransitionSpec { types.transition(from: "a", to: "b")! }
    let typesAttributes: JSONValue = ["name": "Ann", "since": "2024-01-01T00:00:00Z"]

    @Test func typedConversion() throws {
        let input: JSONValue = [
            "n": " 42 ", "r": "2.5", "f": "true", "lvl": "high", "due": "2025-05-01T13:00:00+01:00", "tags": ["a", "b"],
        ]
        let update = try types.render(transition: typesTransition, attributes: typesAttributes, input: input, at: transitionTime)
        let content = update.contentState
        #expect(content["greeting"] == "Hi Ann")
        #expect(content["count"] == 42)
        #expect(content["ratio"] == 2.5)
        #expect(content["flag"] == true)
        #expect(content["level"] == "high")
        #expect(content["tags"] == ["a", "b"])
        // 13:00+01:00 is 12:00Z, the transition time; dates are seconds since 2001-01-01.
        #expect(content["due"] == appSeconds(transitionTime))
        #expect(content["due"] == .double(767_793_600))
        // A relative date is an offset from the transition time.
        #expect(content["when"] == appSeconds(transitionTime.addingTimeInterval(15 * 60)))
        // An optional field rendering empty is null.
        #expect(content["note"] == .null)
        #expect(update.event == .end)
        #expect(update.priority == 10)
        #expect(update.timestamp == transitionTime)
    }

    @Test func literalsFromTheFile() throws {
        let update = try types.render(state: "a", attributes: typesAttributes, at: transitionTime)
        #expect(update.contentState == [
            "greeting": "hi", "count": 0, "ratio": 0.5, "flag": false, "due": appSeconds(transitionTime), "level": "low",
            "note": nil, "tags": [], "when": nil,
        ])
        #expect(update.priority == 5)
        #expect(update.alert == nil)
    }

    @Test(arguments: [
        ("n", "abc", "count", "expected a whole number"),
        ("r", "fast", "ratio", "expected a number"),
        ("f", "yes", "flag", "expected true or false"),
        ("lvl", "medium", "level", "not one of `low`, `high`"),
    ])
    func conversionFailures(input key: String, value: String, field: String, message: String) throws {
        var input: [String: JSONValue] = ["n": "1", "r": "1", "f": "false", "lvl": "low", "due": "+1h", "tags": []]
        input[key] = .string(value)
        #expect {
            try types.render(transition: typesTransition, attributes: typesAttributes, input: .object(input), at: transitionTime)
        } throws: { error in
            guard let error = error as? RenderError else { return false }
            return error.code == .typeMismatch && error.field == field && error.message.contains(message)
        }
    }

    @Test func renderedStringOverMaxLengthIsAnError() throws {
        // "Hi " + 18 characters = 21 > string(20). Nothing is truncated.
        let attributes: JSONValue = ["name": "Bartholomew Jr III", "since": "2024-01-01T00:00:00Z"]
        let input: JSONValue = ["n": "1", "r": "1", "f": "false", "lvl": "low", "due": "+1h", "tags": []]
        #expect {
            try types.render(transition: typesTransition, attributes: attributes, input: input, at: transitionTime)
        } throws: { error in
            guard let error = error as? RenderError else { return false }
            return error.code == .valueTooLong && error.field == "greeting"
                && error.message.contains("rendered text is 21 characters, over the max length of 20")
                && error.description.contains("workflow `types`, transition `a -> b`")
        }
    }

    @Test func foodOrderStart() throws {
        let start = try food.renderStart(attributes: foodAttributes, input: ["eta": "+25m"], at: transitionTime)
        #expect(start.attributesType == "FoodOrderAttributes")
        #expect(start.attributes == foodAttributes)
        #expect(start.update.event == .start)
        #expect(start.update.contentState == [
            "status": "received", "message": "Pizza Place received your order.",
            "eta": appSeconds(transitionTime.addingTimeInterval(25 * 60)), "driverName": nil, "deliveryWindow": nil,
        ])
        #expect(start.update.alert == ActivityAlert(title: .plain("Order A-1042 received"),
                                                    body: .plain("Pizza Place has your order."), sound: "default"))
        #expect(try food.renderStartAlert(attributes: foodAttributes, at: transitionTime) == start.update.alert)
        let aps = start.apnsPayload().json["aps"]
        #expect(aps?["event"] == "start")
        #expect(aps?["timestamp"] == 1_746_100_800)
        #expect(aps?["attributes-type"] == "FoodOrderAttributes")
        #expect(aps?["attributes"] == foodAttributes)
        #expect(aps?["input-push-token"] == 1)
        #expect(aps?["alert"]?["sound"] == "default")
    }

    @Test("a mark-stale timer is the stale date of every update into its state; with stale-after too, the earlier wins")
    func markStaleTimerSetsTheStaleDate() throws {
        #expect(food.staleAfter(in: "out_for_delivery")?.seconds == 10 * 60, "the timer (10m) is earlier than stale-after (30m)")
        let ride = try loadShipped("ride")
        #expect(ride.staleAfter(in: "on_trip")?.seconds == 15 * 60, "stale-after (15m) is earlier than the timer (20m)")
        #expect(food.staleAfter(in: "ready") == nil)
        let late = try food.render(state: "out_for_delivery", attributes: foodAttributes, input: ["eta": "2025-05-01T12:30:00Z"],
                                   at: transitionTime)
        #expect(late.staleDate == transitionTime.addingTimeInterval(10 * 60), "a late token's update is stale on the same terms")
    }

    @Test func dispatchWithDriver() throws {
        let transition = try food.resolveTransition(from: "ready", target: "dispatch")
        let update = try food.render(transition: transition, attributes: foodAttributes,
                                     input: ["eta": "2025-05-01T12:30:00Z", "driver": "Sam", "window": "+25m..+40m"], at: transitionTime)
        #expect(update.contentState == [
            "status": "outForDelivery", "message": "Sam is on the way.",
            "eta": appSeconds(transitionTime.addingTimeInterval(30 * 60)), "driverName": "Sam",
            // The arrival window, `[lower, upper]` in seconds since 2001-01-01 (12:00 + 25 and + 40 minutes).
            "deliveryWindow": [.double(767_795_100), .double(767_796_000)],
        ])
        #expect(update.alert?.body == .plain("Sam is bringing your order."))
        // `stale-after: 30m`, but the state's `mark-stale` timer says 10 minutes: the earlier wins.
        #expect(update.staleDate == transitionTime.addingTimeInterval(10 * 60))
        #expect(update.relevanceScore == 100)
        #expect(update.priority == 10)
        #expect(update.event == .update)
        #expect(update.dismissal == nil)
        let aps = update.apnsPayload().json["aps"]
        #expect(aps?["stale-date"] == .int(1_746_100_800 + 600))
        #expect(aps?["relevance-score"] == 100.0)
        #expect(aps?["dismissal-date"] == nil)
    }

    @Test func dispatchWithoutDriverGivesNull() throws {
        let transition = try food.resolveTransition(from: "ready", target: "out_for_delivery")
        let update = try food.render(transition: transition, attributes: foodAttributes, input: ["eta": "+20m"], at: transitionTime)
        #expect(update.contentState["driverName"] == .null)
        #expect(update.contentState["message"] == "Your order is on the way.")
        #expect(update.alert?.body == .plain("Your order is on its way."))
    }

    @Test func previousContentCarriesOver() throws {
        let dispatched = try food.render(transition: food.transition(from: "ready", to: "out_for_delivery")!,
                                         attributes: foodAttributes, input: ["eta": "+20m", "driver": "Sam"], at: transitionTime)
        let later = transitionTime.addingTimeInterval(1200)
        let delivered = try food.render(transition: food.transition(from: "out_for_delivery", to: "delivered")!,
                                        attributes: foodAttributes, input: [:], previous: dispatched.contentState, at: later)
        #expect(delivered.contentState["driverName"] == "Sam")
        #expect(delivered.contentState["status"] == "delivered")
        #expect(delivered.contentState["eta"] == .null)
        #expect(delivered.event == .end)
        #expect(delivered.dismissal == .after(WorkflowDuration(seconds: 1800)))
        #expect(delivered.dismissalDate == later.addingTimeInterval(1800))
        #expect(delivered.apnsPayload().json["aps"]?["dismissal-date"] == .int(1_746_100_800 + 1200 + 1800))
        // A date from the previous ContentState (2001-based seconds) passes through a template.
        let ready = try food.render(transition: food.transition(from: "in_progress", to: "ready")!, attributes: foodAttributes,
                                    input: [:], previous: dispatched.contentState, at: later)
        #expect(ready.contentState["eta"] == dispatched.contentState["eta"])
    }

    @Test func cancellationWithOptionalReason() throws {
        let cancel = try food.resolveTransition(from: "in_progress", target: "cancel")
        let withReason = try food.render(transition: cancel, attributes: foodAttributes,
                                         input: ["reason": "Kitchen closed"], at: transitionTime)
        #expect(withReason.contentState["message"] == "Cancelled: Kitchen closed")
        #expect(withReason.dismissalDate == transitionTime)
        let without = try food.render(transition: cancel, attributes: foodAttributes, input: [:], at: transitionTime)
        #expect(without.contentState["message"] == "Your order was cancelled.")
        #expect(without.alert?.title == .plain("Order cancelled"))
    }

    @Test func noHTMLEscaping() throws {
        let attributes: JSONValue = ["merchantName": "Tom & Jerry's <Diner>", "orderNumber": "\"7\"", "itemCount": 1]
        let start = try food.renderStart(attributes: attributes, at: transitionTime)
        #expect(start.update.contentState["message"] == "Tom & Jerry's <Diner> received your order.")
        #expect(start.update.alert?.title == .plain("Order \"7\" received"))
    }

    @Test func inputIsValidatedBeforeRendering() throws {
        let transition = food.transition(from: "ready", to: "out_for_delivery")!
        #expect {
            try food.render(transition: transition, attributes: foodAttributes,
                            input: ["eta": "soon", "driver": .string(String(repeating: "x", count: 41)), "tip": 2], at: transitionTime)
        } throws: { error in
            guard let error = error as? DataValidationError else { return false }
            let text = error.description
            return error.problems.count == 3 && text.contains("input of transition `ready -> out_for_delivery`")
                && text.contains("`eta`: `soon` is not a date") && text.contains("`driver`: at most 40 characters allowed, got 41")
                && text.contains("`tip`: unknown field")
        }
        #expect(throws: DataValidationError.self) {
            try food.render(transition: transition, attributes: foodAttributes, input: [:], at: transitionTime)
        }
    }

    @Test func attributesValidation() throws {
        #expect(try food.validateAttributes(["merchantName": "A", "orderNumber": "1", "itemCount": 2.0])
            == ["merchantName": "A", "orderNumber": "1", "itemCount": 2])
        #expect {
            try food.validateAttributes(["merchantNam": "A", "itemCount": "two"])
        } throws: { error in
            let text = (error as? DataValidationError)?.description ?? ""
            return text.contains("`merchantNam`: unknown field (did you mean `merchantName`?)")
                && text.contains("`merchantName`: required string(40) is missing")
                && text.contains("`orderNumber`: required string(12) is missing")
                && text.contains("`itemCount`: expected a whole number, got string \"two\"")
        }
        // Dates are normalized to ISO-8601 UTC; relative offsets are for transition input only.
        #expect(try types.validateAttributes(["name": "x", "since": "2024-01-01T02:00:00+02:00"])
            == ["name": "x", "since": "2024-01-01T00:00:00Z"])
        #expect(throws: DataValidationError.self) { try types.validateAttributes(["name": "x", "since": "+5m"]) }
        #expect(try types.appAttributes(["name": "x", "since": "2001-01-01T00:01:00Z"]) == ["name": "x", "since": 60.0])
    }

    @Test func lateStartShowsPreviousContentOrStateDefaults() throws {
        let ride = try loadShipped("ride")
        let previous: JSONValue = ["phase": "waiting", "message": "m", "driverName": "Kim", "car": nil, "plate": nil, "eta": nil]
        let update = try ride.render(state: "waiting", attributes: ["pickupAddress": "A", "dropoffAddress": "B"],
                                     previous: previous, at: transitionTime)
        #expect(update.contentState == previous)
        let fresh = try ride.render(state: "requested", attributes: ["pickupAddress": "A", "dropoffAddress": "B"], at: transitionTime)
        #expect(fresh.contentState["message"] == "Looking for a driver…")
        #expect(throws: RenderError.self) {
            try ride.render(state: "nowhere", attributes: [:], at: transitionTime)
        }
    }

    @Test func localizedAlert() throws {
        let workflow = try load("""
            name: loc
            activity:
              attributes-type: LocAttributes
              attributes: {number: string(8)}
              content-state: {status: "enum(open, done)"}
            lifecycle:
              start: push-to-start
              start-alert:
                title: {loc-key: ORDER_TITLE, loc-args: ["{{attributes.number}}"]}
                body: {loc-key: ORDER_BODY}
            states:
              open: {initial: true, content: {status: open}}
              done: {final: true, content: {status: done}}
            transitions:
              - {from: open, to: done}
            """)
        let alert = try #require(try workflow.renderStartAlert(attributes: ["number": "42"], at: transitionTime))
        #expect(alert.title == .localized(key: "ORDER_TITLE", args: ["42"]))
        #expect(alert.json == ["title": ["loc-key": "ORDER_TITLE", "loc-args": ["42"]], "body": ["loc-key": "ORDER_BODY", "loc-args": []]])
        let encoded = try JSONEncoder().encode(alert)
        #expect(try JSONDecoder().decode(ActivityAlert.self, from: encoded) == alert)
    }

    @Test func unknownVariableIsCaughtAtLoadTime() {
        let yaml = typesWorkflowYAML.replacingOccurrences(of: "\"Hi {{attributes.name}}\"", with: "\"Hi {{attributes.nmae}}\"")
        let found = diagnostics(yaml)
        #expect(found.count == 1)
        #expect(found.first?.message.contains("uses `{{attributes.nmae}}`, but `nmae` is not in `activity.attributes` (did you mean `attributes.name`?)") == true)
        #expect(found.first.map { "\($0.line):\($0.column)" } == "30:17")
    }
}
