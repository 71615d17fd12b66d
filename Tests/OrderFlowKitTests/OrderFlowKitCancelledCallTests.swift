import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
@testable import OrderFlowKit
import TestTags
import Testing

/// The kit's calls cancelled at any moment, as `disconnect()` does: each ends at once and blocks
/// no thread. (swift-corelibs-foundation's own `URLSession.data(for:)` deadlocks a thread of the
/// cooperative pool when the cancellation meets a refused connection's answer, and crashes when
/// it meets a server's answer.)
@Suite("OrderFlowKit's calls, cancelled at any moment", .tags(.kit))
struct OrderFlowKitCancelledCallTests {
    @Test("against a port nobody listens on and against a server that answers at once", .timeLimit(.minutes(2)))
    func cancelledCallsEnd() async throws {
        let server = try AnsweringServer()
        defer { server.stop() }
        for api in ["http://127.0.0.1:1/v1", "http://127.0.0.1:\(server.port)/v1"] {
            let client = DoorClient(api: try #require(URL(string: api)), session: .shared,
                                    retry: RetryPolicy(attempts: 1, initialDelay: .milliseconds(1)))
            var ended = 0
            for _ in 0..<300 {
                let call = Task { await client.send(method: "PUT", path: "devices/d/x", body: Data("{}".utf8), secret: "s", credential: nil) }
                try await Task.sleep(for: .microseconds(Int.random(in: 0...2_000)))
                call.cancel()
                _ = await call.value
                ended += 1
            }
            #expect(ended == 300, "\(api): every cancelled call ended")
        }
    }
}

/// A TCP server on 127.0.0.1 that answers every request with `200 {}` and closes.
private final class AnsweringServer: @unchecked Sendable {
    let port: Int
    private let socket: Int32

    init() throws {
        let listening = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, length) == 0 && getsockname(listening, $0, &length) == 0 }
        }
        guard bound, listen(listening, 64) == 0 else {
            close(listening)
            throw POSIXError(.EADDRINUSE)
        }
        socket = listening
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread {
            let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".utf8)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let connection = accept(listening, nil, nil)
                if connection < 0 { return }
                _ = read(connection, &buffer, buffer.count)
                _ = write(connection, answer, answer.count)
                close(connection)
            }
        }
    }

    func stop() {
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }
}
