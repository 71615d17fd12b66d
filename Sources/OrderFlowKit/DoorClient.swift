import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How the kit waits between tries of one call.
public struct RetryPolicy: Sendable {
    /// Tries per call before it stays queued for the next launch.
    public var attempts: Int
    /// The wait before the second try; it doubles for each one after.
    public var initialDelay: Duration

    /// A retry policy.
    /// - Parameters:
    ///   - attempts: Tries per call (at least 1).
    ///   - initialDelay: The first wait; doubled for each later try.
    public init(attempts: Int = 4, initialDelay: Duration = .milliseconds(500)) {
        self.attempts = max(1, attempts)
        self.initialDelay = initialDelay
    }
}

/// The server's answer to one call, as far as the kit cares.
enum DoorOutcome: Sendable {
    case done(Data)
    /// Try again later (no answer, 5xx, 429).
    case later
    /// The server refused it for good (4xx): retrying cannot help.
    case refused(status: Int, body: String)
}

/// Speaks the app's door of `orderflow serve`: bearer client secret plus the device credential.
struct DoorClient: Sendable {
    let api: URL
    let session: URLSession
    let retry: RetryPolicy

    func send(method: String, path: String, body: Data?, secret: String, credential: String?) async -> DoorOutcome {
        var delay = retry.initialDelay
        for attempt in 1...retry.attempts {
            // Cancelled (disconnect): what is unsent stays queued for the next launch.
            if Task.isCancelled { return .later }
            let outcome = await once(method: method, path: path, body: body, secret: secret, credential: credential)
            if case .later = outcome, attempt < retry.attempts {
                try? await Task.sleep(for: delay)
                delay = delay * 2
                continue
            }
            return outcome
        }
        return .later
    }

    private func once(method: String, path: String, body: Data?, secret: String, credential: String?) async -> DoorOutcome {
        var request = URLRequest(url: api.appendingPathComponent(path))
        request.httpMethod = method
        request.timeoutInterval = 15
        request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization")
        if let credential { request.setValue(credential, forHTTPHeaderField: "OrderFlow-Device-Credential") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = body
        }
        guard let (data, response) = try? await session.kitData(for: request),
              let status = (response as? HTTPURLResponse)?.statusCode else { return .later }
        switch status {
        case 200..<300: return .done(data)
        case 429, 500...: return .later
        default: return .refused(status: status, body: String(decoding: data.prefix(300), as: UTF8.self))
        }
    }
}

extension Data {
    /// The token as the server takes it: lowercase hexadecimal.
    var hexText: String { map { String(format: "%02x", $0) }.joined() }
}
