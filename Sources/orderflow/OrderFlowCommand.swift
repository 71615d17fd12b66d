import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import Logging
import OrderFlow
import WorkflowKit

/// `orderflow`: drive Live Activities for orders from the command line.
@main
struct OrderFlowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "orderflow",
        abstract: "Drive iPhone Live Activities for food orders and rides from workflows in PostgreSQL.",
        discussion: """
            Define an order's life in a workflow file, create orders, move them along, \
            and see what each device's Live Activity was sent.

            Example (the embedded database starts and migrates itself):
              orderflow workflow apply workflows/food-order.yaml
              orderflow order create 1042 --workflow food-order \\
                --attr merchantName="Luigi's" --attr orderNumber=1042 --attr itemCount=3
              orderflow advance 1042 accept --eta 20m
              orderflow show 1042

            DATABASE
            ORDERFLOW_DATABASE_URL, else DATABASE_URL, names the PostgreSQL to use \
            (postgresql://user:password@host:port/database); run `orderflow migrate` \
            once. Without either, orderflow keeps a private PostgreSQL, one per user: in \
            $ORDERFLOW_HOME when set, else the nearest .orderflow/ folder here or above, \
            else ~/.local/share/orderflow; started and migrated on first use \
            (`orderflow db status` says which, `orderflow db url` gives its URL). ORDERFLOW_MERCHANT selects the merchant (default \
            "default"); ORDERFLOW_LOG_LEVEL sets the log level (default warning).

            LOGS
            On stderr, as text for people; --log-format json (any command), or \
            ORDERFLOW_LOG_FORMAT=json, writes one JSON object per line instead (timestamp, \
            level, logger, message, source and the record's fields), for log shippers.

            OUTPUT
            Text for people: local times, aligned columns, colours on a terminal \
            (NO_COLOR turns them off). Reading commands take --json for scripts, with \
            ISO-8601 times. Push tokens are never shown whole.

            SHELL COMPLETION
              orderflow --generate-completion-script bash > ~/.orderflow-completion.bash
              orderflow --generate-completion-script zsh > ~/.zfunc/_orderflow
              orderflow --generate-completion-script fish \\
                > ~/.config/fish/completions/orderflow.fish

            EXIT CODES
            \(ExitStatus.helpTable)
            """,
        version: OrderFlowVersion.current,
        subcommands: coreCommands + pluggedInCommands
    )

    /// The commands defined in this folder's core files.
    static let coreCommands: [any ParsableCommand.Type] = [
        Migrate.self,
        DatabaseCommand.self,
        WorkflowCommand.self,
        OrderCommand.self,
        Advance.self,
        Cancel.self,
        ShowOrder.self,
        ListOrders.self,
        WatchBoard.self,
        TokenCommand.self,
        Follow.self,
        Unfollow.self,
        DeliveriesCommand.self,
        MerchantCommand.self,
        APIKeyCommand.self,
        MasterKeyCommand.self,
        ServeCommand.self,
    ]

    /// Runs the command and turns every failure into one `orderflow: …` line and an exit code
    /// (see `ExitStatus`); help, version and completion requests print as usual.
    static func main() async {
        do {
            let arguments = try CommandContext.bootstrapLogging(arguments: Array(CommandLine.arguments.dropFirst()))
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ExitCode {
            // Thrown by commands that already printed what went wrong (`workflow validate`).
            Foundation.exit(error.rawValue)
        } catch {
            Foundation.exit(report(error).rawValue)
        }
    }

    /// Prints `error` and returns the exit status.
    static func report(_ error: any Error) -> ExitStatus {
        switch error {
        case is CLIError:
            return FailureReport.print(error)
        default:
            break
        }
        let parserCode = exitCode(for: error)
        if parserCode == .success {
            // --help, --version, --generate-completion-script: the parser's own text on stdout.
            print(fullMessage(for: error))
            return .success
        }
        if parserCode == .validationFailure {
            // A usage error: one line, naming where to read more.
            let message = Self.message(for: error).trimmingCharacters(in: .whitespacesAndNewlines)
            let help = helpHint(in: fullMessage(for: error, columns: 1_000))
            var text = message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message
            if let first = text.first { text = first.lowercased() + text.dropFirst() }
            // It quotes arguments as given: shown as text, never acted on by the terminal (on one
            // line: its messages may span several).
            text = Formatting.escaped(text.replacingOccurrences(of: "\n", with: " "))
            // The parser quotes stray arguments: a push token given in the wrong place would be
            // printed whole.
            text = Formatting.maskingTokens(in: text)
            if let suggestion = subcommandSuggestion(for: message, help: help) { text += ". Did you mean '\(suggestion)'?" }
            Terminal.writeError("orderflow: \(text.replacingOccurrences(of: "\n", with: " ")); \(help)", level: .error)
            return .usage
        }
        return FailureReport.print(error)
    }

    /// For `orderflow lisst` (an unexpected argument where a command has subcommands), the
    /// subcommand it was likely meant as: the parser suggests near misses for options only.
    private static func subcommandSuggestion(for message: String, help: String) -> String? {
        // "unexpected argument 'lisst'", or "2 unexpected arguments: 'aply', 'x'": the first.
        guard let phrase = message.range(of: "nexpected argument"),
              let open = message[phrase.upperBound...].firstIndex(of: "'"),
              let end = message[message.index(after: open)...].firstIndex(of: "'")
        else { return nil }
        let argument = String(message[message.index(after: open)..<end])
        // The command the parser stopped at, from "see `orderflow deliveries --help`".
        let path = help.split(separator: " ").map(String.init).filter { !$0.hasPrefix("`") && !$0.hasPrefix("-") && $0 != "see" }
        var command: any ParsableCommand.Type = OrderFlowCommand.self
        for name in path {
            guard let next = command.configuration.subcommands.first(where: { $0._commandName == name }) else { return nil }
            command = next
        }
        let names = command.configuration.subcommands.map { $0._commandName }
        guard !names.isEmpty else { return nil }
        return closestMatch(to: argument, in: names)
    }

    /// "see `orderflow advance --help`", taken from the parser's full message.
    private static func helpHint(in fullMessage: String) -> String {
        if let start = fullMessage.range(of: "See '"), let end = fullMessage[start.upperBound...].firstIndex(of: "'") {
            return "see `\(fullMessage[start.upperBound..<end])`"
        }
        return "see `orderflow --help`"
    }
}
