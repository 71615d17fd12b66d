import Foundation
import WorkflowKit

/// What one transition made the activity show, as stored in `order_transitions.rendered`.
///
/// The engine renders a transition once, when it commits; the worker later merges the stored
/// renderings of an order's pending transitions into one push (newest content, newest alert).
public struct StoredRendering: Codable, Sendable, Hashable {
    /// `start`, `update` or `end`.
    public var event: ActivityEvent
    /// The state the order is in after the transition.
    public var state: String
    /// The full ContentState, in the app's JSON shape.
    public var content: JSONValue
    public var alert: ActivityAlert?
    /// Epoch seconds after which the device shows the content as stale.
    public var staleDate: Int?
    public var relevanceScore: Double?
    /// 5 or 10.
    public var priority: Int
    /// For `end`: epoch seconds at which the ended activity leaves the Lock Screen; nil for the
    /// system default.
    public var dismissalDate: Int?
    /// When the transition happened, epoch seconds: the basis of `aps.timestamp`.
    public var timestamp: Int

    public init(_ update: RenderedActivityUpdate) {
        event = update.event
        state = update.state
        content = update.contentState
        alert = update.alert
        staleDate = update.staleDate.map(LiveActivityPayload.epochSeconds)
        relevanceScore = update.relevanceScore
        priority = update.priority
        dismissalDate = update.dismissalDate.map(LiveActivityPayload.epochSeconds)
        timestamp = LiveActivityPayload.epochSeconds(update.timestamp)
    }

    public var isEnd: Bool { event == .end }

    /// The same JSON object `Codable` gives (nil fields left out), built directly: every advance
    /// stores one, and `JSONEncoder` cost a tenth of the engine's CPU per advance.
    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "event": .string(event.rawValue), "state": .string(state), "content": content,
            "priority": .int(priority), "timestamp": .int(timestamp),
        ]
        if let alert { object["alert"] = alert.json }
        if let staleDate { object["staleDate"] = .int(staleDate) }
        if let relevanceScore { object["relevanceScore"] = .double(relevanceScore) }
        if let dismissalDate { object["dismissalDate"] = .int(dismissalDate) }
        return .object(object)
    }

    /// Reads the object `json` gives (as stored in `order_transitions.rendered`), as `Codable`
    /// would, from an already parsed value: the worker reads every pending transition's
    /// rendering, and `JSONDecoder` (through `JSONValue`'s own `Decodable`, member by member)
    /// costs a large share of the machine's CPU under overload.
    init(json: JSONValue) throws {
        func field<T>(_ key: String, _ read: (JSONValue) -> T?) throws -> T {
            guard let value = json[key], let read = read(value) else { throw Self.malformed(key) }
            return read
        }
        func optional<T>(_ key: String, _ read: (JSONValue) -> T?) throws -> T? {
            guard let value = json[key], !value.isNull else { return nil }
            guard let read = read(value) else { throw Self.malformed(key) }
            return read
        }
        event = try field("event") { $0.stringValue.flatMap(ActivityEvent.init(rawValue:)) }
        state = try field("state", \.stringValue)
        content = try field("content") { $0.numbersAsCodableReadsThem }
        // Alerts are few and have localizable parts: `Codable` reads them.
        alert = try optional("alert") { value in try? JSONDecoder().decode(ActivityAlert.self, from: Data(value.jsonString.utf8)) }
        staleDate = try optional("staleDate", \.intValue)
        relevanceScore = try optional("relevanceScore", \.doubleValue)
        priority = try field("priority", \.intValue)
        dismissalDate = try optional("dismissalDate", \.intValue)
        timestamp = try field("timestamp", \.intValue)
    }

    private static func malformed(_ key: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "a stored rendering's \"\(key)\" is missing or of the wrong type"))
    }
}

extension JSONValue {
    /// The value with every whole number written with a fraction (`2.0`) as an integer, as
    /// `JSONValue`'s `Decodable` reads it (an `Int` first): what the worker pushed before it
    /// parsed renderings itself, so the pushed bytes stay the same. Returns the value itself (no copy) when it holds no such number, as content almost never does.
    var numbersAsCodableReadsThem: JSONValue {
        hasWholeDouble ? wholeDoublesAsIntegers : self
    }

    private var hasWholeDouble: Bool {
        switch self {
        case .double(let value): return Int(exactly: value) != nil
        case .array(let items): return items.contains { $0.hasWholeDouble }
        case .object(let members): return members.values.contains { $0.hasWholeDouble }
        case .null, .bool, .int, .string: return false
        }
    }

    private var wholeDoublesAsIntegers: JSONValue {
        switch self {
        case .double(let value):
            if let whole = Int(exactly: value) { return .int(whole) }
            return self
        case .array(let items):
            return .array(items.map(\.wholeDoublesAsIntegers))
        case .object(let members):
            return .object(members.mapValues(\.wholeDoublesAsIntegers))
        case .null, .bool, .int, .string:
            return self
        }
    }
}
