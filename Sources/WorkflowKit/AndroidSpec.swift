/// How an order's Android Live Update looks where the workflow's `android:` sections say more
/// than the derived defaults: the presentation keys of one place in the file (the whole
/// workflow, or one state). Every key is optional; a state's value wins over the workflow's,
/// and the workflow's over the derived default (see ``Workflow/renderAndroid(_:from:order:attributes:input:previous:)``).
public struct AndroidPresentation: Sendable, Hashable {
    /// The notification's title (`title`); default: the alert's title, else the state's name.
    public var title: Template?
    /// The notification's text (`text`); default: the ContentState's first text field, else the alert's body.
    public var text: Template?
    /// The status-bar chip's short critical text (`chip`); none by default.
    public var chip: Template?
    /// A drawable resource name in the app for the progress tracker (`icon`).
    public var icon: String?
    /// `#RRGGBB`: the colour of the state's progress segment (`color`).
    public var color: String?
    /// The notification channel id the app posts on (`channel`).
    public var channel: String?
    /// Whether the app asks the system to promote the notification to a Live Update (`promote`).
    public var promote: Bool?
    /// How long FCM keeps the message for an offline device (`ttl`).
    public var ttl: WorkflowDuration?

    public init(title: Template? = nil, text: Template? = nil, chip: Template? = nil, icon: String? = nil, color: String? = nil,
                channel: String? = nil, promote: Bool? = nil, ttl: WorkflowDuration? = nil)
    {
        self.title = title
        self.text = text
        self.chip = chip
        self.icon = icon
        self.color = color
        self.channel = channel
        self.promote = promote
        self.ttl = ttl
    }

    /// These values with `override`'s set ones on top.
    public func overlaid(by override: AndroidPresentation?) -> AndroidPresentation {
        guard let override else { return self }
        return AndroidPresentation(
            title: override.title ?? title, text: override.text ?? text, chip: override.chip ?? chip,
            icon: override.icon ?? icon, color: override.color ?? color, channel: override.channel ?? channel,
            promote: override.promote ?? promote, ttl: override.ttl ?? ttl)
    }

    var isEmpty: Bool { self == AndroidPresentation() }
}

/// The workflow's Android side: what the `android:` sections declare, and the progress bar
/// derived from the transitions when the workflow is loaded.
public struct AndroidSpec: Sendable, Hashable {
    /// The notification channel used when no section names one.
    public static let defaultChannel = "order_updates"
    /// The length of each progress segment; positions are multiples of it.
    public static let segmentLength = 100

    /// The workflow-level `android:` keys.
    public var defaults = AndroidPresentation()
    /// Each state's `android:` keys, by state name.
    public var states: [String: AndroidPresentation] = [:]
    /// The ContentState date field shown as the notification's time (`android.when`); nil for none.
    public var whenField: String?
    /// Whether `android.when` was written (an `eta` date field is used without it).
    public var whenDeclared = false
    /// `android.path` as written; nil when the path is derived.
    public var declaredPath: [String]?
    /// The states of the progress bar, one segment each, in order (declared or derived).
    public var path: [String] = []
    /// Final states that complete the bar: those the path's last state leads to by a transition of its own.
    public var completions: Set<String> = []
    /// Where each state puts the progress point (see docs/workflows.md, "Android").
    public var positions: [String: Int] = [:]

    public init() {}

    /// The keys that apply in `state`: the workflow's, overlaid by the state's.
    public func presentation(in state: String) -> AndroidPresentation {
        defaults.overlaid(by: states[state])
    }

    /// The bar's total length.
    public var total: Int { path.count * Self.segmentLength }
}

extension Workflow {
    /// What the `android:` sections declare, for the canonical form; nil when there are none, so
    /// that the form (and checksum) of workflows without them stays the same.
    var androidCanonicalValue: JSONValue? {
        func value(_ presentation: AndroidPresentation) -> JSONValue {
            var object: [String: JSONValue] = [:]
            if let title = presentation.title { object["title"] = .string(title.source) }
            if let text = presentation.text { object["text"] = .string(text.source) }
            if let chip = presentation.chip { object["chip"] = .string(chip.source) }
            if let icon = presentation.icon { object["icon"] = .string(icon) }
            if let color = presentation.color { object["color"] = .string(color) }
            if let channel = presentation.channel { object["channel"] = .string(channel) }
            if let promote = presentation.promote { object["promote"] = .bool(promote) }
            if let ttl = presentation.ttl { object["ttl"] = .int(ttl.seconds) }
            return .object(object)
        }
        let declared = android
        guard !declared.defaults.isEmpty || !declared.states.isEmpty || declared.whenDeclared || declared.declaredPath != nil else {
            return nil
        }
        var object: [String: JSONValue] = ["workflow": value(declared.defaults), "states": .object(declared.states.mapValues(value))]
        if declared.whenDeclared { object["when"] = declared.whenField.map(JSONValue.string) ?? "none" }
        if let path = declared.declaredPath { object["path"] = .array(path.map(JSONValue.string)) }
        return .object(object)
    }
}
