import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import OrderFlow
import OrderFlowHTTP

/// `orderflow board-link`
struct BoardLinkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "board-link",
        abstract: "Print a one-time sign-in link to a merchant's counter board.",
        discussion: """
            The counter board is the page `orderflow serve` serves at /board: orders in \
            columns by state, one-tap advances and a preview of each customer's Lock Screen. \
            The link opens a page whose button signs that browser in for 12 hours (a cookie); \
            the link works once and expires after 24 hours unused. `orderflow serve` prints one for the \
            default merchant when it starts.

            Example:
              orderflow board-link --merchant luigis --url http://127.0.0.1:8080
            """)

    @Option(help: ArgumentHelp("The merchant whose orders the board shows (default: ORDERFLOW_MERCHANT, else \"default\").", valueName: "id"))
    var merchant: String?

    @Option(help: ArgumentHelp("Where `orderflow serve` is reached (default http://127.0.0.1:8080).", valueName: "url"))
    var url: String = "http://127.0.0.1:8080"

    func validate() throws {
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host != nil,
              parsed.query == nil
        else {
            throw ValidationError("--url must be the server's address, like http://127.0.0.1:8080")
        }
    }

    func run() async throws {
        let context = CommandContext.current()
        let token = try await context.withEngine { engine in
            try await engine.createBoardSignInToken(merchantID: merchant ?? engine.configuration.merchantID)
        }
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        if !base.hasSuffix("/board") { base += "/board" }
        context.terminal.write(base + "?token=" + token.token)
        Terminal.writeError("orderflow: a sign-in link to merchant \(token.merchantID)'s board; it works once, within 24 hours")
    }
}
