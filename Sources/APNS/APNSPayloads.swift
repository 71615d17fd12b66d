import Foundation

/// An already-encoded JSON object: the app's `ContentState`, its static `attributes`, or custom
/// data beside `aps`. It is spliced into the payload byte for byte.
public struct APNSJSONObject: Sendable, Hashable {
    let bytes: [UInt8]
    let keys: Set<String>

    /// Encodes `value` as the app will decode it.
    ///
    /// The caller shapes `value` for the app's `ActivityAttributes.ContentState`; it is encoded
    /// as is, with `JSONEncoder`'s default strategies, which are what the app's default
    /// `JSONDecoder` expects (a `Date` as seconds since 2001-01-01, keys as the property names).
    /// Keys are sorted so the same value always produces the same bytes.
    public init(encoding value: some Encodable & Sendable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw APNSPayloadError.invalid("Could not encode \(type(of: value)) as JSON: \(error)")
        }
        try self.init(json: data, describing: "\(type(of: value))")
    }

    /// Uses JSON text that is already shaped for the app; it must be a JSON object.
    public init(json: Data) throws {
        try self.init(json: json, describing: "the JSON text")
    }

    /// JSON text of an object that the caller (in this package) has just serialised itself, with
    /// its top-level keys: nothing to parse again. The worker builds one per push.
    package init(serializedObject text: String, keys: Set<String>) {
        self.bytes = Array(text.utf8)
        self.keys = keys
    }

    private init(json: Data, describing source: String) throws {
        guard let object = try? JSONSerialization.jsonObject(with: json, options: []) as? [String: Any] else {
            throw APNSPayloadError.invalid("\(source) does not encode to a JSON object ({…}); content state and attributes must be objects.")
        }
        self.bytes = Array(json)
        self.keys = Set(object.keys)
    }

    /// The object's members without the enclosing braces (empty for `{}`).
    var members: ArraySlice<UInt8> {
        var slice = self.bytes[...]
        while let first = slice.first, first != UInt8(ascii: "{") { slice.removeFirst() }
        while let last = slice.last, last != UInt8(ascii: "}") { slice.removeLast() }
        let inner = slice.dropFirst().dropLast()
        return inner.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 } ? [] : inner
    }
}

/// The text of an alert's title, subtitle or body.
public enum APNSAlertText: Sendable, Hashable, ExpressibleByStringLiteral {
    /// Text shown as is.
    case plain(String)
    /// A key of the app's `Localizable.strings` with its format arguments, resolved on the device.
    case localized(key: String, arguments: [String] = [])

    public init(stringLiteral value: String) {
        self = .plain(value)
    }

    var isEmpty: Bool {
        switch self {
        case .plain(let text): text.isEmpty
        case .localized(let key, _): key.isEmpty
        }
    }

    var json: JSONValue {
        switch self {
        case .plain(let text):
            .string(text)
        case .localized(let key, let arguments):
            .object(["loc-key": .string(key), "loc-args": .array(arguments.map(JSONValue.string))])
        }
    }
}

/// The sound an alert plays.
public enum APNSSound: Sendable, Hashable {
    /// The system's default sound (`"default"`).
    case `default`
    /// A sound file in the app bundle or its `Library/Sounds`.
    case named(String)

    var json: JSONValue {
        switch self {
        case .default: .string("default")
        case .named(let name): .string(name)
        }
    }
}

/// The alert of a Live Activity push: lights the screen, shows the expanded presentation, and
/// appears as a notification on Apple Watch. Required on `start`.
public struct LiveActivityAlert: Sendable, Hashable {
    public var title: APNSAlertText
    public var body: APNSAlertText
    /// Encoded inside `alert` (not beside it, as for ordinary notifications).
    public var sound: APNSSound?

    public init(title: APNSAlertText, body: APNSAlertText, sound: APNSSound? = .default) {
        self.title = title
        self.body = body
        self.sound = sound
    }

