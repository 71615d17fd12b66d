import Foundation
import Testing
import WorkflowKit

/// A small workflow with one line of the workflow's `android:` (line 13) and one line of state
/// `cooking`'s (line 21) to vary; the transitions start on line 29.
func androidWorkflowYAML(top: String = "channel: kitchen", state: String = "color: \"#FF9800\"") -> String {
    """
    name: android-test
    activity:
      attributes-type: A
      attributes:
        code: string(6)
        shop: string(40)
      content-state:
        message: string(60)
        eta: date?
    lifecycle:
      start: app
    android:
      \(top)
    states:
      placed:
        initial: true
        content: {message: Placed}
      cooking:
        content: {message: Cooking}
        android:
          \(state)
      done:
        final: true
        content: {message: Done}
      cancelled:
        final: true
        content: {message: Cancelled}
    transitions:
      - {from: placed, to: cooking, input: {eta: date?}, content: {eta: "{{input.eta}}"}}
      - {from: cooking, to: done}
      - {from: any, to: cancelled}
    """
}

@Suite("Android sections")
struct AndroidSectionTests {
    struct Broken: CustomTestStringConvertible {
        var top = "channel: kitchen"
        var state = "color: \"#FF9800\""
        var line: Int
        var column: Int
        var message: String
        var testDescription: String { message }
    }

    static let broken: [Broken] = [
        Broken(top: "colour: \"#FF9800\"", line: 13, column: 3, message: "unknown key `colour` in `android` (did you mean `color`?)"),
        Broken(top: "color: \"#FFF\"", line: 13, column: 10, message: "`color` of `android` `#FFF` must be a colour written `#RRGGBB`"),
        Broken(top: "icon: IcBag", line: 13, column: 9, message: "`icon` of `android` `IcBag` must be a drawable resource name"),
        Broken(top: "channel: \"has space\"", line: 13, column: 12, message: "must be a channel id"),
        Broken(top: "ttl: 5w", line: 13, column: 8, message: "`ttl` of `android`: `5w` is not a duration"),
        Broken(top: "ttl: 30d", line: 13, column: 8, message: "longer than FCM keeps a message (28d)"),
        Broken(top: "promote: 1", line: 13, column: 12, message: "`promote` of `android` must be `true` or `false`"),
        Broken(top: "when: message", line: 13, column: 9, message: "`when` of `android` names `message`, which is not a date field"),
        Broken(top: "path: placed", line: 13, column: 9, message: "`path` of `android` must be a list of state names"),
        Broken(top: "path: [placed, done]", line: 13, column: 18, message: "`android.path` lists final state `done`"),
        Broken(top: "path: [placed, cookin]", line: 13, column: 18, message: "`android.path` names unknown state `cookin` (did you mean `cooking`?)"),
        Broken(top: "path: [placed, placed]", line: 13, column: 18, message: "`android.path` lists `placed` twice"),
        Broken(top: "title: \"{{input.eta}}\"", line: 13, column: 10,
               message: "uses `{{input.eta}}`, but the workflow's `android` section (shared by every state: use inputs in a state's own `android`) declares no input `eta`"),
        Broken(state: "when: eta", line: 21, column: 7, message: "unknown key `when` in `android` of state `cooking`"),
        Broken(state: "chip: \"{{attributes.shop}}\"", line: 21, column: 13,
               message: "`chip` of `android` of state `cooking` can be up to 40 characters; the status-bar chip shows about 12"),
        Broken(state: "chip: \"{{input.nope}}\"", line: 21, column: 13,
               message: "uses `{{input.nope}}`, but the transitions into `cooking` declares no input `nope`"),
        Broken(state: "title: \"\(String(repeating: "{{attributes.shop}}", count: 110))\"", line: 29, column: 12,
               message: "transition `placed -> cooking` can produce an FCM data message of up to"),
    ]

    @Test(arguments: broken)
    func badSectionIsRefusedWithItsPosition(_ broken: Broken) {
        let found = diagnostics(androidWorkflowYAML(top: broken.top, state: broken.state))
        let match = found.first { $0.message.contains(broken.message) }
        #expect(match != nil, "no diagnostic contains \"\(broken.message)\"; got:\n\(WorkflowValidationError(diagnostics: found))")
        if let match {
            #expect("\(match.line):\(match.column)" == "\(broken.line):\(broken.column)", "wrong position for: \(match)")
        }
    }

    @Test func pathIsDerivedFromTheFirstTransitions() throws {
        let food = try loadShipped("food-order")
        #expect(food.android.path == ["received", "in_progress", "ready", "out_for_delivery"])
        #expect(food.android.completions == ["delivered"])
        #expect(food.android.positions == ["received": 0, "in_progress": 100, "ready": 200, "out_for_delivery": 300,
                                           "delivered": 400, "picked_up": 200])
        #expect(food.androidSegments == "100:#9E9E9E,100:#9E9E9E,100:#4CAF50,100:#2196F3")

        let ride = try loadShipped("ride")
        #expect(ride.android.path == ["requested", "driver_assigned", "arriving", "waiting", "on_trip"])
        #expect(ride.android.completions == ["completed"])
        #expect(ride.androidSegments == "100,100,100,100,100")
        #expect(ride.android.whenField == "eta")
    }

    @Test func declaredPathWins() throws {
        let race = try loadShipped("f1-race")
        #expect(race.android.declaredPath == ["scheduled", "racing"])
        #expect(race.android.path == ["scheduled", "racing"])
        #expect(race.android.completions == ["finished"])
        // Off the path, where the furthest path state leading to it is.
        #expect(race.android.positions["safety_car"] == 100)
        #expect(race.android.whenField == nil)
    }

    @Test func sectionsLoadAndOverlay() throws {
        let workflow = try load(androidWorkflowYAML(top: "promote: false", state: "chip: \"{{attributes.code}}\""))
        #expect(workflow.android.presentation(in: "cooking").promote == false)
        #expect(workflow.android.presentation(in: "cooking").chip?.source == "{{attributes.code}}")
        #expect(workflow.android.presentation(in: "placed").chip == nil)
        #expect(workflow.android.whenField == "eta")
        let off = try load(androidWorkflowYAML(top: "when: none"))
        #expect(off.android.whenField == nil)
    }

    @Test func workflowsWithoutAndroidKeepTheirCanonicalForm() throws {
        let ride = try loadShipped("ride")
        #expect(!ride.canonicalJSON.contains("android"))
        let food = try loadShipped("food-order")
        #expect(food.canonicalJSON.contains("\"android\""))
        var changed = try shippedYAML("food-order")
        changed = changed.replacingOccurrences(of: "icon: ic_delivery_car", with: "icon: ic_scooter")
        #expect(try WorkflowLoader.load(yaml: changed, file: "food-order.yaml").canonicalJSON != food.canonicalJSON)
    }
}
