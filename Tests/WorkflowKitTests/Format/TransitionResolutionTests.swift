import Testing
import WorkflowKit

@Suite("Resolving transitions")
struct TransitionResolutionTests {
    let food: Workflow
    let ride: Workflow

    init() throws {
        food = try loadShipped("food-order")
        ride = try loadShipped("ride")
    }

    @Test(arguments: [
        ("received", "in_progress", "received->in_progress"),
        ("received", "IN_PROGRESS", "received->in_progress"),
        ("received", "In-Progress", "received->in_progress"),
        ("received", "in", "received->in_progress"),
        ("received", "accept", "received->in_progress"),
        ("received", "ACC", "received->in_progress"),
        ("ready", "out", "ready->out_for_delivery"),
        ("ready", "dispatch", "ready->out_for_delivery"),
        ("ready", "pickup", "ready->picked_up"),
        ("ready", "picked", "ready->picked_up"),
        ("ready", "cancelled", "ready->cancelled"),
        ("out_for_delivery", "deliver", "out_for_delivery->delivered"),
        ("out_for_delivery", "del", "out_for_delivery->delivered"),
    ])
    func resolves(from current: String, target: String, expected: String) throws {
        #expect(try food.resolveTransition(from: current, target: target).id == expected)
    }

    @Test func eventsOfTheRide() throws {
        #expect(try ride.resolveTransition(from: "arriving", target: "driver_arrived").id == "arriving->waiting")
        #expect(try ride.resolveTransition(from: "driver_assigned", target: "driver").id == "driver_assigned->waiting")
        #expect(try ride.resolveTransition(from: "on_trip", target: "eta").id == "on_trip->on_trip")
        #expect(try ride.resolveTransition(from: "on_trip", target: "drop").id == "on_trip->completed")
    }

    @Test func ambiguousPrefixListsTheCandidates() throws {
        // A prefix matching a state and that transition's own event is not ambiguous.
        #expect(try food.resolveTransition(from: "ready", target: "canc").id == "ready->cancelled")
        #expect(try food.resolveTransition(from: "ready", target: "p").id == "ready->picked_up")
        // From `on_trip`, "c" matches `completed` and `cancelled`/`cancel`: two transitions.
        #expect {
            try ride.resolveTransition(from: "on_trip", target: "c")
        } throws: { error in
            guard let error = error as? TransitionResolutionError else { return false }
            return error.code == .ambiguous && error.currentState == "on_trip"
                && error.message == "`c` is ambiguous from `on_trip`: it matches `completed` (state → completed), `cancelled` (state → cancelled), `cancel` (event → cancelled); type more of the name"
                && error.candidates == ["completed", "cancelled", "cancel"]
        }
        // An exact name wins over a longer name it prefixes.
        #expect(try ride.resolveTransition(from: "on_trip", target: "cancel").id == "on_trip->cancelled")
    }

    @Test func transitionNotAllowed() {
        #expect {
            try food.resolveTransition(from: "received", target: "delivered")
        } throws: { error in
            guard let error = error as? TransitionResolutionError else { return false }
            return error.code == .notAllowed
                && error.message == "cannot go from `received` to `delivered`: `delivered` is a state, but there is no transition `received -> delivered`; from `received` the order can go to: in_progress (event `accept`), cancelled (event `cancel`)"
        }
        #expect {
            try food.resolveTransition(from: "ready", target: "pikup")
        } throws: { error in
            (error as? TransitionResolutionError)?.message.contains("(did you mean `pickup`?)") == true
        }
    }

    @Test("a prefix or event known elsewhere in the workflow is named, not echoed")
    func namesWhatAPrefixMeans() {
        #expect {
            try food.resolveTransition(from: "received", target: "rea")
        } throws: { error in
            (error as? TransitionResolutionError)?.message.hasPrefix(
                "cannot go from `received` to `rea`: `rea` is the state `ready`, but there is no transition `received -> ready`") == true
        }
        #expect {
            try food.resolveTransition(from: "received", target: "dispatch")
        } throws: { error in
            (error as? TransitionResolutionError)?.message.hasPrefix(
                "cannot go from `received` to `dispatch`: `dispatch` is the event `dispatch` (to `out_for_delivery`), which does not leave `received`") == true
        }
        #expect(food.suggestion(for: "redy") == "ready")
        #expect(food.suggestion(for: "dispach") == "dispatch")
        #expect(food.suggestion(for: "zzzzzz") == nil)
    }

    @Test func finalAndUnknownStates() {
        #expect {
            try food.resolveTransition(from: "delivered", target: "cancel")
        } throws: { error in
            guard let error = error as? TransitionResolutionError else { return false }
            return error.code == .finalState && error.message.contains("the order is in final state `delivered`")
        }
        #expect {
            try food.resolveTransition(from: "nowhere", target: "cancel")
        } throws: { error in
            (error as? TransitionResolutionError)?.code == .unknownState
        }
    }
}
