import Testing
import WorkflowKit

/// A small valid workflow; each broken case below changes a line or two of it.
let miniWorkflow = """
    name: mini
    activity:
      attributes-type: MiniAttributes
      attributes:
        shop: string(20)
      content-state:
        status: enum(open, done)
        count: int?
        note: string(40)?
    lifecycle:
      start: app
    states:
      open:
        initial: true
        content: {status: open}
      done:
        final: true
        content: {status: done}
    transitions:
      - from: open
        to: done

    """

struct BrokenWorkflow: Sendable, CustomTestStringConvertible {
    var name: String
    var yaml: String
    /// A substring of the expected diagnostic's message.
    var message: String
    var line: Int
    var column: Int

    var testDescription: String { name }

    init(_ name: String, _ message: String, at line: Int, _ column: Int, yaml: String) {
        self.name = name
        self.yaml = yaml
        self.message = message
        self.line = line
        self.column = column
    }

    /// The mini workflow with `old` replaced by `new` (which must occur exactly once).
    init(_ name: String, _ message: String, at line: Int, _ column: Int, replacing old: String, with new: String) {
        precondition(miniWorkflow.components(separatedBy: old).count == 2, "`\(old)` must occur once in miniWorkflow")
        self.init(name, message, at: line, column, yaml: miniWorkflow.replacingOccurrences(of: old, with: new))
    }
}

