import ConsoleOutput
import Foundation
import OrderFlow

extension DemoReport {
    /// The Android phone following an order: the FCM data messages the stand-in accepted for
    /// it, each of which the app turns into the same notification, replaced in place.
    struct Android: Sendable {
        /// What the FCM stand-in recorded of one data message.
        struct Message: Sendable {
            var receivedAt: Date
            /// `message.data`: the strings the app builds its notification from.
            var data: [String: String]
            /// `message.android.priority`, when sent.
            var priority: String?
        }

        var device: String
        var token: String
        /// The order it follows (its label in the report).
        var orderLabel: String
        /// In arrival order.
        var messages: [Message]
        /// Requests to its token the stand-in refused.
        var refused: Int

        private var ends: Int { messages.filter { $0.data["event"] == "end" }.count }

        /// The phone among the order's followers, as the iPhones are listed.
        func deviceLine(_ terminal: Terminal) -> String {
            terminal.styled("  \(Formatting.escaped(device)): Android, one notification replaced in place (FCM token \(Formatting.maskedToken(token)))", .dim)
        }

        /// Under the order's timeline: one row per message, time, event, priority, what the
        /// notification shows.
        func lines(_ terminal: Terminal) -> [String] {
            var lines = [terminal.styled("  \(Formatting.escaped(device)), each FCM data message as the stand-in received it:", .dim)]
            let rows = messages.map { cells($0, terminal: terminal) }
            let widths = (0..<4).map { column in rows.map { visibleWidth($0[column]) }.max() ?? 0 }
            for row in rows {
                var text = "      → " + zip(row, widths).map { $0 + String(repeating: " ", count: max(0, $1 - visibleWidth($0))) }
                    .joined(separator: "  ")
                while text.hasSuffix(" ") { text.removeLast() }
                lines.append(text)
            }
            return lines
        }

        /// time, event, priority, `“title” · text · progress 2/4`: what the data message carried.
        private func cells(_ message: Message, terminal: Terminal) -> [String] {
            let data = message.data
            let event = Formatting.escaped(data["event"] ?? "?")
            let style: Terminal.Style = event == "end" ? .magenta : .cyan
            var shows: [String] = []
            if let title = data["title"] { shows.append("“\(Formatting.escaped(title))”") }
            if let text = data["text"] { shows.append(Formatting.escaped(text)) }
            if let progress = data["progress"] {
                let total = (data["segments"] ?? "").split(separator: ",")
                    .compactMap { Int($0.split(separator: ":").first ?? "") }.reduce(0, +)
                shows.append("progress \(Formatting.escaped(progress))" + (total > 0 ? "/\(total)" : ""))
            }
            return [terminal.styled(DemoReport.clockTime(message.receivedAt), .dim), terminal.styled(event, style, .bold),
                    Formatting.escaped(message.priority ?? "-"), shows.isEmpty ? "-" : shows.joined(separator: " · ")]
        }

        /// The summary's sentence.
        var summary: String {
            "\(Formatting.escaped(device)) kept one Android notification that changed in place: "
                + "\(Formatting.count(messages.count, "FCM data message")), the last one the end."
        }

        /// The demo's checks on the Android side: something arrived, it ended, nothing after the
        /// end, the stand-in refused nothing.
        var problem: String? {
            if refused > 0 { return "the local FCM stand-in refused \(Formatting.count(refused, "message")) to \(device)" }
            guard let last = messages.last else { return "the Android phone \(device) got no FCM message" }
            if last.data["event"] != "end" {
                if ends > 0 { return "\(device) got an FCM message after the end" }
                let event = Formatting.escaped(last.data["event"] ?? "?")
                return "\(device)'s last FCM message was \(event == "update" ? "an update" : "“\(event)”"), not the end"
            }
            if ends > 1 { return "\(device) got \(ends) end messages; one ends the notification" }
            return nil
        }
    }
}
