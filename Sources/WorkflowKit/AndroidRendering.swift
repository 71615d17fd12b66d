import Foundation

/// The FCM `android.priority` of a message.
public enum AndroidPriority: String, Sendable, Hashable {
    /// Delivered at once, waking the device: only where the iPhone side uses `apns-priority: 10`.
    case high = "HIGH"
    case normal = "NORMAL"
}

/// One Android Live Update as an FCM *data* message: the strings the app turns into its
/// `ProgressStyle` notification, and the delivery options FCM reads. Made by
/// ``Workflow/renderAndroid(_:from:order:attributes:input:previous:)``; tokens and the
/// project are the sender's.
public struct RenderedAndroidUpdate: Sendable, Hashable {
    /// The `data` map: every value a string, as FCM requires (keys are ``AndroidData``'s).
    public var data: [String: String]
    /// `android.priority`.
    public var priority: AndroidPriority
    /// `android.ttl`.
    public var ttl: WorkflowDuration
    /// `android.collapse_key`: one per order, so a device offline through a burst gets the newest.
    public var collapseKey: String

    /// `android.ttl` as FCM spells it (`"3600s"`).
    public var ttlText: String { "\(ttl.seconds)s" }

    /// FCM's limit on a data message: keys and values together.
    public static let maximumDataSize = 4096

    /// The bytes FCM counts against ``maximumDataSize``.
    public var dataSize: Int { data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } }
}

/// The keys of the data message (docs/android.md describes each for the app's developer).
/// None is reserved by FCM (`from`, `gcm`, `message_type`, `google…`).
public enum AndroidData {
    /// The format's version: the app ignores messages of a version it does not know.
    public static let format = "orderflow"
    public static let formatVersion = "1"
    public static let order = "order"
    public static let workflow = "workflow"
    public static let state = "state"
    /// `start`, `update` or `end`.
    public static let event = "event"
    /// Milliseconds since 1970 of the transition: the app drops a message older than the one it shows.
    public static let timestamp = "timestamp"
    public static let title = "title"
    public static let text = "text"
    /// For a localized alert text: the app's string resource name and its arguments (a JSON array of strings).
    public static let titleKey = "title_loc_key"
    public static let titleArgs = "title_loc_args"
    public static let textKey = "text_loc_key"
    public static let textArgs = "text_loc_args"
    /// `length[:#RRGGBB]` per segment, comma-separated, in order.
    public static let segments = "segments"
    /// Where the point and the tracker are, in the segments' units.
    public static let progress = "progress"
    /// Milliseconds since 1970 for `setWhen` (a countdown while in the future); absent without an ETA.
    public static let when = "when"
    public static let chip = "chip"
    public static let icon = "icon"
    public static let channel = "channel"
    /// `true` to call `setRequestPromotedOngoing(true)`.
    public static let promote = "promote"
    /// `true` when the transition has an alert: the app alerts instead of updating silently.
    public static let alert = "alert"
    /// End only: `now` (cancel the notification), `at` (a final post removed at ``dismissAt``)
    /// or `default` (a final post the user dismisses).
    public static let dismiss = "dismiss"
    public static let dismissAt = "dismiss_at"
}

extension Workflow {
    /// The default time to live of a non-final state's message without `stale-after`.
    static let defaultAndroidTTL = WorkflowDuration(seconds: 3_600)
    /// The end's default: long enough that a phone switched off for an evening still takes the
    /// notification down when it comes back.
    static let defaultAndroidEndTTL = WorkflowDuration(seconds: 8 * 3_600)

