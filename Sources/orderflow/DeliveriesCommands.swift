import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import OrderFlow

/// `orderflow deliveries …`
struct DeliveriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliveries",
        abstract: "Inspect push attempts and retry dead letters.",
        discussion: """
            Every push a worker made is recorded with its APNs outcome: sent, retry (will be \
            tried again), dead (gave up: a dead letter), token_dead (the device's token is no \
            longer valid) or rejected (APNs refused the payload).

            Example:
              orderflow deliveries list --failed
              orderflow deliveries retry 42
            """,
        subcommands: [List.self, Retry.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List push attempts, newest first.",
            discussion: """
                --failed shows only dead letters that were not retried yet.

                Example:
                  orderflow deliveries list --failed --limit 20 --json
                """)

        @Flag(help: "Only dead letters not yet retried.")
        var failed = false

        @Option(parsing: .unconditional, help: ArgumentHelp("At most this many (1–10000).", valueName: "n"))
        var limit: Int = 50

        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be between 1 and 10000") }
        }

        func run() async throws {
            let context = CommandContext.current()
            let deliveries = try await context.withEngine { engine in try await engine.deliveries(failedOnly: failed, limit: limit) }
            if output.json {
                try context.terminal.writeJSON(deliveries)
                return
            }
            let terminal = context.terminal
            guard !deliveries.isEmpty else {
                terminal.write(failed ? "no failed deliveries" : "no deliveries yet")
                return
            }
            var table = TextTable(header: ["ID", "TIME", "ORDER", "DEVICE", "EVENT", "PRIO", "TOKEN", "OUTCOME", "ALERT"], rightAligned: [0])
            for delivery in deliveries {
                table.append([
                    // Stored values, escaped before they are padded (see `ShowOrder.lines`).
                    String(delivery.id), Formatting.localTime(delivery.attemptedAt), Formatting.escaped(delivery.orderID),
                    Formatting.escaped(delivery.deviceID), Formatting.escaped(delivery.event), String(delivery.priority),
                    "\(Formatting.escaped(delivery.tokenKind)) \(Formatting.tokenSuffix(delivery.tokenSuffix))",
                    DeliveriesCommand.outcome(delivery, terminal), Formatting.escaped(delivery.alertTitle ?? ""),
                ])
            }
            for line in table.render(terminal) { terminal.write(line) }
            if failed {
                terminal.write(terminal.styled("retry one with `orderflow deliveries retry ID`", .dim))
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a dead letter's order state to its device again.",
            discussion: """
                Re-queues the device's activity: a worker sends it the order's current state \
                (not the old payload, which may be out of date).

                Example:
                  orderflow deliveries retry 42
                """)

        /// The id as given. Collected as unrecognized words, so that `-1` arrives here as a
        /// value to refuse for what it is rather than as an unknown flag (options take negative
        /// values by `parsing: .unconditional`; a positional argument has no such strategy).
        @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The delivery's id (from `deliveries list --failed`).", valueName: "id"))
        var given: [String] = []

        var id: Int64 { given.first.flatMap { Int64($0) } ?? 0 }

        func validate() throws {
            guard let text = given.first else { throw ValidationError("Missing expected argument '<id>'") }
            guard given.count == 1 else { throw ValidationError("Unexpected argument '\(Formatting.escaped(given[1]))'") }
            guard let number = Int64(text) else {
                throw ValidationError("the delivery id `\(Formatting.escaped(text))` is not a whole number; give one from `orderflow deliveries list --failed`")
            }
            guard number >= 1 else {
                throw ValidationError("the delivery id must be 1 or more (ids count from 1, see `orderflow deliveries list --failed`); \(number) is not one")
            }
        }

        func run() async throws {
            let context = CommandContext.current()
            try await context.withEngine { engine in try await engine.retryDelivery(id: id) }
            context.terminal.write("delivery \(id) re-queued; a worker sends the order's current state to its device")
        }
    }

    /// `sent 200`, `dead 410 Unregistered`, … coloured by outcome.
    static func outcome(_ delivery: DeliveryRecord, _ terminal: Terminal) -> String {
        var text = delivery.outcome.rawValue
        if let status = delivery.status { text += " \(status)" }
        if let reason = delivery.reason, !reason.isEmpty { text += " \(Formatting.escaped(reason))" }
        switch delivery.outcome {
        case .sent: return terminal.styled(text, .green)
        case .retry: return terminal.styled(text, .yellow)
        case .dead, .tokenDead, .rejected: return terminal.styled(text, .red)
        }
    }
}