let brokenWorkflows: [BrokenWorkflow] = [
    BrokenWorkflow("YAML syntax error", "YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence at line 3)", at: 4, 13,
                   replacing: "attributes-type: MiniAttributes", with: "attributes-type: [MiniAttributes"),
    BrokenWorkflow("duplicate YAML key", "key `shop` appears more than once", at: 5, 5,
                   replacing: "    shop: string(20)\n", with: "    shop: string(20)\n    shop: int\n"),
    BrokenWorkflow("unknown root key", "unknown key `transitons` in the workflow (did you mean `transitions`?)", at: 19, 1,
                   replacing: "transitions:", with: "transitons:"),
    BrokenWorkflow("unknown state key", "unknown key `finall` in state `done` (did you mean `final`?)", at: 17, 5,
                   replacing: "    final: true", with: "    finall: true"),
    BrokenWorkflow("no initial state", "no initial state: mark the state an order starts in with `initial: true`", at: 12, 1,
                   replacing: "    initial: true\n", with: ""),
    BrokenWorkflow("several initial states", "several initial states (`open`, `done`)", at: 16, 3,
                   replacing: "    final: true", with: "    final: false\n    initial: true"),
    BrokenWorkflow("unreachable state", "state `limbo` is unreachable: no transitions lead to it from the initial state `open`", at: 19, 3,
                   replacing: "transitions:", with: "  limbo:\n    content: {status: open}\ntransitions:\n  - {from: limbo, to: done}"),
    BrokenWorkflow("no path to a final state", "state `stuck` has no path to a final state", at: 19, 3,
                   replacing: "transitions:", with: "  stuck:\n    content: {status: open}\ntransitions:\n  - {from: open, to: stuck}"),
    BrokenWorkflow("transition out of a final state", "leaves final state `done`", at: 22, 11,
                   replacing: "    to: done\n", with: "    to: done\n  - from: done\n    to: open\n"),
    BrokenWorkflow("duplicate transition", "duplicate transition `open -> done` (first declared at line 20)", at: 22, 11,
                   replacing: "    to: done\n", with: "    to: done\n  - from: open\n    to: done\n"),
    BrokenWorkflow("duplicate event from one state", "event `close` is used twice from state `open`", at: 27, 12,
                   replacing: "    to: done\n",
                   with: "    to: done\n    event: close\n  - from: open\n    to: other\n    event: close\n  - {from: other, to: done}\n")
        .withStates("  other:\n    content: {status: open}\n"),
    BrokenWorkflow("unknown target state", "names unknown state `dnoe` (did you mean `done`?)", at: 21, 9,
                   replacing: "    to: done\n", with: "    to: dnoe\n"),
    BrokenWorkflow("unknown state in a timer", "`in` of timer #1 names unknown state `opne` (did you mean `open`?)", at: 23, 10,
                   replacing: "    to: done\n", with: "    to: done\ntimers:\n  - {in: opne, after: 5m, go-to: done}\n"),
    BrokenWorkflow("content misses a required field", "leaves required ContentState field `status` (enum(open, done)) unset", at: 19, 5,
                   replacing: "    content: {status: done}\n", with: ""),
    BrokenWorkflow("content sets an unknown field", "sets `notes`, which is not a ContentState field (did you mean `note`?)", at: 15, 29,
                   replacing: "content: {status: open}", with: "content: {status: open, notes: hi}"),
    BrokenWorkflow("literal of the wrong type", "`count` (int?) expects a whole number, but `many` is text", at: 15, 36,
                   replacing: "content: {status: open}", with: "content: {status: open, count: many}"),
    BrokenWorkflow("enum literal not in the enum", "`opened` is not one of the enum's values (did you mean `open`?)", at: 15, 23,
                   replacing: "content: {status: open}", with: "content: {status: opened}"),
    BrokenWorkflow("template names an unknown attribute", "`shops` is not in `activity.attributes` (did you mean `attributes.shop`?)", at: 15, 35,
                   replacing: "content: {status: open}", with: "content: {status: open, note: \"{{attributes.shops}}\"}"),
    BrokenWorkflow("template names an undeclared input", "transition `open -> done` declares no input `eta`", at: 23, 13,
                   replacing: "    to: done\n", with: "    to: done\n    content:\n      note: \"ETA {{input.eta}}\"\n"),
    BrokenWorkflow("template does not parse", "section `{{#attributes.shop}}` is not closed", at: 15, 35,
                   replacing: "content: {status: open}", with: "content: {status: open, note: \"{{#attributes.shop}}x\"}"),
    BrokenWorkflow("push-to-start without an alert", "`start: push-to-start` needs a `start-alert`", at: 11, 3,
                   replacing: "start: app", with: "start: push-to-start"),
    BrokenWorkflow("duration that does not parse", "`45 minutes` is not a duration", at: 23, 23,
                   replacing: "    to: done\n", with: "    to: done\ntimers:\n  - {in: open, after: 45 minutes, go-to: done}\n"),
    BrokenWorkflow("schema key is a Swift keyword", "`default` is a Swift keyword", at: 9, 5,
                   replacing: "    note: string(40)?", with: "    default: string(40)?"),
    BrokenWorkflow("schema key is not an identifier", "`order-number` is not a valid Swift identifier", at: 5, 5,
                   replacing: "    shop: string(20)", with: "    order-number: string(20)"),
    BrokenWorkflow("unknown field type", "unknown type `strng` (did you mean `string`?)", at: 5, 11,
                   replacing: "    shop: string(20)", with: "    shop: strng(20)"),
    BrokenWorkflow("bad priority", "`priority` must be 5", at: 22, 15,
                   replacing: "    to: done\n", with: "    to: done\n    priority: 7\n"),
    BrokenWorkflow("timer without a matching transition", "there is no transition `open -> done`; add one", at: 16, 12,
                   yaml: """
                       name: mini
                       activity:
                         attributes-type: MiniAttributes
                         content-state:
                           status: enum(open, mid, done)
                       lifecycle: {start: app}
                       states:
                         open: {initial: true, content: {status: open}}
                         mid: {content: {status: mid}}
                         done: {final: true, content: {status: done}}
                       transitions:
                         - {from: open, to: mid}
                         - {from: mid, to: done}
                       timers:
                         - in: open
                           go-to: done
                           after: 5m
                       """),
    BrokenWorkflow("unquoted enum in a flow mapping", "quote a type that contains commas", at: 6, 27,
                   replacing: "  content-state:\n    status: enum(open, done)\n    count: int?\n    note: string(40)?\n",
                   with: "  content-state: {status: enum(open, done), count: int?}\n"),
    BrokenWorkflow("dismissal for a non-final state", "sets a dismissal for `open`, which is not a final state", at: 13, 5,
                   replacing: "  start: app\n", with: "  start: app\n  end:\n    open: immediate\n"),
    BrokenWorkflow("previous content at the start", "there is no previous ContentState when the activity starts", at: 15, 35,
                   replacing: "content: {status: open}", with: "content: {status: open, note: \"{{previous.note}}\"}"),
    BrokenWorkflow("variable without a namespace", "unknown variable `{{shop}}` (did you mean `attributes.shop`?)", at: 15, 35,
                   replacing: "content: {status: open}", with: "content: {status: open, note: \"at {{shop}}\"}"),
    BrokenWorkflow("required field set to null", "`status` (enum(open, done)) is required and cannot be null", at: 15, 23,
                   replacing: "content: {status: open}", with: "content: {status: null}"),
    BrokenWorkflow("empty file", "the file is empty", at: 1, 1, yaml: "# nothing here\n"),

    // Found by WorkflowFuzzTests.
    BrokenWorkflow("empty name", "`name` is empty", at: 1, 7, replacing: "name: mini", with: "name: ''"),
    BrokenWorkflow("control character", "control characters are not allowed (U+0000)", at: 15, 25,
                   replacing: "content: {status: open}", with: "content: {status: op\u{0}en}"),
    BrokenWorkflow("alias bomb", "alias `*l3` makes the file's aliases stand for more than 10000 values", at: 5, 12,
                   yaml: aliasBomb(levels: 9, width: 9) + "? *l8\n: boom\n" + miniWorkflow),
    BrokenWorkflow("max length that overflows the payload bound", "can produce an APNs payload of up to 9223372036854775807 bytes", at: 20, 11,
                   yaml: miniWorkflow
                       .replacingOccurrences(of: "    note: string(40)?", with: "    note: string(9223372036854775807)?")
                       .replacingOccurrences(of: "    to: done\n", with: "    to: done\n    input: {note: \"string(9223372036854775807)\"}\n    content: {note: \"{{input.note}}\"}\n")),
    BrokenWorkflow("array type nested 100,000 deep", "arrays of arrays are not supported", at: 9, 11,
                   replacing: "    note: string(40)?",
                   with: "    note: \"\(String(repeating: "[", count: 100_000))int\(String(repeating: "]", count: 100_000))\""),
    BrokenWorkflow("template sections nested too deep", "sections are nested more than 20 deep", at: 15, 35,
                   replacing: "content: {status: open}",
                   with: "content: {status: open, note: \"\(String(repeating: "{{#attributes.shop}}", count: 21))x\(String(repeating: "{{/attributes.shop}}", count: 21))\"}"),
    BrokenWorkflow("template longer than a payload", "the template is 5700 bytes long, more than the 4096 bytes", at: 18, 32,
                   replacing: "    final: true\n",
                   with: "    final: true\n    alert: {title: Done, body: \"\(String(repeating: "{{attributes.shop}}", count: 300))\"}\n"),
    BrokenWorkflow("100,000-character enum value missed by one letter", "is not one of the enum's values; use one of", at: 15, 23,
                   yaml: miniWorkflow
                       .replacingOccurrences(of: "enum(open, done)", with: "enum(open, done, \(String(repeating: "v", count: 100_000)))")
                       .replacingOccurrences(of: "content: {status: open}", with: "content: {status: \(String(repeating: "v", count: 99_999))w}")),
]

/// "Billion laughs": `levels` anchors, each a list of `width` aliases to the one before.
func aliasBomb(levels: Int, width: Int) -> String {
    var text = "lol0: &l0 [" + Array(repeating: "lol", count: width).joined(separator: ", ") + "]\n"
    for level in 1..<levels {
        text += "lol\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: width).joined(separator: ", ") + "]\n"
    }
    return text
}

extension BrokenWorkflow {
    /// Adds state entries after the `done` state.
    func withStates(_ states: String) -> BrokenWorkflow {
        var copy = self
        copy.yaml = yaml.replacingOccurrences(of: "transitions:\n", with: states + "transitions:\n")
        return copy
    }
}

@Suite("Broken workflows")
struct BrokenWorkflowTests {
    @Test func miniWorkflowIsValid() throws {
        let workflow = try load(miniWorkflow)
        #expect(workflow.transitions.map(\.id) == ["open->done"])
    }

    @Test(arguments: brokenWorkflows)
    func rejected(_ broken: BrokenWorkflow) {
        let found = diagnostics(broken.yaml)
        let match = found.first { $0.message.contains(broken.message) }
        #expect(match != nil, "no diagnostic contains \"\(broken.message)\"; got:\n\(WorkflowValidationError(diagnostics: found))")
        if let match {
            #expect("\(match.line):\(match.column)" == "\(broken.line):\(broken.column)",
                    "wrong position for: \(match)")
            #expect(match.file == "test.yaml")
        }
    }

    @Test func allProblemsAreReportedAtOnce() {
        let yaml = miniWorkflow
            .replacingOccurrences(of: "transitions:", with: "transitons:")
            .replacingOccurrences(of: "    shop: string(20)", with: "    shop: strng(20)")
            .replacingOccurrences(of: "start: app", with: "start: push-to-start")
        let found = diagnostics(yaml)
        #expect(found.count >= 3)
        #expect(found.map(\.line) == found.map(\.line).sorted())
    }
}