    var isEmpty: Bool { self.title.isEmpty && self.body.isEmpty }

    var json: JSONValue {
        var members: [String: JSONValue] = ["title": self.title.json, "body": self.body.json]
        if let sound = self.sound { members["sound"] = sound.json }
        return .object(members)
    }
}

/// The payload of a Live Activity push (`apns-push-type: liveactivity`).
///
/// Build one with ``start(timestamp:attributesType:attributes:contentState:alert:staleDate:relevanceScore:requestInputPushToken:)``,
/// ``update(timestamp:contentState:alert:staleDate:relevanceScore:)`` or
/// ``end(timestamp:contentState:alert:dismissalDate:)``, then ``encoded()``.
/// Every date is sent as integer seconds since 1970.
public struct LiveActivityPayload: Sendable, Hashable {
    public enum Event: String, Sendable, Hashable {
        /// Push-to-start (iOS 17.2+).
        case start
        case update
        case end
    }

    public var event: Event
    /// When the state was produced. The device drops an update older than what it shows, so
    /// this must increase strictly per activity; stamp it from the transition's time.
    public var timestamp: Date
    /// The full `ContentState` (required on start and update, optional on end).
    public var contentState: APNSJSONObject?
    public var alert: LiveActivityAlert?
    /// After this the UI shows the content as stale; advance it with every update.
    public var staleDate: Date?
    /// On end: when the ended activity leaves the Lock Screen (past: at once; absent: the
    /// system's default, at most 4 hours).
    public var dismissalDate: Date?
    /// Orders several activities of one app.
    public var relevanceScore: Double?
    /// On start: the Swift type name of the app's `ActivityAttributes`.
    public var attributesType: String?
    /// On start: the attributes' static fields.
    public var attributes: APNSJSONObject?
    /// On start (iOS 18): ask the started activity to report a fresh update token.
    public var inputPushToken: Bool

    public init(
        event: Event,
        timestamp: Date,
        contentState: APNSJSONObject? = nil,
        alert: LiveActivityAlert? = nil,
        staleDate: Date? = nil,
        dismissalDate: Date? = nil,
        relevanceScore: Double? = nil,
        attributesType: String? = nil,
        attributes: APNSJSONObject? = nil,
        inputPushToken: Bool = false
    ) {
        self.event = event
        self.timestamp = timestamp
        self.contentState = contentState
        self.alert = alert
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.attributesType = attributesType
        self.attributes = attributes
        self.inputPushToken = inputPushToken
    }

    /// Starts an activity remotely (push-to-start, sent to the push-to-start token).
    public static func start(
        timestamp: Date,
        attributesType: String,
        attributes: APNSJSONObject,
        contentState: APNSJSONObject,
        alert: LiveActivityAlert,
        staleDate: Date? = nil,
        relevanceScore: Double? = nil,
        requestInputPushToken: Bool = false
    ) -> Self {
        Self(
            event: .start,
            timestamp: timestamp,
            contentState: contentState,
            alert: alert,
            staleDate: staleDate,
            relevanceScore: relevanceScore,
            attributesType: attributesType,
            attributes: attributes,
            inputPushToken: requestInputPushToken
        )
    }

    /// Starts an activity remotely, encoding `attributes` and `contentState` as the app decodes them.
    public static func start(
        timestamp: Date,
        attributesType: String,
        attributes: some Encodable & Sendable,
        contentState: some Encodable & Sendable,
        alert: LiveActivityAlert,
        staleDate: Date? = nil,
        relevanceScore: Double? = nil,
        requestInputPushToken: Bool = false
    ) throws -> Self {
        .start(
            timestamp: timestamp,
            attributesType: attributesType,
            attributes: try APNSJSONObject(encoding: attributes),
            contentState: try APNSJSONObject(encoding: contentState),
            alert: alert,
            staleDate: staleDate,
            relevanceScore: relevanceScore,
            requestInputPushToken: requestInputPushToken
        )
    }

