import Foundation
import Testing
import WorkflowKit

/// A delivery with an arrival window in every form a `daterange` can be given.
let windowWorkflowYAML = """
    name: window
    activity:
      attributes-type: WindowAttributes
      attributes:
        shop: string(20)
      content-state:
        status: enum(open, dispatched, done)
        window: {type: daterange?, carry-over: true}
        note: string(80)?
    lifecycle:
      start: app
    states:
      open:
        initial: true
        content: {status: open, window: "now..+45m"}
      dispatched:
        content: {status: dispatched}
      planned:
        content: {status: dispatched}
      done:
        final: true
        content: {status: done}
    transitions:
      - from: open
        to: dispatched
        event: dispatch
        input: {window: daterange}
        content:
          window: "{{input.window}}"
          note: "Arriving {{input.window}}"
      - from: open
        to: planned
        event: between
        input: {from: date?, to: date?}
        content:
          window: "{{input.from}}..{{input.to}}"
      - from: dispatched
        to: dispatched
        event: late
        input: {eta: date}
        content:
          window: "{{input.eta}}...+40m"
      - from: dispatched
        to: done
        event: deliver
      - from: planned
        to: done
        event: arrive

    """

/// 2025-05-01T12:00:00Z in seconds since 2001-01-01, what the app's JSONDecoder reads.
private let noonSince2001 = 767_793_600.0

@Suite("daterange fields")
struct DateRangeTests {
    let workflow: Workflow

    init() throws {
        workflow = try load(windowWorkflowYAML)
    }

    func transition(_ event: String, from state: String = "open") throws -> TransitionSpec {
        try workflow.resolveTransition(from: state, target: event)
    }

    // MARK: Declared and checked at load

    @Test func declaredAndGeneratedAsClosedRange() throws {
        #expect(workflow.contentSchema.first { $0.name == "window" }?.type == .optional(.daterange))
        #expect(FieldType.daterange.spelling == "daterange")
        let source = workflow.swiftActivityAttributes()
        #expect(source.contains("        public var window: ClosedRange<Date>?\n"))
    }

    @Test(arguments: brokenWindowWorkflows)
    func rejectedAtLoad(_ broken: BrokenWorkflow) {
        let found = diagnostics(broken.yaml)
        let match = found.first { $0.message.contains(broken.message) }
        #expect(match != nil, "no diagnostic contains \"\(broken.message)\"; got:\n\(WorkflowValidationError(diagnostics: found))")
        if let match {
            #expect("\(match.line):\(match.column)" == "\(broken.line):\(broken.column)", "wrong position for: \(match)")
        }
    }

    // MARK: Inputs

