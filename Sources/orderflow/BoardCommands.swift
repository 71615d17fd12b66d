import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import Logging
import OrderFlow
import ServiceLifecycle
import WorkflowKit

/// `orderflow show`
struct ShowOrder: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show an order's timeline and what each device was sent.",
        discussion: """
            Every transition with its local time, from → to, event and actor; under each, the \
            pushes that carried it to each device: event, priority, alert title and the APNs \
            outcome. Then each device's Live Activity as it is now.

            Example:
              orderflow show 1042
              orderflow show 1042 --json | jq '.transitions[].to'
            """)

    @Argument(help: ArgumentHelp("The order's id.", valueName: "order"))
    var orderID: String

    @OptionGroup var output: OutputOptions

    /// What the customer's app last reported: its activity's state and the newest transition it
    /// had applied, flagged when pushes APNs accepted are not applied yet.
    static func phone(_ activity: ActivityInfo, _ terminal: Terminal) -> String {
        guard let state = activity.appState else { return "-" }
        var text = Formatting.escaped(state)
        if let applied = activity.appAppliedSeq {
            text += ", applied #\(applied)"
            if applied < activity.lastSeq, activity.status == "active" {
                return terminal.styled(text + " of #\(activity.lastSeq) sent", .yellow)
            }
        }
        return text
    }

    /// A broadcast order's channel: the id the app subscribes with, and where it stands.
    static func channelLine(_ channel: BroadcastChannelInfo, _ terminal: Terminal) -> String {
        let id = channel.id.map(Formatting.escaped) ?? "(not created yet)"
        var text = "broadcast channel: \(id)  \(channel.state.rawValue), storage \(channel.storage.rawValue)"
        if let reason = channel.reason { text += " — \(Formatting.escaped(reason))" }
        return channel.state == .failed ? terminal.styled(text, .red) : text
    }

    /// The JSON of `show`: the order, its history and its activities.
    struct Document: Encodable {
        var order: OrderSnapshot
        var activities: [ActivityInfo]
        var pendingCommands: Int
        var transitions: [TransitionRecord]
        var deliveries: [DeliveryRecord]
    }

    /// The JSON of `show --json`: times as ISO-8601 text, each transition's APNs payload as `aps`.
    struct ReadableDocument: Encodable {
        var order: OrderSnapshot
        var activities: [ActivityInfo]
        var pendingCommands: Int
        var transitions: [TransitionRecord.Readable]
        var deliveries: [DeliveryRecord]

        init(_ document: Document, workflow: Workflow) {
            order = document.order.readable(in: workflow)
            activities = document.activities
            pendingCommands = document.pendingCommands
            transitions = document.transitions.map { $0.readable(in: workflow) }
            deliveries = document.deliveries
        }
    }

    func run() async throws {
        let context = CommandContext.current()
        let (document, workflow) = try await context.withEngine { engine in
            let details = try await engine.order(orderID)
            let history = try await engine.history(orderID)
            let document = Document(order: history.order, activities: details.activities, pendingCommands: details.pendingCommands,
                                    transitions: history.transitions, deliveries: history.deliveries)
            return (document, output.json ? try await engine.workflow(of: history.order) : nil)
        }
        if let workflow {
            try context.terminal.writeJSON(ReadableDocument(document, workflow: workflow))
            return
        }
        for line in Self.lines(document, context.terminal) { context.terminal.write(line) }
    }

    static func lines(_ document: Document, _ terminal: Terminal, now: Date = Date()) -> [String] {
        let order = document.order
        var lines: [String] = []
        // Stored values are escaped (`Formatting.escaped`) before they are styled or padded:
        // what the database holds is shown as text, never acted on by the terminal.
        lines.append("\(terminal.styled("order \(Formatting.escaped(order.orderID))", .bold))  \(Formatting.escaped(order.workflow)) v\(order.workflowVersion)  "
            + "\(StateStyle.styled(order.state, isFinal: order.isFinal, terminal)) for \(Formatting.age(since: order.stateEnteredAt, now: now))"
            + (order.isFinal ? " (final)" : ""))
        if case .object(let attributes) = order.attributes, !attributes.isEmpty {
            let text = attributes.keys.sorted().map { "\(Formatting.escaped($0))=\(Formatting.escaped(plain(attributes[$0]!)))" }
                .joined(separator: ", ")
            lines.append(terminal.styled("attributes: \(text)", .dim))
        }
        if let channel = order.channel { lines.append(channelLine(channel, terminal)) }
        lines.append("")
        let deliveriesBySeq = Dictionary(grouping: document.deliveries, by: \.seq)
        var timeline = TextTable(header: ["TIME", "TRANSITION", "EVENT", "ACTOR"])
        var pushLines: [Int: [String]] = [:]
        for (index, transition) in document.transitions.enumerated() {
            let from = transition.from.map(Formatting.escaped) ?? "●"
            let to = StateStyle.styled(transition.to, isFinal: transition.rendered.isEnd, terminal)
            timeline.append([
                Formatting.localTime(transition.occurredAt), "\(from) → \(to)",
                transition.event.map(Formatting.escaped) ?? (transition.from == nil ? "created" : "-"),
                transition.actor.map(Formatting.escaped) ?? "-",
            ])
            var pushes: [String] = []
            if let alert = transition.rendered.alert {
                pushes.append(terminal.styled("alert: \(AlertText.title(alert))", .dim))
            }
            for delivery in deliveriesBySeq[transition.seq] ?? [] {
                pushes.append(deliveryLine(delivery, terminal))
            }
            pushLines[index] = pushes
        }
        let rendered = timeline.render(terminal)
        lines.append(rendered[0])
        for (index, line) in rendered.dropFirst().enumerated() {
            lines.append(line)
            for push in pushLines[index] ?? [] { lines.append("    ↳ " + push) }
        }
        if document.transitions.isEmpty { lines.append("  (no transitions)") }
        lines.append("")
        if document.activities.isEmpty {
            lines.append("no device follows this order; add one with `orderflow follow \(Formatting.commandWord(order.orderID)) DEVICE`")
        } else {
            var devices = TextTable(header: ["DEVICE", "ACTIVITY", "TOKEN", "LAST SENT", "PUSHED", "THE PHONE SAYS"])
            for activity in document.activities {
                devices.append([
                    Formatting.escaped(activity.deviceID), StateStyle.activity(activity.status, terminal),
                    Formatting.tokenSuffix(activity.tokenSuffix),
                    activity.lastSeq > 0 ? "#\(activity.lastSeq)" : "-",
                    activity.lastPushedAt.map { Formatting.localTime($0) } ?? "-",
                    Self.phone(activity, terminal),
                ])
            }
            lines += devices.render(terminal)
        }
        if document.pendingCommands > 0 {
            lines.append(terminal.styled("\(Formatting.count(document.pendingCommands, "update")) waiting for a worker (`orderflow worker run`)", .yellow))
        }
        return lines
    }

    /// `alice-iphone  ios  update  p10  activity …cafef00d  sent 200` (+ reason, + merged count;
    /// for an ordinary alert notification, that it stood in for a Live Activity), and for an
    /// Android phone `anna-pixel  android  update  p10  fcm …9-qZXk3_  sent 200`.
    static func deliveryLine(_ delivery: DeliveryRecord, _ terminal: Terminal) -> String {
        var text = "\(Formatting.escaped(delivery.deviceID))  \(Formatting.escaped(delivery.platform))  "
            + "\(Formatting.escaped(delivery.event))  p\(delivery.priority)  "
            + "\(Formatting.escaped(delivery.tokenKind)) \(Formatting.tokenSuffix(delivery.tokenSuffix))  "
        text += DeliveriesCommand.outcome(delivery, terminal)
        if let title = delivery.alertTitle { text += "  \"\(Formatting.escaped(title))\"" }
        // What the customer got instead of a Live Activity, said in words for staff.
        if delivery.tokenKind == "device" { text += terminal.styled("  (a notification: the device shows no Live Activity)", .dim) }
        if delivery.merged > 1 { text += terminal.styled("  (\(delivery.merged) transitions merged)", .dim) }
        return text
    }

    static func plain(_ value: JSONValue) -> String {
        if case .string(let text) = value { return text }
        return value.jsonString
    }
}

