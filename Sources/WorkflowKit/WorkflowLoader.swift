import Foundation
import Yams

/// Reads a workflow file and returns a validated `Workflow`, or throws every problem found.
public enum WorkflowLoader {
    /// Parses and validates `yaml`; `file` is used in diagnostics.
    public static func load(yaml: String, file: String) throws(WorkflowValidationError) -> Workflow {
        var parser = WorkflowParser(file: file, yaml: yaml)
        let workflow = parser.run()
        guard parser.diagnostics.isEmpty, let workflow else {
            let sorted = parser.diagnostics.enumerated().sorted {
                ($0.element.line, $0.element.column, $0.offset) < ($1.element.line, $1.element.column, $1.offset)
            }.map(\.element)
            throw WorkflowValidationError(diagnostics: sorted)
        }
        return workflow
    }

    /// Reads and validates the workflow file at `url` (diagnostics name the file's path).
    public static func load(contentsOf url: URL) throws -> Workflow {
        let yaml = try String(contentsOf: url, encoding: .utf8)
        return try load(yaml: yaml, file: url.path)
    }
}

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

/// Turns YAML into the workflow model, collecting diagnostics; `WorkflowValidator` then checks
/// the whole (graph, templates, payload sizes).
struct WorkflowParser {
    let file: String
    let yaml: String
    var diagnostics: [Diagnostic] = []
    /// The diagnostics as a set, so that dropping repeats stays cheap when a file has thousands.
    private var reported: Set<Diagnostic> = []

    init(file: String, yaml: String) {
        self.file = file
        self.yaml = yaml
    }

    mutating func error(_ message: String, at position: SourcePosition) {
        let diagnostic = Diagnostic(file: file, line: position.line, column: position.column, message: message)
        if reported.insert(diagnostic).inserted { diagnostics.append(diagnostic) }
    }

    mutating func error(_ message: String, at node: Node?) {
        error(message, at: SourcePosition(node))
    }

    // MARK: Entry point

    static let rootKeys = ["name", "description", "types", "activity", "states", "transitions", "lifecycle", "timers"]

    mutating func run() -> Workflow? {
        let root: Node
        do {
            // Before Yams composes the text: it would take minutes over an alias bomb.
            if let excess = try AliasExpansion.firstExcess(in: yaml) {
                error("alias `*\(excess.alias)` makes the file's aliases stand for more than \(AliasExpansion.limit) values: anchors that repeat other anchors grow exponentially (an \"alias bomb\"); write the values out, or alias fewer and smaller parts",
                      at: excess.position)
                return nil
            }
            guard let composed = try Yams.compose(yaml: yaml) else {
                error("the file is empty: a workflow needs `name`, `activity`, `states`, `transitions` and `lifecycle`", at: .start)
                return nil
            }
            root = composed
        } catch let yamlError as YamlError {
            reportYAMLError(yamlError)
            return nil
        } catch {
            self.error("cannot read the YAML: \(error)", at: .start)
            return nil
        }
        guard let top = mapping(root, what: "the workflow", allowed: Self.rootKeys,
                                required: ["name", "activity", "states", "transitions", "lifecycle"])
        else { return nil }

        let nameText = top["name"].flatMap { string($0, what: "`name`") }
        let name = nameText ?? ""
        if let nameNode = top["name"], nameText?.isEmpty == true {
            error("`name` is empty; name the workflow with letters, digits, `-` and `_` (it names the workflow in the CLI and the database)", at: nameNode)
        }
        if let nameNode = top["name"], !name.isEmpty, !Self.isSlug(name) {
            error("workflow name `\(name)` may use only letters, digits, `-` and `_` (it names the workflow in the CLI and the database)", at: nameNode)
        }
        let description = top["description"].flatMap { string($0, what: "`description`") } ?? ""

        let structTypes = top["types"].map { parseStructTypes($0) } ?? []
        let activity = top["activity"].flatMap { parseActivity($0, structs: structTypes) }
        let attributesSchema = activity?.attributes ?? []
        let contentSchema = activity?.content ?? []

        var states: [ParsedState] = []
        if let statesNode = top["states"] {
            states = parseStates(statesNode, contentSchema: contentSchema)
        }
        var transitions: [ParsedTransition] = []
        if let node = top["transitions"] {
            transitions = parseTransitions(node, contentSchema: contentSchema, structs: structTypes)
        }
        var lifecycle: (spec: LifecycleSpec, startPosition: SourcePosition, alert: ParsedAlert?,
                        dismissals: [String: Located<Dismissal>])?
        if let node = top["lifecycle"] {
            lifecycle = parseLifecycle(node, structs: structTypes)
        }
        var timers: [ParsedTimer] = []
        if let node = top["timers"] {
            timers = parseTimers(node)
        }

        guard let activity, let lifecycle, !name.isEmpty else { return nil }
        var validator = WorkflowValidator(
            parser: self,
            name: name,
            description: description,
            attributesType: activity.attributesType,
            structTypes: structTypes,
            attributesSchema: attributesSchema,
            contentSchema: contentSchema,
            statesPosition: SourcePosition(top.keyNode("states")),
            states: states,
            transitions: transitions,
            lifecycle: lifecycle.spec,
            lifecycleStartPosition: lifecycle.startPosition,
            startAlert: lifecycle.alert,
            dismissals: lifecycle.dismissals,
            timers: timers
        )
        let workflow = validator.validate()
        self.diagnostics = validator.parser.diagnostics
        return workflow
    }

