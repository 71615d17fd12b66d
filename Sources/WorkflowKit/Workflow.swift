import Foundation

/// A validated workflow: the states an order goes through, the transitions between them, and what
/// the order's Live Activity shows on each. Made by `WorkflowLoader`, which rejects every invalid
/// definition, so a value of this type is always consistent.
public struct Workflow: Sendable, Hashable {
    public var name: String
    public var description: String
    /// The Swift type name of the app's `ActivityAttributes`.
    public var attributesType: String
    /// The struct types declared under `types:`, in file order (each uses only earlier ones).
    public var structTypes: [StructType]
    /// The static attributes given when an order is created.
    public var attributesSchema: [FieldSpec]
    /// The app's `ActivityAttributes.ContentState`.
    public var contentSchema: [FieldSpec]
    /// In the order of the file.
    public var states: [StateSpec]
    public var initialState: String
    public var finalStates: Set<String>
    /// One per (from, to) pair, in the order of the file (a transition with several `from` states
    /// or `from: any` is expanded in place).
    public var transitions: [TransitionSpec]
    public var lifecycle: LifecycleSpec
    public var timers: [TimerSpec]
    /// The Android Live Update's presentation and progress bar (`android:` sections and what is derived).
    public var android = AndroidSpec()
}

/// A state of the workflow with the defaults used by every transition into it.
public struct StateSpec: Sendable, Hashable {
    public var name: String
    public var description: String?
    public var isInitial: Bool
    public var isFinal: Bool
    /// Default values for ContentState fields (overridden by a transition's `content`).
    public var content: [String: ValueSpec]
    /// Default alert for transitions into this state.
    public var alert: AlertSpec?
    /// The update's `stale-date` is the transition time plus this.
    public var staleAfter: WorkflowDuration?
    public var relevanceScore: Double?
    /// Default push priority for transitions into this state.
    public var priority: Int?
    /// How the activity ends in this state (final states only).
    public var dismissal: Dismissal?
}

/// A transition from one state to another. Its content, alert, relevance and priority are the
/// effective ones: the target state's defaults with the transition's own values applied on top.
public struct TransitionSpec: Sendable, Hashable, CustomStringConvertible {
    public var from: String
    public var to: String
    /// A name callers may use instead of the target state (`pickup`, `driver_arrived`).
    public var event: String?
    /// The data a caller passes with this transition, e.g. `eta: date`.
    public var inputs: [FieldSpec]
    /// ContentState field → value, for every field the update sets (absent optional fields are null;
    /// a field that carries over and is set by neither the transition nor the state is
    /// `{{previous.field}}`).
    public var content: [String: ValueSpec]
    public var alert: AlertSpec?
    public var relevanceScore: Double?
    /// 5 or 10.
    public var priority: Int
    /// True when the transition enters a final state: the update is an APNs `end` event.
    public var endsActivity: Bool

    /// Stable identifier, `from->to`.
    public var id: String { "\(from)->\(to)" }

    public var description: String {
        if let event { return "\(from) -> \(to) (\(event))" }
        return "\(from) -> \(to)"
    }
}

/// A ContentState value or an alert text: a literal or a Mustache template.
public enum ValueSpec: Sendable, Hashable {
    /// A literal from the YAML file (a date literal is an ISO-8601 string or an offset like `+15m`).
    case literal(JSONValue)
    /// A template rendered over `attributes`, `input`, `previous` and `now`.
    case template(Template)
    /// An array field written as a YAML sequence.
    case list([ValueSpec])
}

/// A text in an alert: plain or localized by the app (`loc-key`, `loc-args`).
public enum TextSpec: Sendable, Hashable {
    case plain(Template)
    case localized(key: String, args: [Template])
}

public struct AlertSpec: Sendable, Hashable {
    public var title: TextSpec
    public var body: TextSpec
    public var sound: String?
}

public enum StartMode: String, Sendable, Hashable {
    /// The server starts the activity with a push-to-start when the order is created.
    case pushToStart = "push-to-start"
    /// The app starts the activity and registers its update token with the server.
    case app
}

