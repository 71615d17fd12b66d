import APNS
import Crypto
import Foundation
import LocalAPNS
import Logging
import NIOCore
import NIOPosix
import OrderFlowTesting
import TestTags
import Testing

/// The push transport's connection handling (Sources/HTTP2Push), through the APNs client: what
/// AsyncHTTPClient used to give, checked against the stand-in.
@Suite("APNs transport: connections, streams, deadlines")
struct APNSTransportTests {
    @Test("the stand-in restarted on its port: the next send reconnects and succeeds")
    func reconnectAfterRestart() async throws {
        try await LocalAPNSFixture.with { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            try await fixture.server.stop()
            try await fixture.server.start()
            // The drop may be seen a moment after the restart: a send on the closed connection
            // fails as a transport error (the worker retries those); the one after it reconnects.
            var sent = false
            for _ in 0..<3 where !sent {
                do {
                    try await fixture.client.send(try liveActivityUpdate())
                    sent = true
                } catch let error as APNSTransportError {
                    #expect(error.action == .retryWithBackoff)
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            #expect(sent)
            #expect(fixture.server.acceptedCount == 2)
        }
    }

    @Test("GOAWAY: streams in flight are answered, later sends go to a new connection")
    func goAway() async throws {
        try await LocalAPNSFixture.with(clientConfiguration: { $0.connections = 1 }) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            #expect(fixture.server.acceptedConnectionCount == 1)
            fixture.server.setResponseDelay(.milliseconds(200))
            async let inFlight = fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(1)))
            // GOAWAY once the stand-in holds the request (it records it before the delayed
            // answer): a fixed sleep let a loaded machine send the GOAWAY first, which refuses
            // the stream instead of testing an answered one.
            let asked = ContinuousClock.now
            while fixture.server.acceptedCount < 2, ContinuousClock.now - asked < .seconds(10) {
                try await Task.sleep(for: .milliseconds(5))
            }
            await fixture.server.goAway()
            _ = try await inFlight
            fixture.server.setResponseDelay(nil)
            try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(2)))
            #expect(fixture.server.acceptedCount == 3)
            #expect(fixture.server.acceptedConnectionCount == 2)
        }
    }

    @Test("a server that accepts TCP but never answers TLS: the connect timeout ends the send")
    func connectTimeoutCoversTLS() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let silent = try await ServerBootstrap(group: group)
            .childChannelInitializer { _ in group.next().makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let port = silent.localAddress?.port ?? 0
        let server = try LocalAPNSServer(configuration: .init(signingKeys: []))
        let client = try APNSClient(
            configuration: APNSClientConfiguration(
                environment: .custom(baseURL: "https://127.0.0.1:\(port)", trustRootsPEM: server.trustRootPEM),
                credentials: .init(key: .pem(P256.Signing.PrivateKey().pemRepresentation), keyID: TestCredentials.keyID, teamID: TestCredentials.teamID),
                timeouts: .init(connect: .milliseconds(300), request: .seconds(60))
            ),
            logger: Logger(label: "apns-tests")
        )
        let started = ContinuousClock.now
        let error = await #expect(throws: APNSTransportError.self) { try await client.send(try liveActivityUpdate()) }
        // Ended by the connect timeout, long before the request's: the bound leaves room for the
        // seconds a busy machine (the start of the full parallel suite) adds.
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(error?.action == .retryWithBackoff)
        try await client.shutdown()
        try await silent.close()
        try await group.shutdownGracefully()
    }

    @Test("sends after shutdown fail as transport errors")
    func sendAfterShutdown() async throws {
        try await LocalAPNSFixture.with { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            try await fixture.client.shutdown()
            await #expect(throws: APNSTransportError.self) { try await fixture.client.send(try liveActivityUpdate()) }
        }
    }
}

/// Timing-sensitive: `scripts/test` runs suites named "Timing" on their own, after the rest.
@Suite("Timing: APNs transport deadlines and cancellation", .tags(.timing))
struct TimingAPNSTransportTests {
    @Test("a request waiting for a stream past its deadline fails as a transport error")
    func deadlineWhileWaitingForStream() async throws {
        try await LocalAPNSFixture.with(
            serverConfiguration: { $0.maxConcurrentStreams = 1 },
            clientConfiguration: {
                $0.connections = 1
                $0.timeouts.request = .milliseconds(600)
            }
        ) { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            fixture.server.setResponseDelay(.milliseconds(400))
            let results = await withTaskGroup(of: (any Error)?.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        do {
                            try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(index)))
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                var errors: [(any Error)?] = []
                for await result in group { errors.append(result) }
                return errors
            }
            // One stream at a time, 400 ms each, 600 ms to live: the first gets through, the
            // ones queued behind it run out of time.
            let failures = results.compactMap { $0 }
            #expect(results.count - failures.count >= 1)
            #expect(failures.count >= 2)
            for failure in failures {
                let transport = failure as? APNSTransportError
                #expect(transport?.action == .retryWithBackoff, "\(failure)")
            }
            fixture.server.setResponseDelay(nil)
            try await Task.sleep(for: .milliseconds(500))  // let the late answers come and go
            try await fixture.client.send(try liveActivityUpdate())
        }
    }

    @Test("a cancelled send ends at once with CancellationError; the connection stays usable")
    func cancellation() async throws {
        try await LocalAPNSFixture.with { fixture in
            try await fixture.client.send(try liveActivityUpdate())
            fixture.server.setResponseDelay(.seconds(5))
            let started = ContinuousClock.now
            let task = Task { try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(1))) }
            try await Task.sleep(for: .milliseconds(100))
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(ContinuousClock.now - started < .seconds(3))
            fixture.server.setResponseDelay(nil)
            try await fixture.client.send(try liveActivityUpdate(token: TestCredentials.token(2)))
            #expect(fixture.server.acceptedConnectionCount <= 2)
        }
    }
}
