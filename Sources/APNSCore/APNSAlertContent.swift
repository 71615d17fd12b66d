import Foundation

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

    var member: PayloadMember {
        switch self {
        case .plain(let text):
            .value(.string(text))
        case .localized(let key, let arguments):
            Self.localizedMember(key: .value(.string(key)), arguments: .value(.array(arguments.map(JSONValue.string))))
        }
    }

    /// `{"loc-key": …, "loc-args": […]}`.
    static func localizedMember(key: PayloadMember, arguments: PayloadMember) -> PayloadMember {
        .object([("loc-key", key), ("loc-args", arguments)])
    }

    /// The most bytes a localized text takes: its key, and arguments of which each takes at most
    /// the given bytes (quotes included).
    public static func maximumLocalizedSize(key: String, argumentSizes: [Int]) -> Int {
        let arguments = PayloadMember.size(2, PayloadMember.size(argumentSizes), max(0, argumentSizes.count - 1))
        return localizedMember(key: .value(.string(key)), arguments: .bound(arguments)).byteCount
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

    /// `"default"` is the system's sound; any other name a file's.
    public init(named name: String) {
        self = name == "default" ? .default : .named(name)
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

    var member: PayloadMember {
        Self.member(title: title.member, body: body.member, sound: sound)
    }

    /// The alert dictionary as it is stored and sent (`sound` inside it).
    public var json: JSONValue { member.value }

    static func member(title: PayloadMember, body: PayloadMember, sound: APNSSound?) -> PayloadMember {
        var members = [("title", title), ("body", body)]
        if let sound { members.append(("sound", .value(sound.json))) }
        return .object(members)
    }

    /// The most bytes an alert takes whose title and body take at most the given bytes.
    public static func maximumSize(title: Int, body: Int, sound: APNSSound?) -> Int {
        member(title: .bound(title), body: .bound(body), sound: sound).byteCount
    }
}
