import APNSCore
import Foundation
import NIOCore
import NIOHTTP1

/// A broadcast the stand-in accepted, with the devices it reached.
public struct LocalAPNSBroadcast: Sendable {
    public let bundleID: String
    public let channelID: String
    public let apnsID: UUID
    /// `apns-unique-id` answered.
    public let uniqueID: String
    public let priority: Int
    public let expiration: Int64
    public let payload: JSONValue
    public let rawPayload: [UInt8]
    /// The devices subscribed to the channel when it arrived: one request, this many deliveries.
    public let subscribers: Set<String>
    public let receivedAt: Date

    public var aps: JSONValue? { self.payload["aps"] }
}

/// A channel of the stand-in's channel management API.
public struct LocalAPNSChannel: Sendable, Hashable {
    public let bundleID: String
    public let id: String
    public let storagePolicy: Int
}

/// The stand-in's channels, subscriptions and broadcasts.
struct BroadcastState {
    var channels: [String: LocalAPNSChannel] = [:]
    /// Device ids by channel id: the devices a broadcast fans out to.
    var subscribers: [String: Set<String>] = [:]
    var broadcasts: [LocalAPNSBroadcast] = []
    var broadcastCount = 0
    var deliveryCount = 0
    var channelRequestCount = 0
    /// APNs allows 10,000 channels per app and environment.
    var channelLimit = 10_000
}

extension LocalAPNSCore {
    static let channelPathPrefix = "/1/apps/"
    static let broadcastPathPrefix = "/4/broadcasts/apps/"

    /// Channel management (`/1/apps/<bundle id>/channels`, `/all-channels`) and broadcasts
    /// (`/4/broadcasts/apps/<bundle id>`), checked as APNs documents them.
    func respondToBroadcastAPI(method: HTTPMethod, path: String, headers: HTTPHeaders, body: ByteBuffer?, bodySize: Int,
                               now: Date) -> LocalAPNSReply
    {
        var apnsID = UUID().uuidString.lowercased()
        var values: [String: String] = [:]
        for (name, value) in headers { values[name.lowercased()] = value }
        let channelHeader = values["apns-channel-id"]
        func reject(_ status: Int, _ reason: String, _ detail: String? = nil) -> LocalAPNSReply {
            self.recordRejection(
                LocalAPNSRejection(deviceToken: channelHeader ?? "", status: status, reason: reason, detail: detail,
                                   injected: false, receivedAt: now))
            return LocalAPNSReply(status: status, apnsID: apnsID, body: Self.errorBody(reason: reason, detail: detail))
        }
        if let requestedID = values["apns-id"] {
            guard UUID(uuidString: requestedID) != nil else { return reject(400, "BadMessageId", "apns-id must be a UUID") }
            apnsID = requestedID.lowercased()
        }
        guard let authorization = values["authorization"] else {
            return reject(403, "MissingProviderToken", "no authorization header")
        }
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return reject(403, "InvalidProviderToken", "authorization must be 'bearer <jwt>'")
        }
        if case .invalid(let status, let reason, let detail) = self.verifyProviderToken(String(authorization.dropFirst(7)), now: now) {
            return reject(status, reason, detail)
        }