/// `orderflow list`
struct ListOrders: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Show the board: orders grouped by state.",
        discussion: """
            Orders grouped by workflow and state (in the workflow's order), each with its age, \
            how long it has been in its state, and each device's activity status. Pages hold \
            --limit orders; the last line names the cursor for the next page.

            Example:
              orderflow list --workflow food-order --state ready
              orderflow list --json | jq '.orders[].order.orderID'
            """)

    @OptionGroup var filter: BoardFilter

    @Option(help: ArgumentHelp("Continue after this cursor (from the previous page).", valueName: "cursor"))
    var after: String?

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let context = CommandContext.current()
        let board = try await context.withEngine { engine in
            var board = try await Board.load(engine, query: OrderQuery(workflow: filter.workflow, state: filter.state, after: after, limit: filter.limit))
            if output.json {
                // Content dates as ISO-8601 text, read with each order's pinned workflow version.
                for index in board.page.orders.indices {
                    let order = board.page.orders[index].order
                    board.page.orders[index].order = order.readable(in: try await engine.workflow(of: order))
                }
            }
            return board
        }
        if output.json {
            try context.terminal.writeJSON(board.page)
            return
        }
        for line in board.lines(context.terminal, emptyText: "no orders\(filter.describe)") { context.terminal.write(line) }
        if let next = board.page.nextCursor {
            context.terminal.write(context.terminal.styled("more: orderflow list --after \(Formatting.commandWord(next))", .dim))
        }
    }
}

