import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import OrderFlow
import WorkflowKit

/// `orderflow order …`
struct OrderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "order",
        abstract: "Create orders; redact finished ones.",
        discussion: """
            An order follows the newest version of its workflow from the workflow's initial \
            state; `advance`, `cancel`, `show` and `list` work on orders once they exist.

            Example:
              orderflow order create 1042 --workflow food-order \\
                --attr merchantName="Luigi's" --attr orderNumber=1042 --attr itemCount=3
            """,
        subcommands: [Create.self, RedactOrder.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an order and start its Live Activity.",
            discussion: """
                Attributes are the activity's static values, typed by the workflow's schema: \
                `--attr itemCount=3` gives the number 3, a date takes ISO-8601 text, an optional \
                value takes `null`, an array takes `a,b,c` or JSON. --attributes-json gives them \
                all at once (--attr values win). --input gives the workflow's start-input. \
                Retrying with the same --idempotency-key returns the first result.

                Example:
                  orderflow order create 1042 --workflow food-order \\
                    --attr merchantName="Luigi's" --attr orderNumber=1042 \\
                    --attr itemCount=3 --input eta=25m
                """)

        @Argument(help: ArgumentHelp("The order's id, as the merchant knows it.", valueName: "order-id"))
        var orderID: String

        @Option(help: ArgumentHelp("The workflow's name.", valueName: "name"))
        var workflow: String

        @Option(parsing: .unconditional, help: ArgumentHelp("Pin a workflow version instead of the newest.", valueName: "n"))
        var version: Int?

        @Option(name: .customLong("attr"), help: ArgumentHelp("An attribute, key=value (repeatable).", valueName: "key=value"))
        var attributes: [String] = []

        @Option(name: .customLong("attributes-json"), help: ArgumentHelp("All attributes as a JSON object.", valueName: "json"))
        var attributesJSON: String?

        @Option(help: ArgumentHelp("Start input for the initial state, key=value (repeatable).", valueName: "key=value"))
        var input: [String] = []

        @Option(help: ArgumentHelp("Makes a retried creation return the first result.", valueName: "key"))
        var idempotencyKey: String?

        @OptionGroup var output: OutputOptions

        func validate() throws {
            if let version, version < 1 { throw ValidationError("--version must be 1 or more") }
        }

        func run() async throws {
            let context = CommandContext.current()
            let base = try attributesJSON.map { try TypedValues.jsonObject($0, option: "--attributes-json") } ?? [:]
            let order = try await context.withEngine { engine in
                let stored = try await engine.storedWorkflow(name: workflow, version: version)
                let attributes = try TypedValues.object(
                    self.attributes, option: "--attr", schema: stored.workflow.attributesSchema, base: base)
                let startInput = try TypedValues.object(input, option: "--input", schema: stored.workflow.lifecycle.startInputs)
                let order = try await engine.createOrder(NewOrder(
                    orderID: orderID, workflow: workflow, workflowVersion: stored.version, attributes: attributes,
                    input: startInput, idempotencyKey: idempotencyKey, actor: context.actor))
                return output.json ? order.readable(in: stored.workflow) : order
            }
            if output.json {
                try context.terminal.writeJSON(order)
                return
            }
            let terminal = context.terminal
            terminal.write("created order \(terminal.styled(Formatting.escaped(order.orderID), .bold)) (\(Formatting.escaped(order.workflow)) v\(order.workflowVersion)) in \(StateStyle.styled(order.state, isFinal: order.isFinal, terminal))")
            if order.channel != nil {
                terminal.write("a broadcast event: the worker creates its APNs channel; `orderflow show \(Formatting.commandWord(order.orderID))` gives the channel id for the app")
            }
            terminal.write(terminal.styled("follow it from a device with `orderflow follow \(Formatting.commandWord(order.orderID)) DEVICE`", .dim))
        }
    }
}

/// `orderflow advance`
struct Advance: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Move an order to its next state.",
        discussion: """
            TARGET is a state or an event of the order's workflow, case-insensitive, and a \
            unique prefix is enough (`rea` for ready, `out` for out_for_delivery). --eta takes \
            15m, +15m or ISO-8601 and is passed as input `eta`; --driver as input `driver`; \
            --reason as input `reason`; --input passes any other input, typed by the transition's declaration. --expect \
            refuses unless the order is in that state. Retrying with the same --idempotency-key \
            changes nothing and prints the first result.

            Example:
              orderflow advance 1042 dispatch --eta 15m --driver Sam
            """)

    @Argument(help: ArgumentHelp("The order's id.", valueName: "order"))
    var orderID: String

    @Argument(help: ArgumentHelp("The state or event to go to (a unique prefix is enough).", valueName: "state-or-event"))
    var target: String

    // `.unconditional`: `--eta -5m` is an offset, not an option.
    @Option(parsing: .unconditional, help: ArgumentHelp("Input `eta`: 15m, +15m, -5m or ISO-8601.", valueName: "time"))
    var eta: String?

    @Option(help: ArgumentHelp("Input `driver`.", valueName: "name"))
    var driver: String?

    @Option(help: ArgumentHelp("Input `reason` (a cancellation's, say).", valueName: "text"))
    var reason: String?

    @Option(help: ArgumentHelp("Transition input, key=value (repeatable).", valueName: "key=value"))
    var input: [String] = []

    @Option(help: ArgumentHelp("Fail unless the order is in this state.", valueName: "state"))
    var expect: String?

    @Option(help: ArgumentHelp("Makes a retry change nothing and print the first result.", valueName: "key"))
    var idempotencyKey: String?

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let context = CommandContext.current()
        var values: [String: JSONValue] = [:]
        if let eta { values["eta"] = .string(try TypedValues.eta(eta)) }
        if let driver { values["driver"] = .string(driver) }
        if let reason { values["reason"] = .string(reason) }
        let outcome = try await context.withEngine { engine in
            try await TransitionOutput.result(engine, json: output.json) {
                var transitionInput = JSONValue.object(values)
                if !input.isEmpty {
                    transitionInput = try await typedInput(engine, base: values)
                }
                return try await engine.advance(
                    orderID, to: target, input: transitionInput, idempotencyKey: idempotencyKey, expectedState: expect,
                    actor: context.actor)
            }
        }
        try TransitionOutput.print(outcome, context: context)
    }

    /// `--input` typed by the declaration of the transition TARGET names. When the transition
    /// cannot be resolved, the values go as text and `advance` reports the real problem.
    private func typedInput(_ engine: OrderFlowEngine, base: [String: JSONValue]) async throws -> JSONValue {
        let order = try await engine.order(orderID).order
        let workflow = try await engine.storedWorkflow(name: order.workflow, version: order.workflowVersion).workflow
        let inputs = (try? workflow.resolveTransition(from: order.state, target: target))?.inputs ?? []
        return try TypedValues.object(input, option: "--input", schema: inputs, base: base)
    }
}

