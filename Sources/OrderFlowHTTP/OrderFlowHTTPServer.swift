import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import OpenAPIHummingbird
import OpenAPIRuntime
import OrderFlow
import Prometheus
import ServiceLifecycle

/// Where and how the HTTP API listens.
public struct OrderFlowHTTPConfiguration: Sendable {
    /// Loopback by default: put a TLS-terminating proxy in front to serve other machines.
    public var host: String = "127.0.0.1"
    /// 0 picks a free port (see ``OrderFlowHTTPServer/boundPort``).
    public var port: Int = 8080
    /// Whether this process also runs the worker (for `/healthz`).
    public var runsWorker: Bool = true
    /// The worker's state for `/healthz` (`running` is healthy), when this process runs one.
    public var workerStatus: (@Sendable () -> String)?
    /// The registry `GET /metrics` shows on this listener (the process's metrics, the worker's
    /// included, when it is the one `MetricsSystem` was bootstrapped with), only to a request
    /// bearing ``metricsToken``: the metrics name every merchant and its traffic, which the
    /// internet must not read. Without both, this listener serves no `/metrics`; give the
    /// registry its own listener on loopback instead (``MetricsListener``).
    public var metrics: PrometheusCollectorRegistry?
    /// The bearer token `GET /metrics` needs here (at least 16 characters).
    public var metricsToken: String?
    /// Where clients reach this server (`https://orders.example.com`), when a proxy in front
    /// of it terminates TLS: the board's sign-in links name it, and with `https` the board's
    /// cookie is `Secure` and `__Host-`. Nil: `http://host:port` as bound.
    public var publicURL: String?
    /// A connection with no request in flight — or whose request's head or body stopped
    /// arriving — for this long is closed: a client that opens connections and trickles bytes
    /// (slowloris) holds each for no longer. Default 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// A request's body must arrive within this long of its head (408 otherwise). Default 30 s.
    public var requestBodyTimeout: Duration = .seconds(30)
    /// Connections served at once; more wait in the listen queue until one closes. Default 1,024.
    public var maximumConnections = 1_024
    /// The most header bytes (all fields together) and header fields a request may carry.
    /// Defaults 32 KiB and 100.
    public var maximumHeaderBytes = 32 * 1024
    public var maximumHeaderFields = 100
    /// Event streams (`GET /v1/events`) one API key or board session may hold open at once.
    /// Default 8.
    public var eventStreamsPerCredential = 8

    public init(host: String = "127.0.0.1", port: Int = 8080, runsWorker: Bool = true,
                workerStatus: (@Sendable () -> String)? = nil, metrics: PrometheusCollectorRegistry? = nil,
                metricsToken: String? = nil) {
        self.host = host
        self.port = port
        self.runsWorker = runsWorker
        self.workerStatus = workerStatus
        self.metrics = metrics
        self.metricsToken = metricsToken
    }
}

/// The HTTP API (`openapi/orderflow.yaml`) on Hummingbird, as a `Service`: run it beside an
/// ``OrderFlowHost`` (or an engine of your own) in one `ServiceGroup`; a graceful shutdown lets
/// the requests in flight finish.
public final class OrderFlowHTTPServer: Service, Sendable {
    let engine: OrderFlowEngine
    public let configuration: OrderFlowHTTPConfiguration
    let logger: Logger
    private let listener = Listening()
    private let events: EventStreams

    public init(engine: OrderFlowEngine, configuration: OrderFlowHTTPConfiguration = .init(), logger: Logger) {
        self.engine = engine
        self.configuration = configuration
        self.logger = logger
        self.events = EventStreams(limits: .init(perCredential: configuration.eventStreamsPerCredential))
    }

    /// The port the server listens on, once it does.
    public var boundPort: Int? { listener.boundPort }

    /// The event streams a credential (`api-key:<prefix>`, `board:<digest>`) holds open now.
    public func openEventStreams(for credential: String) -> Int {
        events.openStreams(for: credential)
    }

