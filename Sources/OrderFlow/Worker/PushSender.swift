import APNS

/// The seam between the worker and APNs: `APNSClient` in production, anything that answers
/// like APNs in tests and benchmarks.
public protocol PushSender: Sendable {
    /// Sends one notification; throws an `APNSSendFailure` when APNs refuses it or cannot be
    /// reached.
    /// - Parameter request: the notification, its token, topic and headers.
    func send(_ request: APNSRequest) async throws -> APNSSendResult

    /// The same app's broadcasts and channel management, for `audience: broadcast` orders; nil
    /// when the sender has none (those orders' channels then fail, said so). A sender that is
    /// also a ``BroadcastSender`` is its own by default.
    var broadcaster: (any BroadcastSender)? { get }
}

extension PushSender {
    public var broadcaster: (any BroadcastSender)? { nil }
}

extension PushSender where Self: BroadcastSender {
    public var broadcaster: (any BroadcastSender)? { self }
}

/// What the worker needs of an app for `audience: broadcast` orders: broadcasts and the channel
/// management API (iOS 18 channels). `APNSClient` has them.
public protocol BroadcastSender: Sendable {
    func broadcast(_ request: APNSBroadcastRequest) async throws -> APNSBroadcastResult
    func createChannel(bundleID: String, storagePolicy: APNSMessageStoragePolicy) async throws -> String
    func deleteChannel(bundleID: String, id: String) async throws
}

extension APNSClient: PushSender, BroadcastSender {}
