import Foundation

/// The `apns-push-type` of a request.
public enum APNSPushType: String, Sendable, Hashable {
    /// A Live Activity start, update or end. The topic gets the `.push-type.liveactivity` suffix.
    case liveActivity = "liveactivity"
    /// An ordinary visible notification.
    case alert
}

/// The `apns-priority` of a request.
public enum APNSPriority: Int, Sendable, Hashable {
    /// `5`: delivered when convenient for the device; free of the Live Activity update budget.
    case conservePower = 5
    /// `10`: delivered at once; spends the device's Live Activity budget. APNs' default.
    case immediate = 10
}

/// One notification to one device.
public struct APNSRequest: Sendable, Hashable {
    /// The device token in hexadecimal (real ones are often 160 characters; no length is assumed).
    public var deviceToken: String
    public var pushType: APNSPushType
    /// The app's bundle id. For ``APNSPushType/liveActivity`` the client sends
    /// `<bundle id>.push-type.liveactivity` (a topic that already ends so is kept as is).
    public var topic: String
    public var priority: APNSPriority
    /// `apns-expiration`: epoch seconds until which APNs keeps retrying delivery; `0` means
    /// deliver now or never; `nil` leaves the header out.
    public var expiration: Int?
    /// `apns-id`. When `nil` the client generates one, so every send has an id to log.
    public var apnsID: UUID?
    /// `apns-collapse-id`: notifications with the same id replace each other on the device.
    public var collapseID: String?
    /// The JSON body, at most 4096 bytes.
    public var payload: Data

    public init(
        deviceToken: String,
        pushType: APNSPushType,
        topic: String,
        priority: APNSPriority = .immediate,
        expiration: Int? = nil,
        apnsID: UUID? = nil,
        collapseID: String? = nil,
        payload: Data
    ) {
        self.deviceToken = deviceToken
        self.pushType = pushType
        self.topic = topic
        self.priority = priority
        self.expiration = expiration
        self.apnsID = apnsID
        self.collapseID = collapseID
        self.payload = payload
    }

    /// A Live Activity start, update or end for `deviceToken` (a push-to-start or activity token).
    public init(
        liveActivity payload: LiveActivityPayload,
        deviceToken: String,
        bundleID: String,
        priority: APNSPriority = .immediate,
        expiration: Int? = nil,
        apnsID: UUID? = nil
    ) throws {
        self.init(
            deviceToken: deviceToken,
            pushType: .liveActivity,
            topic: bundleID,
            priority: priority,
            expiration: expiration,
            apnsID: apnsID,
            payload: try payload.encoded()
        )
    }

    /// An ordinary alert notification for `deviceToken`.
    public init(
        alert payload: AlertPayload,
        deviceToken: String,
        bundleID: String,
        priority: APNSPriority = .immediate,
        expiration: Int? = nil,
        apnsID: UUID? = nil,
        collapseID: String? = nil
    ) throws {
        self.init(
            deviceToken: deviceToken,
            pushType: .alert,
            topic: bundleID,
            priority: priority,
            expiration: expiration,
            apnsID: apnsID,
            collapseID: collapseID,
            payload: try payload.encoded()
        )
    }

    /// The suffix APNs requires on the topic of a Live Activity push.
    public static let liveActivityTopicSuffix = ".push-type.liveactivity"

    /// The `apns-topic` header as sent.
    public var headerTopic: String {
        switch self.pushType {
        case .liveActivity where !self.topic.hasSuffix(Self.liveActivityTopicSuffix):
            self.topic + Self.liveActivityTopicSuffix
        case .liveActivity, .alert:
            self.topic
        }
    }

    /// Checks what can be checked before sending.
    func validate() throws {
        let token = self.deviceToken.utf8
        let isHex = token.allSatisfy { byte in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
        }
        guard !token.isEmpty, token.count % 2 == 0, isHex else {
            throw APNSRequestError(
                code: .invalidDeviceToken,
                message: "The device token \(APNSTokenRedaction.redacted(self.deviceToken)) (\(token.count) characters) is not an even-length "
                    + "hexadecimal string; it can never be delivered: drop it and check how the app reports tokens."
            )
        }
        guard !self.topic.isEmpty else {
            throw APNSRequestError(
                code: .missingTopic,
                message: "The notification has no topic: set it to the app's bundle id."
            )
        }
        guard !self.payload.isEmpty else {
            throw APNSRequestError(code: .emptyPayload, message: "The notification's payload is empty.")
        }
        guard self.payload.count <= APNSLimits.maximumPayloadSize else {
            throw APNSPayloadError.tooLarge(size: self.payload.count)
        }
    }
}

/// APNs accepted the notification. Accepted means queued for the device, not displayed.
public struct APNSSendResult: Sendable, Hashable {
    /// The `apns-id` APNs answered with (the one sent, or the one it assigned).
    public let apnsID: UUID
    /// The HTTP status code (200).
    public let status: Int

    public init(apnsID: UUID, status: Int) {
        self.apnsID = apnsID
        self.status = status
    }
}

/// Printed, dumped or interpolated into a log message, a request shows its token redacted.
extension APNSRequest: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "APNSRequest(deviceToken: \(APNSTokenRedaction.redacted(self.deviceToken)), pushType: \(self.pushType.rawValue), "
            + "topic: \(self.topic), priority: \(self.priority.rawValue), payload: \(self.payload.count) bytes)"
    }

    public var debugDescription: String { self.description }

    public var customMirror: Mirror {
        Mirror(self, children: [
            "deviceToken": APNSTokenRedaction.redacted(self.deviceToken), "pushType": self.pushType, "topic": self.topic,
            "priority": self.priority, "expiration": self.expiration as Any, "apnsID": self.apnsID as Any,
            "collapseID": self.collapseID as Any, "payload": "\(self.payload.count) bytes",
        ])
    }
}
