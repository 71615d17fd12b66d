import APNS

/// The seam between the worker and APNs: `APNSClient` in production, anything that answers
/// like APNs in tests and benchmarks.
public protocol PushSender: Sendable {
    /// Sends one notification; throws an `APNSSendFailure` when APNs refuses it or cannot be
    /// reached.
    /// - Parameter request: the notification, its token, topic and headers.
    func send(_ request: APNSRequest) async throws -> APNSSendResult
}

extension APNSClient: PushSender {}
