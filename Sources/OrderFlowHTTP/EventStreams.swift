import Foundation
import OpenAPIRuntime
import OrderFlow
import Synchronization

/// The open `GET /v1/events` streams (Server-Sent Events): each reads the merchant's feed from
/// its cursor and writes every event as it commits.
///
/// A stream reads a page only when the client has taken the last one (the response body pulls
/// it), so a slow reader or a replay from an old cursor holds one page in memory, never the
/// feed, and loses nothing. Each credential (an API key, a board session) holds at most
/// ``Limits/perCredential`` streams at once; each stream looks again every few seconds
/// whether its credential still stands, and ends when it does not (a revoked key, a board
/// signed out or expired). All of them end when the server stops, so that a graceful shutdown
/// does not wait for clients that never hang up.
final class EventStreams: Sendable {
    struct Limits: Sendable {
        /// Streams one credential may hold open at once; the next is refused (429).
        var perCredential = 8
        /// How far back a cursor may reach: an older one is refused (410) rather than replaying
        /// an unbounded stretch of the feed.
        var replayWindow: Duration = .seconds(24 * 60 * 60)
        /// How often a stream checks that its credential still stands.
        var recheckInterval: Duration = .seconds(2)
    }

    /// How often an idle stream looks for new events (commits elsewhere — the CLI, other
    /// processes' workers and timers — have no in-process signal).
    static let pollInterval: Duration = .milliseconds(250)
    /// A comment line at least this often keeps proxies from closing an idle stream.
    static let keepAliveInterval: Duration = .seconds(15)
    /// Events read per query.
    static let pageSize = 200

    let limits: Limits
    private let state = Mutex(State())

    private struct State {
        var closed = false
        /// Open streams by credential.
        var open: [String: Int] = [:]
    }

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Whether a stream's credential still stands (false ends the stream).
    typealias Authorization = @Sendable () async -> Bool

    /// The stream's body: the events after `cursor`, then each as it commits.
    /// - Throws: ``TooManyStreams`` when `credential` holds ``Limits/perCredential`` already;
    ///   ``CursorTooOld`` when the first event after `cursor` is older than the replay window.
    /// `replaying`: the cursor is the client's (`Last-Event-ID`, `after`), not "now".
    func stream(engine: OrderFlowEngine, after cursor: FeedCursor, replaying: Bool, credential: String,
                stillAuthorized: @escaping Authorization) async throws -> HTTPBody {
        if replaying {
            // A cursor that reaches back beyond the window is refused before anything is held.
            if let first = try await engine.feedEvents(after: cursor, limit: 1).events.first,
               first.at < Date().addingTimeInterval(-limits.replayWindow.inSeconds) {
                throw CursorTooOld(window: limits.replayWindow)
            }
        }
        let admitted: Bool? = state.withLock { state in
            guard !state.closed else { return nil }
            guard state.open[credential, default: 0] < limits.perCredential else { return false }
            state.open[credential, default: 0] += 1
            return true
        }
        switch admitted {
        case nil:
            return HTTPBody(": the server is stopping; reconnect in a moment\n\n")
        case false?:
            throw TooManyStreams(limit: limits.perCredential)
        case true?:
            let lease = Lease(streams: self, credential: credential)
            let feed = FeedChunks(engine: engine, start: cursor, streams: self, lease: lease, stillAuthorized: stillAuthorized)
            return HTTPBody(feed, length: .unknown, iterationBehavior: .single)
        }
    }

