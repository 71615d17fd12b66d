import Foundation
import Testing
import WorkflowKit

@Suite("APNs payload size")
struct PayloadSizeTests {
    func workflow(noteLength: Int, title: String = "Done") -> String {
        """
        name: big
        activity:
          attributes-type: BigAttributes
          content-state:
            status: enum(open, done)
            note: string(\(noteLength))
        lifecycle:
          start: app
        states:
          open:
            initial: true
            content: {status: open, note: ""}
          done:
            final: true
            content: {status: done, note: "{{input.note}}"}
        transitions:
          - from: open
            to: done
            input: {note: string(\(noteLength))}
            alert: {title: "\(title)", body: "Finished"}

        """
    }

    @Test func hugeMaxLengthIsRejectedNamingTheTransitionAndSize() {
        let found = diagnostics(workflow(noteLength: 5000))
        #expect(found.count == 1)
        let diagnostic = found.first
        #expect(diagnostic.map { "\($0.line):\($0.column)" } == "17:11")
        // {"aps":{"timestamp":10,"event":"end","content-state":{"note":5002,"status":"done"},"alert":{...}}}
        #expect(diagnostic?.message.contains("transition `open -> done` can produce an APNs payload of up to 5133 bytes, over the 4096-byte limit") == true)
        #expect(diagnostic?.message.contains("largest field `note` up to 5002 bytes") == true)
    }

    @Test func largestAllowedFitsAndItsRenderingIsExactlyAtTheBound() throws {
        // 5133 - 5000 = 133 bytes besides the note, so string(3963) gives exactly 4096.
        #expect(diagnostics(workflow(noteLength: 3964)).first?.message.contains("up to 4097 bytes") == true)
        let fitting = try load(workflow(noteLength: 3963))
        let transition = try #require(fitting.transition(from: "open", to: "done"))
        let update = try fitting.render(transition: transition, attributes: [:],
                                        input: ["note": .string(String(repeating: "n", count: 3963))], at: transitionTime)
        #expect(update.apnsPayload().encodedSize == 4096)
        // Non-ASCII text counts more bytes than characters: the render-time check stops it
        // (2000 "é" are 4000 bytes, under the limit for one text, but the payload is 4133).
        #expect {
            try fitting.render(transition: transition, attributes: [:],
                               input: ["note": .string(String(repeating: "é", count: 2000))], at: transitionTime)
        } throws: { error in
            guard let error = error as? RenderError else { return false }
            return error.code == .payloadTooLarge && error.message.contains("over the 4096-byte limit")
        }
    }

    @Test func startPayloadCountsAttributes() {
        let yaml = """
            name: start
            activity:
              attributes-type: StartAttributes
              attributes: {blob: string(4000)}
              content-state: {status: "enum(open, done)"}
            lifecycle:
              start: push-to-start
              start-alert: {title: "Hi", body: "There"}
            states:
              open: {initial: true, content: {status: open}}
              done: {final: true, content: {status: done}}
            transitions:
              - {from: open, to: done}

            """
        let found = diagnostics(yaml)
        #expect(found.count == 1)
        #expect(found.first?.message.contains("the push-to-start can produce an APNs payload of up to") == true)
        #expect(found.first.map { "\($0.line):\($0.column)" } == "7:3")
    }

    @Test func shippedWorkflowsStayWellUnderTheLimit() throws {
        for name in ["food-order", "ride"] {
            let workflow = try loadShipped(name)
            for transition in workflow.transitions {
                #expect(workflow.maximumPayloadSize(for: transition) < 2048, "\(name) \(transition)")
            }
            #expect(workflow.maximumStartPayloadSize < 2048)
        }
    }
}