/// `orderflow watch`
struct WatchBoard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show the board and redraw it until Ctrl-C.",
        discussion: """
            The `list` board, refreshed every --interval (a duration like 2s, 1m, or seconds). \
            A lost database connection is shown on the board and retried. Ctrl-C (or SIGTERM) \
            stops it and exits 0.

            Example:
              orderflow watch --workflow food-order --interval 1s
            """)

    @OptionGroup var filter: BoardFilter

    @Option(help: ArgumentHelp("How often to redraw: 2s, 500ms, 1m.", valueName: "duration"))
    var interval: String = "2s"

    func validate() throws {
        guard Self.parseInterval(interval) != nil else {
            throw ValidationError("--interval `\(interval)` is not a duration; give e.g. 2s, 500ms or 1m")
        }
    }

    static func parseInterval(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("ms"), let milliseconds = Int(trimmed.dropLast(2)), milliseconds >= 100 {
            return .milliseconds(milliseconds)
        }
        if let seconds = Double(trimmed), seconds >= 0.1 { return .milliseconds(Int(seconds * 1000)) }
        return WorkflowDuration(parsing: trimmed).map { .seconds($0.seconds) }
    }

    func run() async throws {
        let context = CommandContext.current()
        let interval = Self.parseInterval(interval) ?? .seconds(2)
        let query = OrderQuery(workflow: filter.workflow, state: filter.state, limit: filter.limit)
        try await context.withEngine { engine in
            let watcher = BoardWatcher(engine: engine, query: query, interval: interval, context: context,
                                       emptyText: "no orders\(filter.describe)")
            let group = ServiceGroup(
                services: [watcher], gracefulShutdownSignals: [.sigint, .sigterm], logger: context.logger)
            try await group.run()
        }
    }
}

/// Redraws the board until graceful shutdown (Ctrl-C).
struct BoardWatcher: Service {
    let engine: OrderFlowEngine
    let query: OrderQuery
    let interval: Duration
    let context: CommandContext
    let emptyText: String

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await draw()
                do { try await Task.sleep(for: interval) } catch { return }
            }
        }
    }

    private func draw() async {
        let terminal = context.terminal
        var lines = [terminal.styled("orderflow watch — every \(interval) — \(Formatting.localTime(Date())) — Ctrl-C to stop", .dim), ""]
        do {
            let board = try await Board.load(engine, query: query)
            lines += board.lines(terminal, emptyText: emptyText)
            if board.page.nextCursor != nil {
                lines.append(terminal.styled("showing the first \(query.limit) orders; raise --limit to see more", .dim))
            }
        } catch {
            let report = FailureReport.make(error)
            lines += report.lines.map { terminal.styled($0, .red) } + [terminal.styled("retrying…", .dim)]
        }
        terminal.clearScreen()
        terminal.write(lines.joined(separator: "\n"))
        if !terminal.isInteractive { terminal.write() }
        fflush(nil)  // all streams: the board must show now, also when piped
    }
}