    /// Waits until the server listens; its port.
    public func listening() async -> Int? {
        await listener.wait()
    }

    public func run() async throws {
        let application = Application(
            router: try Self.router(engine: engine, runsWorker: configuration.runsWorker, workerStatus: configuration.workerStatus,
                                    events: events, metrics: configuration.metricsToken.flatMap { token in
                                        configuration.metrics.map { (registry: $0, token: token) }
                                    }, boardCookie: BoardCookie(secure: configuration.publicURL?.lowercased().hasPrefix("https://") == true),
                                    bodyTimeout: configuration.requestBodyTimeout, logger: logger),
            server: .http1(configuration: HTTP1Channel.Configuration(
                idleTimeout: .nanoseconds(Int64(configuration.idleTimeout.inSeconds * 1e9)),
                httpDecoderConfiguration: .init(maxHeaderFieldSize: configuration.maximumHeaderBytes,
                                                maxHeaderListSize: configuration.maximumHeaderBytes,
                                                maxHeaderFieldCount: configuration.maximumHeaderFields))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "OrderFlow",
                                 availableConnectionsDelegate: MaximumAvailableConnections(configuration.maximumConnections)),
            onServerRunning: { [listener] channel in listener.bound(channel) },
            logger: logger)
        // Whatever ends the server (a port in use, an address that is not this machine's),
        // nobody must go on waiting for it to listen.
        defer { listener.ended() }
        do {
            // The event streams never end by themselves: a graceful shutdown ends them, so that
            // the server's wait for requests in flight is not a wait for clients to hang up.
            try await withGracefulShutdownHandler {
                try await application.run()
            } onGracefulShutdown: { [events] in
                events.closeAll()
            }
        } catch let error as IOError where boundPort == nil {
            throw OrderFlowHTTPListenError(host: configuration.host, port: configuration.port, errno: error.errnoCode)
        }
    }

    /// The routes, for this server and for tests in process (`hotRoutesByHand: false` sends every
    /// advance and read through the generated server, for the tests that compare it with
    /// `HandRoutes`).
    static func router(engine: OrderFlowEngine, runsWorker: Bool, workerStatus: (@Sendable () -> String)? = nil,
                       events: EventStreams = EventStreams(),
                       metrics: (registry: PrometheusCollectorRegistry, token: String)? = nil,
                       boardCookie: BoardCookie = BoardCookie(), bodyTimeout: Duration = .seconds(30), logger: Logger,
                       hotRoutesByHand: Bool = true) throws -> Router<BasicRequestContext> {
        let router = Router()
        // Outermost: every request is counted and timed (by route, method and status), and
        // logged once with its request id, whatever answers it.
        router.add(middleware: RequestMetrics())
        router.add(middleware: MerchantAuthentication(
            engine: engine, cookie: boardCookie,
            publicPaths: BoardRoutes.publicPaths.union(metrics == nil ? ["/healthz", "/openapi.yaml"] : ["/healthz", "/openapi.yaml", "/metrics"]),
            logger: logger))
        router.add(middleware: MethodNotAllowed())
        router.add(middleware: RequestBodyLimit(timeout: bodyTimeout))
        router.add(middleware: EmptyOptionalBody())
        router.add(middleware: ProblemsAcceptable())
        router.add(middleware: RequestErrors())
        router.add(middleware: MinimalReturn())
        router.get("/openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml"],
                     body: .init(byteBuffer: ByteBuffer(bytes: Contract.document)))
        }
        if let metrics {
            let expected = Data(metrics.token.utf8)
            router.get("/metrics") { request, _ in
                let given = request.headers[.authorization].flatMap(MerchantAuthentication<BasicRequestContext>.bearerCredential)
                guard let given, OrderFlowEngine.constantTimeEqual(Data(given.utf8), expected) else {
                    return MerchantAuthentication<BasicRequestContext>.unauthorized(
                        "the metrics need the operator's metrics token: `Authorization: Bearer <token>` (`orderflow serve --metrics-token-file`)",
                        challenge: "Bearer", requestID: MerchantAuthentication<BasicRequestContext>.newRequestID())
                }
                return MetricsText.response(metrics.registry)
            }
        }
        BoardRoutes(engine: engine, cookie: boardCookie).register(on: router)
        let api = OrderFlowAPI(engine: engine, runsWorker: runsWorker, workerStatus: workerStatus, events: events, logger: logger)
        // Compact JSON with its keys sorted (the runtime's default also pretty-prints: more bytes
        // on the wire and more work per answer, for no client that parses it). The hot routes
        // answer ordinary requests themselves (`HandRoutes`).
        let configuration = Configuration(dateTranscoder: ISO8601Transcoder(), jsonEncodingOptions: [.sortedKeys])
        if hotRoutesByHand {
            try api.registerHandlers(on: HandRoutes(router: router, api: api), configuration: configuration)
        } else {
            // Every request through the generated server (tests compare the two).
            try api.registerHandlers(on: router, configuration: configuration)
        }
        return router
    }
}

