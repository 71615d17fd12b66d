import APNS
import LocalAPNS
import Foundation

/// What reached the APNs stand-in in a fault scenario, judged against what had to.
///
/// Every device token of the scenario must have received its activity's final state (an `end`
/// whose content is the final one): one that did not is *lost*. A push that repeats one already
/// accepted for the same token (same event and `aps.timestamp`) is *duplicated*: allowed after a
/// crash, and harmless, because the device ignores an update whose timestamp is not newer.
public struct DeliveryAudit: Sendable, CustomStringConvertible {
    public var scenario: String
    /// The load held, in words ("40 orders, 440 transitions over 3.1 s").
    public var load: String
    /// The faults injected, in words.
    public var faults: String
    /// Final states that had to arrive (one per device token).
    public var expected: Int
    /// Final states that arrived.
    public var delivered: Int
    /// Pushes that repeated one already accepted.
    public var duplicated: Int
    /// Pushes accepted in all.
    public var accepted: Int
    /// Tokens (shortened) whose final state never arrived.
    public var lostTokens: [String]
    /// Anything else worth a figure ("retries per activity ≤ 7", "dead letters 0").
    public var notes: [String]

    public var lost: Int { lostTokens.count }

    /// Audits `pushes` for `tokens`, where `isFinal` recognises the final state's push.
    public init(
        scenario: String, load: String, faults: String, tokens: [String], pushes: [LocalAPNSPush],
        notes: [String] = [], isFinal: (LocalAPNSPush) -> Bool
    ) {
        self.scenario = scenario
        self.load = load
        self.faults = faults
        self.notes = notes
        let byToken = Dictionary(grouping: pushes, by: \.deviceToken)
        var delivered = 0
        var duplicated = 0
        var lost: [String] = []
        for token in tokens {
            let received = byToken[token] ?? []
            var seen = Set<String>()
            for push in received {
                let key = "\(push.aps?["event"]?.stringValue ?? "alert")/\(push.aps?["timestamp"]?.integerValue ?? 0)"
                if !seen.insert(key).inserted { duplicated += 1 }
            }
            if received.contains(where: isFinal) { delivered += 1 } else { lost.append(APNSTokenRedaction.redacted(token)) }
        }
        self.expected = tokens.count
        self.delivered = delivered
        self.duplicated = duplicated
        self.accepted = pushes.count
        self.lostTokens = lost
    }

    /// A duration as the report writes it: "3.1 s".
    public static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return String(format: "%.1f s", seconds)
    }

    /// One line for the test log and RELIABILITY.md.
    public var description: String {
        var parts = [
            "reliability: \(scenario)", "load: \(load)", "faults: \(faults)",
            "final states expected \(expected), delivered \(delivered), duplicated \(duplicated), lost \(lost)",
            "pushes accepted \(accepted)",
        ]
        parts += notes
        if !lostTokens.isEmpty { parts.append("lost tokens: " + lostTokens.prefix(5).joined(separator: ", ")) }
        return parts.joined(separator: " | ")
    }

    /// Prints the line and, when `ORDERFLOW_RELIABILITY_LOG` names a file, appends it there
    /// (`scripts/test` collects the lines into its summary).
    public func report() {
        Self.report(line: description)
    }

    /// Prints a `reliability:` line of a scenario that is not about deliveries, and collects it
    /// as `report()` does.
    public static func report(line description: String) {
        print(description)
        guard let path = ProcessInfo.processInfo.environment["ORDERFLOW_RELIABILITY_LOG"], !path.isEmpty else { return }
        let line = Data((description + "\n").utf8)
        if let handle = FileHandle(forWritingAtPath: path) {
            defer { try? handle.close() }
            _ = try? handle.seekToEnd()
            try? handle.write(contentsOf: line)
        } else {
            _ = FileManager.default.createFile(atPath: path, contents: line)
        }
    }
}