    /// Replaces the activity's whole content state.
    public static func update(
        timestamp: Date,
        contentState: APNSJSONObject,
        alert: LiveActivityAlert? = nil,
        staleDate: Date? = nil,
        relevanceScore: Double? = nil
    ) -> Self {
        Self(
            event: .update,
            timestamp: timestamp,
            contentState: contentState,
            alert: alert,
            staleDate: staleDate,
            relevanceScore: relevanceScore
        )
    }

    /// Replaces the activity's whole content state, encoding it as the app decodes it.
    public static func update(
        timestamp: Date,
        contentState: some Encodable & Sendable,
        alert: LiveActivityAlert? = nil,
        staleDate: Date? = nil,
        relevanceScore: Double? = nil
    ) throws -> Self {
        .update(
            timestamp: timestamp,
            contentState: try APNSJSONObject(encoding: contentState),
            alert: alert,
            staleDate: staleDate,
            relevanceScore: relevanceScore
        )
    }

    /// Ends the activity, optionally with a final content state.
    public static func end(
        timestamp: Date,
        contentState: APNSJSONObject? = nil,
        alert: LiveActivityAlert? = nil,
        dismissalDate: Date? = nil
    ) -> Self {
        Self(event: .end, timestamp: timestamp, contentState: contentState, alert: alert, dismissalDate: dismissalDate)
    }

    /// Ends the activity with a final content state, encoded as the app decodes it.
    public static func end(
        timestamp: Date,
        contentState: some Encodable & Sendable,
        alert: LiveActivityAlert? = nil,
        dismissalDate: Date? = nil
    ) throws -> Self {
        .end(timestamp: timestamp, contentState: try APNSJSONObject(encoding: contentState), alert: alert, dismissalDate: dismissalDate)
    }

    /// The JSON body, with sorted keys.
    ///
    /// - Throws: ``APNSPayloadError`` when a start lacks its alert or attributes, a start or update
    ///   lacks its content state, a number is not finite, or the body exceeds 4096 bytes.
    public func encoded() throws -> Data {
        try self.validate()
        var aps: [String: JSONValue] = [
            "timestamp": .int(Self.epochSeconds(self.timestamp)),
            "event": .string(self.event.rawValue),
        ]
        if let contentState = self.contentState { aps["content-state"] = .raw(contentState.bytes) }
        if let alert = self.alert { aps["alert"] = alert.json }
        if let staleDate = self.staleDate { aps["stale-date"] = .int(Self.epochSeconds(staleDate)) }
        if let dismissalDate = self.dismissalDate { aps["dismissal-date"] = .int(Self.epochSeconds(dismissalDate)) }
        if let relevanceScore = self.relevanceScore { aps["relevance-score"] = .double(relevanceScore) }
        if let attributesType = self.attributesType { aps["attributes-type"] = .string(attributesType) }
        if let attributes = self.attributes { aps["attributes"] = .raw(attributes.bytes) }
        if self.inputPushToken { aps["input-push-token"] = .int(1) }
        let body = JSONValue.object(["aps": .object(aps)]).serialized
        guard body.count <= APNSLimits.maximumPayloadSize else {
            throw APNSPayloadError.tooLarge(size: body.count)
        }
        return Data(body)
    }

    private func validate() throws {
        switch self.event {
        case .start:
            guard let alert = self.alert, !alert.isEmpty else {
                throw APNSPayloadError.invalid("A Live Activity start needs an alert with a title or body: without one the start silently fails on the device.")
            }
            guard let attributesType = self.attributesType, !attributesType.isEmpty, self.attributes != nil else {
                throw APNSPayloadError.invalid("A Live Activity start needs attributes-type (the app's ActivityAttributes type name) and attributes.")
            }
            guard self.contentState != nil else {
                throw APNSPayloadError.invalid("A Live Activity start needs a content state.")
            }
        case .update:
            guard self.contentState != nil else {
                throw APNSPayloadError.invalid("A Live Activity update needs the full content state.")
            }
        case .end:
            break
        }
        if let relevanceScore = self.relevanceScore, !relevanceScore.isFinite {
            throw APNSPayloadError.invalid("relevance-score must be a finite number, not \(relevanceScore).")
        }
    }

