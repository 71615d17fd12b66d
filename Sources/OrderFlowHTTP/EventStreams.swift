import Foundation
import OpenAPIRuntime
import OrderFlow
import Synchronization

/// The open `GET /v1/events` streams (Server-Sent Events): each reads the merchant's feed from
/// its cursor and writes every event as it commits; all of them end when the server stops, so
/// that a graceful shutdown does not wait for clients that never hang up.
final class EventStreams: Sendable {
    /// How often an idle stream looks for new events (commits elsewhere — the CLI, other
    /// processes' workers and timers — have no in-process signal).
    static let pollInterval: Duration = .milliseconds(250)
    /// A comment line at least this often keeps proxies from closing an idle stream.
    static let keepAliveInterval: Duration = .seconds(15)
    /// Events read per query.
    static let pageSize = 200

    private let state = Mutex(State())

    private struct State {
        var closed = false
        var producers: [Int: Task<Void, Never>] = [:]
        var nextID = 0
    }

    /// The stream's body: the events after `cursor`, then each as it commits.
    func stream(engine: OrderFlowEngine, after cursor: FeedCursor) -> HTTPBody {
        let (stream, continuation) = AsyncStream.makeStream(of: ArraySlice<UInt8>.self, bufferingPolicy: .bufferingOldest(64))
        let id: Int? = state.withLock { state in
            guard !state.closed else { return nil }
            defer { state.nextID += 1 }
            return state.nextID
        }
        guard let id else {
            continuation.yield(ArraySlice(": the server is stopping; reconnect in a moment\n\n".utf8))
            continuation.finish()
            return HTTPBody(stream, length: .unknown, iterationBehavior: .single)
        }
        let producer = Task {
            await Self.produce(engine: engine, after: cursor, into: continuation)
            continuation.finish()
        }
        state.withLock { $0.producers[id] = producer }
        continuation.onTermination = { [weak self] _ in
            producer.cancel()
            _ = self?.state.withLock { $0.producers.removeValue(forKey: id) }
        }
        return HTTPBody(stream, length: .unknown, iterationBehavior: .single)
    }

    /// Ends every stream, and any opened from now on at once.
    func closeAll() {
        let producers = state.withLock { state in
            state.closed = true
            return Array(state.producers.values)
        }
        for producer in producers { producer.cancel() }
    }

    private static func produce(engine: OrderFlowEngine, after start: FeedCursor,
                                into continuation: AsyncStream<ArraySlice<UInt8>>.Continuation) async {
        // The reconnection delay browsers use, and a first line so that the client sees the
        // response begin at once.
        continuation.yield(ArraySlice("retry: 2000\n: OrderFlow events\n\n".utf8))
        var cursor = start
        var lastWrite = ContinuousClock.now
        var unavailable = false
        while !Task.isCancelled {
            let page: FeedPage
            do {
                page = try await engine.feedEvents(after: cursor, limit: pageSize)
                unavailable = false
            } catch {
                if !unavailable {
                    // Said once per outage, as a comment: the stream stays open and resumes.
                    let sentence = OrderFlowError.translating(error)?.message ?? "the feed could not be read"
                    continuation.yield(ArraySlice(": \(oneLine(sentence)); retrying\n\n".utf8))
                    lastWrite = .now
                }
                unavailable = true
                try? await Task.sleep(for: .seconds(1))
                continue
            }
            for event in page.events {
                if case .terminated = continuation.yield(ArraySlice(encode(event).utf8)) { return }
            }
            if !page.events.isEmpty { lastWrite = .now }
            cursor = page.cursor
            if page.events.count == pageSize { continue }
            if ContinuousClock.now - lastWrite >= keepAliveInterval {
                if case .terminated = continuation.yield(ArraySlice(": keep-alive\n\n".utf8)) { return }
                lastWrite = .now
            }
            try? await Task.sleep(for: pollInterval)
        }
    }

    /// One event in the wire format: `id`, `event` and a one-line JSON `data`.
    static func encode(_ event: FeedEvent) -> String {
        let body = Components.Schemas.FeedEvent(
            _type: event.kind == .transition ? .transition : .push, orderId: event.orderID, workflow: event.workflow,
            seq: event.seq, from: event.from, to: event.to, event: event.event, actor: event.actor, at: event.at,
            deliveryId: event.deliveryID, device: event.deviceID, outcome: event.outcome.flatMap { .init(rawValue: $0.rawValue) },
            status: event.status, reason: event.reason)
        // JSON escapes every line break, so `data:` is one line.
        let data = (try? encoder.encode(body)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
        return "id: \(event.cursor)\nevent: \(event.kind.rawValue)\ndata: \(data)\n\n"
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // As every other time of the API.
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(try ISO8601Transcoder().encode(date))
        }
        return encoder
    }()

    private static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
