import APNSCore
import Foundation

/// One FCM *data* message to one registration token: the app's `FirebaseMessagingService`
/// receives `data` in `onMessageReceived`, in the background too, and builds its notification
/// itself. No `notification` block is sent, so FCM never shows anything on its own.
public struct FCMMessage: Sendable, Hashable {
    /// `android.priority`.
    public enum Priority: String, Sendable, Hashable {
        /// Delivered when convenient (Doze may hold it back).
        case normal = "NORMAL"
        /// Wakes the device at once. FCM may deprioritise an app whose high-priority messages
        /// do not lead to a visible notification.
        case high = "HIGH"
    }

    /// The registration token the app got from `FirebaseMessaging.getToken()`.
    public var token: String
    /// The key–value data; every value is a string, as FCM requires.
    public var data: [String: String]
    /// `android.priority`.
    public var priority: Priority
    /// `android.collapse_key`: while the device is offline, messages with the same key replace
    /// each other (FCM keeps at most four keys per device).
    public var collapseKey: String?
    /// `android.ttl`: how long FCM keeps the message for an offline device, in whole seconds
    /// (sent as `"<seconds>s"`); `nil` for FCM's default of four weeks, `0` for now or never.
    public var timeToLive: Int?

    /// The most bytes of data (keys and values, UTF-8) FCM accepts in one message.
    public static let maximumDataSize = 4096

    /// - Parameters:
    ///   - token: the registration token.
    ///   - data: the key–value data.
    ///   - priority: `android.priority`.
    ///   - collapseKey: `android.collapse_key`.
    ///   - timeToLive: `android.ttl` in seconds.
    public init(token: String, data: [String: String], priority: Priority = .normal, collapseKey: String? = nil, timeToLive: Int? = nil) {
        self.token = token
        self.data = data
        self.priority = priority
        self.collapseKey = collapseKey
        self.timeToLive = timeToLive
    }

    /// The size FCM counts against ``maximumDataSize``: the UTF-8 bytes of every key and value.
    public var dataSize: Int {
        self.data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    /// The request body: `{"message": {"token", "data", "android": {…}}}`.
    public var body: JSONValue {
        var android: [String: JSONValue] = ["priority": .string(self.priority.rawValue)]
        if let collapseKey { android["collapse_key"] = .string(collapseKey) }
        if let timeToLive { android["ttl"] = .string("\(max(0, timeToLive))s") }
        return .object(["message": .object([
            "token": .string(self.token),
            "data": .object(self.data.mapValues(JSONValue.string)),
            "android": .object(android),
        ])])
    }

    /// ``body`` as bytes, written directly rather than built as a ``JSONValue`` tree first (the
    /// same bytes as `body.serialized`: keys sorted): every message sent is encoded once.
    func encodedBody() -> [UInt8] {
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ",")
        var bytes: [UInt8] = []
        bytes.reserveCapacity(96 + self.token.utf8.count + self.dataSize + 4 * self.data.count + (self.collapseKey?.utf8.count ?? 0))
        bytes.append(contentsOf: #"{"message":{"android":{"#.utf8)
        if let collapseKey {
            bytes.append(contentsOf: #""collapse_key":"#.utf8)
            JSONValue.writeString(collapseKey, into: &bytes)
            bytes.append(comma)
        }
        bytes.append(contentsOf: #""priority":""#.utf8)
        bytes.append(contentsOf: self.priority.rawValue.utf8)
        bytes.append(quote)
        if let timeToLive {
            bytes.append(contentsOf: #","ttl":""#.utf8)
            bytes.append(contentsOf: String(max(0, timeToLive)).utf8)
            bytes.append(contentsOf: #"s""#.utf8)
        }
        bytes.append(contentsOf: #"},"data":{"#.utf8)
        for (index, member) in self.data.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
            if index > 0 { bytes.append(comma) }
            JSONValue.writeString(member.key, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONValue.writeString(member.value, into: &bytes)
        }
        bytes.append(contentsOf: #"},"token":"#.utf8)
        JSONValue.writeString(self.token, into: &bytes)
        bytes.append(contentsOf: "}}".utf8)
        return bytes
    }

    /// Checks what FCM would refuse, before sending.
    ///
    /// - Throws: ``FCMMessageError``: a token that cannot be one, data over 4096 bytes, a reserved
    ///   or empty key, an empty collapse key.
    public func validate() throws {
        let isTokenCharacter: (UInt8) -> Bool = { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: ":")
        }
        guard !self.token.isEmpty, self.token.utf8.allSatisfy(isTokenCharacter) else {
            throw FCMMessageError(
                code: .invalidToken,
                message: "The registration token \(APNSTokenRedaction.redacted(self.token)) (\(self.token.utf8.count) characters) has characters "
                    + "no FCM token has; it can never be delivered: drop it and check how the app reports its token.")
        }
        // The first reserved key in order, named in the error; sorted only when there is one.
        if self.data.keys.contains(where: Self.isReserved), let key = self.data.keys.sorted().first(where: Self.isReserved) {
            throw FCMMessageError(
                code: .reservedKey,
                message: "The data key '\(key.prefix(64))' is \(key.isEmpty ? "empty" : "reserved by FCM (from, message_type, and keys starting with google or gcm)"); rename it.")
        }
        guard self.dataSize <= Self.maximumDataSize else {
            throw FCMMessageError(
                code: .dataTooLarge,
                message: "The message's data is \(self.dataSize) bytes (keys and values); FCM accepts at most \(Self.maximumDataSize). Shorten the content.")
        }
        if let collapseKey, collapseKey.isEmpty {
            throw FCMMessageError(code: .invalidCollapseKey, message: "The collapse key is empty; leave it out or give it a value.")
        }
    }

    /// Whether FCM refuses `key` as a data key.
    ///
    /// - Parameter key: a data key.
    public static func isReserved(_ key: String) -> Bool {
        key.isEmpty || key == "from" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }
}

/// Printed, dumped or logged, a message shows its token redacted and its data's size.
extension FCMMessage: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "FCMMessage(token: \(APNSTokenRedaction.redacted(self.token)), priority: \(self.priority.rawValue), data: \(self.dataSize) bytes)"
    }

    public var debugDescription: String { self.description }

    public var customMirror: Mirror {
        Mirror(self, children: [
            "token": APNSTokenRedaction.redacted(self.token), "priority": self.priority,
            "collapseKey": self.collapseKey as Any, "timeToLive": self.timeToLive as Any, "data": "\(self.dataSize) bytes",
        ])
    }
}

/// FCM accepted the message: queued for the device, not yet delivered.
public struct FCMSendResult: Sendable, Hashable {
    /// The name FCM gave the message: `projects/{project}/messages/{message id}`.
    public let name: String

    /// - Parameter name: the message's name.
    public init(name: String) {
        self.name = name
    }
}