/// The server could not listen where it was asked to.
public struct OrderFlowHTTPListenError: Error, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// The system's reason (`EADDRINUSE`, `EADDRNOTAVAIL`, `EACCES`, …).
    public var errno: Int32

    public var description: String {
        let place = "\(host):\(port)"
        switch errno {
        case EADDRINUSE:
            return "cannot listen on \(place): the port is in use by another program; stop it, or pick another --port (0 picks a free one)"
        case EACCES:
            return "cannot listen on \(place): permission denied (ports below 1024 need privileges); pick a port above 1023"
        case EADDRNOTAVAIL:
            return "cannot listen on \(place): \(host) is not an address of this machine; use 127.0.0.1, 0.0.0.0 or one of its addresses"
        default:
            return "cannot listen on \(place): \(String(cString: strerror(errno))); check --host and --port"
        }
    }
}

/// The contract, served as it is in the repository (`openapi/orderflow.yaml`).
enum Contract {
    static let document: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
              let data = try? Data(contentsOf: url)
        else { return Array("openapi: 3.1.0\n# the bundled contract could not be read\n".utf8) }
        return Array(data)
    }()
}

/// Refuses a body over ``OrderFlowAPI/maximumBodyBytes`` (413): before reading it when its
/// `Content-Length` says so, else (a chunked body) as soon as it grows past the limit — the
/// body is read here, at most that far, so no handler ever holds more. A body that has not
/// arrived whole within `timeout` is 408 and the connection closes: a client that trickles a
/// body holds its connection no longer than that.
struct RequestBodyLimit<Context: RequestContext>: RouterMiddleware {
    var timeout: Duration = .seconds(30)

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let limit = OrderFlowAPI.maximumBodyBytes
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            return Self.tooLarge("the request body is \(length) bytes; at most \(limit) are accepted")
        }
        var request = request
        if request.method == .post || request.method == .put || request.method == .patch {
            do {
                request = try await Self.collected(request, limit: limit, within: timeout)
            } catch is NIOTooManyBytesError {
                return Self.tooLarge("the request body is over \(limit) bytes; at most \(limit) are accepted")
            } catch is BodyTimedOut {
                var response = ProblemResponse.response(
                    status: .requestTimeout, code: "invalidInput",
                    detail: "the request body did not arrive within \(Int(timeout.inSeconds)) seconds; send it at once", requestID: RequestScope.current?.requestID)
                response.headers[.connection] = "close"
                return response
            }
        }
        return try await next(request, context)
    }

    private struct BodyTimedOut: Error {}

    /// The request with its body read into memory, or an error when it is too large or late.
    /// The deadline is looked at as each part arrives (no timer task per request, on the
    /// advance's path): a body that trickles in is cut at the deadline, and one that stops
    /// arriving is closed by the listener's idle timeout.
    private static func collected(_ request: Request, limit: Int, within timeout: Duration) async throws -> Request {
        let deadline = ContinuousClock.now + timeout
        var collected = ByteBuffer()
        for try await part in request.body {
            guard ContinuousClock.now < deadline else { throw BodyTimedOut() }
            guard collected.readableBytes + part.readableBytes <= limit else { throw NIOTooManyBytesError(maxBytes: limit) }
            collected.writeImmutableBuffer(part)
        }
        var request = request
        request.body = .init(buffer: collected)
        return request
    }

    static func tooLarge(_ detail: String) -> Response {
        ProblemResponse.response(status: .contentTooLarge, code: "invalidInput", detail: detail, requestID: RequestScope.current?.requestID)
    }
}

