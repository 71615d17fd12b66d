import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import OrderFlow
import WorkflowKit

/// `orderflow workflow …`
struct WorkflowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "workflow",
        abstract: "Validate, store and inspect workflow files.",
        discussion: """
            A workflow file describes an order's states, the transitions between them and what \
            the Live Activity shows at each step (see docs/workflows.md). Applying a file stores \
            it as a new immutable version; orders stay pinned to the version they started with.

            Example:
              orderflow workflow validate workflows/*.yaml
              orderflow workflow apply workflows/*.yaml
            """,
        subcommands: [Validate.self, Apply.self, List.self, Show.self, Graph.self, SwiftCode.self])

    struct Validate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check workflow files without storing them.",
            discussion: """
                Prints `ok: NAME (N states, M transitions)` for a valid file, and every problem \
                of an invalid one as `file:line:column: error: …` (on stderr), which editors \
                link to the spot. Exits 65 when a file is invalid, 66 when one cannot be read. \
                Needs no database.

                Example:
                  orderflow workflow validate workflows/food-order.yaml workflows/ride.yaml
                """)

        @Argument(help: ArgumentHelp("The workflow files to check.", valueName: "file"), completion: .file(extensions: ["yaml", "yml"]))
        var files: [String]

        func validate() throws {
            guard !files.isEmpty else { throw ValidationError("give at least one workflow file") }
        }

        func run() async throws {
            let terminal = CommandContext.current().terminal
            var worst = ExitStatus.success
            for file in files {
                do {
                    let workflow = try WorkflowLoader.load(contentsOf: URL(fileURLWithPath: file))
                    terminal.write("\(terminal.styled("ok:", .green)) \(workflow.name) (\(WorkflowDescription.summary(workflow)))")
                } catch {
                    let status = FailureReport.print(error)
                    if worst == .success || status.rawValue > worst.rawValue { worst = status }
                }
            }
            if worst != .success { throw worst.exitCode }
        }
    }

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Store workflow files as new versions.",
            discussion: """
                Each file is validated and stored as the workflow's next version when its content \
                differs from the newest one (comments and formatting do not count); otherwise \
                nothing changes and the file is reported unchanged. New orders use the newest \
                version; existing orders keep theirs.

                Example:
                  orderflow workflow apply workflows/food-order.yaml
                """)

        @Argument(help: ArgumentHelp("The workflow files to store.", valueName: "file"), completion: .file(extensions: ["yaml", "yml"]))
        var files: [String]

        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard !files.isEmpty else { throw ValidationError("give at least one workflow file") }
        }

        func run() async throws {
            let context = CommandContext.current()
            let sources = try files.map { file in (file, try String(contentsOf: URL(fileURLWithPath: file), encoding: .utf8)) }
            // Validate every file before storing any, so that a typo in one applies nothing.
            var invalid: [any Error] = []
            for (file, yaml) in sources {
                do { _ = try WorkflowLoader.load(yaml: yaml, file: file) } catch { invalid.append(error) }
            }
            if !invalid.isEmpty {
                var worst = ExitStatus.success
                for error in invalid { worst = FailureReport.print(error) }
                throw worst.exitCode
            }
            let results = try await context.withEngine { engine in
                var results: [AppliedWorkflow] = []
                for (file, yaml) in sources { results.append(try await engine.applyWorkflow(yaml: yaml, file: file)) }
                return results
            }
            if output.json {
                try context.terminal.writeJSON(results)
                return
            }
            let terminal = context.terminal
            for result in results {
                if result.created {
                    terminal.write("\(terminal.styled("applied", .green)) \(result.name) version \(result.version)")
                } else {
                    terminal.write("\(result.name) unchanged (version \(result.version))")
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the stored workflows.",
            discussion: """
                One line per workflow: its newest version, how many versions exist, and when the \
                newest was applied.

                Example:
                  orderflow workflow list --json
                """)

        @OptionGroup var output: OutputOptions

        func run() async throws {
            let context = CommandContext.current()
            let summaries = try await context.withEngine { engine in try await engine.workflowVersions() }
            if output.json {
                try context.terminal.writeJSON(summaries)
                return
            }
            let terminal = context.terminal
            guard !summaries.isEmpty else {
                terminal.write("no workflows yet; store one with `orderflow workflow apply FILE`")
                return
            }
            var table = TextTable(header: ["NAME", "VERSION", "VERSIONS", "APPLIED"], rightAligned: [1, 2])
            for summary in summaries {
                table.append([terminal.styled(summary.name, .bold), String(summary.latestVersion), String(summary.versions),
                              Formatting.localTime(summary.updatedAt)])
            }
            for line in table.render(terminal) { terminal.write(line) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Describe a workflow: schemas, states, transitions and timers.",
            discussion: """
                NAME shows the newest stored version, NAME@VERSION a given one; a path ending in \
                .yaml reads that file instead (no database needed). --source prints the YAML as \
                it was applied.

                Example:
                  orderflow workflow show food-order@2
                  orderflow workflow show workflows/ride.yaml --json
                """)

        @Argument(help: ArgumentHelp("A stored workflow (NAME or NAME@VERSION) or a .yaml file.", valueName: "workflow"),
                  completion: .file(extensions: ["yaml", "yml"]))
        var workflow: String

        @Flag(help: "Print the workflow's YAML source as stored.")
        var source = false

        @OptionGroup var output: OutputOptions

        func run() async throws {
            let context = CommandContext.current()
            let loaded = try await WorkflowReference(workflow).load(context)
            if source {
                context.terminal.write(loaded.source, terminator: loaded.source.hasSuffix("\n") ? "" : "\n")
                return
            }
            let description = WorkflowDescription(loaded.workflow, version: loaded.version, appliedAt: loaded.appliedAt)
            if output.json {
                try context.terminal.writeJSON(description)
                return
            }
            for line in description.lines(context.terminal) { context.terminal.write(line) }
        }
    }

    struct Graph: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Draw a workflow's states and transitions as Mermaid or Graphviz.",
            discussion: """
                Mermaid renders in GitHub Markdown (```mermaid); dot renders with Graphviz. \
                Timers that move an order are drawn as transitions labelled `after …`.

                Example:
                  orderflow workflow graph food-order --format dot | dot -Tsvg > food-order.svg
                """)

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case mermaid
            case dot
        }

        @Argument(help: ArgumentHelp("A stored workflow (NAME or NAME@VERSION) or a .yaml file.", valueName: "workflow"),
                  completion: .file(extensions: ["yaml", "yml"]))
        var workflow: String

        @Option(help: "mermaid or dot.")
        var format: Format = .mermaid

        func run() async throws {
            let context = CommandContext.current()
            let loaded = try await WorkflowReference(workflow).load(context)
            let text = format == .mermaid ? loaded.workflow.mermaid() : loaded.workflow.graphviz()
            context.terminal.write(text, terminator: "")
        }
    }

    struct SwiftCode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "swift",
            abstract: "Print the Swift ActivityAttributes type the iOS app needs.",
            discussion: """
                The generated type decodes exactly the attributes and ContentState this workflow \
                sends; regenerate it whenever the workflow's schema changes.

                Example:
                  orderflow workflow swift food-order > App/FoodOrderAttributes.swift
                """)

        @Argument(help: ArgumentHelp("A stored workflow (NAME or NAME@VERSION) or a .yaml file.", valueName: "workflow"),
                  completion: .file(extensions: ["yaml", "yml"]))
        var workflow: String

        func run() async throws {
            let context = CommandContext.current()
            let loaded = try await WorkflowReference(workflow).load(context)
            context.terminal.write(loaded.workflow.swiftActivityAttributes(), terminator: "")
        }
    }
}

