import ConsoleOutput
import Foundation
import LocalAPNS
import OrderFlow
import WorkflowKit

/// The timelines and the summary, built after the worker drained.
struct DemoReport: Sendable {
    struct Order: Sendable {
        var label: String
        var story: String
        var history: OrderHistory
        var activities: [ActivityInfo]
    }

    var orders: [Order]
    var pushes: [LocalAPNSPush]
    var holders: [String: TokenHolder]
    var merchantID: String
    var elapsed: Duration
    var broadcast: Broadcast? = nil
    var android: Android? = nil

    /// The race: one channel, one request per update, APNs' fan-out.
    struct Broadcast: Sendable {
        var label: String
        var story: String
        var channel: BroadcastChannelInfo?
        /// Transitions after the creation.
        var updates: Int
        /// Broadcast requests the stand-in accepted, and the deliveries they fanned out to.
        var requests: Int
        var deliveries: Int
        var fans: Int
        /// Push-to-starts that joined fans to the channel.
        var starts: Int

        func lines(_ terminal: Terminal) -> [String] {
            var lines = [terminal.styled("\(label)  \(story)", .bold)]
            let id = channel?.id.map { Formatting.maskedToken($0) } ?? "(none)"
            lines.append("  channel \(id), \(channel?.state.rawValue ?? "missing"); \(starts) push-to-starts joined \(fans) fans to it (input-push-channel)")
            lines.append("  \(Formatting.count(updates, "update")) → \(Formatting.count(requests, "broadcast request")) → \(Formatting.count(deliveries, "delivery", "deliveries")) (the stand-in's fan-out); per device it would take \(updates * fans) requests")
            if channel?.state == .ended {
                lines.append(terminal.styled("  the channel keeps the final result for late joiners, then the worker deletes it", .dim))
            }
            return lines
        }

        var problem: String? {
            if requests == 0 { return "the race was not broadcast (no broadcast request reached the stand-in)" }
            if deliveries < requests * fans { return "the race's broadcasts reached \(deliveries) phones, not \(requests * fans)" }
            return nil
        }
    }

    private var deliveriesByID: [UUID: DeliveryRecord] {
        var byID: [UUID: DeliveryRecord] = [:]
        for order in orders {
            for delivery in order.history.deliveries {
                if let id = delivery.apnsID { byID[id] = delivery }
            }
        }
        return byID
    }

    /// Pushes that failed for good (a retry that later succeeded is not a failure).
    private var failedDeliveries: [DeliveryRecord] {
        orders.flatMap(\.history.deliveries).filter(\.outcome.isFailure)
    }

    /// Why the run did not go as it should, if it did not.
    var problem: String? {
        let failed = failedDeliveries
        if !failed.isEmpty {
            let reasons = Set(failed.map { Formatting.escaped($0.reason ?? $0.outcome.rawValue) }).sorted().joined(separator: ", ")
            return "\(Formatting.count(failed.count, "push", "pushes")) did not go through (\(reasons)); see the timelines above"
        }
        if pushes.isEmpty { return "the local APNs stand-in received no pushes" }
        return broadcast?.problem ?? android?.problem
    }

    func lines(_ terminal: Terminal) -> [String] {
        var lines: [String] = [""]
        let byID = deliveriesByID
        for order in orders {
            lines += orderLines(order, terminal: terminal, deliveries: byID)
            if let android, android.orderLabel == order.label { lines += android.lines(terminal) }
            lines.append("")
        }
        if let broadcast {
            lines += broadcast.lines(terminal)
            lines.append("")
        }
        lines += summary(terminal)
        return lines
    }

