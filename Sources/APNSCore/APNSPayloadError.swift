/// The payload cannot be sent: it is larger than APNs accepts, or it lacks what a Live Activity
/// needs. (The `APNS` client treats it as a send failure that is never retried as is.)
public struct APNSPayloadError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: Hashable, Sendable {
        /// The encoded payload has `size` bytes; APNs accepts at most `limit`.
        case tooLarge(size: Int, limit: Int)
        /// The payload is malformed or incomplete (the message says how).
        case invalid
    }

    public let code: Code
    public let message: String

    public static func tooLarge(size: Int, limit: Int = APNSLimits.maximumPayloadSize) -> Self {
        Self(
            code: .tooLarge(size: size, limit: limit),
            message: "The payload is \(size) bytes but APNs accepts at most \(limit); "
                + "send a smaller content state (shorter strings, fewer fields). Never retried as is."
        )
    }

    public static func invalid(_ message: String) -> Self {
        Self(code: .invalid, message: message)
    }

    public var description: String { self.message }
}

/// Fixed limits of APNs.
public enum APNSLimits {
    /// The largest payload APNs accepts for a notification, in bytes (the whole JSON body).
    public static let maximumPayloadSize = 4096
    /// The largest payload of a broadcast to a channel (iOS 18), in bytes.
    public static let maximumBroadcastPayloadSize = 5120
}
