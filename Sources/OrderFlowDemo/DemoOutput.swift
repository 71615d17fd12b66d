import ConsoleOutput
import Foundation

/// Progress lines while the demo runs, coloured on a terminal.
struct DemoOutput: Sendable {
    let terminal: Terminal

    func intro() {
        terminal.write(terminal.styled("OrderFlow demo: one Live Activity per order, updated in place", .bold))
        terminal.write("""
            A customer should see one Lock Screen card that follows the order, not a string of \
            separate notifications.
            This runs the whole path here: PostgreSQL → engine → worker → APNs and FCM (local \
            stand-ins; nothing goes to Apple or Google).
            """)
        terminal.write()
    }

    func done(_ text: String) {
        terminal.write(terminal.styled("✓ ", .green) + text)
    }

    func note(_ text: String) {
        terminal.write(terminal.styled("… ", .dim) + text)
    }

    func write(_ lines: [String]) {
        for line in lines { terminal.write(line) }
    }

    /// `1.2 s`.
    static func seconds(_ duration: Duration) -> String {
        let parts = duration.components
        let seconds = Double(parts.seconds) + Double(parts.attoseconds) / 1e18
        return String(format: "%.1f s", seconds)
    }
}