/// `--workflow`, `--state`, `--limit` for `list` and `watch`.
struct BoardFilter: ParsableArguments {
    @Option(help: ArgumentHelp("Only orders of this workflow.", valueName: "name"))
    var workflow: String?

    @Option(help: ArgumentHelp("Only orders in this state.", valueName: "state"))
    var state: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("At most this many orders (1–1000).", valueName: "n"))
    var limit: Int = 50

    func validate() throws {
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") }
    }

    /// ` of workflow food-order in state ready`, for "no orders…".
    var describe: String {
        (workflow.map { " of workflow \($0)" } ?? "") + (state.map { " in state \($0)" } ?? "")
    }
}

/// A page of orders grouped for display.
struct Board {
    var page: OrderPage
    /// State names per workflow, in the workflow's order (from its newest version).
    var stateOrder: [String: [String]]

    static func load(_ engine: OrderFlowEngine, query: OrderQuery) async throws -> Board {
        let page = try await engine.orders(query)
        var stateOrder: [String: [String]] = [:]
        for name in Set(page.orders.map(\.order.workflow)) {
            stateOrder[name] = try? await engine.storedWorkflow(name: name, version: nil).workflow.states.map(\.name)
        }
        return Board(page: page, stateOrder: stateOrder)
    }

    func lines(_ terminal: Terminal, emptyText: String, now: Date = Date()) -> [String] {
        guard !page.orders.isEmpty else { return [emptyText] }
        var lines: [String] = []
        let byWorkflow = Dictionary(grouping: page.orders, by: \.order.workflow)
        for workflow in byWorkflow.keys.sorted() {
            let orders = byWorkflow[workflow]!
            let order = stateOrder[workflow] ?? []
            let byState = Dictionary(grouping: orders, by: \.order.state)
            let states = byState.keys.sorted { (order.firstIndex(of: $0) ?? Int.max, $0) < (order.firstIndex(of: $1) ?? Int.max, $1) }
            lines.append(terminal.styled(Formatting.escaped(workflow), .bold) + terminal.styled("  \(Formatting.count(orders.count, "order"))", .dim))
            var table = TextTable(header: ["STATE", "ORDER", "AGE", "IN STATE", "ACTIVITY"], rightAligned: [2, 3])
            for state in states {
                let group = byState[state]!.sorted { $0.order.stateEnteredAt < $1.order.stateEnteredAt }
                for (index, summary) in group.enumerated() {
                    let stateCell = index == 0
                        ? StateStyle.styled(state, isFinal: summary.order.isFinal, terminal) + " (\(group.count))" : ""
                    table.append([
                        stateCell, Formatting.escaped(summary.order.orderID), Formatting.age(since: summary.order.createdAt, now: now),
                        Formatting.age(since: summary.order.stateEnteredAt, now: now), activity(summary.activityStatuses, terminal),
                    ])
                }
            }
            lines += table.render(terminal, indent: "  ")
            lines.append("")
        }
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    /// `active`, `active ×2, waiting`, or `no device`.
    func activity(_ statuses: [String], _ terminal: Terminal) -> String {
        guard !statuses.isEmpty else { return terminal.styled("no device", .dim) }
        var counts: [(String, Int)] = []
        for status in statuses {
            if let index = counts.firstIndex(where: { $0.0 == status }) { counts[index].1 += 1 } else { counts.append((status, 1)) }
        }
        return counts.map { StateStyle.activity($0.0, terminal) + ($0.1 > 1 ? " ×\($0.1)" : "") }.joined(separator: ", ")
    }
}
