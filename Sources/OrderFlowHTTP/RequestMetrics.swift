import Dispatch
import HTTPTypes
import Hummingbird
import Metrics
import Synchronization

/// Counts and times every request with the metrics, names and dimensions of Hummingbird's
/// `MetricsMiddleware` (`hb_requests`, `hb_request_errors`, `http_server_request_duration`,
/// `http_server_active_requests`; dashboards and `deploy/prometheus/alerts.yml` read them), but
/// leaves an answer held in memory as the handler made it. Hummingbird's wraps every body in a
/// closure so as to time its writing, and a closure body leaves the server's one-write path:
/// head, body and end of every answer then went to the socket as three writes and three
/// flushes. An answer in memory is timed until it is ready (its writing is one write);
/// a streamed one (an event stream) until its last byte, and counted active until then.
struct RequestMetrics<Context: RequestContext>: RouterMiddleware {
    private let cache: RequestMetricsCache

    /// Metrics made by `factory`: the process's (`MetricsSystem`) unless a test gives its own.
    init(factory: any MetricsFactory = MetricsSystem.factory) {
        cache = RequestMetricsCache(factory: factory)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = DispatchTime.now().uptimeNanoseconds
        let active = cache.active(request.method)
        active.increment()
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            let metrics = cache.endpoint(.init(path: context.endpointPath ?? "NotFound", method: request.method, status: status))
            metrics.requests.increment()
            metrics.errors.increment()
            active.decrement()
            throw error
        }
        let metrics = cache.endpoint(.init(path: context.endpointPath ?? "Unknown", method: request.method, status: response.status))
        guard response.headers[.contentType]?.hasPrefix("text/event-stream") == true else {
            metrics.requests.increment()
            metrics.duration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started))
            active.decrement()
            return response
        }
        var streamed = response
        let body = response.body
        streamed.body = ResponseBody(contentLength: body.contentLength) { writer in
            defer {
                metrics.requests.increment()
                metrics.duration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started))
                active.decrement()
            }
            try await body.write(writer)
        }
        return streamed
    }
}

/// The metrics of each method, and of each route, method and status, made once: making one is a
/// lookup in the metrics system's registry, under its lock.
private final class RequestMetricsCache: Sendable {
    struct Endpoint: Hashable {
        var path: String
        var method: HTTPRequest.Method
        var status: HTTPResponse.Status
    }

    struct EndpointMetrics: Sendable {
        let requests: Counter
        let errors: Counter
        let duration: Metrics.Timer

        init(_ endpoint: Endpoint, factory: any MetricsFactory) {
            let dimensions = [
                ("http.route", endpoint.path),
                ("http.request.method", endpoint.method.rawValue),
                ("http.response.status_code", String(endpoint.status.code)),
            ]
            requests = Counter(label: "hb.requests", dimensions: dimensions, factory: factory)
            duration = Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds,
                                     factory: factory)
            let errorDimensions = [
                ("http.route", endpoint.path),
                ("http.request.method", endpoint.method.rawValue),
                ("error.type", String(endpoint.status.code)),
            ]
            errors = Counter(label: "hb.request.errors", dimensions: errorDimensions, factory: factory)
        }
    }

    private let factory: any MetricsFactory
    private let methods = Mutex<[HTTPRequest.Method: Meter]>([:])
    private let endpoints = Mutex<[Endpoint: EndpointMetrics]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    func active(_ method: HTTPRequest.Method) -> Meter {
        methods.withLock { methods in
            if let meter = methods[method] { return meter }
            let meter = Meter(label: "http.server.active_requests", dimensions: [("http.request.method", method.rawValue)], factory: factory)
            methods[method] = meter
            return meter
        }
    }

    func endpoint(_ endpoint: Endpoint) -> EndpointMetrics {
        endpoints.withLock { endpoints in
            if let metrics = endpoints[endpoint] { return metrics }
            let metrics = EndpointMetrics(endpoint, factory: factory)
            endpoints[endpoint] = metrics
            return metrics
        }
    }
}