    private func orderLines(_ order: Order, terminal: Terminal, deliveries byID: [UUID: DeliveryRecord]) -> [String] {
        let snapshot = order.history.order
        var lines: [String] = []
        // Values read back from the database and the APNs stand-in are escaped before they are
        // styled or padded: shown as text, never acted on by the terminal.
        let title = "Order \(order.label) · \(Formatting.escaped(snapshot.orderID))"
        lines.append(terminal.styled(title, .bold)
            + terminal.styled(" · \(Formatting.escaped(snapshot.workflow)) · \(attributesLine(snapshot.attributes))", .dim))
        lines.append("  " + order.story)
        for activity in order.activities {
            if let android, activity.deviceID == android.device {
                lines.append(android.deviceLine(terminal))
                continue
            }
            let tokens = holders.filter { $0.value.device == activity.deviceID }
                .sorted { $0.value.kind > $1.value.kind }
                .map { "\($0.value.kind) token \(Formatting.maskedToken($0.key))" }
            let how = activity.status == "alerts" ? "no Live Activity, ordinary alerts" : "Live Activity \(Formatting.escaped(activity.status))"
            lines.append(terminal.styled("  \(Formatting.escaped(activity.deviceID)): \(how) (\(tokens.joined(separator: ", ")))", .dim))
        }

        // The pushes of this order, under the transition each one carries (its newest).
        var bySeq: [Int: [(LocalAPNSPush, DeliveryRecord)]] = [:]
        for push in pushes {
            guard let delivery = byID[push.apnsID], delivery.orderID == snapshot.orderID else { continue }
            bySeq[delivery.seq, default: []].append((push, delivery))
        }
        let orderPushes = bySeq.values.flatMap { $0 }.sorted { $0.0.receivedAt < $1.0.receivedAt }
        let rows = orderPushes.map { pushCells($0.0, $0.1, terminal: terminal) }
        let widths = (0..<5).map { column in rows.map { visibleWidth($0[column]) }.max() ?? 0 }

        for transition in order.history.transitions {
            let to = Formatting.escaped(transition.to)
            let change = transition.from.map { "\(Formatting.escaped($0)) → \(to)" } ?? "created in \(to)"
            var line = "  " + terminal.styled(Self.clockTime(transition.occurredAt), .dim) + "  " + terminal.styled(change, .bold)
            if let event = transition.event { line += "  " + terminal.styled(Formatting.escaped(event), .dim) }
            lines.append(line)
            let carried = (bySeq[transition.seq] ?? []).sorted { $0.0.receivedAt < $1.0.receivedAt }
            for (push, delivery) in carried {
                let cells = pushCells(push, delivery, terminal: terminal)
                var text = "      → " + zip(cells, widths).map { pad($0, $1) }.joined(separator: "  ")
                while text.hasSuffix(" ") { text.removeLast() }
                if delivery.merged > 1 && push.pushType == "liveactivity" {
                    text += "  " + terminal.styled("◀ \(delivery.merged) transitions in 1 update", .yellow, .bold)
                }
                lines.append(text)
            }
            if carried.isEmpty, let later = orderPushes.first(where: { covers($0.1, transition.seq) && $0.1.seq > transition.seq }) {
                let event = Formatting.escaped(later.0.aps?["event"]?.stringValue ?? "push")
                lines.append(terminal.styled("      ⋯ merged into the \(event) at \(Self.clockTime(later.0.receivedAt))", .dim))
            }
        }
        return lines
    }

    /// Whether a Live Activity push folded the transition `seq` in.
    private func covers(_ delivery: DeliveryRecord, _ seq: Int) -> Bool {
        delivery.event != "alert" && delivery.merged > 1 && delivery.seq - delivery.merged < seq
    }

