import Foundation
import LocalAPNS
import OrderFlow
import Testing

/// `Examples/HTTP/end-to-end.sh` — a plain curl script playing the merchant's backend and the
/// customer's app — against `orderflow serve` with its worker, and the APNs stand-in receiving
/// the activity's start, its updates and its end.
@Suite("HTTP end to end", .serialized)
struct HTTPEndToEndTests {
    @Test("a curl script creates, follows and advances an order; the stand-in receives start, updates and end")
    func curlScript() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "http_e2e")
        if try await !setup.engine.merchants().contains(where: { $0.id == "default" }) {
            _ = try await setup.engine.addMerchant("default")
        }
        let key = try await setup.engine.createAPIKey(merchantID: "default", name: "e2e").secret
        var cli = setup.cli
        cli.workingDirectory = Fixtures.repository
        // The metrics on the API's own port only for the operator's token.
        let metricsToken = "operator-metrics-token-0123456789"
        let tokenFile = cli.directory.appendingPathComponent("metrics-token")
        try metricsToken.write(to: tokenFile, atomically: true, encoding: .utf8)
        let serve = try cli.start(["serve", "--port", "0", "--metrics-token-file", tokenFile.path] + setup.workerArguments.dropFirst(2))
        let port = try #require(try await HTTPWalkthroughTests.port(of: serve), "serve never said where it listens")

        let pushToStart = String(repeating: "a1", count: 32)
        let activity = String(repeating: "b2", count: 32)
        let events = cli.directory.appendingPathComponent("events.txt")
        let ran = try await cli.shell("Examples/HTTP/end-to-end.sh", environment: [
            "API": "http://127.0.0.1:\(port)", "KEY": key, "ORDER": "E2E-1", "PUSH_TO_START_TOKEN": pushToStart,
            "ACTIVITY_TOKEN": activity, "EVENTS": events.path,
        ])
        #expect(ran.status == 0, "\(ran)")
        #expect(ran.stdout.contains("advanced to delivered") && ran.stdout.contains("pushes: start:sent"), "\(ran)")

        let started = setup.apns.pushes(forToken: pushToStart)
        #expect(started.map { $0.payload["aps"]?["event"]?.stringValue } == ["start"], "one push-to-start: \(started)")
        let updates = setup.apns.pushes(forToken: activity).map { $0.payload["aps"]?["event"]?.stringValue ?? "?" }
        #expect(updates.count >= 2 && updates.last == "end" && updates.dropLast().allSatisfy { $0 == "update" },
                "updates, then the end, last: \(updates)")
        let states = setup.apns.pushes(forToken: activity).compactMap { $0.payload["aps"]?["content-state"]?["status"]?.stringValue }
        #expect(states.last == "delivered", "\(states)")

        // The feed carried every transition, in order, with ids a client can resume from.
        let feed = try String(contentsOf: events, encoding: .utf8)
        let transitions = feed.components(separatedBy: "\n").filter { $0.hasPrefix("data: ") && $0.contains(#""type":"transition""#) }
        #expect(transitions.count == 5, "created and four advances:\n\(feed)")
        #expect(transitions.last?.contains(#""to":"delivered""#) == true)
        #expect(feed.contains("event: push") && feed.components(separatedBy: "\n").contains { $0.hasPrefix("id: ") })

        // A chunked body (no Content-Length) over the limit is cut as it is read: 413.
        let chunked = try await cli.shell(
            "head -c 3000000 /dev/zero | tr '\\0' ' ' | curl -s -X POST http://127.0.0.1:\(port)/v1/orders -H 'Authorization: Bearer \(key)' -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary @- -w ' %{http_code}'")
        #expect(chunked.stdout.hasSuffix(" 413") && chunked.stdout.contains("contentTooLarge") == false && chunked.stdout.contains("1048576"), "\(chunked)")

        // The operator's view on the API's own port: health with the worker, and the metrics.
        let health = try await cli.shell("curl -s http://127.0.0.1:\(port)/healthz")
        let healthBody = try JSONSerialization.jsonObject(with: Data(health.stdout.utf8)) as? [String: Any]
        #expect(healthBody?["worker"] as? String == "running" && healthBody?["status"] as? String == "ok", "\(health)")
        let withoutToken = try await cli.shell("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:\(port)/metrics")
        #expect(withoutToken.stdout == "401", "\(withoutToken)")
        let metrics = try await cli.shell("curl -s http://127.0.0.1:\(port)/metrics -H 'Authorization: Bearer \(metricsToken)'")
        for name in ["hb_requests", "orderflow_app_reports_total", "orderflow_pushes_applied_total", "orderflow_commit_to_applied_seconds"] {
            #expect(metrics.stdout.contains(name), "\(name) in /metrics:\n\(metrics.stdout.split(separator: "\n").filter { $0.hasPrefix("# TYPE") }.joined(separator: "\n"))")
        }

        let details = try await setup.engine.order("E2E-1")
        #expect(details.activities.first?.appState == "active" && details.activities.first?.appAppliedSeq != nil, "\(details.activities)")
        let shown = try await cli.run("show", "E2E-1")
        #expect(shown.stdout.contains("THE PHONE SAYS") && shown.stdout.contains("active, applied #"), "\(shown)")

        // A client that keeps the feed open does not hold the server up at SIGINT.
        let feedClient = Process()
        feedClient.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        feedClient.arguments = ["-sN", "--max-time", "60", "http://127.0.0.1:\(port)/v1/events", "-H", "Authorization: Bearer \(key)"]
        feedClient.standardOutput = FileHandle.nullDevice
        feedClient.standardError = FileHandle.nullDevice
        try feedClient.run()
        defer { if feedClient.isRunning { feedClient.terminate() } }
        try await Task.sleep(for: .milliseconds(500))
        let interrupted = Date()
        serve.interrupt()
        let stopped = try await serve.finish()
        #expect(stopped.status == 0, "\(stopped)")
        #expect(Date().timeIntervalSince(interrupted) < 30, "it stopped without waiting for the feed's client to hang up")
        #expect(!stopped.stderr.contains(key) && !ran.stdout.contains(key), "the key never appears whole")
        // Each request is logged once with its request id (never with a credential).
        let advances = stopped.stderr.split(separator: "\n").filter { $0.contains("/v1/orders/E2E-1/advance") }
        #expect(advances.count == 4 && advances.allSatisfy { $0.contains("request_id") && $0.contains("200") },
                "one log line per advance:\n\(stopped.stderr.suffix(3000))")
        try await setup.shutdown()
    }
}
