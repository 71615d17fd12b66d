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
    private let keysByID: [String: LocalAPNSServer.SigningKey]
    private let providerTokens = Mutex(ProviderTokenCache())
    private let faults = Mutex(FaultState())
    private let records = Mutex(RecordState())
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

    // MARK: Provider tokens

    enum ProviderTokenVerdict: Sendable {
        case valid(keyID: String)
        case invalid(status: Int, reason: String, detail: String)
    }

    private struct VerifiedToken: Sendable {
        var keyID: String
        var issuedAt: Int64
    }

    private enum CachedVerdict: Sendable {
        case valid(VerifiedToken)
        case invalid(status: Int, reason: String, detail: String)
    }

    private struct ProviderTokenCache {
        var verdicts: [String: CachedVerdict] = [:]
        /// The newest `iat` seen per key id, to notice regeneration faster than allowed.
        var newestIssuedAt: [String: Int64] = [:]
    }

    /// Checks signature, key id, team and `iat`. Signature checks are cached per distinct token
    /// string (a sender reuses one token for many requests); the age is checked every time.
    func verifyProviderToken(_ jwt: String, now: Date) -> ProviderTokenVerdict {
        let cached = self.providerTokens.withLock { $0.verdicts[jwt] }
        let verdict: CachedVerdict
        if let cached {
            verdict = cached
        } else {
            var fresh = self.verifySignature(jwt)
            verdict = self.providerTokens.withLock { cache in
                if case .valid(let token) = fresh, let interval = self.configuration.minimumProviderTokenInterval {
                    if let newest = cache.newestIssuedAt[token.keyID], token.issuedAt > newest,
                        Duration.seconds(token.issuedAt - newest) < interval
                    {
                        fresh = .invalid(
                            status: 429,
                            reason: "TooManyProviderTokenUpdates",
                            detail: "a new provider token for key \(token.keyID) only \(token.issuedAt - newest) s after the previous one"
                        )
                    } else {
                        cache.newestIssuedAt[token.keyID] = max(cache.newestIssuedAt[token.keyID] ?? .min, token.issuedAt)
                    }
                }
                if cache.verdicts.count >= 10_000 {
                    cache.verdicts.removeAll(keepingCapacity: true)
                }
                cache.verdicts[jwt] = fresh
                return fresh
            }
        }
        switch verdict {
        case .invalid(let status, let reason, let detail):
            return .invalid(status: status, reason: reason, detail: detail)
        case .valid(let token):
            let age = Int64(now.timeIntervalSince1970.rounded(.down)) - token.issuedAt
            let maximumAge = self.configuration.maximumProviderTokenAge.components.seconds
            if age > maximumAge {
                return .invalid(status: 403, reason: "ExpiredProviderToken", detail: "the provider token is \(age) s old")
            }
            if age < -maximumAge {
                return .invalid(status: 403, reason: "InvalidProviderToken", detail: "the provider token's iat is \(-age) s in the future")
            }
            return .valid(keyID: token.keyID)
        }
    }

    private func verifySignature(_ jwt: String) -> CachedVerdict {
        func invalid(_ detail: String) -> CachedVerdict {
            .invalid(status: 403, reason: "InvalidProviderToken", detail: detail)
        }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Self.base64URLDecode(parts[0]),
            let claimsBytes = Self.base64URLDecode(parts[1]),
            let signatureBytes = Self.base64URLDecode(parts[2]),
            let header = try? JSONValue(parsing: headerBytes),
            let claims = try? JSONValue(parsing: claimsBytes)
        else {
            return invalid("the provider token is not a JWT")
        }
        guard header["alg"]?.stringValue == "ES256" else {
            return invalid("the JWT header's alg must be ES256")
        }
        guard let keyID = header["kid"]?.stringValue else {
            return invalid("the JWT header has no kid")
        }
        guard let key = self.keysByID[keyID] else {
            return invalid("no key with id \(keyID) is known")
        }
        guard let issuer = claims["iss"]?.stringValue, issuer == key.teamID else {
            return invalid("iss must be the team id \(key.teamID)")
        }
        guard let issuedAt = claims["iat"]?.integerValue else {
            return invalid("iat must be an integer number of seconds")
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else {
            return invalid("the signature does not verify with key \(keyID)")
        }
        return .valid(VerifiedToken(keyID: keyID, issuedAt: Int64(issuedAt)))
    }

    private static func base64URLDecode(_ text: Substring) -> Data? {
        Base64URL.decode(text)
    }

    // MARK: Faults

    private struct FaultRule: Sendable {
        var fault: LocalAPNSFault
        var deviceToken: String?
        var remaining: Int?
        var until: ContinuousClock.Instant?
        /// Answers only this fraction of the matching requests, chosen at random; nil: all.
        var fraction: Double?
    }

    private struct FaultState {
        var rules: [FaultRule] = []
        var delay: Duration?
    }

    func addFault(_ fault: LocalAPNSFault, deviceToken: String?, count: Int?, duration: Duration?, fraction: Double? = nil) {
        let rule = FaultRule(
            fault: fault,
            deviceToken: deviceToken,
            remaining: count,
            until: duration.map { ContinuousClock.now + $0 },
            fraction: fraction
        )
        self.faults.withLock { $0.rules.append(rule) }
    }

    func setDelay(_ delay: Duration?) {
        self.faults.withLock { $0.delay = delay }
    }

    func clearFaults() {
        self.faults.withLock { $0 = FaultState() }
    }

    /// The fault to answer with, if any (rules for this token before rules for every token, in
    /// the order they were added), and the delay to apply.
    func takeFault(forToken deviceToken: String) -> (LocalAPNSFault?, Duration?) {
        self.faults.withLock { state in
            if state.rules.isEmpty { return (nil, state.delay) }
            let now = ContinuousClock.now
            state.rules.removeAll { rule in
                rule.remaining.map { $0 <= 0 } ?? false || rule.until.map { $0 <= now } ?? false
            }
            let index =
                state.rules.firstIndex { $0.deviceToken == deviceToken }
                ?? state.rules.firstIndex { $0.deviceToken == nil }
            guard let index else { return (nil, state.delay) }
            if let fraction = state.rules[index].fraction, Double.random(in: 0..<1) >= fraction { return (nil, state.delay) }
            let fault = state.rules[index].fault
            if let remaining = state.rules[index].remaining {
                state.rules[index].remaining = remaining - 1
            }
            return (fault, state.delay)
        }
    }

    // MARK: Records

    private struct Waiter {
        var count: Int
        var continuation: CheckedContinuation<[LocalAPNSPush], any Error>
    }

    private struct RecordState {
        var pushes: [LocalAPNSPush] = []
        var acceptedCount = 0
        var rejections: [LocalAPNSRejection] = []
        var rejectedCount = 0
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiterID: UInt64 = 0
    }

    private func recordAccepted(_ push: LocalAPNSPush?) {
        // A push-to-start with `input-push-channel` subscribes the device (named by its token)
        // to the channel, as iOS 18 does with the activity it starts.
        if let push, push.aps?["event"]?.stringValue == "start", let channel = push.aps?["input-push-channel"]?.stringValue {
            _ = self.broadcastState.withLock { $0.subscribers[channel, default: []].insert(push.deviceToken) }
        }
        let ready: [(CheckedContinuation<[LocalAPNSPush], any Error>, [LocalAPNSPush])] = self.records.withLock { state in
            if let push { state.pushes.append(push) }
            state.acceptedCount += 1
            guard !state.waiters.isEmpty else { return [] }
            var ready: [(CheckedContinuation<[LocalAPNSPush], any Error>, [LocalAPNSPush])] = []
            for (id, waiter) in state.waiters where waiter.count <= state.acceptedCount {
                state.waiters.removeValue(forKey: id)
                ready.append((waiter.continuation, state.pushes))
            }
            return ready
        }
        for (continuation, pushes) in ready {
            continuation.resume(returning: pushes)
        }
    }

    func recordRejection(_ rejection: LocalAPNSRejection) {
        self.records.withLock { state in
            state.rejectedCount += 1
            if self.configuration.recordsPushes || state.rejections.count < 10_000 {
                state.rejections.append(rejection)
            }
        }
    }

    var pushes: [LocalAPNSPush] { self.records.withLock { $0.pushes } }
    var acceptedCount: Int { self.records.withLock { $0.acceptedCount } }
    var rejections: [LocalAPNSRejection] { self.records.withLock { $0.rejections } }
    var rejectedCount: Int { self.records.withLock { $0.rejectedCount } }

    func resetRecords() {
        self.records.withLock { state in
            state.pushes.removeAll()
            state.acceptedCount = 0
            state.rejections.removeAll()
            state.rejectedCount = 0
        }
    }

    /// Returns the recorded pushes once at least `count` requests were accepted since the last reset.
    func waitForAccepted(count: Int) async throws -> [LocalAPNSPush] {
        let id: UInt64 = self.records.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[LocalAPNSPush], any Error>) in
                let immediate: Result<[LocalAPNSPush], any Error>? = self.records.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.acceptedCount >= count { return .success(state.pushes) }
                    state.waiters[id] = Waiter(count: count, continuation: continuation)
                    return nil
                }
                if let immediate {
                    continuation.resume(with: immediate)
                }
            }
        } onCancel: {
            let waiter = self.records.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }
}
