import Yams

// What `WorkflowParser` reads from the file, each piece with the position it came from, so
// that `WorkflowValidator` can point its diagnostics at the right line and column.

/// A 1-based position in the workflow file.
struct SourcePosition: Hashable {
    var line: Int
    var column: Int

    static let start = SourcePosition(line: 1, column: 1)

    init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    init(_ node: Node?) {
        self = node?.mark.map { SourcePosition(line: $0.line, column: $0.column) } ?? .start
    }
}

/// A value with the place in the file it came from.
struct Located<Value> {
    var value: Value
    var position: SourcePosition
}

/// A template with where it was written and what it is for (used in messages).
struct TemplateUse {
    var template: Template
    var position: SourcePosition
    var label: String
}

struct ParsedAlert {
    var spec: AlertSpec
    var templates: [TemplateUse]
    var position: SourcePosition
}

enum AlertOverride {
    case inherit
    case suppressed
    case alert(ParsedAlert)
}

struct ParsedState {
    var spec: StateSpec
    var position: SourcePosition
    var content: [String: Located<ValueSpec>]
    var alert: ParsedAlert?
    var android: ParsedAndroid?
}

struct ParsedTransition {
    var from: [Located<String>]
    var fromAny: Bool
    var to: Located<String>
    var event: Located<String>?
    var inputs: [FieldSpec]
    var content: [String: Located<ValueSpec>]
    var alert: AlertOverride
    var priority: Int?
    var relevanceScore: Double?
    var position: SourcePosition
}

struct ParsedTimer {
    var state: Located<String>
    var after: WorkflowDuration
    var goTo: Located<String>?
    var position: SourcePosition
}
