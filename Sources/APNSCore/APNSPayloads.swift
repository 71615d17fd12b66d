import Foundation

/// A JSON object for the payload: the app's `ContentState`, its static `attributes`, or custom
/// data beside `aps`. Either already-encoded text, spliced in byte for byte, or a ``JSONValue``
/// object, serialized (and counted, for the size limit) without an intermediate copy.
public struct APNSJSONObject: Sendable, Hashable {
    enum Storage: Sendable, Hashable {
        case encoded(bytes: [UInt8], keys: Set<String>)
        case value([String: JSONValue])
    }

    let storage: Storage

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

    /// A rendered value (an object), serialized when the payload is encoded: never parsed back.
    public init(value: JSONValue) throws {
        guard case .object(let members) = value else {
            throw APNSPayloadError.invalid("a \(value.typeName) is not a JSON object ({…}); content state and attributes must be objects.")
        }
        storage = .value(members)
    }

    /// A rendered object, serialized when the payload is encoded.
    public init(members: [String: JSONValue]) {
        storage = .value(members)
    }

    private init(json: Data, describing source: String) throws {
        guard case .object(let members)? = try? JSONValue(data: json) else {
            throw APNSPayloadError.invalid("\(source) does not encode to a JSON object ({…}); content state and attributes must be objects.")
        }
        storage = .encoded(bytes: Array(json), keys: Set(members.keys))
    }

    var keys: Set<String> {
        switch storage {
        case .encoded(_, let keys): keys
        case .value(let members): Set(members.keys)
        }
    }

    /// The bytes this object takes in a payload.
    var byteCount: Int {
        switch storage {
        case .encoded(let bytes, _): bytes.count
        case .value(let members): JSONValue.object(members).jsonByteCount
        }
    }

    func write(into body: inout [UInt8]) {
        switch storage {
        case .encoded(let bytes, _): body.append(contentsOf: bytes)
        case .value(let members): JSONValue.object(members).write(into: &body)
        }
    }

    /// The object's members without the enclosing braces (empty for `{}`).
    var members: ArraySlice<UInt8> {
        var bytes: [UInt8] = []
        write(into: &bytes)
        var slice = bytes[...]
        while let first = slice.first, first != UInt8(ascii: "{") { slice.removeFirst() }
        while let last = slice.last, last != UInt8(ascii: "}") { slice.removeLast() }
        let inner = slice.dropFirst().dropLast()
        return inner.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 } ? [] : inner
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
    /// On start (iOS 18): the broadcast channel the started activity subscribes to
    /// (`input-push-channel`), for an activity that many devices follow.
    public var inputPushChannel: String?

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
        inputPushToken: Bool = false,
        inputPushChannel: String? = nil
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
        self.inputPushChannel = inputPushChannel
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
    /// `limit` is ``APNSLimits/maximumBroadcastPayloadSize`` for a broadcast.
    public func encoded(limit: Int = APNSLimits.maximumPayloadSize) throws -> Data {
        try self.validate()
        let body = self.body
        let size = body.byteCount
        guard size <= limit else {
            throw APNSPayloadError.tooLarge(size: size, limit: limit)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        body.write(into: &bytes)
        return Data(bytes)
    }

    /// The bytes ``encoded()`` gives (or would give past the limit), counted without encoding.
    public var encodedSize: Int { body.byteCount }

    /// The body as a ``JSONValue`` (for reading a payload back, not on the sending path).
    public var json: JSONValue { body.value }

    private var body: PayloadMember {
        Self.body(
            event: event, timestamp: .value(.int(Self.epochSeconds(timestamp))),
            contentState: contentState.map(PayloadMember.encoded), alert: alert?.member,
            staleDate: staleDate.map { .value(.int(Self.epochSeconds($0))) },
            dismissalDate: dismissalDate.map { .value(.int(Self.epochSeconds($0))) },
            relevanceScore: relevanceScore, attributesType: attributesType,
            attributes: attributes.map(PayloadMember.encoded), inputPushToken: inputPushToken, inputPushChannel: inputPushChannel)
    }

    /// The payload format, in one place: ``encoded()`` and ``maximumSize(event:contentState:alert:staleDate:dismissalDate:relevanceScore:attributesType:attributes:inputPushToken:)``
    /// both read it.
    static func body(
        event: Event, timestamp: PayloadMember, contentState: PayloadMember?, alert: PayloadMember?,
        staleDate: PayloadMember?, dismissalDate: PayloadMember?, relevanceScore: Double?, attributesType: String?,
        attributes: PayloadMember?, inputPushToken: Bool, inputPushChannel: String? = nil
    ) -> PayloadMember {
        var aps: [(String, PayloadMember)] = [("timestamp", timestamp), ("event", .value(.string(event.rawValue)))]
        if let contentState { aps.append(("content-state", contentState)) }
        if let alert { aps.append(("alert", alert)) }
        if let staleDate { aps.append(("stale-date", staleDate)) }
        if let dismissalDate { aps.append(("dismissal-date", dismissalDate)) }
        if let relevanceScore { aps.append(("relevance-score", .value(.double(relevanceScore)))) }
        if let attributesType { aps.append(("attributes-type", .value(.string(attributesType)))) }
        if let attributes { aps.append(("attributes", attributes)) }
        if inputPushToken { aps.append(("input-push-token", .value(.int(1)))) }
        if let inputPushChannel { aps.append(("input-push-channel", .value(.string(inputPushChannel)))) }
        return .object([("aps", .object(aps))])
    }

    /// Digits of a timestamp in seconds since 1970, up to the year 2286.
    public static let timestampDigits = 10

    /// The most bytes a payload takes whose parts take at most the given bytes: what a workflow
    /// is checked against when it is loaded, before any value is known. Dates count
    /// ``timestampDigits`` digits; `nil` leaves a part out.
    public static func maximumSize(
        event: Event, contentState: Int?, alert: Int?, staleDate: Bool, dismissalDate: Bool,
        relevanceScore: Double?, attributesType: String?, attributes: Int?, inputPushToken: Bool
    ) -> Int {
        let date = PayloadMember.bound(timestampDigits)
        return body(
            event: event, timestamp: date, contentState: contentState.map(PayloadMember.bound),
            alert: alert.map(PayloadMember.bound), staleDate: staleDate ? date : nil, dismissalDate: dismissalDate ? date : nil,
            relevanceScore: relevanceScore, attributesType: attributesType, attributes: attributes.map(PayloadMember.bound),
            inputPushToken: inputPushToken
        ).byteCount
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

    /// Seconds since 1970, rounded down: every date a payload carries.
    public static func epochSeconds(_ date: Date) -> Int {
        Int(date.timeIntervalSince1970.rounded(.down))
    }
}
