import Hummingbird
import HummingbirdTesting
import NIOCore
import Prometheus
import Testing
@testable import OrderFlowHTTP

/// The API's request metrics: the names, labels and values `deploy/prometheus/alerts.yml` and
/// the operations guide's dashboards read (those of Hummingbird's own middleware), with an
/// answer in memory left as the handler made it and a streamed one timed to its last byte.
@Suite("Request metrics")
struct RequestMetricsTests {
    @Test("requests, errors and durations by route, method and status; a stream is timed to its end and active until then")
    func countsAndTimes() async throws {
        let registry = PrometheusCollectorRegistry()
        let router = Router()
        router.add(middleware: RequestMetrics(factory: PrometheusMetricsFactory(registry: registry)))
        router.get("/v1/orders/{id}") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{}")))
        }
        router.post("/v1/orders/{id}/advance") { _, _ -> Response in
            throw HTTPError(.conflict, message: "stale")
        }
        // The stream says when it is open, then waits to be let go on: its request is measured
        // in the middle, whatever the machine's pace.
        let (opened, open) = AsyncStream<Void>.makeStream()
        let (release, letGo) = AsyncStream<Void>.makeStream()
        router.get("/v1/events") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/event-stream"], body: ResponseBody { writer in
                try await writer.write(ByteBuffer(string: ": open\n\n"))
                open.yield()
                for await _ in release { break }
                try await writer.write(ByteBuffer(string: "data: {}\n\n"))
                try await writer.finish(nil)
            })
        }
        let application = Application(router: router)
        try await application.test(.router) { client in
            for id in ["A1", "A2"] {
                try await client.execute(uri: "/v1/orders/\(id)", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == "{}", "the answer is the handler's, untouched")
                }
            }
            try await client.execute(uri: "/v1/orders/A1/advance", method: .post) { #expect($0.status == .conflict) }
            async let stream: Void = client.execute(uri: "/v1/events", method: .get) { response in
                #expect(String(buffer: response.body) == ": open\n\ndata: {}\n\n")
            }
            for await _ in opened { break }
            let active = Self.lines(registry).filter { $0.hasPrefix("http_server_active_requests{") }
            let streamActive = active.contains(#"http_server_active_requests{http_request_method="GET"} 1.0"#)
            #expect(streamActive,
                    "an open event stream is an active request: \(active)")
            try await Task.sleep(for: .milliseconds(300))
            letGo.yield()
            try await stream
        }
        let text = Self.text(registry)
        let lines = Self.lines(registry)
        for expected in [
            #"hb_requests{http_route="/v1/orders/{id}",http_request_method="GET",http_response_status_code="200"} 2"#,
            #"hb_requests{http_route="/v1/orders/{id}/advance",http_request_method="POST",http_response_status_code="409"} 1"#,
            #"hb_request_errors{http_route="/v1/orders/{id}/advance",http_request_method="POST",error_type="409"} 1"#,
            #"hb_requests{http_route="/v1/events",http_request_method="GET",http_response_status_code="200"} 1"#,
            #"http_server_request_duration_count{http_route="/v1/orders/{id}",http_request_method="GET",http_response_status_code="200"} 2"#,
            #"http_server_active_requests{http_request_method="GET"} 0.0"#,
            #"http_server_active_requests{http_request_method="POST"} 0.0"#,
        ] {
            let found = lines.contains(expected)
            #expect(found, "\(expected) in:\n\(text)")
        }
        // The stream's duration covers its writing (the 300 ms between its two events).
        let streamSum = text.split(separator: "\n").first {
            $0.hasPrefix(#"http_server_request_duration_sum{http_route="/v1/events""#)
        }.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
        #expect((streamSum ?? 0) >= 0.3, "the event stream was timed \(streamSum.map { "\($0) s" } ?? "not at all"), not until its last event:\n\(text)")
    }

    static func text(_ registry: PrometheusCollectorRegistry) -> String {
        var buffer = [UInt8]()
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    static func lines(_ registry: PrometheusCollectorRegistry) -> Set<String> {
        Set(text(registry).split(separator: "\n").map(String.init))
    }
}