    static func epochSeconds(_ date: Date) -> Int64 {
        Int64(date.timeIntervalSince1970.rounded(.down))
    }
}

/// An ordinary alert notification (`apns-push-type: alert`), the fallback for a device without
/// Live Activity tokens.
public struct AlertPayload: Sendable, Hashable {
    public enum InterruptionLevel: String, Sendable, Hashable {
        case passive
        case active
        case timeSensitive = "time-sensitive"
        case critical
    }

    public var title: APNSAlertText
    public var subtitle: APNSAlertText?
    public var body: APNSAlertText
    /// Encoded as `aps.sound`, beside the alert (unlike a Live Activity's).
    public var sound: APNSSound?
    public var badge: Int?
    public var threadID: String?
    public var category: String?
    public var interruptionLevel: InterruptionLevel?
    public var relevanceScore: Double?
    /// App-specific keys placed beside `aps` (for example the order id the app opens on tap).
    public var customData: APNSJSONObject?

    public init(
        title: APNSAlertText,
        subtitle: APNSAlertText? = nil,
        body: APNSAlertText,
        sound: APNSSound? = .default,
        badge: Int? = nil,
        threadID: String? = nil,
        category: String? = nil,
        interruptionLevel: InterruptionLevel? = nil,
        relevanceScore: Double? = nil,
        customData: APNSJSONObject? = nil
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.sound = sound
        self.badge = badge
        self.threadID = threadID
        self.category = category
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.customData = customData
    }

    /// The JSON body: `aps` first, then the custom data's members.
    ///
    /// - Throws: ``APNSPayloadError`` when the alert is empty, custom data uses the key `aps`, a
    ///   number is not finite, or the body exceeds 4096 bytes.
    public func encoded() throws -> Data {
        guard !(self.title.isEmpty && self.body.isEmpty) else {
            throw APNSPayloadError.invalid("An alert notification needs a title or a body.")
        }
        if let relevanceScore = self.relevanceScore, !relevanceScore.isFinite {
            throw APNSPayloadError.invalid("relevance-score must be a finite number, not \(relevanceScore).")
        }
        var alert: [String: JSONValue] = ["title": self.title.json, "body": self.body.json]
        if let subtitle = self.subtitle { alert["subtitle"] = subtitle.json }
        var aps: [String: JSONValue] = ["alert": .object(alert)]
        if let sound = self.sound { aps["sound"] = sound.json }
        if let badge = self.badge { aps["badge"] = .int(badge) }
        if let threadID = self.threadID { aps["thread-id"] = .string(threadID) }
        if let category = self.category { aps["category"] = .string(category) }
        if let level = self.interruptionLevel { aps["interruption-level"] = .string(level.rawValue) }
        if let relevanceScore = self.relevanceScore { aps["relevance-score"] = .double(relevanceScore) }

        var body: [UInt8] = Array("{\"aps\":".utf8)
        JSONValue.object(aps).write(into: &body)
        if let customData = self.customData {
            guard !customData.keys.contains("aps") else {
                throw APNSPayloadError.invalid("Custom data beside aps cannot use the key \"aps\".")
            }
            let members = customData.members
            if !members.isEmpty {
                body.append(UInt8(ascii: ","))
                body.append(contentsOf: members)
            }
        }
        body.append(UInt8(ascii: "}"))
        guard body.count <= APNSLimits.maximumPayloadSize else {
            throw APNSPayloadError.tooLarge(size: body.count)
        }
        return Data(body)
    }
}