    /// event, device and token, priority, alert title, what the card shows (+ aps timestamp).
    private func pushCells(_ push: LocalAPNSPush, _ delivery: DeliveryRecord, terminal: Terminal) -> [String] {
        let aps = push.aps
        let event = Formatting.escaped(push.pushType == "liveactivity" ? (aps?["event"]?.stringValue ?? "?") : "alert")
        let style: Terminal.Style = switch event {
        case "start": .green
        case "end": .magenta
        case "alert": .yellow
        default: .cyan
        }
        let who = Formatting.escaped((holders[push.deviceToken]?.device ?? "?") + " " + Formatting.maskedToken(push.deviceToken))
        let alert = aps?["alert"]?["title"]?.stringValue.map { "“\(Formatting.escaped($0))”" } ?? terminal.styled("no alert", .dim)
        var shows = push.pushType == "liveactivity" ? Self.contentSummary(aps?["content-state"]) : "ordinary notification"
        if let timestamp = aps?["timestamp"]?.integerValue {
            shows += terminal.styled("  ts \(timestamp)", .dim)
        }
        return [terminal.styled(event, style, .bold), who, "prio \(push.priority)", alert, shows]
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - visibleWidth(text)))
    }

    private func attributesLine(_ attributes: JSONValue) -> String {
        guard case .object(let members) = attributes else { return "" }
        let order = ["merchantName", "itemCount", "pickupAddress", "dropoffAddress"]
        return order.compactMap { key -> String? in
            guard let value = members[key] else { return nil }
            switch (key, value) {
            case ("itemCount", .int(let count)): return Formatting.count(count, "item")
            case ("pickupAddress", .string(let text)): return "from \(Formatting.escaped(text))"
            case ("dropoffAddress", .string(let text)): return "to \(Formatting.escaped(text))"
            case (_, .string(let text)): return Formatting.escaped(text)
            default: return nil
            }
        }.joined(separator: " · ")
    }

    /// `preparing · Sam · eta 14:28 · arriving 14:24–14:34`: the fields a glance at the Lock Screen shows.
    static func contentSummary(_ content: JSONValue?) -> String {
        guard let content else { return "-" }
        var parts: [String] = []
        for key in ["status", "phase"] { if let value = content[key]?.stringValue { parts.append(value) } }
        if let driver = content["driverName"]?.stringValue { parts.append(driver) }
        if let car = content["car"]?.stringValue { parts.append(car) }
        if let plate = content["plate"]?.stringValue { parts.append(plate) }
        if let eta = content["eta"]?.doubleValue {
            // Dates in the app's JSON count from 2001-01-01, as Swift's `Date` decodes them.
            parts.append("eta " + Self.hourMinute(Date(timeIntervalSinceReferenceDate: eta)))
        }
        if let window = content["deliveryWindow"]?.arrayValue, window.count == 2,
            let lower = window[0].doubleValue, let upper = window[1].doubleValue
        {
            // A `ClosedRange<Date>`: `[lower, upper]`, each counted from 2001-01-01 as above.
            parts.append("arriving " + Self.hourMinute(Date(timeIntervalSinceReferenceDate: lower)) + "–"
                + Self.hourMinute(Date(timeIntervalSinceReferenceDate: upper)))
        }
        return parts.isEmpty ? "-" : Formatting.escaped(parts.joined(separator: " · "))
    }

    private func summary(_ terminal: Terminal) -> [String] {
        let transitions = orders.reduce(0) { $0 + $1.history.transitions.count }
        let liveActivity = pushes.filter { $0.pushType == "liveactivity" }.count
        let alerts = pushes.count - liveActivity
        var line = "\(Formatting.count(transitions, "transition")) → \(Formatting.count(pushes.count, "push", "pushes"))"
        line += " (\(liveActivity) Live Activity, \(Formatting.count(alerts, "ordinary alert")))"
        let burst = orders.compactMap { order -> (String, Int)? in
            let merged = order.history.deliveries.filter { $0.event != "alert" }.map(\.merged).max() ?? 0
            return merged > 1 ? (order.label, merged) : nil
        }.max { $0.1 < $1.1 }
        if let (label, merged) = burst {
            line += ": order \(label)'s \(merged) quick steps arrived as 1 update"
        }
        var lines = [terminal.styled(line, .bold, .green)]
        let people = Set(pushes.filter { $0.pushType == "liveactivity" }.compactMap { holders[$0.deviceToken]?.device }).count
        lines.append("Each of the \(people) phones with a Live Activity kept one card that changed in place, from start to end:")
        lines.append("one continuous activity per order instead of a string of separate notifications.")
        if alerts > 0 {
            lines.append("Only the phone without a Live Activity got ordinary alerts, for the steps that carry one.")
        }
        if let android { lines.append(android.summary) }
        lines.append(terminal.styled(
            "(\(DemoOutput.seconds(elapsed)) in all. Look again: ORDERFLOW_MERCHANT=\(Formatting.commandWord(merchantID)) orderflow show \(Formatting.commandWord(orders[0].history.order.orderID)))",
            .dim))
        return lines
    }

    static func clockTime(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        formatter.dateFormat = "HH:mm:ss.SSS"
        return formatter.string(from: date)
    }

    static func hourMinute(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = .current
        formatter.dateFormat = "HH:mm"
        return formatter.string(from: date)
    }
}
