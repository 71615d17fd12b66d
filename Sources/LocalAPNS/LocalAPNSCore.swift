import Crypto
import APNSCore
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// The answer the stand-in gives to one request.
struct LocalAPNSReply: Sendable {
    var status: Int
    var apnsID: String
    var body: [UInt8]?
    var delay: Duration?
    /// Response headers beyond `:status` and `apns-id` (`apns-channel-id`, `apns-unique-id`).
    var headers: [(name: String, value: String)] = []
}

/// Verifies requests as APNs does, applies injected faults and records what it accepted.
/// Shared by every connection and stream of one ``LocalAPNSServer``.
final class LocalAPNSCore: Sendable {
    let configuration: LocalAPNSServer.Configuration
    let keysByID: [String: LocalAPNSServer.SigningKey]
    let providerTokens = Mutex(ProviderTokenCache())
    let faults = Mutex(FaultState())
    let records = Mutex(RecordState())
    /// Channels, their subscribers and the broadcasts sent to them (LocalAPNSBroadcast.swift).
    let broadcastState = Mutex(BroadcastState())

    init(configuration: LocalAPNSServer.Configuration) {
        self.configuration = configuration
        self.keysByID = Dictionary(configuration.signingKeys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
    }

    // MARK: Handling a request

    private static let devicePathPrefix = "/3/device/"
    private static let liveActivitySuffix = ".push-type.liveactivity"
    private static let knownPushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm",
        "liveactivity", "pushtotalk", "widgets", "controls",
    ]