        if path.hasPrefix(Self.broadcastPathPrefix) {
            let bundleID = String(path.dropFirst(Self.broadcastPathPrefix.count))
            guard method == .POST else { return reject(405, "MethodNotAllowed", "a broadcast is a POST") }
            return self.broadcast(bundleID: bundleID, values: values, body: body, bodySize: bodySize, apnsID: apnsID, now: now,
                                  reject: reject)
        }
        let rest = path.dropFirst(Self.channelPathPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 2, !rest[0].isEmpty else {
            return reject(404, "BadPath", "the path must be /1/apps/<bundle id>/channels or /1/apps/<bundle id>/all-channels")
        }
        let bundleID = String(rest[0])
        self.broadcastState.withLock { $0.channelRequestCount += 1 }
        switch (method, rest[1]) {
        case (.GET, "all-channels"):
            let ids = self.broadcastState.withLock { state in
                state.channels.values.filter { $0.bundleID == bundleID }.map(\.id).sorted()
            }
            let list = ids.map { "\"\($0)\"" }.joined(separator: ",")
            return LocalAPNSReply(status: 200, apnsID: apnsID, body: Array("{\"channels\":[\(list)]}".utf8))
        case (.POST, "channels"):
            guard bodySize > 0, let body, let request = try? JSONValue(parsing: Array(body.readableBytesView)) else {
                return reject(400, "PayloadEmpty", "a channel is created with {\"message-storage-policy\": 0|1, \"push-type\": \"LiveActivity\"}")
            }
            guard let pushType = request["push-type"]?.stringValue else {
                return reject(400, "MissingPushType", "the body needs \"push-type\": \"LiveActivity\"")
            }
            guard pushType == "LiveActivity" else {
                return reject(400, "InvalidPushType", "channels carry only \"push-type\": \"LiveActivity\", not \"\(pushType)\"")
            }
            guard let policy = request["message-storage-policy"]?.integerValue, policy == 0 || policy == 1 else {
                return reject(400, "InvalidPolicy", "message-storage-policy must be 0 (no storage) or 1 (the most recent message)")
            }
            var idBytes = [UInt8](repeating: 0, count: 16)
            for index in idBytes.indices { idBytes[index] = UInt8.random(in: 0...255) }
            let id = Data(idBytes).base64EncodedString()
            let created: Bool = self.broadcastState.withLock { state in
                guard state.channels.values.filter({ $0.bundleID == bundleID }).count < state.channelLimit else { return false }
                state.channels[id] = LocalAPNSChannel(bundleID: bundleID, id: id, storagePolicy: policy)
                return true
            }
            guard created else {
                return reject(400, "CannotCreateChannelConfig", "the app has the most channels allowed; delete ended ones")
            }
            return LocalAPNSReply(status: 201, apnsID: apnsID, body: nil, headers: [("apns-channel-id", id)])
        case (.GET, "channels"), (.DELETE, "channels"):
            guard let id = channelHeader, !id.isEmpty else { return reject(400, "MissingChannelId", "the apns-channel-id header is required") }
            guard Data(base64Encoded: id) != nil else { return reject(400, "BadChannelId", "the channel id is not base64") }
            let channel: LocalAPNSChannel? = self.broadcastState.withLock { state in
                guard let channel = state.channels[id], channel.bundleID == bundleID else { return nil }
                if method == .DELETE {
                    state.channels.removeValue(forKey: id)
                    state.subscribers.removeValue(forKey: id)
                }
                return channel
            }
            guard let channel else { return reject(400, "ChannelNotRegistered", "no channel \(id) for \(bundleID)") }
            if method == .DELETE { return LocalAPNSReply(status: 204, apnsID: apnsID, body: nil) }
            return LocalAPNSReply(status: 200, apnsID: apnsID, body: Array("{\"message-storage-policy\":\(channel.storagePolicy)}".utf8))
        default:
            return reject(405, "MethodNotAllowed", "\(method.rawValue) \(path) is not part of the channel management API")
        }
    }

    private func broadcast(bundleID: String, values: [String: String], body: ByteBuffer?, bodySize: Int, apnsID: String, now: Date,
                           reject: (Int, String, String?) -> LocalAPNSReply) -> LocalAPNSReply
    {
        guard let channelID = values["apns-channel-id"], !channelID.isEmpty else {
            return reject(400, "MissingChannelId", "a broadcast needs the apns-channel-id header")
        }
        guard Data(base64Encoded: channelID) != nil else { return reject(400, "BadChannelId", "the channel id is not base64") }
        guard let pushType = values["apns-push-type"] else {
            return reject(400, "MissingPushType", "a broadcast needs apns-push-type: liveactivity")
        }
        guard pushType == "liveactivity" else {
            return reject(400, "InvalidPushType", "a broadcast carries only liveactivity pushes, not \(pushType)")
        }
        guard let priorityText = values["apns-priority"], let priority = Int(priorityText), [1, 5, 10].contains(priority) else {
            return reject(400, "BadPriority", "a broadcast needs apns-priority 10, 5 or 1")
        }
        guard let expirationText = values["apns-expiration"], let expiration = Int64(expirationText), expiration >= 0 else {
            return reject(400, "BadExpirationDate", "a broadcast needs apns-expiration: 0 or epoch seconds")
        }
        guard let channel = self.broadcastState.withLock({ $0.channels[channelID] }), channel.bundleID == bundleID else {
            return reject(400, "ChannelNotRegistered", "no channel \(channelID) for \(bundleID)")
        }
        if channel.storagePolicy == 0, expiration != 0 {
            return reject(400, "InvalidPolicy", "the channel stores no messages: apns-expiration must be 0")
        }
        guard bodySize > 0, let body else { return reject(400, "PayloadEmpty", nil) }
        guard bodySize <= APNSLimits.maximumBroadcastPayloadSize else {
            return reject(413, "PayloadTooLarge", "the payload is \(bodySize) bytes; a broadcast takes at most \(APNSLimits.maximumBroadcastPayloadSize)")
        }
        let rawPayload = Array(body.readableBytesView)
        guard let payload = try? JSONValue(parsing: rawPayload), let aps = payload["aps"]?.objectValue else {
            return reject(400, "InvalidPayload", "the payload must be a JSON object with an 'aps' object")
        }
        if let problem = Self.liveActivityProblem(aps) { return reject(400, "InvalidPayload", problem) }
        if aps["event"]?.stringValue == "start" {
            return reject(400, "InvalidPayload", "a broadcast cannot start a Live Activity (send push-to-start with input-push-channel)")
        }
        let (fault, delay) = self.takeFault(forToken: channelID)
        if let fault {
            self.recordRejection(LocalAPNSRejection(deviceToken: channelID, status: fault.status, reason: fault.reason, detail: nil,
                                                    injected: true, receivedAt: now))
            return LocalAPNSReply(status: fault.status, apnsID: apnsID, body: Self.errorBody(reason: fault.reason), delay: delay)
        }
        let uniqueID = UUID().uuidString.lowercased()
        self.broadcastState.withLock { state in
            let subscribers = state.subscribers[channelID] ?? []
            state.broadcastCount += 1
            state.deliveryCount += subscribers.count
            state.broadcasts.append(
                LocalAPNSBroadcast(bundleID: bundleID, channelID: channelID, apnsID: UUID(uuidString: apnsID) ?? UUID(), uniqueID: uniqueID,
                                   priority: priority, expiration: expiration, payload: payload, rawPayload: rawPayload,
                                   subscribers: subscribers, receivedAt: now))
        }
        return LocalAPNSReply(status: 200, apnsID: apnsID, body: nil, delay: delay, headers: [("apns-unique-id", uniqueID)])
    }
}