/// A workflow named on the command line: `NAME`, `NAME@VERSION`, or a `.yaml` file.
struct WorkflowReference: Sendable {
    enum Kind: Sendable {
        case file(String)
        case stored(name: String, version: Int?)
    }

    struct Loaded: Sendable {
        var workflow: Workflow
        var source: String
        var version: Int?
        var appliedAt: Date?
    }

    let kind: Kind

    init(_ text: String) throws {
        if text.hasSuffix(".yaml") || text.hasSuffix(".yml") || text.contains("/") {
            kind = .file(text)
        } else if let at = text.lastIndex(of: "@") {
            let name = String(text[..<at])
            guard let version = Int(text[text.index(after: at)...]), version > 0, !name.isEmpty else {
                throw CLIError(.usage, "`\(text)` is not NAME or NAME@VERSION", remedy: "write it like food-order@2")
            }
            kind = .stored(name: name, version: version)
        } else {
            kind = .stored(name: text, version: nil)
        }
    }

    func load(_ context: CommandContext) async throws -> Loaded {
        switch kind {
        case .file(let path):
            let yaml = try String(contentsOf: URL(fileURLWithPath: path), encoding: .utf8)
            return Loaded(workflow: try WorkflowLoader.load(yaml: yaml, file: path), source: yaml)
        case .stored(let name, let version):
            let stored = try await context.withEngine { engine in try await engine.storedWorkflow(name: name, version: version) }
            return Loaded(workflow: stored.workflow, source: stored.source, version: stored.version, appliedAt: stored.createdAt)
        }
    }
}