    @Test func inputsAreCheckedAndNormalized() throws {
        let dispatch = try transition("dispatch")
        #expect(try workflow.validateInput(["window": "+10m..+25m"], for: dispatch, at: transitionTime) == ["window": "+10m..+25m"])
        #expect(try workflow.validateInput(["window": "+10m...+25m"], for: dispatch, at: transitionTime) == ["window": "+10m..+25m"])
        #expect(try workflow.validateInput(["window": ["now", "2025-05-01T14:25:00+02:00"]], for: dispatch, at: transitionTime)
            == ["window": "now..2025-05-01T12:25:00Z"])
        #expect(try workflow.validateInput(["window": " 2025-05-01T12:10:00Z .. 2025-05-01T12:10:00Z "], for: dispatch, at: transitionTime)
            == ["window": "2025-05-01T12:10:00Z..2025-05-01T12:10:00Z"], "a window of one moment is a range")
    }

    @Test(arguments: [
        ("+25m..+10m", "`window`: `+25m..+10m` ends before it starts; give the earlier time first"),
        ("2025-05-01T12:40:00Z..+10m", "`window`: `2025-05-01T12:40:00Z..+10m` ends before it starts"),
        ("+10m", "`window`: `+10m` is not a date range; join two times with `..`"),
        ("-5m..+10m", "`window`: the range's start: `-5m` lies in the past"),
        ("+10m..+99999d", "`window`: the range's end: `+99999d` is 99999 days ahead"),
        ("+10m..soon", "`window`: the range's end: `soon` is not a date"),
    ])
    func badInputsAreRefused(_ text: String, _ message: String) throws {
        let dispatch = try transition("dispatch")
        #expect {
            _ = try workflow.validateInput(["window": .string(text)], for: dispatch, at: transitionTime)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test func wireNumbersAreRefusedAsInput() throws {
        // Callers give times as text, as for `date`; the wire's numbers are the app's business.
        #expect(throws: DataValidationError.self) {
            _ = try workflow.validateInput(["window": [767_794_200, 767_795_100]], for: try transition("dispatch"), at: transitionTime)
        }
    }

    // MARK: Rendering: the exact numbers on the wire

    @Test func rendersTheWireArrayOf2001Seconds() throws {
        let update = try workflow.render(transition: try transition("dispatch"), attributes: ["shop": "Sol"],
                                         input: ["window": "+10m..+25m"], at: transitionTime)
        #expect(update.contentState["window"] == [.double(noonSince2001 + 600), .double(noonSince2001 + 1500)])
        #expect(update.apnsPayload().json["aps"]?["content-state"]?["window"] == [.double(767_794_200), .double(767_795_100)])
        // The bytes sent: exactly these numbers, as JSON numbers.
        let body = try JSONValue(json: String(decoding: try update.apnsPayload().encoded(), as: UTF8.self))
        #expect(body["aps"]?["content-state"]?["window"]?.arrayValue?.compactMap { $0.doubleValue } == [767_794_200, 767_795_100])
        // Text shows the window as ISO-8601 UTC, `lower..upper`.
        #expect(update.contentState["note"] == "Arriving 2025-05-01T12:10:00Z..2025-05-01T12:25:00Z")
    }

    @Test func rendersFromTwoDateInputs() throws {
        let between = try transition("between")
        let update = try workflow.render(transition: between, attributes: ["shop": "Sol"],
                                         input: ["from": "2025-05-01T12:05:00Z", "to": "+20m"], at: transitionTime)
        #expect(update.contentState["window"] == [.double(noonSince2001 + 300), .double(noonSince2001 + 1200)])
        // Both sides empty: an optional range is null, as an optional field that renders empty.
        let neither = try workflow.render(transition: between, attributes: ["shop": "Sol"], input: [:], at: transitionTime)
        #expect(neither.contentState["window"] == .null)
    }

    @Test func oneSideMissingIsARenderError() throws {
        #expect {
            _ = try workflow.render(transition: try transition("between"), attributes: ["shop": "Sol"], input: ["from": "+5m"], at: transitionTime)
        } throws: { error in
            guard let error = error as? RenderError else { return false }
            return error.code == .typeMismatch && error.field == "window" && error.message.contains("expected a date range")
        }
    }

    @Test func aMixedTemplateThatEndsBeforeItStartsIsARenderError() throws {
        let dispatched = try workflow.render(transition: try transition("dispatch"), attributes: ["shop": "Sol"],
                                             input: ["window": "+10m..+25m"], at: transitionTime)
        let late = try transition("late", from: "dispatched")
        let fine = try workflow.render(transition: late, attributes: ["shop": "Sol"], input: ["eta": "+30m"],
                                       previous: dispatched.contentState, at: transitionTime)
        #expect(fine.contentState["window"] == [.double(noonSince2001 + 1800), .double(noonSince2001 + 2400)])
        #expect {
            _ = try workflow.render(transition: late, attributes: ["shop": "Sol"], input: ["eta": "+50m"],
                                    previous: dispatched.contentState, at: transitionTime)
        } throws: { error in
            guard let error = error as? RenderError else { return false }
            return error.code == .typeMismatch && error.message.contains("ends before it starts")
        }
    }

    @Test func aLiteralIsRelativeToTheTransitionTime() throws {
        let start = try workflow.render(state: "open", attributes: ["shop": "Sol"], at: transitionTime)
        #expect(start.contentState["window"] == [.double(noonSince2001), .double(noonSince2001 + 2700)])
    }

    // MARK: Carry-over and reading

    @Test func carriesOverExactly() throws {
        let dispatched = try workflow.render(transition: try transition("dispatch"), attributes: ["shop": "Sol"],
                                             input: ["window": "2025-05-01T12:10:00.250Z..+25m"], at: transitionTime)
        let later = transitionTime.addingTimeInterval(900)
        let delivered = try workflow.render(transition: try transition("deliver", from: "dispatched"), attributes: ["shop": "Sol"],
                                            input: [:], previous: dispatched.contentState, at: later)
        #expect(delivered.contentState["window"] == dispatched.contentState["window"])
        #expect(delivered.contentState["window"] == [.double(noonSince2001 + 600.25), .double(noonSince2001 + 1500)])
        #expect(workflow.readableContent(delivered.contentState)["window"] == "2025-05-01T12:10:00.250Z..2025-05-01T12:25:00Z")
    }

    // MARK: The 4 KB bound

    @Test func boundCountsTheWorstCaseArray() throws {
        let dateYAML = windowWorkflowYAML.replacingOccurrences(of: "{type: daterange?, carry-over: true}", with: "{type: date?, carry-over: true}")
            .replacingOccurrences(of: "\"now..+45m\"", with: "now").replacingOccurrences(of: "input: {window: daterange}", with: "input: {window: date}")
            .replacingOccurrences(of: "\"{{input.from}}..{{input.to}}\"", with: "\"{{input.from}}\"")
            .replacingOccurrences(of: "\"{{input.eta}}...+40m\"", with: "\"{{input.eta}}\"")
        let dates = try load(dateYAML)
        let deliver = try transition("deliver", from: "dispatched")
        let dateDeliver = try dates.resolveTransition(from: "dispatched", target: "deliver")
        // `[`, two dates of 24, `,` and `]`: 27 bytes more than one date.
        #expect(workflow.maximumPayloadSize(for: deliver) - dates.maximumPayloadSize(for: dateDeliver) == 27)
        // The note's `{{input.window}}` counts `lower..upper` at its longest: two dates and the `..`.
        let dispatch = try transition("dispatch")
        let rendered = try workflow.render(transition: dispatch, attributes: ["shop": "Sol"],
                                           input: ["window": "2025-05-01T12:10:00.123Z..2025-05-01T12:25:00.456Z"], at: transitionTime)
        #expect(rendered.apnsPayload().encodedSize <= workflow.maximumPayloadSize(for: dispatch))
    }

    @Test func tooManyRangesAreRejectedAtLoad() {
        // 80 ranges: 2 + 80 × 51 + 79 commas = 4161 bytes of content alone.
        let yaml = windowWorkflowYAML.replacingOccurrences(of: "    note: string(80)?\n", with: "    note: string(80)?\n    slots: \"[daterange; 80]?\"\n")
            .replacingOccurrences(of: "input: {window: daterange}", with: "input: {window: daterange, slots: \"[daterange; 80]\"}")
            .replacingOccurrences(of: "      window: \"{{input.window}}\"\n", with: "      window: \"{{input.window}}\"\n      slots: \"{{input.slots}}\"\n")
        let found = diagnostics(yaml)
        #expect(found.contains { $0.message.contains("largest field `slots` up to 4161 bytes") }, "\(found)")
    }

    // MARK: The app's side

    /// What the generated `ContentState` declares for the range, decoded by Swift's default
    /// `JSONDecoder` exactly as the phone does (`ClosedRange<Date>` is Codable as `[lower, upper]`).
    struct AppPayload: Codable {
        struct APS: Codable {
            struct ContentState: Codable, Hashable {
                var window: ClosedRange<Date>?
            }
            var contentState: ContentState

            enum CodingKeys: String, CodingKey {
                case contentState = "content-state"
            }
        }
        var aps: APS
    }

    @Test func swiftDecodesTheRenderedPayload() throws {
        let update = try workflow.render(transition: try transition("dispatch"), attributes: ["shop": "Sol"],
                                         input: ["window": "2025-05-01T12:10:00Z..2025-05-01T12:25:00Z"], at: transitionTime)
        let body = try update.apnsPayload().encoded()
        let decoded = try JSONDecoder().decode(AppPayload.self, from: body)
        let window = try #require(decoded.aps.contentState.window)
        #expect(window.lowerBound == Date(timeIntervalSince1970: 1_746_101_400))  // 12:10:00Z
        #expect(window.upperBound == Date(timeIntervalSince1970: 1_746_102_300))  // 12:25:00Z
        // And Swift's own encoding is what the engine sends.
        let reencoded = try JSONValue(json: String(decoding: try JSONEncoder().encode(decoded.aps.contentState), as: UTF8.self))
        #expect(reencoded["window"]?.arrayValue?.compactMap { $0.doubleValue } == update.contentState["window"]?.arrayValue?.compactMap { $0.doubleValue })
        // A range the engine refuses (ending first) is one the phone could not decode either.
        #expect(throws: DecodingError.self) {
            _ = try JSONDecoder().decode(AppPayload.APS.ContentState.self, from: Data(#"{"window":[767795100,767794200]}"#.utf8))
        }
    }
}