    func respond(method: HTTPMethod, uri: String, headers: HTTPHeaders, body: ByteBuffer?, bodySize: Int) -> LocalAPNSReply {
        let now = Date()
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
        if path.hasPrefix(Self.channelPathPrefix) || path.hasPrefix(Self.broadcastPathPrefix) {
            return self.respondToBroadcastAPI(method: method, path: path, headers: headers, body: body, bodySize: bodySize, now: now)
        }
        let deviceToken = path.hasPrefix(Self.devicePathPrefix) ? String(path.dropFirst(Self.devicePathPrefix.count)) : ""

        var apnsID = ""
        func reject(_ status: Int, _ reason: String, _ detail: String? = nil) -> LocalAPNSReply {
            self.recordRejection(
                LocalAPNSRejection(
                    deviceToken: deviceToken, status: status, reason: reason, detail: detail,
                    injected: false, receivedAt: now
                )
            )
            return LocalAPNSReply(status: status, apnsID: apnsID, body: Self.errorBody(reason: reason, detail: detail))
        }

        // Headers by lower-cased name; APNs refuses a repeated apns-* or authorization header.
        var headerValues: [String: String] = [:]
        headerValues.reserveCapacity(12)
        var duplicate: String?
        for (name, value) in headers {
            let name = name.lowercased()
            if headerValues.updateValue(value, forKey: name) != nil, name.hasPrefix("apns-") || name == "authorization" {
                duplicate = name
            }
        }

        if let requestedID = headerValues["apns-id"] {
            guard Self.isUUIDText(requestedID) else {
                apnsID = UUID().uuidString.lowercased()
                return reject(400, "BadMessageId", "apns-id must be a UUID")
            }
            apnsID = requestedID.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) })
                ? requestedID.lowercased() : requestedID
        } else {
            apnsID = UUID().uuidString.lowercased()
        }
        guard method == .POST else {
            return reject(405, "MethodNotAllowed", "only POST is supported")
        }
        guard path.hasPrefix(Self.devicePathPrefix) else {
            return reject(404, "BadPath", "the path must be /3/device/<device token>")
        }
        if let duplicate {
            return reject(400, "DuplicateHeaders", "the header \(duplicate) appears more than once")
        }
        guard !deviceToken.isEmpty else {
            return reject(400, "MissingDeviceToken")
        }
        guard deviceToken.utf8.count % 2 == 0, deviceToken.utf8.allSatisfy(Self.isHexDigit) else {
            return reject(400, "BadDeviceToken", "the device token must be an even number of hexadecimal digits")
        }

        // Provider token.
        guard let authorization = headerValues["authorization"] else {
            return reject(403, "MissingProviderToken", "no authorization header")
        }
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return reject(403, "InvalidProviderToken", "authorization must be 'bearer <jwt>'")
        }
        let keyID: String
        switch self.verifyProviderToken(String(authorization.dropFirst(7)), now: now) {
        case .valid(let verifiedKeyID):
            keyID = verifiedKeyID
        case .invalid(let status, let reason, let detail):
            return reject(status, reason, detail)
        }

        // Topic, push type, priority, expiration, collapse id.
        guard let topic = headerValues["apns-topic"], !topic.isEmpty else {
            return reject(400, "MissingTopic", "apns-topic is required with token authentication")
        }
        let pushType = headerValues["apns-push-type"] ?? "alert"
        guard Self.knownPushTypes.contains(pushType) else {
            return reject(400, "InvalidPushType", "unknown apns-push-type '\(pushType)'")
        }
        let isLiveActivity = pushType == "liveactivity"
        let hasLiveActivitySuffix = topic.hasSuffix(Self.liveActivitySuffix)
        if isLiveActivity, !hasLiveActivitySuffix {
            return reject(400, "TopicDisallowed", "a liveactivity push needs the topic '<bundle id>\(Self.liveActivitySuffix)'")
        }
        if !isLiveActivity, hasLiveActivitySuffix {
            return reject(400, "InvalidPushType", "the topic '\(topic)' takes apns-push-type liveactivity")
        }
        if let accepted = self.configuration.acceptedBundleIDs {
            let bundleID = hasLiveActivitySuffix ? String(topic.dropLast(Self.liveActivitySuffix.count)) : topic
            guard accepted.contains(bundleID) else {
                return reject(400, "DeviceTokenNotForTopic", "the stand-in accepts only \(accepted.sorted())")
            }
        }
        var priority = 10
        if let text = headerValues["apns-priority"] {
            guard let value = Int(text), value == 5 || value == 10 else {
                return reject(400, "BadPriority", "apns-priority must be 5 or 10")
            }
            priority = value
        }
        var expiration: Int64?
        if let text = headerValues["apns-expiration"] {
            guard let value = Int64(text), value >= 0 else {
                return reject(400, "BadExpirationDate", "apns-expiration must be integer epoch seconds")
            }
            expiration = value
        }
        let collapseID = headerValues["apns-collapse-id"]
        if let collapseID, collapseID.utf8.count > 64 {
            return reject(400, "BadCollapseId", "apns-collapse-id is longer than 64 bytes")
        }

        // Payload.
        guard bodySize > 0, let body else {
            return reject(400, "PayloadEmpty")
        }
        guard bodySize <= APNSLimits.maximumPayloadSize else {
            return reject(413, "PayloadTooLarge", "the payload is \(bodySize) bytes; at most \(APNSLimits.maximumPayloadSize) are accepted")
        }
        let rawPayload = Array(body.readableBytesView)
        let payload: JSONValue
        do {
            payload = try JSONValue(parsing: rawPayload)
        } catch {
            return reject(400, "InvalidPayload", "the payload is not JSON: \(error)")
        }
        guard let aps = payload["aps"]?.objectValue else {
            return reject(400, "InvalidPayload", "the payload must be a JSON object with an 'aps' object")
        }
        if isLiveActivity, let problem = Self.liveActivityProblem(aps) {
            return reject(400, "InvalidPayload", problem)
        }

        // The request is one APNs would accept: apply injected faults, then record it.
        let (fault, delay) = self.takeFault(forToken: deviceToken)
        if let fault {
            self.recordRejection(
                LocalAPNSRejection(
                    deviceToken: deviceToken, status: fault.status, reason: fault.reason, detail: nil,
                    injected: true, receivedAt: now
                )
            )
            let timestamp = fault.timestamp.map { Int64(($0.timeIntervalSince1970 * 1000).rounded(.down)) }
            return LocalAPNSReply(
                status: fault.status,
                apnsID: apnsID,
                body: Self.errorBody(reason: fault.reason, timestamp: timestamp),
                delay: delay
            )
        }
        if self.configuration.recordsPushes {
            let push = LocalAPNSPush(
                deviceToken: deviceToken,
                apnsID: UUID(uuidString: apnsID)!,
                topic: topic,
                pushType: pushType,
                priority: priority,
                expiration: expiration,
                collapseID: collapseID,
                keyID: keyID,
                headers: headerValues,
                payload: payload,
                rawPayload: rawPayload,
                receivedAt: now
            )
            self.recordAccepted(push)
        } else {
            self.recordAccepted(nil)
        }
        return LocalAPNSReply(status: 200, apnsID: apnsID, body: nil, delay: delay)
    }

    /// Whether `text` is a UUID in its 8-4-4-4-12 hexadecimal form (what `UUID(uuidString:)`
    /// accepts, checked without its sscanf).
    static func isUUIDText(_ text: String) -> Bool {
        var count = 0
        for byte in text.utf8 {
            let isDashPosition = count == 8 || count == 13 || count == 18 || count == 23
            guard isDashPosition ? byte == UInt8(ascii: "-") : Self.isHexDigit(byte) else { return false }
            count += 1
            if count > 36 { return false }
        }
        return count == 36
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    /// What APNs or the device would refuse in a Live Activity `aps`, or `nil`.
    static func liveActivityProblem(_ aps: [String: JSONValue]) -> String? {
        guard aps["timestamp"]?.integerValue != nil else {
            return "aps.timestamp must be an integer (epoch seconds)"
        }
        guard let event = aps["event"]?.stringValue, ["start", "update", "end"].contains(event) else {
            return "aps.event must be start, update or end"
        }
        if let contentState = aps["content-state"], contentState.objectValue == nil {
            return "aps.content-state must be an object"
        }
        if event != "end", aps["content-state"] == nil {
            return "aps.content-state is required on \(event)"
        }
        if aps["sound"] != nil {
            return "for a Live Activity, sound belongs inside aps.alert"
        }
        for key in ["stale-date", "dismissal-date"] where aps[key] != nil && aps[key]?.integerValue == nil {
            return "aps.\(key) must be an integer (epoch seconds)"
        }
        if let alert = aps["alert"], alert.objectValue == nil, alert.stringValue == nil {
            return "aps.alert must be an object"
        }
        if event == "start" {
            guard let alert = aps["alert"], !isEmptyAlert(alert) else {
                return "a start needs a non-empty aps.alert (without one the start silently fails)"
            }
            guard let type = aps["attributes-type"]?.stringValue, !type.isEmpty else {
                return "a start needs aps.attributes-type"
            }
            guard aps["attributes"]?.objectValue != nil else {
                return "a start needs an aps.attributes object"
            }
        }
        return nil
    }

    private static func isEmptyAlert(_ alert: JSONValue) -> Bool {
        if let text = alert.stringValue { return text.isEmpty }
        func isEmptyText(_ value: JSONValue?) -> Bool {
            guard let value else { return true }
            if let text = value.stringValue { return text.isEmpty }
            if let key = value["loc-key"]?.stringValue { return key.isEmpty }
            return true
        }
        return isEmptyText(alert["title"]) && isEmptyText(alert["body"])
    }

    static func errorBody(reason: String, timestamp: Int64? = nil, detail: String? = nil) -> [UInt8] {
        var members = ["\"reason\":" + quoted(reason)]
        if let timestamp { members.append("\"timestamp\":\(timestamp)") }
        // `detail` is the stand-in's own addition, to say which check failed.
        if let detail { members.append("\"detail\":" + quoted(detail)) }
        return Array("{\(members.joined(separator: ","))}".utf8)
    }

    private static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