/// What `workflow show` prints, and its JSON.
struct WorkflowDescription: Encodable {
    struct Field: Encodable {
        var name: String
        var type: String
    }

    struct State: Encodable {
        var name: String
        var initial: Bool
        var final: Bool
        var description: String?
        var alert: Bool
    }

    struct Transition: Encodable {
        var from: String
        var to: String
        var event: String?
        var input: [Field]
        var alert: Bool
        var priority: Int
    }

    struct Timer: Encodable {
        var state: String
        var after: String
        var goTo: String?
        var markStale: Bool
    }

    var name: String
    var version: Int?
    var appliedAt: Date?
    var description: String
    var attributesType: String
    var start: String
    var startInput: [Field]
    var attributes: [Field]
    var contentState: [Field]
    var states: [State]
    var transitions: [Transition]
    var timers: [Timer]

    init(_ workflow: Workflow, version: Int?, appliedAt: Date?) {
        func fields(_ specs: [FieldSpec]) -> [Field] { specs.map { Field(name: $0.name, type: $0.type.spelling) } }
        name = workflow.name
        self.version = version
        self.appliedAt = appliedAt
        description = workflow.description
        attributesType = workflow.attributesType
        start = workflow.lifecycle.start.rawValue
        startInput = fields(workflow.lifecycle.startInputs)
        attributes = fields(workflow.attributesSchema)
        contentState = fields(workflow.contentSchema)
        states = workflow.states.map {
            State(name: $0.name, initial: $0.isInitial, final: $0.isFinal, description: $0.description, alert: $0.alert != nil)
        }
        transitions = workflow.transitions.map {
            Transition(from: $0.from, to: $0.to, event: $0.event, input: fields($0.inputs), alert: $0.alert != nil, priority: $0.priority)
        }
        timers = workflow.timers.map { timer in
            switch timer.action {
            case .transition(let to): return Timer(state: timer.state, after: timer.after.description, goTo: to, markStale: false)
            case .markStale: return Timer(state: timer.state, after: timer.after.description, goTo: nil, markStale: true)
            }
        }
    }

    /// `7 states, 12 transitions`.
    static func summary(_ workflow: Workflow) -> String {
        "\(Formatting.count(workflow.states.count, "state")), \(Formatting.count(workflow.transitions.count, "transition"))"
    }

    func lines(_ terminal: Terminal) -> [String] {
        func schema(_ fields: [Field]) -> String {
            fields.isEmpty ? "-" : fields.map { "\($0.name): \($0.type)" }.joined(separator: ", ")
        }
        var lines: [String] = []
        var title = terminal.styled(name, .bold)
        if let version { title += " version \(version)" }
        if let appliedAt { title += terminal.styled(" (applied \(Formatting.localTime(appliedAt)))", .dim) }
        lines.append(title)
        // A description can hold any character YAML escapes can write (`"\e"`): shown as text.
        if !description.isEmpty { lines.append(contentsOf: description.split(separator: "\n", omittingEmptySubsequences: false).map { Formatting.escaped(String($0)) }) }
        lines.append("")
        var facts = TextTable(header: ["", ""])
        facts.rows = [
            ["activity", "\(attributesType), started by \(start)"],
            ["attributes", schema(attributes)],
            ["content-state", schema(contentState)],
        ]
        if !startInput.isEmpty { facts.append(["start-input", schema(startInput)]) }
        lines += facts.render(terminal).dropFirst()
        lines.append("")
        lines.append(terminal.styled("States", .bold))
        var stateTable = TextTable(header: ["STATE", "KIND", "DESCRIPTION"])
        for state in states {
            let kind = state.initial ? terminal.styled("initial", .cyan) : state.final ? terminal.styled("final", .magenta) : ""
            stateTable.append([state.name, kind, Formatting.escaped(state.description ?? "")])
        }
        lines += stateTable.render(terminal, indent: "  ")
        lines.append("")
        lines.append(terminal.styled("Transitions", .bold))
        var transitionTable = TextTable(header: ["FROM", "TO", "EVENT", "INPUT", "PUSH"])
        for transition in transitions {
            transitionTable.append([
                transition.from, transition.to, transition.event ?? "", transition.input.isEmpty ? "" : schema(transition.input),
                "priority \(transition.priority)" + (transition.alert ? ", alert" : ""),
            ])
        }
        lines += transitionTable.render(terminal, indent: "  ")
        if !timers.isEmpty {
            lines.append("")
            lines.append(terminal.styled("Timers", .bold))
            for timer in timers {
                let action = timer.goTo.map { "go to \($0)" } ?? "mark the activity stale"
                lines.append("  after \(timer.after) in \(timer.state): \(action)")
            }
        }
        return lines
    }
}
