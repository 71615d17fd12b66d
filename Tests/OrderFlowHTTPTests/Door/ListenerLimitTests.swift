#if canImport(Glibc)
import Glibc
#endif
import Foundation
import OrderFlow
import OrderFlowTesting
import Testing
@testable import OrderFlowHTTP

/// The listener against clients that hold it: raw TCP connections that trickle a head or a
/// body, send too many or too large headers, or take every connection.
@Suite("The listener: idle timeout, connection limit, header and body limits", .serialized)
struct ListenerLimitTests {
    /// A plain TCP connection to the server, byte by byte.
    final class RawConnection {
        let descriptor: Int32

        init(port: Int) throws {
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        }

        deinit { close(descriptor) }

        /// False once the server has closed the connection.
        @discardableResult
        func send(_ text: String) -> Bool {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
        }

        /// What arrives within `seconds`, and whether the server closed the connection.
        func receive(within seconds: Double) -> (text: String, closed: Bool) {
            var received: [UInt8] = []
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                var poll = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = Glibc.poll(&poll, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000)))
                guard ready > 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 65_536)
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count <= 0 { return (String(decoding: received, as: UTF8.self), true) }
                received += buffer[0..<count]
                if String(decoding: received, as: UTF8.self).contains("\r\n\r\n") && count < buffer.count { break }
            }
            return (String(decoding: received, as: UTF8.self), false)
        }
    }

    @Test("a head that trickles in is cut at the idle timeout; so is a connection that sends nothing")
    func slowHead() async throws {
        let live = try await EventStreamLimitTests.LiveServer.start { $0.idleTimeout = .seconds(2) }
        defer { Task { await live.stop() } }
        let silent = try RawConnection(port: live.port)
        let trickling = try RawConnection(port: live.port)
        let started = Date()
        trickling.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        var cut = false
        for index in 0..<40 {
            try await Task.sleep(for: .milliseconds(250))
            if !trickling.send("X-Slow-\(index): a\r\n") || trickling.receive(within: 0.01).closed { cut = true; break }
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(cut && elapsed < 5, "a trickled head held the connection for \(elapsed) s")
        #expect(silent.receive(within: 3).closed, "a silent connection is closed too")
        // The server still answers.
        let fresh = try RawConnection(port: live.port)
        fresh.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(fresh.receive(within: 5).text.hasPrefix("HTTP/1.1 200"))
    }

    @Test("a body that trickles in is 408 at the body timeout, and the connection closes")
    func slowBody() async throws {
        let live = try await EventStreamLimitTests.LiveServer.start { $0.requestBodyTimeout = .seconds(2) }
        defer { Task { await live.stop() } }
        let key = try await live.fixture.engine.createAPIKey(merchantID: "default", name: "slow").secret
        let connection = try RawConnection(port: live.port)
        connection.send("POST /v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(key)\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"id\":")
        let started = Date()
        var answer = ""
        for _ in 0..<40 {
            connection.send(" ")
            let read = connection.receive(within: 0.25)
            answer += read.text
            if read.closed || answer.contains("\r\n\r\n") { break }
        }
        #expect(answer.hasPrefix("HTTP/1.1 408"), "\(answer)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(try await live.fixture.engine.orders().orders.isEmpty, "nothing was created")
    }

    @Test("too many headers, or too large ones, are refused without an answer from the API")
    func headerLimits() async throws {
        let live = try await EventStreamLimitTests.LiveServer.start()
        defer { Task { await live.stop() } }
        let many = (0..<150).map { "X-Header-\($0): v\r\n" }.joined()
        let large = "X-Large: " + String(repeating: "a", count: 40_000) + "\r\n"
        for extra in [many, large] {
            let connection = try RawConnection(port: live.port)
            connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + "\r\n")
            let read = connection.receive(within: 5)
            #expect(!read.text.hasPrefix("HTTP/1.1 200"), "\(read.text.prefix(200))")
            #expect(read.closed || read.text.hasPrefix("HTTP/1.1 4"), "\(read.text.prefix(200))")
        }
        let fine = try RawConnection(port: live.port)
        fine.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (0..<20).map { "X-Header-\($0): v\r\n" }.joined() + "\r\n")
        #expect(fine.receive(within: 5).text.hasPrefix("HTTP/1.1 200"))
    }

    @Test("past the connection limit, a new connection waits until one closes")
    func connectionLimit() async throws {
        let live = try await EventStreamLimitTests.LiveServer.start { $0.maximumConnections = 3 }
        defer { Task { await live.stop() } }
        var held: [RawConnection] = []
        for _ in 0..<3 {
            let connection = try RawConnection(port: live.port)
            connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(connection.receive(within: 5).text.hasPrefix("HTTP/1.1 200"))
            held.append(connection)
        }
        let waiting = try RawConnection(port: live.port)
        waiting.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(waiting.receive(within: 1.5).text.isEmpty, "a fourth connection is not served while three are open")
        held.removeFirst()
        #expect(waiting.receive(within: 5).text.hasPrefix("HTTP/1.1 200"), "served once one closed")
    }
}