    /// Ends every stream (within a poll interval), and any opened from now on at once.
    func closeAll() {
        state.withLock { $0.closed = true }
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Streams open now for `credential`.
    func openStreams(for credential: String) -> Int {
        state.withLock { $0.open[credential, default: 0] }
    }

    fileprivate func release(_ credential: String) {
        state.withLock { state in
            let left = state.open[credential, default: 1] - 1
            state.open[credential] = left > 0 ? left : nil
        }
    }

    /// A stream's place among its credential's: given back once, when the stream ends or its
    /// body is dropped (a client that hung up).
    fileprivate final class Lease: Sendable {
        private let released = Mutex(false)
        private let streams: EventStreams
        private let credential: String

        init(streams: EventStreams, credential: String) {
            self.streams = streams
            self.credential = credential
        }

        func release() {
            let first = released.withLock { done in
                defer { done = true }
                return !done
            }
            if first { streams.release(credential) }
        }

        deinit { release() }
    }

    /// The wire format, a chunk at a time: a page is read only once the previous one was taken.
    private struct FeedChunks: AsyncSequence, Sendable {
        typealias Element = ArraySlice<UInt8>
        let engine: OrderFlowEngine
        let start: FeedCursor
        let streams: EventStreams
        let lease: Lease
        let stillAuthorized: Authorization

        func makeAsyncIterator() -> Iterator {
            Iterator(engine: engine, cursor: start, streams: streams, lease: lease, stillAuthorized: stillAuthorized)
        }

        struct Iterator: AsyncIteratorProtocol {
            let engine: OrderFlowEngine
            var cursor: FeedCursor
            let streams: EventStreams
            let lease: Lease
            let stillAuthorized: Authorization
            var started = false
            var finished = false
            var unavailable = false
            var pending: [ArraySlice<UInt8>] = []
            var lastWrite = ContinuousClock.now
            var lastCheck = ContinuousClock.now

            init(engine: OrderFlowEngine, cursor: FeedCursor, streams: EventStreams, lease: Lease, stillAuthorized: @escaping Authorization) {
                self.engine = engine
                self.cursor = cursor
                self.streams = streams
                self.lease = lease
                self.stillAuthorized = stillAuthorized
            }

            mutating func next() async -> ArraySlice<UInt8>? {
                if !started {
                    started = true
                    // The reconnection delay browsers use, and a first line so that the client
                    // sees the response begin at once.
                    return write("retry: 2000\n: OrderFlow events\n\n")
                }
                while !finished {
                    if !pending.isEmpty { return write(pending.removeFirst()) }
                    if Task.isCancelled || streams.isClosed { return end() }
                    if ContinuousClock.now - lastCheck >= streams.limits.recheckInterval {
                        lastCheck = .now
                        guard await stillAuthorized() else {
                            let said = write(": the credential of this stream was revoked or its session ended; reconnect with a valid one\n\n")
                            finished = true
                            return said
                        }
                    }
                    let page: FeedPage
                    do {
                        page = try await engine.feedEvents(after: cursor, limit: EventStreams.pageSize)
                        unavailable = false
                    } catch {
                        let sentence = OrderFlowError.translating(error)?.httpSentence ?? "the feed could not be read"
                        let first = !unavailable
                        unavailable = true
                        try? await Task.sleep(for: .seconds(1))
                        // Said once per outage, as a comment: the stream stays open and resumes.
                        if first { return write(": \(Self.oneLine(sentence)); retrying\n\n") }
                        continue
                    }
                    cursor = page.cursor
                    pending = page.events.map { ArraySlice(EventStreams.encode($0).utf8) }
                    if page.events.count == EventStreams.pageSize || !pending.isEmpty { continue }
                    if ContinuousClock.now - lastWrite >= EventStreams.keepAliveInterval {
                        return write(": keep-alive\n\n")
                    }
                    try? await Task.sleep(for: EventStreams.pollInterval)
                }
                return end()
            }

            private mutating func write(_ text: String) -> ArraySlice<UInt8> {
                write(ArraySlice(text.utf8))
            }

            private mutating func write(_ chunk: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
                lastWrite = .now
                return chunk
            }

            private mutating func end() -> ArraySlice<UInt8>? {
                finished = true
                lease.release()
                return nil
            }

            private static func oneLine(_ text: String) -> String {
                String(text.map { $0.isNewline ? " " : $0 })
            }
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
}

/// A credential that holds as many event streams as it may: 429, retry later.
struct TooManyStreams: Error {
    var limit: Int
    static let retryAfterSeconds = 5
    var detail: String {
        "this credential has \(limit) event streams open already, the most it may; close one (each browser tab of the board holds one) and try again"
    }
}

/// A cursor from before the feed's replay window: 410, start again from now.
struct CursorTooOld: Error {
    var window: Duration
    var detail: String {
        "this cursor reaches back more than \(Int(window.inSeconds / 3600)) hours, further than the feed replays; read the orders (GET /v1/orders, their history) and reconnect without Last-Event-ID or after"
    }
}