/// The window workflow with `old` replaced by `new` (which must occur exactly once).
private func brokenWindow(_ name: String, _ message: String, at line: Int, _ column: Int, replacing old: String, with new: String) -> BrokenWorkflow {
    precondition(windowWorkflowYAML.components(separatedBy: old).count == 2, "`\(old)` must occur once in windowWorkflowYAML")
    return BrokenWorkflow(name, message, at: line, column, yaml: windowWorkflowYAML.replacingOccurrences(of: old, with: new))
}

let brokenWindowWorkflows: [BrokenWorkflow] = [
    brokenWindow("a range that ends before it starts", "`window` (daterange?): `+25m..+10m` ends before it starts; give the earlier time first",
                 at: 15, 37, replacing: "window: \"now..+45m\"", with: "window: \"+25m..+10m\""),
    brokenWindow("ISO times in the wrong order", "`2025-05-01T12:30:00Z..2025-05-01T12:00:00Z` ends before it starts",
                 at: 15, 37, replacing: "window: \"now..+45m\"", with: "window: \"2025-05-01T12:30:00Z..2025-05-01T12:00:00Z\""),
    brokenWindow("one time where two are needed", "`window` (daterange?) expects a date range: two times joined by `..`",
                 at: 15, 37, replacing: "window: \"now..+45m\"", with: "window: \"+10m\""),
    brokenWindow("a YAML list", "`window` (daterange?) is written as one text, two times joined by `..`",
                 at: 15, 37, replacing: "window: \"now..+45m\"", with: "window: [now, +45m]"),
    brokenWindow("a side that is not a time", "`window` (daterange?) expects a date range",
                 at: 15, 37, replacing: "window: \"now..+45m\"", with: "window: \"now..soon\""),
    brokenWindow("a template without `..`", "is a date range: its template must render two times joined by `..`",
                 at: 36, 15, replacing: "window: \"{{input.from}}..{{input.to}}\"", with: "window: \"{{input.from}} to {{input.to}}\""),
    brokenWindow("a side that is a number", "each side of `..` is one time, but `{{input.count}}` is int",
                 at: 36, 15, replacing: "input: {from: date?, to: date?}\n    content:\n      window: \"{{input.from}}..{{input.to}}\"",
                 with: "input: {from: date?, to: date?, count: int}\n    content:\n      window: \"{{input.count}}..{{input.to}}\""),
    brokenWindow("a literal side that is not a time", "`soon` is not a time",
                 at: 42, 15, replacing: "window: \"{{input.eta}}...+40m\"", with: "window: \"{{input.eta}}..soon\""),
    brokenWindow("one date variable", "is daterange? but `{{input.eta}}` is date: a date range needs two times",
                 at: 42, 15, replacing: "window: \"{{input.eta}}...+40m\"", with: "window: \"{{input.eta}}\""),
    brokenWindow("a default", "a daterange? field cannot have a default",
                 at: 8, 59, replacing: "window: {type: daterange?, carry-over: true}",
                 with: "window: {type: daterange?, carry-over: true, default: \"now..+1h\"}"),
    brokenWindow("a misspelt type", "unknown type `datrange` (did you mean `daterange`?)",
                 at: 8, 20, replacing: "window: {type: daterange?, carry-over: true}", with: "window: {type: datrange?, carry-over: true}"),
]
