import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OrderFlowTesting
import Synchronization

/// An HTTP client of several `orderflow serve` replicas: one call, its status and JSON body;
/// or a call retried as a careful client retries it — the same request, the same
/// `Idempotency-Key`, while the answer says nothing about the request's fate (no answer, a cut
/// connection, 502/503/504 from the balancer or a replica).
final class ReplicaClient: Sendable {
    struct Answer: Sendable, CustomStringConvertible {
        var status: Int
        var text: String
        var headers: [(String, String)]

        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        }

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        var description: String { "\(status) \(text.prefix(300))" }
    }

    /// Redirects are answers to check (the board's sign-in sets its cookie on a 303), not to follow.
    let http: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()
    /// Calls answered only after a retry, and the retries.
    let retried = Atomic<Int>(0)

    func call(_ method: HTTPMethod, _ url: String, body: String? = nil, apiKey: String?, idempotencyKey: String? = nil,
              headers extra: [(String, String)] = [], contentType: String = "application/json") async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let apiKey { request.headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
        request.headers.add(name: "Content-Type", value: contentType)
        if let idempotencyKey { request.headers.add(name: "Idempotency-Key", value: idempotencyKey) }
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await http.execute(request, timeout: .seconds(20))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return Answer(status: Int(response.status.code), text: String(buffer: bytes),
                      headers: response.headers.map { ($0.name, $0.value) })
    }

    /// `call`, repeated while its fate is unknown (at most 30 s).
    func retrying(_ method: HTTPMethod, _ url: String, body: String? = nil, apiKey: String?,
                  idempotencyKey: String? = nil, contentType: String = "application/json") async throws -> Answer {
        let deadline = ContinuousClock.now + .seconds(30)
        var attempts = 0
        while true {
            attempts += 1
            if attempts == 2 { retried.add(1, ordering: .relaxed) }
            do {
                let answer = try await call(method, url, body: body, apiKey: apiKey, idempotencyKey: idempotencyKey, contentType: contentType)
                if ![502, 503, 504].contains(answer.status) || ContinuousClock.now > deadline { return answer }
            } catch where ContinuousClock.now < deadline {
                // No answer: the request may or may not have been done; the key makes a retry safe.
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    func shutdown() async throws {
        try await http.shutdown()
    }
}

/// A `GET /v1/events` reader that, when its stream is cut, reconnects to the next replica with
/// `Last-Event-ID`, as a browser's EventSource does through a balancer.
final class EventStreamFollower: Sendable {
    struct Event: Sendable, Hashable {
        var id: String
        /// `transition <order> <seq>` or `push <delivery id>`.
        var key: String
    }

    let received = LockedValue<[Event]>([])
    let reconnections = LockedValue<[String]>([])
    private let client: ReplicaClient
    private let apiKey: String

    init(client: ReplicaClient, apiKey: String) {
        self.client = client
        self.apiKey = apiKey
    }

    /// Follows the stream from now on, starting on `bases[0]`, until cancelled.
    func follow(bases: [String]) async {
        var index = 0
        var lastID: String?
        while !Task.isCancelled {
            let base = bases[index % bases.count]
            var request = HTTPClientRequest(url: base + "/v1/events")
            request.headers.add(name: "Authorization", value: "Bearer \(apiKey)")
            if let lastID { request.headers.add(name: "Last-Event-ID", value: lastID) }
            do {
                let response = try await client.http.execute(request, timeout: .hours(1))
                if response.status == .ok {
                    var buffer = ""
                    for try await chunk in response.body {
                        buffer += String(buffer: chunk)
                        while let end = buffer.range(of: "\n\n") {
                            let block = String(buffer[..<end.lowerBound])
                            buffer = String(buffer[end.upperBound...])
                            if let event = Self.parse(block) {
                                lastID = event.id
                                received.withLock { $0.append(event) }
                            }
                        }
                    }
                }
            } catch {
                // Cut (the replica was killed) or refused (it is starting again): the next one.
            }
            if Task.isCancelled { return }
            index += 1
            reconnections.withLock { $0.append("\(bases[index % bases.count]) after \(lastID ?? "-")") }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    static func parse(_ block: String) -> Event? {
        var id: String?
        var data: String?
        for line in block.split(separator: "\n") {
            if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
            if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
        }
        guard let id, let data,
              let object = (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any],
              let type = object["type"] as? String
        else { return nil }
        if type == "push", let delivery = object["delivery_id"] as? Int {
            return Event(id: id, key: "push \(delivery)")
        }
        return Event(id: id, key: "transition \(object["order_id"] as? String ?? "?") \(object["seq"] as? Int ?? -1)")
    }
}