/// What to do when an activity nears the 8-hour limit.
public enum TimeLimitPolicy: String, Sendable, Hashable {
    /// End the activity; the order goes on without one.
    case end
    /// End it and start a new one with push-to-start showing the current content.
    case restart
}

/// How an ended activity leaves the Lock Screen.
public enum Dismissal: Sendable, Hashable, CustomStringConvertible {
    /// The system default (kept up to 4 hours).
    case systemDefault
    /// Removed at once.
    case immediate
    /// Kept this long after the end (at most 4 hours).
    case after(WorkflowDuration)

    /// The APNs `dismissal-date` for an activity ended at `endedAt`; nil for the system default.
    public func dismissalDate(endedAt: Date) -> Date? {
        switch self {
        case .systemDefault: return nil
        // A date in the past removes the activity at once; the end time is in the past on arrival.
        case .immediate: return endedAt
        case .after(let duration): return endedAt.addingTimeInterval(TimeInterval(duration.seconds))
        }
    }

    public var description: String {
        switch self {
        case .systemDefault: return "default"
        case .immediate: return "immediate"
        case .after(let duration): return "after \(duration)"
        }
    }
}

public struct LifecycleSpec: Sendable, Hashable {
    public var start: StartMode
    /// Data given when the order is created, usable in the initial state's content and the start alert.
    public var startInputs: [FieldSpec]
    /// The alert of the push-to-start (required for `push-to-start`).
    public var startAlert: AlertSpec?
    public var onTimeLimit: TimeLimitPolicy
    /// Who an order's activity updates go to: each follower's device (the default), or every
    /// subscriber of one APNs broadcast channel per order (iOS 18).
    public var audience: Audience = .perDevice

    public init(start: StartMode, startInputs: [FieldSpec], startAlert: AlertSpec?, onTimeLimit: TimeLimitPolicy,
                audience: Audience = .perDevice)
    {
        self.start = start
        self.startInputs = startInputs
        self.startAlert = startAlert
        self.onTimeLimit = onTimeLimit
        self.audience = audience
    }
}

/// Who an order's updates go to (`lifecycle.audience`).
public enum Audience: Sendable, Hashable {
    /// One push per following device (`per-device`, the default): a customer's own order.
    case perDevice
    /// One broadcast per update to a channel that every follower subscribes to (`broadcast`):
    /// a shared event such as a race or a match. `storage` is the channel's
    /// `message-storage-policy`.
    case broadcast(storage: ChannelStorage)

    public var isBroadcast: Bool {
        if case .broadcast = self { return true }
        return false
    }
}

/// What APNs keeps of a broadcast channel's traffic for devices that join late
/// (`lifecycle.channel-storage`).
public enum ChannelStorage: String, Sendable, Hashable {
    /// `latest` (policy 1, the default): the most recent update, up to 8 hours.
    case latest
    /// `none` (policy 0): nothing; every broadcast is delivered once (`apns-expiration: 0`).
    case none
}

/// A durable timer: after `after` in `state`, do `action`.
public struct TimerSpec: Sendable, Hashable, CustomStringConvertible {
    public enum Action: Sendable, Hashable {
        /// Take the transition `state -> to`.
        case transition(to: String)
        /// Show the activity as stale from then on: every update into the state carries that
        /// moment as its `stale-date` (see ``Workflow/staleAfter(in:)``), so the phone itself
        /// marks the content outdated, whether or not a push can be sent then.
        case markStale
    }

    public var state: String
    public var after: WorkflowDuration
    public var action: Action

    /// Stable identifier, e.g. `ready+45m->cancelled` or `out_for_delivery+10m:stale`.
    public var id: String {
        switch action {
        case .transition(let to): return "\(state)+\(after)->\(to)"
        case .markStale: return "\(state)+\(after):stale"
        }
    }

    public var description: String {
        switch action {
        case .transition(let to): return "after \(after) in `\(state)`, go to `\(to)`"
        case .markStale: return "after \(after) in `\(state)`, mark stale"
        }
    }
}

