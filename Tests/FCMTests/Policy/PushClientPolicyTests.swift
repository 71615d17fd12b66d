import AsyncHTTPClient
import HTTP2Push
import LocalFCM
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import Testing

/// The network policy both push clients keep (Sources/HTTP2Push/PushClientPolicy.swift): their
/// TLS settings, and their AsyncHTTPClient requests (token exchanges, broadcast channels) against
/// a plain HTTP/1 server that records what it is asked.
@Suite("Push clients' network policy")
struct PushClientPolicyTests {
    @Test("TLS 1.2 or later, against the given trust roots, else the system's")
    func tlsSettings() throws {
        let system = PushClientPolicy.tls(trustRoots: nil)
        #expect(system.minimumTLSVersion == .tlsv12)
        #expect(system.trustRoots == TLSConfiguration.makeClientConfiguration().trustRoots)
        let root = try NIOSSLCertificate.fromPEMBytes(Array(try LocalFCMServer().trustRootPEM.utf8))
        let custom = PushClientPolicy.tls(trustRoots: root)
        #expect(custom.minimumTLSVersion == .tlsv12)
        #expect(custom.trustRoots == .certificates(root))
    }

    @Test("a redirect is answered as it is, never followed; a compressed body is given as it was sent")
    func noRedirectNoDecompression() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let asked = AskedPaths()
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(PolicyProbeHandler(asked: asked))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let port = server.localAddress?.port ?? 0
        let client = PushClientPolicy.httpClient(
            tls: PushClientPolicy.tls(trustRoots: nil), connectTimeout: .seconds(5), idleTimeout: .seconds(5),
            eventLoopGroup: group, logger: Logger(label: "policy-tests"))

        let moved = try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/moved"), timeout: .seconds(10))
        #expect(moved.status == .found)
        #expect(moved.headers.first(name: "location") == "/elsewhere")
        _ = try await moved.body.collect(upTo: 1024)

        let compressed = try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/compressed"), timeout: .seconds(10))
        let body = try await compressed.body.collect(upTo: 1024)
        #expect(compressed.status == .ok)
        #expect(Array(body.readableBytesView) == PolicyProbeHandler.notReallyGzip, "the bytes as the server sent them")

        #expect(asked.paths == ["/moved", "/compressed"], "nothing asked of /elsewhere")
        try await client.shutdown()
        try await server.close()
        try await group.shutdownGracefully()
    }
}

private final class AskedPaths: Sendable {
    private let storage = Mutex<[String]>([])
    var paths: [String] { storage.withLock { $0 } }
    func append(_ path: String) { storage.withLock { $0.append(path) } }
}

/// Answers `/moved` with a 302 to `/elsewhere`, `/compressed` with bytes labelled gzip that are
/// not gzip (a client that decompressed them would fail), anything else with an empty 200.
private final class PolicyProbeHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    static let notReallyGzip: [UInt8] = Array("plain bytes, labelled gzip".utf8)
    private let asked: AskedPaths

    init(asked: AskedPaths) { self.asked = asked }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let request) = unwrapInboundIn(data) else { return }
        asked.append(request.uri)
        var headers = HTTPHeaders()
        var body: [UInt8] = []
        let status: HTTPResponseStatus
        switch request.uri {
        case "/moved":
            status = .found
            headers.add(name: "location", value: "/elsewhere")
        case "/compressed":
            status = .ok
            headers.add(name: "content-encoding", value: "gzip")
            body = Self.notReallyGzip
        default:
            status = .ok
        }
        headers.add(name: "content-length", value: String(body.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
