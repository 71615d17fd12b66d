import Foundation

/// A text in a rendered alert.
public enum LocalizableText: Sendable, Hashable, Codable {
    case plain(String)
    /// Localized by the app from its strings file: `{"loc-key": key, "loc-args": args}`.
    case localized(key: String, args: [String])

    private enum CodingKeys: String, CodingKey {
        case key = "loc-key"
        case args = "loc-args"
    }

    /// Encodes in the APNs shape: a string, or `{"loc-key": …, "loc-args": […]}`.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .plain(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .localized(let key, let args):
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(key, forKey: .key)
            try container.encode(args, forKey: .args)
        }
    }

    public init(from decoder: any Decoder) throws {
        if let text = try? decoder.singleValueContainer().decode(String.self) {
            self = .plain(text)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self = .localized(key: try container.decode(String.self, forKey: .key),
                          args: try container.decodeIfPresent([String].self, forKey: .args) ?? [])
    }

}

extension APNSAlertText {
    public init(_ text: LocalizableText) {
        switch text {
        case .plain(let text): self = .plain(text)
        case .localized(let key, let args): self = .localized(key: key, arguments: args)
        }
    }
}

/// A rendered alert; encodes as the APNs `alert` dictionary (`sound` sits inside it).
public struct ActivityAlert: Sendable, Hashable, Codable {
    public var title: LocalizableText
    public var body: LocalizableText
    public var sound: String?

    public init(title: LocalizableText, body: LocalizableText, sound: String? = nil) {
        self.title = title
        self.body = body
        self.sound = sound
    }

    /// The alert as APNs receives it (and as it is stored).
    public var json: JSONValue { LiveActivityAlert(self).json }
}

extension LiveActivityAlert {
    public init(_ alert: ActivityAlert) {
        self.init(title: APNSAlertText(alert.title), body: APNSAlertText(alert.body), sound: alert.sound.map(APNSSound.init(named:)))
    }
}
