import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import OrderFlow

/// `orderflow purge`
struct PurgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Delete finished orders, dead letters and devices without a token once they are old enough.",
        discussion: """
            Finished orders (in a final state of their workflow) are deleted with their \
            history, pushes, activities, followers and broadcast channel once they finished \
            longer ago than their merchant's retention (`orderflow merchant retention`), \
            else --older-than. Dead letters, commands never sent, and devices without a \
            token that follow no order go after --older-than too; idempotency keys after a \
            day. An order still being sent is kept until that is done.

            Every merchant's rows are purged. The work goes in small batches, each its own \
            short transaction, so orders, the feed and workers go on meanwhile; stopping it \
            at any point is safe, and running it again carries on. Workers purge on their \
            own every 10 minutes (`orderflow worker run --purge-interval`).

            Durations: a number and a unit, s, m, h or d (90s, 15m, 12h, 30d, 1d12h).

            Example:
              orderflow purge --dry-run
              orderflow purge --older-than 45d
            """)

    @Option(help: ArgumentHelp(
        "Keep finished orders of merchants without a retention of their own, dead letters and tokenless devices this long (default 30d).",
        valueName: "duration"))
    var olderThan: String = "30d"

    @Flag(help: "Count what would be deleted; change nothing.")
    var dryRun = false

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let context = CommandContext.current()
        let age = try DurationArgument.parse(olderThan, option: "--older-than")
        try RetentionPolicy.validate(age, what: "--older-than")
        var policy = RetentionPolicy()
        policy.defaultRetention = age
        policy.deadLetterAge = age
        policy.tokenlessDeviceAge = age
        let purged = try await context.withEngine { engine in
            dryRun ? try await engine.purgeable(policy) : try await engine.purge(policy)
        }
        if output.json {
            try context.terminal.writeJSON(purged)
            return
        }
        let terminal = context.terminal
        let verb = dryRun ? "would delete" : "deleted"
        guard purged.total > 0 else {
            terminal.write(dryRun ? "nothing to purge: no row is past its retention" : "nothing purged: no row is past its retention")
            return
        }
        var table = TextTable(header: ["ROWS", "KIND"], rightAligned: [0])
        for kind in PurgedRows.Kind.allCases where purged[kind] > 0 {
            table.append([String(purged[kind]), Self.words(kind)])
        }
        for line in table.render(terminal) { terminal.write(line) }
        terminal.write("\(verb) \(purged.total) rows, \(purged[.orders]) of them finished orders"
            + (dryRun ? "; run without --dry-run to delete them" : " (\(purged.batches) batches)"))
    }

    static func words(_ kind: PurgedRows.Kind) -> String {
        switch kind {
        case .orders: "finished orders"
        case .transitions: "their transitions"
        case .deliveries: "their push attempts"
        case .activities: "their activities"
        case .followers: "their followers"
        case .channels: "their broadcast channels"
        case .commands: "their activity commands"
        case .deadLetters: "dead letters of orders kept"
        case .staleCommands: "activity commands never sent"
        case .devices: "devices without a token"
        case .pushToStartTokens: "their dead push-to-start tokens"
        case .requestKeys: "idempotency keys older than a day"
        }
    }
}

/// `orderflow merchant retention`
struct MerchantRetentionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retention",
        abstract: "Show or set how long a merchant's finished orders are kept.",
        discussion: """
            Without a duration, shows the merchant's retention. With one (a number and a unit, \
            s, m, h or d: 90s, 15m, 12h, 45d; from 1 minute to 100 years) sets it; --default \
            gives the merchant the purge's default back (30 days, or `orderflow purge \
            --older-than`). The next purge applies it.

            Example:
              orderflow merchant retention luigis 45d
              orderflow merchant retention luigis
              orderflow merchant retention luigis --default
            """)

    @Argument(help: ArgumentHelp("The merchant's id.", valueName: "id"))
    var id: String

    @Argument(help: ArgumentHelp("The new retention, such as 45d.", valueName: "duration"))
    var duration: String?

    @Flag(name: .customLong("default"), help: "Keep the merchant's finished orders as long as the purge's default.")
    var useDefault = false

    func validate() throws {
        if useDefault, duration != nil { throw ValidationError("give either a duration or --default, not both") }
    }

    func run() async throws {
        let context = CommandContext.current()
        let terminal = context.terminal
        if duration != nil || useDefault {
            let retention = try duration.map { try DurationArgument.parse($0, option: "the retention") }
            if let retention { try RetentionPolicy.validate(retention, what: "the retention") }
            try await context.withEngine { engine in try await engine.setRetention(retention, merchantID: id) }
            terminal.write(Self.sentence(id, retention))
            return
        }
        let retention = try await context.withEngine { engine in try await engine.retention(merchantID: id) }
        terminal.write(Self.sentence(id, retention.own))
    }

    static func sentence(_ merchantID: String, _ own: Duration?) -> String {
        own.map { "merchant \(merchantID) keeps its finished orders for \(RetentionText.describe($0))" }
            ?? "merchant \(merchantID) keeps its finished orders as long as the purge's default (30d unless `orderflow purge --older-than`)"
    }
}

/// A duration given on the command line: `90s`, `15m`, `12h`, `30d`.
enum DurationArgument {
    static func parse(_ text: String, option: String) throws -> Duration {
        guard let duration = RetentionText.parse(text) else {
            throw CLIError(.usage, "\(option): `\(Formatting.escaped(text))` is not a duration",
                           remedy: "write a number and a unit, s, m, h or d, like 30d, 12h, 15m or 90s")
        }
        return duration
    }
}
