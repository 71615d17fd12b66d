import Foundation

/// What the purge deletes, and how gently (``OrderFlowEngine/purge(_:onBatch:)``, the worker's
/// housekeeping).
///
/// Finished orders — in a final state of their workflow version — are deleted with every row
/// that hangs off them once their finish is older than their merchant's retention
/// (``OrderFlowEngine/setRetention(_:merchantID:)``), else ``defaultRetention``. An order still
/// being worked on (leased by a worker, or with activity commands waiting) is kept until that is
/// done. Dead letters (pushes that failed for good and were not retried) and commands waiting
/// for longer than ``deadLetterAge`` go too, and so do devices without a token for longer than
/// ``tokenlessDeviceAge`` that follow no order, with their credential; idempotency keys after
/// the day they answer for.
public struct RetentionPolicy: Sendable, Equatable {
    /// How long finished orders of a merchant without a retention of its own are kept. Default 30 days.
    public var defaultRetention: Duration = Self.thirtyDays
    /// How long dead letters, and commands never sent, are kept. Default 30 days.
    public var deadLetterAge: Duration = Self.thirtyDays
    /// How long a device without a token is kept. Default 30 days.
    public var tokenlessDeviceAge: Duration = Self.thirtyDays
    /// Orders (or dead letters, devices, keys) deleted per batch; each batch is one short
    /// transaction, so that its locks and its WAL stay small. Default 100.
    public var batchSize: Int = 100
    /// The pause between two batches, leaving the database to the hot path. Default 50 ms.
    public var pause: Duration = .milliseconds(50)
    /// Whose rows are purged. Default every merchant's.
    public var merchants: MerchantScope = .all

    public init() {}

    public static let thirtyDays: Duration = .seconds(30 * 86_400)
    /// The shortest retention or age accepted: a purge cannot race the order it just finished.
    public static let shortest: Duration = .seconds(60)
    /// The longest accepted (the database's dates end long after, but not much after that).
    public static let longest: Duration = .seconds(100 * 366 * 86_400)

    /// Checks the ages and the batch.
    /// - Throws: `OrderFlowError.invalidInput`, saying which value is wrong.
    public func validate() throws {
        try Self.validate(defaultRetention, what: "the default retention")
        try Self.validate(deadLetterAge, what: "the dead letters' age")
        try Self.validate(tokenlessDeviceAge, what: "the age of devices without a token")
        guard (1...10_000).contains(batchSize) else {
            throw OrderFlowError(.invalidInput, "a purge batch of \(batchSize) rows cannot be used: give 1 to 10000")
        }
        guard pause >= .zero else { throw OrderFlowError(.invalidInput, "the pause between purge batches cannot be negative") }
    }

    /// Checks one retention or age: between ``shortest`` and ``longest``.
    public static func validate(_ age: Duration, what: String) throws {
        guard age >= shortest, age <= longest else {
            throw OrderFlowError(.invalidInput,
                "\(what) must be between 1 minute and 100 years, not \(RetentionText.describe(age))")
        }
    }
}

/// Rows a purge deleted (or, for a dry run, would delete), by kind.
public struct PurgedRows: Sendable, Equatable, Codable {
    public enum Kind: String, CaseIterable, Sendable, Codable {
        case orders
        case transitions
        case deliveries
        case activities
        case followers
        case channels
        case commands
        /// Dead letters of orders that are kept.
        case deadLetters = "dead_letters"
        /// Activity commands never sent in time (``RetentionPolicy/deadLetterAge``).
        case staleCommands = "stale_commands"
        case devices
        case pushToStartTokens = "push_to_start_tokens"
        case requestKeys = "request_keys"
    }

    /// Rows by kind; kinds with none may be absent.
    public var rows: [Kind: Int] = [:]
    /// The batches run (0 for a dry run).
    public var batches: Int = 0

    public init(rows: [Kind: Int] = [:], batches: Int = 0) {
        self.rows = rows
        self.batches = batches
    }

    public subscript(kind: Kind) -> Int { rows[kind] ?? 0 }

    /// Every row, whatever its kind.
    public var total: Int { rows.values.reduce(0, +) }

    mutating func add(_ counts: [Kind: Int]) {
        for (kind, count) in counts { rows[kind, default: 0] += count }
    }
}

/// A merchant's retention of finished orders.
public struct MerchantRetention: Sendable, Equatable {
    public var merchantID: String
    /// Its own; nil when it keeps the purge's default.
    public var own: Duration?
}

/// Durations as people write and read them: `90s`, `15m`, `12h`, `30d`, and combinations
/// such as `1d12h`.
public enum RetentionText {
    /// The duration `text` names; nil for anything else (no unit, an unknown unit, zero).
    public static func parse(_ text: String) -> Duration? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        var seconds: Int64 = 0
        var digits = ""
        var sawPart = false
        for character in text.trimmingCharacters(in: .whitespaces).lowercased() {
            if character.isASCII, character.isNumber {
                digits.append(character)
            } else if let unit = units[character], !digits.isEmpty, digits.count <= 12, let value = Int64(digits) {
                let (product, overflow) = value.multipliedReportingOverflow(by: unit)
                guard !overflow else { return nil }
                seconds += product
                digits = ""
                sawPart = true
            } else {
                return nil
            }
        }
        guard sawPart, digits.isEmpty, seconds > 0 else { return nil }
        return .seconds(seconds)
    }

    /// `30d`, `1d12h`, `2m`, `45s`: the largest units first, nothing left out.
    public static func describe(_ duration: Duration) -> String {
        var rest = duration.components.seconds
        if rest <= 0 { return "\(rest)s" }
        var text = ""
        for (unit, size) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60), ("s", 1)] where rest >= size {
            text += "\(rest / size)\(unit)"
            rest %= size
        }
        return text
    }
}
