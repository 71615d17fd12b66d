import AsyncHTTPClient
import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// Every metric deploy/prometheus/alerts.yml names is one the binaries expose: scraped from a
/// running `orderflow serve` with its worker after a push went out, or — for the series that
/// appear only once their event happened (a paused app) — defined by name in the sources.
@Suite("The alerts name real metrics", .serialized)
struct AlertMetricsTests {
    /// Series that exist only after their event, and the source file that defines each.
    static let eventSeries = [
        "orderflow_sending_paused": "Sources/OrderFlow/Worker/WorkerMetrics.swift",
    ]

    @Test("each metric in an alert's expression is on /metrics of serve with its worker, or defined in the sources",
          .timeLimit(.minutes(3)))
    func alertsNameExposedMetrics() async throws {
        let names = try Self.alertMetricNames()
        #expect(names.count >= 6, "the alerts name the metrics they watch: \(names.sorted())")

        let database = try await TestDatabase.fresh(prefix: "alerts")
        _ = try await Schema.migrate(database)
        let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, maximumConnections: 2))
        _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        _ = try await engine.createOrder(NewOrder(orderID: "M1", workflow: "food-order",
            attributes: ["merchantName": "Metrics Kitchen", "orderNumber": "M1", "itemCount": 1]))
        try await engine.registerActivityToken(orderID: "M1", deviceID: "phone-m1", token: EngineFixture.token(401))
        let fixture = try await WorkerFixture.start(keyMode: 0o600)
        let token = "alerts-check-" + UUID().uuidString
        let tokenFile = try Fixtures.file("metrics-token", token)
        let cli = try CLI(databaseURL: database.connectionString)
        let serve = try cli.start(["serve", "--port", "0", "--metrics-token-file", tokenFile] + fixture.arguments.dropFirst(2))
        let port = try #require(try await HTTPWalkthroughTests.port(of: serve), "serve never said where it listens")
        _ = try await engine.advance("M1", to: "accept")
        // One API call, so that the request metrics have a series.
        let health = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/healthz"), timeout: .seconds(10))
        #expect(health.status == .ok)

        // Scraped until the push went out and the queue depth was sampled once.
        var exposition = ""
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            exposition = String(buffer: try await response.body.collect(upTo: 4 << 20))
            if exposition.contains("orderflow_pushes_total{"), exposition.contains("orderflow_queue_depth{"),
               exposition.contains("orderflow_database_reachable"), exposition.contains("\"/healthz\""),
               exposition.contains("orderflow_purge_last_success_timestamp_seconds") { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        serve.process.terminate()
        let stopped = try await serve.finish()
        #expect(stopped.status == 0, "\(stopped)")
        #expect(exposition.contains("orderflow_database_reachable 1"), "the worker reads its database")
        // The labels the alerts select on.
        #expect(exposition.contains("http_response_status_code=\"200\"") && exposition.contains("outcome=\"sent\"")
                && exposition.contains("platform=\"ios\""), "\(exposition)")
        let exposed = Set(exposition.split(separator: "\n").filter { !$0.hasPrefix("#") }
            .map { String($0.prefix { $0 != "{" && $0 != " " }) })

        for name in names.sorted() {
            if exposed.contains(name) { continue }
            if let file = Self.eventSeries[name] {
                let source = try String(contentsOf: Fixtures.repository.appendingPathComponent(file), encoding: .utf8)
                #expect(source.contains("\"\(name)\""), "\(name) is neither exposed nor defined in \(file)")
            } else {
                Issue.record("alerts.yml names \(name), which serve with its worker does not expose; exposed: \(exposed.sorted())")
            }
        }
        try await fixture.stop()
        await engine.shutdown()
    }

    /// The metric names in the alerts' expressions: OrderFlow's own and the HTTP server's.
    static func alertMetricNames() throws -> Set<String> {
        let file = Fixtures.repository.appendingPathComponent("deploy/prometheus/alerts.yml")
        let text = try String(contentsOf: file, encoding: .utf8)
        var names: Set<String> = []
        var inExpression = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("expr:") {
                inExpression = true
            } else if trimmed.range(of: #"^[a-z_]+:"#, options: .regularExpression) != nil || trimmed.hasPrefix("- ") {
                inExpression = false
            }
            guard inExpression else { continue }
            for match in trimmed.matches(of: /\b(?:orderflow|hb|http_server)_[a-z0-9_]+/) { names.insert(String(match.output)) }
        }
        return names
    }
}