/// Errors are answered as problem details (RFC 9457, `application/problem+json`) whatever the
/// request's `Accept` lists: the generated server checks every answer against `Accept`, and a
/// client asking for `application/json` (many libraries send it) got "response content type
/// not acceptable" (400) in place of the real 404, 409 or 422. The problem type is added to the
/// accepted ones; what a successful answer must match stays the client's choice.
struct ProblemsAcceptable<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let accept = request.headers[.accept], !Self.acceptsProblems(accept) else {
            return try await next(request, context)
        }
        var head = request.head
        head.headerFields[.accept] = accept + ", application/problem+json"
        return try await next(Request(head: head, body: request.body), context)
    }

    /// Whether one of `accept`'s media ranges (parameters and case aside) takes a problem body.
    static func acceptsProblems(_ accept: String) -> Bool {
        AcceptHeader.mediaRanges(of: accept).contains { ["*/*", "application/*", "application/problem+json"].contains($0) }
    }
}

/// Reading an `Accept` header as the generated server reads it (shared by `ProblemsAcceptable`
/// and the advance route's check of an ordinary request).
enum AcceptHeader {
    /// The media ranges, lowercased, without their parameters (`q` included), in order.
    static func mediaRanges(of accept: String) -> [String] {
        accept.split(separator: ",").map { range in
            range.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        }
    }
}

/// A request the generated server could not read (malformed JSON, a wrong type, a missing
/// field, an unknown content type) is the caller's mistake: 400 with a problem body that names
/// what was wrong, never a 500.
struct RequestErrors<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as ServerError {
            return ProblemResponse.response(
                status: .badRequest, code: "invalidInput", detail: Self.sentence(error), requestID: RequestScope.current?.requestID)
        } catch let error as HTTPError {
            return ProblemResponse.response(
                status: error.status, code: error.status == .notFound ? "notFound" : "invalidInput",
                detail: error.body ?? "\(error.status.reasonPhrase.lowercased())", requestID: RequestScope.current?.requestID)
        }
    }

    /// What the generated code found wrong, in a sentence a client can act on.
    static func sentence(_ error: ServerError) -> String {
        switch error.underlyingError {
        case let decoding as DecodingError:
            return "the request body does not fit \(error.operationID)'s schema: " + describe(decoding)
        default:
            return "the request does not fit \(error.operationID) in the contract (GET /openapi.yaml): \(error.causeDescription)"
        }
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let names = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return names.isEmpty ? "the body" : "`\(names.joined(separator: "."))`"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context)) lacks the required field `\(key.stringValue)`"
        case .typeMismatch(let type, let context):
            return "\(path(context)) is not \(Self.article(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context)) is null where \(Self.article(type)) is required"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "it is not valid JSON" : "\(path(context)) is not valid: \(context.debugDescription)"
        @unknown default:
            return "it could not be read"
        }
    }

    static func article(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Double.Type: "a number"
        case is Bool.Type: "true or false"
        default: "the declared type"
        }
    }
}
