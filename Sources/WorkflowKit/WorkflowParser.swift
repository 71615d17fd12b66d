import Yams

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

    static let rootKeys = ["name", "description", "types", "activity", "states", "transitions", "lifecycle", "timers", "android"]

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

        let android = top["android"].flatMap { parseAndroid($0, what: "`android`", workflowLevel: true) }

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
        validator.android = android
        let workflow = validator.validate()
        self.diagnostics = validator.parser.diagnostics
        return workflow
    }

    static func isSlug(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
        }
    }
}
