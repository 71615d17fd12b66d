import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import OrderFlow
import OrderFlowTesting
import PGKit
import ServiceLifecycle
import Testing
@testable import OrderFlowHTTP

/// `GET /v1/events` against a listening server: what one credential may hold, how a stream ends
/// with its credential, how far back a cursor reaches, and that a slow reader loses nothing.
@Suite("Event streams: bounded, and ended with their credential", .serialized)
struct EventStreamLimitTests {
    /// A server on a free port of this machine, its engine's database fresh.
    struct LiveServer {
        let fixture: EngineFixture
        let server: OrderFlowHTTPServer
        let task: Task<Void, any Error>
        let port: Int
        let client = HTTPClient(eventLoopGroupProvider: .singleton)

        static func start(streamsPerCredential: Int = 8,
                          _ adjust: (inout OrderFlowHTTPConfiguration) -> Void = { _ in }) async throws -> LiveServer {
            let fixture = try await EngineFixture.make()
            if try await !fixture.engine.merchants().contains(where: { $0.id == "default" }) {
                _ = try await fixture.engine.addMerchant("default")
            }
            var configuration = OrderFlowHTTPConfiguration(port: 0, runsWorker: false)
            configuration.eventStreamsPerCredential = streamsPerCredential
            adjust(&configuration)
            let server = OrderFlowHTTPServer(engine: fixture.engine, configuration: configuration, logger: Logger(label: "test"))
            let task = Task { try await server.run() }
            let port = try #require(await server.listening())
            return LiveServer(fixture: fixture, server: server, task: task, port: port)
        }

        func stop() async {
            task.cancel()
            try? await client.shutdown()
            await fixture.shutdown()
        }

        /// Opens a stream with an API key (or a board session's cookie).
        func open(key: String, query: String = "", cookie: String? = nil) async throws -> (status: Int, headers: [(String, String)],
                                                                     body: HTTPClientResponse.Body.AsyncIterator) {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/events\(query)")
            if let cookie {
                request.headers.add(name: "Cookie", value: cookie)
            } else {
                request.headers.add(name: "Authorization", value: "Bearer \(key)")
            }
            let response = try await client.execute(request, timeout: .seconds(30))
            return (Int(response.status.code), response.headers.map { ($0.name, $0.value) }, response.body.makeAsyncIterator())
        }
    }