/// A duration written like `45m`, `10s`, `2h`, `1h30m`, `1d`.
public struct WorkflowDuration: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var seconds: Int

    public init(seconds: Int) { self.seconds = seconds }

    /// Parses `1h30m`, `45m`, `10s`, `2h`, `1d`; nil for anything else (including zero).
    public init?(parsing text: String) {
        // Read as UTF-8 bytes: only ASCII digits and the units d, h, m, s can appear, so any
        // other byte (a part of a non-ASCII character too) makes the text invalid.
        let trimmed = text.trimmingWhitespace(newlines: false)
        guard !trimmed.isEmpty else { return nil }
        var total = 0
        var number: Int?
        var lastUnitRank = Int.max
        for byte in trimmed.utf8 {
            if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                let (product, overflow1) = (number ?? 0).multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = product.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                number = sum
                continue
            }
            let unit: (rank: Int, seconds: Int)
            switch byte {
            case UInt8(ascii: "d"): unit = (4, 86_400)
            case UInt8(ascii: "h"): unit = (3, 3_600)
            case UInt8(ascii: "m"): unit = (2, 60)
            case UInt8(ascii: "s"): unit = (1, 1)
            default: return nil
            }
            guard let value = number, unit.rank < lastUnitRank else { return nil }
            let (product, overflow1) = value.multipliedReportingOverflow(by: unit.seconds)
            let (sum, overflow2) = total.addingReportingOverflow(product)
            guard !overflow1, !overflow2 else { return nil }
            total = sum
            lastUnitRank = unit.rank
            number = nil
        }
        guard number == nil, total > 0 else { return nil }
        self.seconds = total
    }

    public var timeInterval: TimeInterval { TimeInterval(seconds) }

    /// The shortest spelling, e.g. `1h30m`.
    public var description: String {
        var rest = seconds
        var text = ""
        for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] where rest >= size {
            text += "\(rest / size)\(unit)"
            rest %= size
        }
        return text.isEmpty ? "0s" : text
    }

    public static func < (lhs: WorkflowDuration, rhs: WorkflowDuration) -> Bool { lhs.seconds < rhs.seconds }
}

// MARK: - Queries

extension Workflow {
    /// The transitions leaving `state`, in file order.
    public func transitions(from state: String) -> [TransitionSpec] {
        transitions.filter { $0.from == state }
    }

    /// The transition `from -> to`, if there is one.
    public func transition(from: String, to: String) -> TransitionSpec? {
        transitions.first { $0.from == from && $0.to == to }
    }

    /// The transition with the given `id` (`from->to`).
    public func transition(id: String) -> TransitionSpec? {
        transitions.first { $0.id == id }
    }

    /// What the content of an order shown in `state` without a transition holds: the state's
    /// `content`, else the field's `default`; fields with neither are absent (null).
    public func defaultContent(in state: StateSpec) -> [String: ValueSpec] {
        var content: [String: ValueSpec] = [:]
        for field in contentSchema {
            if let value = state.content[field.name] {
                content[field.name] = value
            } else if let value = field.defaultValue {
                content[field.name] = .literal(value)
            }
        }
        return content
    }

    public func state(named name: String) -> StateSpec? {
        states.first { $0.name == name }
    }

    /// How long after entering `state` its content goes stale: the state's `stale-after`, or a
    /// `mark-stale` timer of the state, whichever comes first; nil when neither is declared.
    public func staleAfter(in stateName: String) -> WorkflowDuration? {
        let declared = state(named: stateName)?.staleAfter
        let timed = timers.filter { $0.state == stateName && $0.action == .markStale }.map(\.after).min { $0.seconds < $1.seconds }
        switch (declared, timed) {
        case let (declared?, timed?): return declared.seconds <= timed.seconds ? declared : timed
        case let (declared, timed): return declared ?? timed
        }
    }

    public func isFinal(_ state: String) -> Bool {
        finalStates.contains(state)
    }

    /// The timers that start when an order enters `state`.
    public func timers(in state: String) -> [TimerSpec] {
        timers.filter { $0.state == state }
    }

    /// How the activity is dismissed when the order ends in `state` (nil for a non-final state).
    public func dismissal(in state: String) -> Dismissal? {
        guard isFinal(state) else { return nil }
        return self.state(named: state)?.dismissal ?? .systemDefault
    }
}
