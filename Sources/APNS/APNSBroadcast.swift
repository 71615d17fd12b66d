import Foundation

/// How much of a channel's traffic APNs keeps for devices that join late; fixed when the channel
/// is created (`message-storage-policy`).
public enum APNSMessageStoragePolicy: Int, Sendable, Hashable, CaseIterable {
    /// `0`: nothing is stored; a broadcast must have `apns-expiration: 0`. A higher send budget.
    case noMessageStored = 0
    /// `1`: the most recent message is kept (up to 8 hours) for devices that subscribe later.
    case mostRecentMessageStored = 1
}

/// The `apns-priority` of a broadcast: APNs takes 10, 5 and 1 on a channel.
public enum APNSBroadcastPriority: Int, Sendable, Hashable {
    /// `1`: delivered when it costs the devices least; may be grouped with others.
    case lowest = 1
    /// `5`: opportunistic; may be grouped and throttled. For routine updates.
    case conservePower = 5
    /// `10`: at once. For milestones (the start of a race, its finish).
    case immediate = 10

    public init(_ priority: APNSPriority) {
        switch priority {
        case .conservePower: self = .conservePower
        case .immediate: self = .immediate
        }
    }
}

/// One Live Activity update or end for every device subscribed to a channel (iOS 18):
/// `POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`. A broadcast cannot start an
/// activity; devices join by push-to-start with `input-push-channel`, or the app subscribes.
public struct APNSBroadcastRequest: Sendable, Hashable {
    /// The channel id APNs gave when the channel was created (base64).
    public var channelID: String
    /// The app's bundle id (in the path; a broadcast has no `apns-topic`).
    public var bundleID: String
    public var priority: APNSBroadcastPriority
    /// `apns-expiration`, required on a broadcast: epoch seconds, or `0` to deliver once. A
    /// channel that stores nothing takes only `0`.
    public var expiration: Int
    /// `apns-id`. When `nil` the client generates one.
    public var apnsID: UUID?
    /// The JSON body, at most ``APNSLimits/maximumBroadcastPayloadSize`` bytes.
    public var payload: Data

    public init(channelID: String, bundleID: String, priority: APNSBroadcastPriority, expiration: Int = 0,
                apnsID: UUID? = nil, payload: Data)
    {
        self.channelID = channelID
        self.bundleID = bundleID
        self.priority = priority
        self.expiration = expiration
        self.apnsID = apnsID
        self.payload = payload
    }

    /// A Live Activity `update` or `end` for the channel's followers.
    public init(liveActivity payload: LiveActivityPayload, channelID: String, bundleID: String,
                priority: APNSBroadcastPriority, expiration: Int = 0, apnsID: UUID? = nil) throws
    {
        if payload.event == .start {
            throw APNSPayloadError.invalid("A broadcast cannot start a Live Activity: send a push-to-start with `input-push-channel` to each device, or let the app subscribe to the channel.")
        }
        self.init(channelID: channelID, bundleID: bundleID, priority: priority, expiration: expiration, apnsID: apnsID,
                  payload: try payload.encoded(limit: APNSLimits.maximumBroadcastPayloadSize))
    }

    /// Checks what can be checked before sending.
    func validate() throws {
        guard APNSChannelIDs.isWellFormed(self.channelID) else {
            throw APNSRequestError(
                code: .invalidChannelID,
                message: "The channel id `\(self.channelID.prefix(60))` is not base64 text; use the id APNs answered when the channel was created."
            )
        }
        guard !self.bundleID.isEmpty else {
            throw APNSRequestError(code: .missingTopic, message: "The broadcast has no bundle id: set it to the app's bundle id.")
        }
        guard self.expiration >= 0 else {
            throw APNSRequestError(code: .invalidExpiration, message: "apns-expiration must be 0 (deliver once) or a time in epoch seconds, not \(self.expiration).")
        }
        guard !self.payload.isEmpty else {
            throw APNSRequestError(code: .emptyPayload, message: "The broadcast's payload is empty.")
        }
        guard self.payload.count <= APNSLimits.maximumBroadcastPayloadSize else {
            throw APNSPayloadError.tooLarge(size: self.payload.count, limit: APNSLimits.maximumBroadcastPayloadSize)
        }
    }
}

/// APNs accepted the broadcast: it fans it out to the channel's subscribers.
public struct APNSBroadcastResult: Sendable, Hashable {
    /// The `apns-id` of the request.
    public let apnsID: UUID
    /// `apns-unique-id`, APNs' own id of the broadcast (for the Push Notifications Console), when sent.
    public let uniqueID: String?
}

/// A channel as APNs reports it.
public struct APNSChannel: Sendable, Hashable {
    public let id: String
    public let storagePolicy: APNSMessageStoragePolicy?
}

enum APNSChannelIDs {
    /// Channel ids are base64 of no fixed size: letters, digits, `+`, `/`, up to two `=`.
    static func isWellFormed(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard !bytes.isEmpty, bytes.count <= 512 else { return false }
        let body = bytes.prefix { $0 != UInt8(ascii: "=") }
        let padding = bytes.count - body.count
        guard padding <= 2, bytes[body.count...].allSatisfy({ $0 == UInt8(ascii: "=") }) else { return false }
        return body.allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
    }
}

extension APNSClientConfiguration.Environment {
    /// The channel management host: `api-manage-broadcast.push.apple.com:2196`, in the sandbox
    /// `api-manage-broadcast.sandbox.push.apple.com:2195`; a custom endpoint serves both.
    public var channelManagementBaseURL: String {
        switch self {
        case .production: "https://api-manage-broadcast.push.apple.com:2196"
        case .sandbox: "https://api-manage-broadcast.sandbox.push.apple.com:2195"
        case .custom: self.baseURL
        }
    }
}

extension APNSClientConfiguration {
    /// Where broadcasts go, without a trailing slash.
    public var broadcastBaseURL: String { self.broadcastURLOverride.map(Self.trimmed) ?? self.environment.baseURL }

    /// Where channel requests go, without a trailing slash.
    public var channelManagementBaseURL: String {
        self.channelManagementURLOverride.map(Self.trimmed) ?? self.environment.channelManagementBaseURL
    }

    private static func trimmed(_ url: String) -> String {
        url.hasSuffix("/") ? String(url.dropLast()) : url
    }
}