    /// Derives the Android data message from an update rendered for iPhones (which holds the
    /// content, the alert, the event, priority and time), so that both platforms show the same
    /// thing; the `android:` keys of the update's state and of the workflow override the defaults.
    ///
    /// - Parameters:
    ///   - update: What ``render(transition:attributes:validatedInput:previous:at:)`` (or another
    ///     render function) produced.
    ///   - from: The state the transition left, nil without a transition; places the point of a
    ///     state off the progress path.
    ///   - order: The order's id, sent to the app and used as the collapse key.
    ///   - attributes: The order's normalized attributes, for the `android:` templates.
    ///   - input: The transition's validated input, for the `android:` templates.
    ///   - previous: The ContentState shown before the update (app shape), for `{{previous.x}}`.
    /// - Throws: ``RenderError`` with `payloadTooLarge` when the data would exceed 4096 bytes.
    public func renderAndroid(_ update: RenderedActivityUpdate, from: String?, order: String, attributes: JSONValue,
                              input: JSONValue, previous: JSONValue?) throws -> RenderedAndroidUpdate
    {
        let context = "workflow `\(name)`, Android update in `\(update.state)`"
        let presentation = android.presentation(in: update.state)
        let inputSchema = from.flatMap { transition(from: $0, to: update.state)?.inputs } ?? inputs(into: update.state)
        let renderer = Renderer(workflow: self, attributes: attributes, input: input, inputSchema: inputSchema,
                                previous: previous, time: update.timestamp, context: context)
        var data: [String: String] = [
            AndroidData.format: AndroidData.formatVersion,
            AndroidData.order: order,
            AndroidData.workflow: name,
            AndroidData.state: update.state,
            AndroidData.event: update.event.rawValue,
            AndroidData.timestamp: Self.milliseconds(update.timestamp),
            AndroidData.segments: androidSegments,
            AndroidData.progress: String(androidProgress(in: update.state, from: from)),
            AndroidData.channel: presentation.channel ?? AndroidSpec.defaultChannel,
            AndroidData.promote: String(update.event != .end && (presentation.promote ?? true)),
            AndroidData.alert: String(update.alert != nil),
        ]
        if let title = presentation.title {
            data[AndroidData.title] = renderer.render(title)
        } else if let title = update.alert?.title {
            Self.put(title, clippedTo: Self.derivedTitleLength, text: AndroidData.title, key: AndroidData.titleKey, args: AndroidData.titleArgs, into: &data)
        } else {
            data[AndroidData.title] = Self.displayName(of: update.state)
        }
        if let text = presentation.text {
            data[AndroidData.text] = renderer.render(text)
        } else if let text = androidContentText(update.contentState) {
            data[AndroidData.text] = Self.clipped(text, to: Self.derivedTextLength)
        } else if let body = update.alert?.body {
            Self.put(body, clippedTo: Self.derivedTextLength, text: AndroidData.text, key: AndroidData.textKey, args: AndroidData.textArgs, into: &data)
        }
        if let field = android.whenField, let seconds = update.contentState[field]?.doubleValue {
            data[AndroidData.when] = Self.milliseconds(Date(timeIntervalSinceReferenceDate: seconds))
        }
        if let chip = presentation.chip {
            let text = renderer.render(chip)
            if !text.isEmpty { data[AndroidData.chip] = text }
        }
        if let icon = presentation.icon { data[AndroidData.icon] = icon }
        if update.event == .end {
            switch update.dismissal ?? .systemDefault {
            case .immediate: data[AndroidData.dismiss] = "now"
            case .systemDefault: data[AndroidData.dismiss] = "default"
            case .after(let duration):
                data[AndroidData.dismiss] = "at"
                data[AndroidData.dismissAt] = Self.milliseconds(update.timestamp.addingTimeInterval(duration.timeInterval))
            }
        }
        let rendered = RenderedAndroidUpdate(
            data: data, priority: update.priority >= 10 ? .high : .normal,
            ttl: presentation.ttl ?? (isFinal(update.state) ? Self.defaultAndroidEndTTL : staleAfter(in: update.state) ?? Self.defaultAndroidTTL),
            collapseKey: Self.androidCollapseKey(order: order))
        if rendered.dataSize > RenderedAndroidUpdate.maximumDataSize {
            throw RenderError(code: .payloadTooLarge, context: context, field: nil,
                              message: "the FCM data would be \(rendered.dataSize) bytes, over the \(RenderedAndroidUpdate.maximumDataSize)-byte limit FCM accepts; shorten the text values given (attributes or input)")
        }
        return rendered
    }

    /// The collapse key of an order's messages.
    public static func androidCollapseKey(order: String) -> String { "order:" + order }

    /// The progress bar's segments, `length[:#RRGGBB]` each (the same for every update of the workflow).
    public var androidSegments: String {
        android.path.map { state in
            let color = android.presentation(in: state).color
            return "\(AndroidSpec.segmentLength)" + (color.map { ":" + $0 } ?? "")
        }.joined(separator: ",")
    }

    /// Where the point is after entering `state` from `from`: a state of the path at the start of
    /// its segment, a completing final state at the end of the bar, any other state where the
    /// order came from (so a cancellation leaves the point where it was).
    public func androidProgress(in state: String, from: String?) -> Int {
        if android.path.contains(state) || android.completions.contains(state) || from == nil {
            return android.positions[state] ?? 0
        }
        return from.flatMap { android.positions[$0] } ?? android.positions[state] ?? 0
    }

    /// The first text field of the ContentState that has a value: what the Live Activity itself
    /// shows as its message.
    func androidContentText(_ content: JSONValue) -> String? {
        for field in contentSchema {
            guard case .string = field.type.nonOptional, case .string(let text)? = content[field.name],
                  !text.trimmingWhitespace().isEmpty
            else { continue }
            return text
        }
        return nil
    }

    /// A notification shows two lines of title and a few of text: a derived text is cut to these
    /// many characters, which keeps every workflow that fits APNs within FCM's limit too. Texts
    /// written in `android:` are not cut; the loader checks their size.
    static let derivedTitleLength = 80
    static let derivedTextLength = 240
    static let derivedArgumentLength = 80

    static func put(_ text: LocalizableText, clippedTo length: Int, text textKey: String, key: String, args: String,
                    into data: inout [String: String])
    {
        switch text {
        case .plain(let plain):
            data[textKey] = clipped(plain, to: length)
        case .localized(let resource, let arguments):
            data[key] = resource
            data[args] = JSONValue.array(arguments.map { .string(clipped($0, to: derivedArgumentLength)) }).jsonString
        }
    }

    /// `text` cut to `length` characters, the last one an ellipsis when cut.
    static func clipped(_ text: String, to length: Int) -> String {
        guard text.count > length else { return text }
        return text.prefix(length - 1) + "…"
    }

    /// `out_for_delivery` → `Out for delivery`, `driverArrived` → `Driver arrived`.
    static func displayName(of state: String) -> String {
        var words = ""
        for character in state {
            if character == "_" {
                words.append(" ")
            } else if character.isUppercase, !words.isEmpty, words.last != " " {
                words.append(" ")
                words.append(contentsOf: character.lowercased())
            } else {
                words.append(character)
            }
        }
        return words.prefix(1).uppercased() + words.dropFirst()
    }

    static func milliseconds(_ date: Date) -> String {
        String(Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }
}