    /// Reads a stream until `stop` says so or it ends; the text read.
    static func read(_ body: inout HTTPClientResponse.Body.AsyncIterator, for limit: Duration,
                     until stop: (String) -> Bool) async throws -> (text: String, ended: Bool) {
        var text = ""
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            guard let chunk = try await body.next() else { return (text, true) }
            text += String(buffer: chunk)
            if stop(text) { return (text, false) }
        }
        return (text, false)
    }

    @Test("one key holds at most its streams: the next is 429 with Retry-After; another key is not held back")
    func perCredentialCap() async throws {
        let live = try await LiveServer.start(streamsPerCredential: 3)
        defer { Task { await live.stop() } }
        let first = try await live.fixture.engine.createAPIKey(merchantID: "default", name: "first").secret
        let second = try await live.fixture.engine.createAPIKey(merchantID: "default", name: "second").secret
        var held: [HTTPClientResponse.Body.AsyncIterator] = []
        for _ in 0..<3 {
            var opened = try await live.open(key: first)
            #expect(opened.status == 200)
            _ = try await Self.read(&opened.body, for: .seconds(5)) { $0.contains("OrderFlow events") }
            held.append(opened.body)
        }
        var refused = try await live.open(key: first)
        #expect(refused.status == 429)
        #expect(refused.headers.contains { $0.0.lowercased() == "retry-after" && Int($0.1) ?? 0 >= 1 }, "\(refused.headers)")
        let problem = try await Self.read(&refused.body, for: .seconds(5)) { _ in false }
        #expect(problem.text.contains("tooManyStreams"), "\(problem.text)")
        let other = try await live.open(key: second)
        #expect(other.status == 200, "another key has streams of its own")
        #expect(live.server.openEventStreams(for: "api-key:" + OrderFlowEngine.apiKeyPrefix(of: first)!) == 3)
        _ = held
    }

    @Test("a stream ends within seconds of its key's revocation, saying why")
    func endsAtRevocation() async throws {
        let live = try await LiveServer.start()
        defer { Task { await live.stop() } }
        let key = try await live.fixture.engine.createAPIKey(merchantID: "default", name: "soon revoked")
        var opened = try await live.open(key: key.secret)
        #expect(opened.status == 200)
        _ = try await Self.read(&opened.body, for: .seconds(5)) { $0.contains("OrderFlow events") }
        try await live.fixture.engine.revokeAPIKey(merchantID: "default", prefix: key.key.prefix)
        let started = ContinuousClock.now
        let rest = try await Self.read(&opened.body, for: .seconds(15)) { _ in false }
        #expect(rest.ended, "the stream ended: \(rest.text)")
        #expect(ContinuousClock.now - started < .seconds(8))
        #expect(rest.text.contains("revoked"), "\(rest.text)")
    }

    @Test("a board's stream ends within seconds of its sign-out, and its streams count against the session")
    func endsAtSignOut() async throws {
        let live = try await EventStreamLimitTests.LiveServer.start(streamsPerCredential: 2)
        defer { Task { await live.stop() } }
        let engine = live.fixture.engine
        let session = try #require(try await engine.redeemBoardSignInToken(try await engine.createBoardSignInToken(merchantID: "default").token))
        let cookie = "orderflow_board=\(session.secret)"
        var first = try await live.open(key: "", cookie: cookie)
        #expect(first.status == 200)
        _ = try await Self.read(&first.body, for: .seconds(5)) { $0.contains("OrderFlow events") }
        var second = try await live.open(key: "", cookie: cookie)
        _ = try await Self.read(&second.body, for: .seconds(5)) { $0.contains("OrderFlow events") }
        #expect(try await live.open(key: "", cookie: cookie).status == 429, "a third stream of the session")
        try await engine.endBoardSession(session.secret)
        let started = ContinuousClock.now
        let rest = try await Self.read(&first.body, for: .seconds(15)) { _ in false }
        #expect(rest.ended && rest.text.contains("session ended"), "\(rest.text)")
        #expect(ContinuousClock.now - started < .seconds(8))
    }

    @Test("a cursor older than the replay window is 410; a slow reader of a long replay gets every event, once")
    func boundedReplayWithoutLoss() async throws {
        let live = try await LiveServer.start()
        defer { Task { await live.stop() } }
        let key = try await live.fixture.engine.createAPIKey(merchantID: "default", name: "replay").secret
        let count = 450
        for index in 0..<count { _ = try await live.fixture.createFoodOrder("R-\(index)") }

        // Read slowly: the server must wait for the reader, not drop what does not fit a buffer.
        var opened = try await live.open(key: key, query: "?after=0.-1")
        #expect(opened.status == 200)
        try await Task.sleep(for: .seconds(2))
        let replay = try await Self.read(&opened.body, for: .seconds(30)) { text in
            text.components(separatedBy: "event: transition").count - 1 >= count
        }
        let ids = replay.text.components(separatedBy: "\n").filter { $0.hasPrefix("id: ") }
        #expect(ids.count == count, "every creation once: \(ids.count)")
        #expect(Set(ids).count == ids.count)

        // Make the first event two days old: a cursor before it reaches beyond the window.
        // (History is immutable by trigger; this test's database lets its owner step around it.)
        let pool = live.fixture.engine.pool
        _ = try await pool.query(PostgresQuery("ALTER TABLE order_transitions DISABLE TRIGGER USER"))
        _ = try await pool.query(PostgresQuery("UPDATE order_transitions SET occurred_at = now() - interval '2 days' WHERE order_id = 'R-0'"))
        _ = try await pool.query(PostgresQuery("ALTER TABLE order_transitions ENABLE TRIGGER USER"))
        var old = try await live.open(key: key, query: "?after=0.-1")
        #expect(old.status == 410)
        let problem = try await Self.read(&old.body, for: .seconds(5)) { _ in false }
        #expect(problem.text.contains("cursorTooOld"), "\(problem.text)")
        #expect(try await live.open(key: key).status == 200, "without a cursor the stream starts now")
    }

    @Test("a stream's body reads the feed only as fast as it is taken: a reader that waits loses nothing")
    func pulledNotPushed() async throws {
        let fixture = try await EngineFixture.make()
        defer { Task { await fixture.shutdown() } }
        let count = 700
        for index in 0..<count { _ = try await fixture.createFoodOrder("P-\(index)") }
        let streams = EventStreams()
        let body = try await streams.stream(engine: fixture.engine, after: FeedCursor(transaction: 0, index: -1), replaying: true,
                                            credential: "test", stillAuthorized: { true })
        #expect(streams.openStreams(for: "test") == 1)
        // Nothing is taken for a while: a body that pushed into a bounded buffer would drop here.
        try await Task.sleep(for: .seconds(1))
        var ids: [String] = []
        for try await chunk in body {
            ids += String(decoding: chunk, as: UTF8.self).components(separatedBy: "\n").filter { $0.hasPrefix("id: ") }
            if ids.count >= count { break }
        }
        #expect(ids.count == count && Set(ids).count == count, "\(ids.count) events")
        streams.closeAll()
    }
}