/// `orderflow cancel`
struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel an order.",
        discussion: """
            Takes the workflow's `cancel` transition (every non-final state usually has one) \
            and ends the Live Activity; --reason is shown to the customer when the workflow \
            uses it.

            Example:
              orderflow cancel 1042 --reason "Out of dough"
            """)

    @Argument(help: ArgumentHelp("The order's id.", valueName: "order"))
    var orderID: String

    @Option(help: ArgumentHelp("Why, for the customer (input `reason`).", valueName: "text"))
    var reason: String?

    @Option(help: ArgumentHelp("Makes a retry change nothing and print the first result.", valueName: "key"))
    var idempotencyKey: String?

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let context = CommandContext.current()
        let outcome = try await context.withEngine { engine in
            try await TransitionOutput.result(engine, json: output.json) {
                try await engine.cancel(orderID, reason: reason, idempotencyKey: idempotencyKey, actor: context.actor)
            }
        }
        try TransitionOutput.print(outcome, context: context)
    }
}

/// What `advance` and `cancel` print.
enum TransitionOutput {
    /// `advance --json`: times as ISO-8601 text, the transition's APNs payload as `aps`.
    struct Readable: Encodable {
        var order: OrderSnapshot
        var transition: TransitionRecord.Readable
        var replayed: Bool
    }

    /// The result and, for `--json`, the workflow its values are read with.
    static func result(
        _ engine: OrderFlowEngine, json: Bool, _ advance: () async throws -> AdvanceResult
    ) async throws -> (AdvanceResult, Workflow?) {
        let result = try await advance()
        return (result, json ? try await engine.workflow(of: result.order) : nil)
    }

    static func print(_ outcome: (AdvanceResult, Workflow?), context: CommandContext) throws {
        let (result, workflow) = outcome
        if let workflow {
            try context.terminal.writeJSON(Readable(order: result.order.readable(in: workflow),
                                                    transition: result.transition.readable(in: workflow), replayed: result.replayed))
            return
        }
        let terminal = context.terminal
        let transition = result.transition
        // Stored values are escaped before they are styled (see `ShowOrder.lines`).
        let from = transition.from.map { StateStyle.styled($0, isFinal: false, terminal) } ?? "created"
        let to = StateStyle.styled(transition.to, isFinal: result.order.isFinal && transition.to == result.order.state, terminal)
        var line = "\(terminal.styled(Formatting.escaped(result.order.orderID), .bold)): \(from) → \(to)"
        if let event = transition.event { line += " (\(Formatting.escaped(event)))" }
        if result.replayed {
            line += terminal.styled(" — already done at \(Formatting.localTime(transition.occurredAt)) with this idempotency key; nothing changed", .yellow)
        }
        terminal.write(line)
        if let alert = transition.rendered.alert {
            terminal.write(terminal.styled("  alert: \(AlertText.title(alert))", .dim))
        }
        if result.order.isFinal {
            terminal.write(terminal.styled("  \(Formatting.escaped(result.order.state)) is final: the Live Activity ends", .dim))
        }
    }
}

/// Colours for states on the board and in timelines; the names (read from the database) are
/// escaped first.
enum StateStyle {
    static func styled(_ state: String, isFinal: Bool, _ terminal: Terminal) -> String {
        let shown = Formatting.escaped(state)
        return isFinal ? terminal.styled(shown, .magenta) : terminal.styled(shown, .cyan)
    }

    /// An activity status: green when live, yellow while waiting, red when the token is dead.
    static func activity(_ status: String, _ terminal: Terminal) -> String {
        switch status {
        case "active": return terminal.styled(status, .green)
        case "waiting", "starting": return terminal.styled(status, .yellow)
        case "gone": return terminal.styled(status, .red)
        case "ended": return terminal.styled(status, .dim)
        default: return Formatting.escaped(status)
        }
    }
}

/// An alert's title as a person reads it, escaped.
enum AlertText {
    static func title(_ alert: ActivityAlert) -> String {
        switch alert.title {
        case .plain(let text): return Formatting.escaped(text)
        case .localized(let key, let args):
            return Formatting.escaped(args.isEmpty ? key : "\(key)(\(args.joined(separator: ", ")))")
        }
    }
}