    static func isSlug(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
        }
    }

    mutating func reportYAMLError(_ yamlError: YamlError) {
        switch yamlError {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let contextText = context.map { " (\($0.text) at line \($0.mark.line))" } ?? ""
            error("YAML syntax error: \(problem)\(contextText); check indentation and quoting (a value containing `: `, `#` or starting with `{`, `*` or `&` must be quoted)",
                  at: SourcePosition(line: mark.line, column: mark.column))
        case .duplicatedKeysInMapping(let duplicates, let context):
            error("key \(codeList(duplicates)) appears more than once in the same mapping; keep one",
                  at: SourcePosition(line: context.mark.line, column: context.mark.column))
        case .reader(let problem, let offset, let value, _):
            // libyaml refuses control characters (NUL, ESC, …) anywhere in the text, even in comments.
            let character = Unicode.Scalar(UInt32(truncatingIfNeeded: value)).map { " (U+\(String(format: "%04X", $0.value)))" } ?? ""
            error("the file is not readable text: \(problem)\(character); remove the character, or in a double-quoted string write it as an escape like `\\u0007`",
                  at: offset.map(position(ofCharacterOffset:)) ?? .start)
        default:
            error("cannot read the YAML: \(yamlError)", at: .start)
        }
    }

    /// The line and column of the character `offset` characters into the file, counted as
    /// libyaml counts: lines break at LF, CR, CRLF, NEL, LS and PS; columns are Unicode scalars.
    func position(ofCharacterOffset offset: Int) -> SourcePosition {
        guard let end = yaml.index(yaml.startIndex, offsetBy: offset, limitedBy: yaml.endIndex) else { return .start }
        var position = SourcePosition.start
        var previous: Unicode.Scalar?
        for scalar in yaml.unicodeScalars[..<end] {
            defer { previous = scalar }
            switch scalar {
            case "\n" where previous == "\r":
                continue
            case "\n", "\r", "\u{85}", "\u{2028}", "\u{2029}":
                position.line += 1
                position.column = 1
            default:
                position.column += 1
            }
        }
        return position
    }

    // MARK: Generic readers

    struct Entries {
        var node: Node
        var entries: [(key: String, keyNode: Node, value: Node)]

        subscript(key: String) -> Node? { entries.first { $0.key == key }?.value }
        func keyNode(_ key: String) -> Node? { entries.first { $0.key == key }?.keyNode }
    }

    /// Reads a mapping, reporting unknown keys (with a suggestion) and missing required ones.
    /// `allowed == nil` accepts any key (maps whose keys are names: states, fields).
    mutating func mapping(_ node: Node, what: String, allowed: [String]?, required: [String] = [],
                          nullIsEmpty: Bool = false) -> Entries?
    {
        if nullIsEmpty, case .scalar = node, node.tagName == .null {
            return Entries(node: node, entries: [])
        }
        guard case .mapping(let map) = node else {
            let hint = allowed.map { " with keys such as \(codeList($0.prefix(4)))" } ?? ""
            error("\(what) must be a mapping (`key: value` lines)\(hint), not \(describe(node))", at: node)
            return nil
        }
        var entries: [(String, Node, Node)] = []
        for (keyNode, value) in map {
            guard case .scalar(let keyScalar) = keyNode else {
                error("keys in \(what) must be plain names, not \(describe(keyNode))", at: keyNode)
                continue
            }
            let key = keyScalar.string
            if let allowed, !allowed.contains(key) {
                error("unknown key `\(key)` in \(what)\(didYouMean(key, in: allowed)); allowed keys: \(codeList(allowed))",
                      at: keyNode)
                continue
            }
            entries.append((key, keyNode, value))
        }
        for key in required where !entries.contains(where: { $0.0 == key }) {
            error("\(what) is missing the required key `\(key)`", at: node)
        }
        return Entries(node: node, entries: entries)
    }

    func describe(_ node: Node) -> String {
        switch node {
        case .scalar(let scalar):
            if node.tagName == .null { return "an empty value" }
            return "the value `\(scalar.string)`"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        }
    }

    mutating func string(_ node: Node, what: String) -> String? {
        guard case .scalar(let scalar) = node, node.tagName != .null else {
            error("\(what) must be a text value, not \(describe(node))", at: node)
            return nil
        }
        return scalar.string
    }

    mutating func name(_ node: Node, what: String) -> String? {
        guard let text = string(node, what: what) else { return nil }
        guard SwiftNames.isIdentifier(text) else {
            error("\(what) `\(text)` must be a name made of letters, digits and `_` (not starting with a digit)", at: node)
            return nil
        }
        return text
    }

    mutating func bool(_ node: Node, what: String) -> Bool? {
        guard case .scalar = node, node.tagName == .bool, let value = node.bool else {
            error("\(what) must be `true` or `false`, not \(describe(node))", at: node)
            return nil
        }
        return value
    }

    mutating func number(_ node: Node, what: String) -> Double? {
        guard case .scalar = node, node.tagName == .int || node.tagName == .float,
            let value = node.float, value.isFinite
        else {
            error("\(what) must be a number, not \(describe(node))", at: node)
            return nil
        }
        return value
    }

    mutating func priority(_ node: Node) -> Int? {
        guard case .scalar = node, node.tagName == .int, let value = node.int, value == 5 || value == 10 else {
            error("`priority` must be 5 (opportunistic, free) or 10 (immediate, uses the device's budget), not \(describe(node))", at: node)
            return nil
        }
        return value
    }

    mutating func duration(_ node: Node, what: String) -> WorkflowDuration? {
        guard case .scalar(let scalar) = node, node.tagName != .null else {
            error("\(what) must be a duration like `45m`, `10s`, `2h` or `1h30m`, not \(describe(node))", at: node)
            return nil
        }
        guard let duration = WorkflowDuration(parsing: scalar.string) else {
            error("\(what): `\(scalar.string)` is not a duration; write a number with a unit, largest unit first, e.g. `45m`, `10s`, `2h`, `1h30m` (units d, h, m, s)", at: node)
            return nil
        }
        return duration
    }

    /// A single name or a list of names.
    mutating func names(_ node: Node, what: String) -> [Located<String>] {
        switch node {
        case .sequence(let sequence):
            if sequence.isEmpty { error("\(what) is an empty list; name at least one state", at: node) }
            return sequence.compactMap { item in string(item, what: what).map { Located(value: $0, position: SourcePosition(item)) } }
        default:
            return string(node, what: what).map { [Located(value: $0, position: SourcePosition(node))] } ?? []
        }
    }

    // MARK: Schemas

    struct ParsedActivity {
        var attributesType: String
        var attributes: [FieldSpec]
        var content: [FieldSpec]
    }

    mutating func parseActivity(_ node: Node, structs: [StructType]) -> ParsedActivity? {
        guard let map = mapping(node, what: "`activity`", allowed: ["attributes-type", "attributes", "content-state", "carry-over"],
                                required: ["attributes-type", "content-state"])
        else { return nil }
        var attributesType = ""
        if let typeNode = map["attributes-type"], let text = string(typeNode, what: "`attributes-type`") {
            if let problem = SwiftNames.problem(with: text) {
                error("`attributes-type`: \(problem); it must be the Swift name of the app's ActivityAttributes type", at: typeNode)
            } else if text == "ContentState" {
                error("`attributes-type` cannot be `ContentState`, the name of its nested type", at: typeNode)
            } else if structs.contains(where: { $0.name == text }) {
                error("`attributes-type` `\(text)` is also the name of a type under `types:`; rename one", at: typeNode)
            } else {
                attributesType = text
            }
        }
        var carryOverAll = false
        if let node = map["carry-over"] {
            carryOverAll = bool(node, what: "`activity.carry-over`") ?? false
        }
        let structsByName = Dictionary(structs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let attributes = map["attributes"].map {
            schema($0, what: "`activity.attributes`", swiftNames: true, structs: structsByName)
        } ?? []
        let content = map["content-state"].map {
            schema($0, what: "`activity.content-state`", swiftNames: true, structs: structsByName,
                   carryOver: carryOverAll ? .all : .perField)
        } ?? []
        guard !attributesType.isEmpty, map["content-state"] != nil else { return nil }
        return ParsedActivity(attributesType: attributesType, attributes: attributes, content: content)
    }

    /// Whether the fields of a schema may keep their previous value (ContentState only).
    enum CarryOver {
        /// Not a ContentState: `carry-over` is refused.
        case notAllowed
        /// Only fields that say `carry-over: true`.
        case perField
        /// `activity.carry-over: true`: every field unless it says `carry-over: false`.
        case all
    }

    static let fieldKeys = ["type", "default", "carry-over"]

    /// `name: type` lines, or `name: {type: T, default: V, carry-over: true}`. `swiftNames` requires
    /// names usable as Swift properties (schemas that become the app's Codable types).
    mutating func schema(_ node: Node, what: String, swiftNames: Bool, structs: [String: StructType],
                         carryOver: CarryOver = .notAllowed) -> [FieldSpec]
    {
        guard let map = mapping(node, what: what, allowed: nil, nullIsEmpty: true) else { return [] }
        var fields: [FieldSpec] = []
        var enumTypeNames: [String: String] = [:]
        for entry in map.entries {
            let fieldName = entry.key
            if swiftNames, let problem = SwiftNames.problem(with: fieldName) {
                error("field name in \(what): \(problem); schema keys become Swift property names in the app", at: entry.keyNode)
                continue
            }
            if !swiftNames, !SwiftNames.isIdentifier(fieldName) {
                error("`\(fieldName)` in \(what) must be a name made of letters, digits and `_`", at: entry.keyNode)
                continue
            }
            var typeNode = entry.value
            var long: Entries?
            if case .mapping = entry.value {
                guard let entries = mapping(entry.value, what: "field `\(fieldName)` in \(what)", allowed: Self.fieldKeys,
                                            required: ["type"]),
                    let node = entries["type"]
                else { continue }
                long = entries
                typeNode = node
            }
            let typeText: String
            switch typeNode {
            case .scalar(let scalar) where typeNode.tagName != .null:
                typeText = scalar.string
            // Unquoted, `[string(10); 3]` is a YAML list of one element: read it as the array type.
            case .sequence(let items) where items.count == 1:
                guard case .scalar(let element) = items[0] else { fallthrough }
                typeText = "[\(element.string)]"
            default:
                error("field `\(fieldName)` in \(what) needs a type such as `string(60)`, `int`, `date?`, `enum(a, b)` or `{type: int, default: 0}`, not \(describe(typeNode))",
                      at: typeNode)
                continue
            }
            let type: FieldType
            do {
                type = try FieldType.parse(typeText, structs: structs)
            } catch {
                self.error("field `\(fieldName)` in \(what): \(error.message)", at: typeNode)
                continue
            }
            if swiftNames, let values = Self.enumValues(type) {
                var bad = false
                for value in values {
                    if let problem = SwiftNames.problem(with: value) {
                        error("enum value in field `\(fieldName)`: \(problem); enum values become Swift case names", at: typeNode)
                        bad = true
                    }
                }
                if bad { continue }
                let typeName = CodeGenerator.enumTypeName(for: fieldName)
                if typeName == "ContentState" {
                    error("enum field `\(fieldName)` would generate a Swift type named `ContentState`, which clashes with the nested ContentState struct; rename the field", at: entry.keyNode)
                    continue
                }
                if let other = enumTypeNames[typeName] {
                    error("enum fields `\(other)` and `\(fieldName)` would both generate the Swift type `\(typeName)`; rename one", at: entry.keyNode)
                    continue
                }
                if structs[typeName] != nil {
                    error("enum field `\(fieldName)` would generate a Swift type named `\(typeName)`, which clashes with the struct type `\(typeName)` under `types:`; rename the field or the type", at: entry.keyNode)
                    continue
                }
                enumTypeNames[typeName] = fieldName
            }
            var field = FieldSpec(name: fieldName, type: type, carriesOver: carryOver == .all)
            if let long {
                if let node = long["default"] {
                    guard let value = defaultValue(node, field: fieldName, type: type) else { continue }
                    field.defaultValue = value
                }
                if let node = long["carry-over"] {
                    if carryOver == .notAllowed {
                        error("`carry-over` of field `\(fieldName)` in \(what): only ContentState fields keep their previous value", at: node)
                        continue
                    }
                    field.carriesOver = bool(node, what: "`carry-over` of field `\(fieldName)`") ?? false
                }
            }
            fields.append(field)
        }
        return fields
    }

    /// A field's `default`: a literal of its type; dates and structs have none (a fixed date is
    /// a mistake waiting to happen, and a struct's own fields can have defaults).
    mutating func defaultValue(_ node: Node, field: String, type: FieldType) -> JSONValue? {
        // An empty list is a default of any array type.
        let isEmptyList = if case .sequence(let items) = node { items.isEmpty } else { false }
        func hasDateOrStruct(_ type: FieldType) -> Bool {
            switch type {
            case .date, .structure: return true
            case .optional(let wrapped): return hasDateOrStruct(wrapped)
            case .array(let element, _): return !isEmptyList && hasDateOrStruct(element)
            default: return false
            }
        }
        if hasDateOrStruct(type) {
            error("`default` of field `\(field)`: a \(type.spelling) field cannot have a default; set it in the initial state's `content`, or give the struct's own fields defaults",
                  at: node)
            return nil
        }
        guard let value = value(node, field: field, type: type) else { return nil }
        func literal(_ spec: ValueSpec) -> JSONValue? {
            switch spec {
            case .literal(let value): return value
            case .list(let items):
                var values: [JSONValue] = []
                for item in items {
                    guard let value = literal(item) else { return nil }
                    values.append(value)
                }
                return .array(values)
            case .template: return nil
            }
        }
        guard let result = literal(value) else {
            error("`default` of field `\(field)` must be a literal value, not a template: there is nothing to render it from", at: node)
            return nil
        }
        return result
    }

    // MARK: Struct types

    /// `types:` — `Name: {field: type, …}`, each usable by name in the schemas and in the types
    /// declared after it.
    mutating func parseStructTypes(_ node: Node) -> [StructType] {
        guard let map = mapping(node, what: "`types`", allowed: nil, nullIsEmpty: true) else { return [] }
        var result: [StructType] = []
        var byName: [String: StructType] = [:]
        for entry in map.entries {
            let typeName = entry.key
            if let problem = SwiftNames.problem(with: typeName) {
                error("type name `\(typeName)` under `types`: \(problem); it becomes a Swift struct name in the app", at: entry.keyNode)
                continue
            }
            guard let first = typeName.unicodeScalars.first, ("A"..."Z").contains(first) else {
                error("type name `\(typeName)` under `types` must start with a capital letter (`\(typeName.prefix(1).uppercased() + typeName.dropFirst())`), as Swift types do, so it cannot be taken for a built-in type like `string`",
                      at: entry.keyNode)
                continue
            }
            if typeName == "ContentState" {
                error("type name `ContentState` under `types` clashes with the ActivityAttributes' nested ContentState struct; rename it", at: entry.keyNode)
                continue
            }
            let fields = schema(entry.value, what: "type `\(typeName)`", swiftNames: true, structs: byName)
            if fields.isEmpty {
                if case .mapping(let fieldMap) = entry.value, !fieldMap.isEmpty { continue }  // reported above
                error("type `\(typeName)` has no fields; list them as `name: type` lines", at: entry.keyNode)
                continue
            }
            let structure = StructType(name: typeName, fields: fields)
            result.append(structure)
            byName[typeName] = structure
        }
        return result
    }

    static func enumValues(_ type: FieldType) -> [String]? {
        switch type {
        case .enumeration(let values): return values
        case .optional(let wrapped), .array(let wrapped, _): return enumValues(wrapped)
        default: return nil
        }
    }

    // MARK: States

    static let stateKeys = ["description", "initial", "final", "content", "alert", "stale-after", "relevance", "priority"]

    mutating func parseStates(_ node: Node, contentSchema: [FieldSpec]) -> [ParsedState] {
        guard let map = mapping(node, what: "`states`", allowed: nil) else { return [] }
        if map.entries.isEmpty {
            error("`states` is empty; list the order's states, one marked `initial: true` and at least one `final: true`", at: node)
        }
        var states: [ParsedState] = []
        for entry in map.entries {
            let stateName = entry.key
            guard SwiftNames.isIdentifier(stateName) else {
                error("state name `\(stateName)` must be made of letters, digits and `_` (not starting with a digit)", at: entry.keyNode)
                continue
            }
            if stateName == "any" {
                error("`any` cannot be a state name: `from: any` means every non-final state", at: entry.keyNode)
                continue
            }
            let what = "state `\(stateName)`"
            guard let fields = mapping(entry.value, what: what, allowed: Self.stateKeys, nullIsEmpty: true) else { continue }
            var spec = StateSpec(name: stateName, description: nil, isInitial: false, isFinal: false, content: [:],
                                 alert: nil, staleAfter: nil, relevanceScore: nil, priority: nil, dismissal: nil)
            var parsed = ParsedState(spec: spec, position: SourcePosition(entry.keyNode), content: [:], alert: nil)
            if let node = fields["description"] { spec.description = string(node, what: "`description` of \(what)") }
            if let node = fields["initial"] { spec.isInitial = bool(node, what: "`initial` of \(what)") ?? false }
            if let node = fields["final"] { spec.isFinal = bool(node, what: "`final` of \(what)") ?? false }
            if let node = fields["content"] {
                parsed.content = content(node, what: "`content` of \(what)", schema: contentSchema)
                spec.content = parsed.content.mapValues(\.value)
            }
            if let node = fields["alert"] {
                switch alertOverride(node, what: "`alert` of \(what)") {
                case .alert(let alert):
                    parsed.alert = alert
                    spec.alert = alert.spec
                case .suppressed, .inherit:
                    break
                }
            }
            if let node = fields["stale-after"] { spec.staleAfter = duration(node, what: "`stale-after` of \(what)") }
            if let node = fields["relevance"] { spec.relevanceScore = number(node, what: "`relevance` of \(what)") }
            if let node = fields["priority"] { spec.priority = priority(node) }
            parsed.spec = spec
            states.append(parsed)
        }
        return states
    }

    // MARK: Content values

    mutating func content(_ node: Node, what: String, schema: [FieldSpec]) -> [String: Located<ValueSpec>] {
        guard let map = mapping(node, what: what, allowed: nil, nullIsEmpty: true) else { return [:] }
        var result: [String: Located<ValueSpec>] = [:]
        for entry in map.entries {
            guard let field = schema.first(where: { $0.name == entry.key }) else {
                error("\(what) sets `\(entry.key)`, which is not a ContentState field\(didYouMean(entry.key, in: schema.map(\.name))); fields: \(codeList(schema.map(\.name)))",
                      at: entry.keyNode)
                continue
            }
            if let value = value(entry.value, field: field.name, type: field.type) {
                result[field.name] = Located(value: value, position: SourcePosition(entry.value))
            }
        }
        return result
    }

    /// A literal or template for a field of `type`; literals are checked against the type here.
    mutating func value(_ node: Node, field: String, type: FieldType) -> ValueSpec? {
        let label = "`\(field)` (\(type.spelling))"
        switch node {
        case .sequence(let items):
            guard case .array(let element, let maxCount) = type.nonOptional else {
                error("\(label) is not an array; give a single value, not a list", at: node)
                return nil
            }
            if items.count > maxCount {
                error("\(label) holds at most \(maxCount) elements, the list has \(items.count)", at: node)
                return nil
            }
            var values: [ValueSpec] = []
            for item in items {
                guard let value = value(item, field: field + "[]", type: element) else { return nil }
                values.append(value)
            }
            return .list(values)
        case .mapping where type.structType != nil:
            error("\(label) is a struct: fill it from a variable of the same type, like \"{{input.\(field)}}\" or \"{{previous.\(field)}}\"", at: node)
            return nil
        case .mapping, .alias:
            error("\(label) needs a value, a template like \"{{input.x}}\", or a list; not \(describe(node))", at: node)
            return nil
        case .scalar(let scalar):
            if node.tagName == .null {
                guard type.isOptional else {
                    error("\(label) is required and cannot be null; give a value or make the field optional (`\(type.spelling)?`)", at: node)
                    return nil
                }
                return .literal(.null)
            }
            let text = scalar.string
            let isText = node.tagName == .str || node.tagName == .timestamp
            if isText, text.contains("{{") {
                do {
                    return .template(try Template(text))
                } catch {
                    self.error("\(label): \(error.message)", at: node)
                    return nil
                }
            }
            if case .array = type.nonOptional {
                error("\(label) is an array: write a YAML list like `[a, b]` or a single template like \"{{input.\(field)}}\"", at: node)
                return nil
            }
            return literal(scalar, node: node, label: label, type: type.nonOptional)
        }
    }

    mutating func literal(_ scalar: Node.Scalar, node: Node, label: String, type: FieldType) -> ValueSpec? {
        let text = scalar.string
        let tag = node.tagName
        let yamlKind: String
        switch tag {
        case .int: yamlKind = "a number"
        case .float: yamlKind = "a number"
        case .bool: yamlKind = "a bool"
        default: yamlKind = "text"
        }
        func wrong(_ expected: String) -> ValueSpec? {
            error("\(label) expects \(expected), but `\(text)` is \(yamlKind)", at: node)
            return nil
        }
        switch type {
        case .string(let maxLength):
            guard tag == .str || tag == .timestamp else { return wrong("text; quote the value (\"\(text)\") to use it as text") }
            if let maxLength, text.count > maxLength {
                error("\(label) allows at most \(maxLength) characters, the text has \(text.count)", at: node)
                return nil
            }
            return .literal(.string(text))
        case .int:
            guard tag == .int, let value = node.int else { return wrong("a whole number") }
            return .literal(.int(value))
        case .double:
            guard tag == .int || tag == .float, let value = node.float, value.isFinite else { return wrong("a number") }
            return .literal(.double(value))
        case .bool:
            guard tag == .bool, let value = node.bool else { return wrong("`true` or `false`") }
            return .literal(.bool(value))
        case .date:
            guard tag == .str || tag == .timestamp, DateValues.isDateLiteral(text) else {
                return wrong("a date: an ISO-8601 time like `2025-05-01T12:00:00Z`, an offset from the transition time like `+15m`, `now`, or a template")
            }
            return .literal(.string(text))
        case .enumeration(let values):
            guard values.contains(text) else {
                error("\(label): `\(text)` is not one of the enum's values\(didYouMean(text, in: values)); use one of \(codeList(values))", at: node)
                return nil
            }
            return .literal(.string(text))
        case .optional(let wrapped):
            return literal(scalar, node: node, label: label, type: wrapped)
        case .array:
            return wrong("a list")
        case .structure(let structure):
            return wrong("a \(structure.name) object: a template like \"{{input.x}}\" naming a \(structure.name)")
        }
    }

    // MARK: Alerts

    static let alertKeys = ["title", "body", "sound"]

    mutating func alertOverride(_ node: Node, what: String) -> AlertOverride {
        if case .scalar(let scalar) = node, node.tagName == .bool || node.tagName == .null || scalar.string == "none" {
            if node.tagName == .bool, node.bool == true {
                error("\(what) must be a mapping with `title` and `body`, or `none`/`false` for no alert", at: node)
            }
            return .suppressed
        }
        guard let map = mapping(node, what: what, allowed: Self.alertKeys, required: ["title", "body"]) else { return .inherit }
        var templates: [TemplateUse] = []
        let title = map["title"].flatMap { text($0, what: "`title` of \(what)", templates: &templates) }
        let body = map["body"].flatMap { text($0, what: "`body` of \(what)", templates: &templates) }
        let sound = map["sound"].flatMap { string($0, what: "`sound` of \(what)") }
        guard let title, let body else { return .inherit }
        return .alert(ParsedAlert(spec: AlertSpec(title: title, body: body, sound: sound), templates: templates,
                                  position: SourcePosition(node)))
    }

    mutating func text(_ node: Node, what: String, templates: inout [TemplateUse]) -> TextSpec? {
        if case .mapping = node {
            guard let map = mapping(node, what: what, allowed: ["loc-key", "loc-args"], required: ["loc-key"]) else { return nil }
            guard let key = map["loc-key"].flatMap({ string($0, what: "`loc-key` of \(what)") }) else { return nil }
            var args: [Template] = []
            if let argsNode = map["loc-args"] {
                guard case .sequence(let items) = argsNode else {
                    error("`loc-args` of \(what) must be a list of texts or templates", at: argsNode)
                    return nil
                }
                for item in items {
                    guard let template = template(item, what: "`loc-args` of \(what)") else { return nil }
                    templates.append(TemplateUse(template: template, position: SourcePosition(item), label: "`loc-args` of \(what)"))
                    args.append(template)
                }
            }
            return .localized(key: key, args: args)
        }
        guard let template = template(node, what: what) else { return nil }
        if template.source.trimmingCharacters(in: .whitespaces).isEmpty {
            error("\(what) is empty; an alert needs text (an empty alert makes a push-to-start silently fail)", at: node)
            return nil
        }
        templates.append(TemplateUse(template: template, position: SourcePosition(node), label: what))
        return .plain(template)
    }

    mutating func template(_ node: Node, what: String) -> Template? {
        guard case .scalar(let scalar) = node, node.tagName != .null else {
            error("\(what) must be a text or a template, not \(describe(node))", at: node)
            return nil
        }
        do {
            return try Template(scalar.string)
        } catch {
            self.error("\(what): \(error.message)", at: node)
            return nil
        }
    }

    // MARK: Transitions

    static let transitionKeys = ["from", "to", "event", "input", "content", "alert", "priority", "relevance"]

    mutating func parseTransitions(_ node: Node, contentSchema: [FieldSpec], structs: [StructType]) -> [ParsedTransition] {
        let structsByName = Dictionary(structs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        guard case .sequence(let items) = node else {
            error("`transitions` must be a list of `- from: …, to: …` entries, not \(describe(node))", at: node)
            return []
        }
        var result: [ParsedTransition] = []
        for (index, item) in items.enumerated() {
            let what = "transition #\(index + 1)"
            guard let map = mapping(item, what: what, allowed: Self.transitionKeys, required: ["from", "to"]) else { continue }
            guard let fromNode = map["from"], let toNode = map["to"], let to = string(toNode, what: "`to` of \(what)") else {
                continue
            }
            let from = names(fromNode, what: "`from` of \(what)")
            let fromAny = from.count == 1 && from[0].value == "any"
            let label = "transition `\(fromAny ? "any" : from.map(\.value).joined(separator: "|")) -> \(to)`"
            var transition = ParsedTransition(
                from: fromAny ? [] : from, fromAny: fromAny, to: Located(value: to, position: SourcePosition(toNode)),
                event: nil, inputs: [], content: [:], alert: .inherit, priority: nil, relevanceScore: nil,
                position: SourcePosition(item))
            if from.contains(where: { $0.value == "any" }) && !fromAny {
                error("`any` in `from` of \(label) already means every non-final state; write `from: any` alone", at: fromNode)
            }
            if let node = map["event"], let event = name(node, what: "`event` of \(label)") {
                transition.event = Located(value: event, position: SourcePosition(node))
            }
            if let node = map["input"] {
                transition.inputs = schema(node, what: "`input` of \(label)", swiftNames: false, structs: structsByName)
            }
            if let node = map["content"] {
                transition.content = content(node, what: "`content` of \(label)", schema: contentSchema)
            }
            if let node = map["alert"] { transition.alert = alertOverride(node, what: "`alert` of \(label)") }
            if let node = map["priority"] { transition.priority = priority(node) }
            if let node = map["relevance"] { transition.relevanceScore = number(node, what: "`relevance` of \(label)") }
            result.append(transition)
        }
        return result
    }

    // MARK: Lifecycle

    static let lifecycleKeys = ["start", "start-input", "start-alert", "end", "on-time-limit", "audience", "channel-storage"]

    mutating func parseLifecycle(_ node: Node, structs: [StructType]) -> (spec: LifecycleSpec, startPosition: SourcePosition, alert: ParsedAlert?,
                                                   dismissals: [String: Located<Dismissal>])?
    {
        guard let map = mapping(node, what: "`lifecycle`", allowed: Self.lifecycleKeys, required: ["start"]) else { return nil }
        guard let startNode = map["start"], let startText = string(startNode, what: "`lifecycle.start`") else { return nil }
        guard let start = StartMode(rawValue: startText) else {
            error("`lifecycle.start` must be `push-to-start` (the server starts the activity when the order is created) or `app` (the app starts it and registers its token), not `\(startText)`\(didYouMean(startText, in: ["push-to-start", "app"]))",
                  at: startNode)
            return nil
        }
        let structsByName = Dictionary(structs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let startInputs = map["start-input"].map {
            schema($0, what: "`lifecycle.start-input`", swiftNames: false, structs: structsByName)
        } ?? []
        var alert: ParsedAlert?
        if let alertNode = map["start-alert"] {
            if case .alert(let parsed) = alertOverride(alertNode, what: "`lifecycle.start-alert`") { alert = parsed }
        }
        var dismissals: [String: Located<Dismissal>] = [:]
        if let endNode = map["end"], let entries = mapping(endNode, what: "`lifecycle.end`", allowed: nil) {
            for entry in entries.entries {
                if let dismissal = dismissal(entry.value, state: entry.key) {
                    dismissals[entry.key] = Located(value: dismissal, position: SourcePosition(entry.keyNode))
                }
            }
        }
        var onTimeLimit = TimeLimitPolicy.end
        if let limitNode = map["on-time-limit"], let text = string(limitNode, what: "`lifecycle.on-time-limit`") {
            if let policy = TimeLimitPolicy(rawValue: text) {
                onTimeLimit = policy
            } else {
                error("`lifecycle.on-time-limit` must be `end` (end the activity near its 8-hour limit) or `restart` (start a fresh one with push-to-start), not `\(text)`",
                      at: limitNode)
            }
        }
        var audience = Audience.perDevice
        if let audienceNode = map["audience"], let text = string(audienceNode, what: "`lifecycle.audience`") {
            switch text {
            case "per-device": break
            case "broadcast":
                audience = .broadcast(storage: .latest)
                if onTimeLimit == .restart {
                    error("`lifecycle.on-time-limit: restart` does not go with `audience: broadcast`: the followers' activities are not tracked one by one, so none can be restarted; use `end`",
                          at: map["on-time-limit"] ?? audienceNode)
                }
            default:
                error("`lifecycle.audience` must be `per-device` (one push per following device, the default) or `broadcast` (one APNs channel per order, every follower subscribed; iOS 18), not `\(text)`\(didYouMean(text, in: ["per-device", "broadcast"]))",
                      at: audienceNode)
            }
        }
        if let storageNode = map["channel-storage"], let text = string(storageNode, what: "`lifecycle.channel-storage`") {
            if let storage = ChannelStorage(rawValue: text) {
                if audience.isBroadcast {
                    audience = .broadcast(storage: storage)
                } else {
                    error("`lifecycle.channel-storage` applies to `audience: broadcast` only; add `audience: broadcast` or remove it",
                          at: storageNode)
                }
            } else {
                error("`lifecycle.channel-storage` must be `latest` (APNs keeps the newest update for devices that join late, the default) or `none` (nothing is kept; each broadcast is delivered once), not `\(text)`\(didYouMean(text, in: ["latest", "none"]))",
                      at: storageNode)
            }
        }
        let spec = LifecycleSpec(start: start, startInputs: startInputs, startAlert: alert?.spec, onTimeLimit: onTimeLimit,
                                 audience: audience)
        return (spec, SourcePosition(map.keyNode("start")), alert, dismissals)
    }

    mutating func dismissal(_ node: Node, state: String) -> Dismissal? {
        let what = "dismissal of `\(state)` in `lifecycle.end`"
        let maximum = WorkflowDuration(seconds: 4 * 3600)
        if case .mapping = node {
            guard let map = mapping(node, what: what, allowed: ["after"], required: ["after"]),
                let afterNode = map["after"], let after = duration(afterNode, what: "`after` of \(what)")
            else { return nil }
            guard after <= maximum else {
                error("\(what): `after: \(after)` is longer than the 4 hours an ended activity can stay on the Lock Screen", at: afterNode)
                return nil
            }
            return .after(after)
        }
        guard let text = string(node, what: what) else { return nil }
        switch text {
        case "immediate": return .immediate
        case "default": return .systemDefault
        default:
            if text.hasPrefix("after ") {
                guard let after = WorkflowDuration(parsing: String(text.dropFirst(6))) else {
                    error("\(what): `\(text.dropFirst(6))` is not a duration; write e.g. `after 30m`", at: node)
                    return nil
                }
                guard after <= maximum else {
                    error("\(what): `\(text)` is longer than the 4 hours an ended activity can stay on the Lock Screen", at: node)
                    return nil
                }
                return .after(after)
            }
            error("\(what) must be `immediate`, `default`, `after 30m` or `{after: 30m}`, not `\(text)`", at: node)
            return nil
        }
    }

    // MARK: Timers

    mutating func parseTimers(_ node: Node) -> [ParsedTimer] {
        guard case .sequence(let items) = node else {
            error("`timers` must be a list of `- {in: state, after: 45m, go-to: state}` or `- {in: state, after: 10m, mark-stale: true}` entries",
                  at: node)
            return []
        }
        var timers: [ParsedTimer] = []
        for (index, item) in items.enumerated() {
            let what = "timer #\(index + 1)"
            guard let map = mapping(item, what: what, allowed: ["in", "after", "go-to", "mark-stale"], required: ["in", "after"]),
                let inNode = map["in"], let state = string(inNode, what: "`in` of \(what)"),
                let afterNode = map["after"], let after = duration(afterNode, what: "`after` of \(what)")
            else { continue }
            var goTo: Located<String>?
            if let node = map["go-to"], let target = string(node, what: "`go-to` of \(what)") {
                goTo = Located(value: target, position: SourcePosition(node))
            }
            var markStale = false
            if let node = map["mark-stale"] {
                markStale = bool(node, what: "`mark-stale` of \(what)") ?? false
                if !markStale { error("`mark-stale` of \(what) can only be `true`; remove it otherwise", at: node) }
            }
            if (goTo == nil) == !markStale {
                error("\(what) must have exactly one action: `go-to: <state>` or `mark-stale: true`", at: item)
                continue
            }
            timers.append(ParsedTimer(state: Located(value: state, position: SourcePosition(inNode)), after: after,
                                      goTo: goTo, position: SourcePosition(item)))
        }
        return timers
    }
}

extension Node {
    /// The resolved YAML tag (`str`, `int`, `bool`, `null`, …) of this node.
    var tagName: Tag.Name { Tag.Name(rawValue: tag.rawValue) }
}
