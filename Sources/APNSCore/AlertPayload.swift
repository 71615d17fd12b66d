import Foundation

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
        var alert = [("title", self.title.member), ("body", self.body.member)]
        if let subtitle = self.subtitle { alert.append(("subtitle", subtitle.member)) }
        var aps: [(String, PayloadMember)] = [("alert", .object(alert))]
        if let sound = self.sound { aps.append(("sound", .value(sound.json))) }
        if let badge = self.badge { aps.append(("badge", .value(.int(badge)))) }
        if let threadID = self.threadID { aps.append(("thread-id", .value(.string(threadID)))) }
        if let category = self.category { aps.append(("category", .value(.string(category)))) }
        if let level = self.interruptionLevel { aps.append(("interruption-level", .value(.string(level.rawValue)))) }
        if let relevanceScore = self.relevanceScore { aps.append(("relevance-score", .value(.double(relevanceScore)))) }

        var body: [UInt8] = Array("{\"aps\":".utf8)
        PayloadMember.object(aps).write(into: &body)
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