extension LocalAPNSServer {
    // MARK: Channels and broadcasts

    /// Subscribes a device to a channel, as an app does with `pushType: .channel(id)` or a
    /// push-to-start with `input-push-channel`: each broadcast on the channel then reaches it.
    public func subscribe(device: String, toChannel channelID: String) {
        _ = self.core.broadcastState.withLock { $0.subscribers[channelID, default: []].insert(device) }
    }

    /// The channels that exist now.
    public func channels() -> [LocalAPNSChannel] {
        self.core.broadcastState.withLock { Array($0.channels.values) }.sorted { $0.id < $1.id }
    }

    /// Every accepted broadcast since the last ``resetBroadcasts()``, in arrival order.
    public func broadcasts() -> [LocalAPNSBroadcast] { self.core.broadcastState.withLock { $0.broadcasts } }

    /// Accepted broadcast requests, and the deliveries they fanned out to (one per subscribed device).
    public var broadcastCounts: (requests: Int, deliveries: Int, channelRequests: Int) {
        self.core.broadcastState.withLock { ($0.broadcastCount, $0.deliveryCount, $0.channelRequestCount) }
    }

    /// The broadcasts that reached `device`.
    public func broadcasts(reaching device: String) -> [LocalAPNSBroadcast] {
        self.broadcasts().filter { $0.subscribers.contains(device) }
    }

    /// Forgets a channel as APNs may (deleted elsewhere, expired): broadcasts to it then answer
    /// `400 ChannelNotRegistered`. Returns whether it existed.
    @discardableResult
    public func dropChannel(_ channelID: String) -> Bool {
        self.core.broadcastState.withLock { state in
            state.subscribers[channelID] = nil
            return state.channels.removeValue(forKey: channelID) != nil
        }
    }

    /// The devices subscribed to a channel.
    public func subscribers(ofChannel channelID: String) -> Set<String> {
        self.core.broadcastState.withLock { $0.subscribers[channelID] ?? [] }
    }

    /// Sets how many channels an app may have (10,000, as APNs, unless a test lowers it).
    public func setChannelLimit(_ limit: Int) {
        self.core.broadcastState.withLock { $0.channelLimit = limit }
    }

    /// Forgets broadcasts and counters; channels and subscriptions stay.
    public func resetBroadcasts() {
        self.core.broadcastState.withLock { state in
            state.broadcasts.removeAll()
            state.broadcastCount = 0
            state.deliveryCount = 0
            state.channelRequestCount = 0
        }
    }

    /// Waits until at least `count` broadcasts were accepted.
    @discardableResult
    public func waitForBroadcasts(count: Int, timeout: Duration = .seconds(10)) async throws -> [LocalAPNSBroadcast] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let broadcasts = self.broadcasts()
            if broadcasts.count >= count { return broadcasts }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LocalAPNSServerError(message: "The local APNs accepted \(self.broadcasts().count) broadcasts, not \(count), within \(timeout).")
    }
}
