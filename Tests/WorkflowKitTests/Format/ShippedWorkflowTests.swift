import Foundation
import Testing
import WorkflowKit

@Suite("Shipped workflows")
struct ShippedWorkflowTests {
    @Test func foodOrderLoads() throws {
        let workflow = try loadShipped("food-order")
        #expect(workflow.name == "food-order")
        #expect(workflow.attributesType == "FoodOrderAttributes")
        #expect(workflow.states.map(\.name) == [
            "received", "in_progress", "ready", "out_for_delivery", "delivered", "picked_up", "cancelled",
        ])
        #expect(workflow.initialState == "received")
        #expect(workflow.finalStates == ["delivered", "picked_up", "cancelled"])
        #expect(workflow.lifecycle.start == .pushToStart)
        #expect(workflow.lifecycle.startAlert != nil)
        // `from: any` expands to every non-final state.
        #expect(Set(workflow.transitions.filter { $0.to == "cancelled" }.map(\.from))
            == ["received", "in_progress", "ready", "out_for_delivery"])
        #expect(workflow.transition(from: "ready", to: "picked_up")?.event == "pickup")
        #expect(workflow.transition(id: "ready->out_for_delivery")?.inputs.map(\.name) == ["eta", "driver", "window"])
        #expect(workflow.timers.map(\.id) == ["ready+45m->cancelled", "out_for_delivery+10m:stale"])
        #expect(workflow.timers(in: "ready").first?.action == .transition(to: "cancelled"))
        #expect(workflow.dismissal(in: "delivered") == .after(WorkflowDuration(seconds: 1800)))
        #expect(workflow.dismissal(in: "cancelled") == .immediate)
        #expect(workflow.dismissal(in: "ready") == nil)
        #expect(workflow.state(named: "out_for_delivery")?.staleAfter == WorkflowDuration(seconds: 1800))
        #expect(workflow.isFinal("picked_up"))
        #expect(!workflow.isFinal("ready"))
    }

    @Test("the kitchen's message counts items in good English: 1 item, 0 and 3 items")
    func itemsArePluralised() throws {
        let workflow = try loadShipped("food-order")
        for (count, expected) in [(1, "Luigi's is preparing your 1 item."), (3, "Luigi's is preparing your 3 items."),
                                  (0, "Luigi's is preparing your 0 items.")] {
            let attributes: JSONValue = ["merchantName": "Luigi's", "orderNumber": "1042", "itemCount": .int(count)]
            let update = try workflow.render(state: "in_progress", attributes: attributes, at: Date(timeIntervalSince1970: 1_746_100_800))
            #expect(update.contentState["message"] == .string(expected))
        }
    }

    @Test func ridesLoad() throws {
        let workflow = try loadShipped("ride")
        #expect(workflow.initialState == "requested")
        #expect(workflow.finalStates == ["completed", "cancelled"])
        #expect(workflow.lifecycle.start == .app)
        #expect(workflow.transitions(from: "arriving").map(\.to) == ["waiting", "cancelled"])
        #expect(workflow.transition(from: "arriving", to: "waiting")?.event == "driver_arrived")
        #expect(workflow.transition(from: "on_trip", to: "on_trip")?.event == "eta_changed")
        #expect(workflow.contentSchema.map(\.name) == ["phase", "message", "driverName", "car", "plate", "eta"])
    }

    @Test func defaultPriorities() throws {
        let workflow = try loadShipped("food-order")
        // An alert or an end makes a milestone (10); a quiet update is opportunistic (5).
        #expect(workflow.transition(from: "received", to: "in_progress")?.priority == 5)
        #expect(workflow.transition(from: "in_progress", to: "ready")?.priority == 10)
        #expect(workflow.transition(from: "ready", to: "picked_up")?.priority == 10)
        #expect(workflow.transition(from: "ready", to: "picked_up")?.alert == nil)
        #expect(workflow.transition(from: "ready", to: "picked_up")?.endsActivity == true)
        let ride = try loadShipped("ride")
        // An explicit priority wins.
        #expect(ride.transition(from: "on_trip", to: "on_trip")?.priority == 5)
        #expect(ride.transition(from: "driver_assigned", to: "arriving")?.priority == 5)
    }

    @Test func diagrams() throws {
        let workflow = try loadShipped("food-order")
        let mermaid = workflow.mermaid()
        #expect(mermaid.hasPrefix("stateDiagram-v2\n    [*] --> received\n"))
        #expect(mermaid.contains("    ready --> picked_up: pickup\n"))
        #expect(mermaid.contains("    ready --> cancelled: after 45m\n"))
        #expect(mermaid.contains("    delivered --> [*]\n"))
        let dot = workflow.graphviz()
        #expect(dot.hasPrefix("digraph \"food-order\" {"))
        #expect(dot.contains("\"delivered\" [label=\"delivered\", shape=doublecircle];"))
        #expect(dot.contains("\"ready\" -> \"out_for_delivery\" [label=\"dispatch\"];"))
        #expect(dot.contains("\"ready\" -> \"cancelled\" [style=dashed, label=\"after 45m\"];"))
        #expect(dot.hasSuffix("}\n"))
    }

    @Test func formatReferenceShowsTheShippedFilesVerbatim() throws {
        let docs = try String(contentsOf: workflowsDirectory.deletingLastPathComponent().appendingPathComponent("docs/workflows.md"),
                              encoding: .utf8)
        for name in ["food-order", "ride"] {
            #expect(docs.contains("```yaml\n" + (try shippedYAML(name)) + "```\n"), "docs/workflows.md is out of date for \(name).yaml")
        }
    }

    @Test func validationErrorDescriptionIsOneLinePerDiagnostic() throws {
        let error = WorkflowValidationError(diagnostics: [
            Diagnostic(file: "a.yaml", line: 3, column: 5, message: "first"),
            Diagnostic(file: "a.yaml", line: 9, column: 1, message: "second"),
        ])
        #expect(error.description == "a.yaml:3:5: error: first\na.yaml:9:1: error: second")
    }

    @Test func loadingFromURLNamesTheFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("broken.yaml")
        try "name: x\n".write(to: file, atomically: true, encoding: .utf8)
        #expect {
            try WorkflowLoader.load(contentsOf: file)
        } throws: { error in
            guard let error = error as? WorkflowValidationError else { return false }
            return error.description.hasPrefix(file.path + ":1:1: error:")
        }
    }
}
