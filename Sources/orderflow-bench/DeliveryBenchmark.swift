import APNS
import ArgumentParser
import Foundation
import LocalPostgres
import Logging
import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import WorkflowKit

/// Peak pushes/s of our APNs client against the local stand-in, side by side in one run with
/// Python's aioapns sending the same payload to the same endpoint; the same for our FCM client
/// and pyfcm on the local FCM stand-in; and how fast one worker drains a queue of pre-enqueued
/// transitions.
struct DeliveryBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delivery",
        abstract: "Pushes/s: our APNSClient vs aioapns, our FCMClient vs pyfcm, on local stand-ins; worker drain rate.",
        discussion: """
            1. worker drain (unless --worker-orders 0): N orders, each followed by a device with an \
            activity token and advanced once while no worker runs; then one worker (in process, \
            batch 100 × --lanes claim loops, the worker's default 4) is started and timed until activity_commands is empty. Before and \
            after it, the raw limit on the same database: pgbench, 8 clients, running one advance's \
            writes as one statement (as the advance benchmark's raw side) for --raw-seconds; the \
            drain's pushes/s is reported against the mean of the two.
            2. senders: the payload of one of the worker's pushes (a Live Activity update), sent \
            --pushes times with --concurrency requests in flight, by our APNSClient, then by \
            aioapns (Python, one process, pip install aioapns), then by ours again; all to the same \
            stand-in (TLS, HTTP/2, ES256 provider tokens verified on every request).
            3. FCM senders (unless --fcm-messages 0): a food-order Live Update data message rendered \
            from the shipped workflow, sent --fcm-messages times to 1000 registration tokens by our \
            FCMClient (--concurrency in flight), then by pyfcm (Python, pip install pyfcm; \
            --fcm-peer-threads threads), then by ours again; all to the same LocalFCM stand-in (TLS, \
            OAuth token endpoint, v1 message checks), which counts what it accepts from each side: \
            a side whose count differs from what it sent fails the run. A sample of 10 messages \
            from each side is first compared with the rendered one.

            Example: swift run -c release orderflow-bench delivery --pushes 20000 --concurrency 200
            FCM only: orderflow-bench delivery --worker-orders 0 --pushes 0 --python /tmp/aiovenv/bin/python
            """)

    @Option(help: "Pushes each APNs sender sends (after a warm-up of 1000); 0 skips the APNs senders.") var pushes = 20_000
    @Option(help: "Requests in flight at once, for both senders.") var concurrency = 200
    @Option(help: "HTTP/2 connections our client opens (APNSClientConfiguration.connections).") var connections = 2
    @Option(help: "Orders queued for the worker drain measurement (0 to skip it).") var workerOrders = 10_000
    @Option(help: "Claim loops of the draining worker (its concurrentBatches; default: the worker's).") var lanes: Int?
    @Option(help: "Milliseconds the stand-in waits before answering each of the drain's pushes (APNs across the internet answers in tens; default 0).")
    var apnsDelay = 0
    @Option(help: "Seconds of each pgbench turn of the raw limit, before and after the drain (0: no raw limit).") var rawSeconds = 5
    @Option(help: "FCM messages each FCM sender sends (after a warm-up of 1000); 0 skips the FCM senders.") var fcmMessages = 20_000
    @Option(help: "pyfcm's concurrency: threads (or messages a batch with --fcm-peer-mode async).") var fcmPeerThreads = 16
    @Option(help: "How pyfcm sends: threads (notify per thread, keep-alive sessions) or async (async_notify_multiple_devices).")
    var fcmPeerMode = "threads"
    @Option(help: "The Python interpreter with aioapns and pyfcm installed (scripts/bench-python-peers makes one).") var python = "python3"
    @Option(help: "PostgreSQL server URL (default: ORDERFLOW_DATABASE_URL, else a private cluster in .orderflow/).")
    var database: String?

    func run() async throws {
        guard pushes >= 0, fcmMessages >= 0, concurrency > 0, fcmPeerThreads > 0 else {
            throw BenchError("--pushes and --fcm-messages must be 0 or more, --concurrency and --fcm-peer-threads positive")
        }
        guard ["threads", "async"].contains(fcmPeerMode) else { throw BenchError("--fcm-peer-mode is threads or async") }
        guard rawSeconds >= 0 else { throw BenchError("--raw-seconds must be 0 or more") }
        if let lanes, lanes < 1 { throw BenchError("--lanes must be 1 or more") }
        guard apnsDelay >= 0 else { throw BenchError("--apns-delay must be 0 or more") }
        var logger = Logger(label: "orderflow.bench")
        logger.logLevel = .warning

        var payload = Self.syntheticPayload
        if workerOrders > 0 {
            payload = try await measureWorker(logger: logger) ?? payload
        }

        if pushes > 0 {
            let apns = try await BenchAPNS.start(recordsPushes: false)
            do {
                try await compareSenders(apns: apns, payload: payload, logger: logger)
                try? await apns.server.stop()
            } catch {
                try? await apns.server.stop()
                throw error
            }
        }
        if fcmMessages > 0 {
            try await compareFCMSenders(logger: logger)
        }
    }

    private func compareSenders(apns: BenchAPNS, payload: Data, logger: Logger) async throws {
        let tokens = (0..<1000).map { _ in BenchAPNS.randomToken(160) }
        print("")
        print("senders: \(pushes) pushes each, \(concurrency) in flight (ours over \(connections) connection(s)), payload \(payload.count) bytes (a Live Activity update), to \(apns.server.baseURL)")

        let ours1 = try await measureOurs(apns: apns, payload: payload, tokens: tokens, logger: logger)
        print(String(format: "ours (APNSClient)      %8.0f pushes/s", ours1))
        let theirs: Result<Double, any Error>
        do {
            theirs = .success(try await measureAioapns(apns: apns, payload: payload, tokens: tokens))
        } catch {
            theirs = .failure(error)
        }
        if case .success(let rate) = theirs { print(String(format: "aioapns (Python)       %8.0f pushes/s", rate)) }
        let ours2 = try await measureOurs(apns: apns, payload: payload, tokens: tokens, logger: logger)
        print(String(format: "ours again             %8.0f pushes/s", ours2))
        let ours = (ours1 + ours2) / 2
        print("")
        print(String(format: "ours (mean of 2 runs)  %8.0f pushes/s", ours))
        switch theirs {
        case .success(let rate):
            print(String(format: "aioapns                %8.0f pushes/s", rate))
            print(String(format: "ratio ours/aioapns     %8.2f", ours / rate))
        case .failure(let error):
            print("aioapns: not measured: \(error)")
        }
        print("refused by the stand-in: \(apns.server.rejectedCount); TCP connections accepted: \(apns.server.acceptedConnectionCount)")
    }

    // MARK: Our client

    private func measureOurs(apns: BenchAPNS, payload: Data, tokens: [String], logger: Logger) async throws -> Double {
        var configuration = APNSClientConfiguration(
            environment: .custom(baseURL: apns.server.baseURL, trustRootsPEM: apns.server.trustRootPEM),
            credentials: .init(key: .pem(apns.keyPEM), keyID: BenchAPNS.keyID, teamID: BenchAPNS.teamID),
            maximumConcurrentRequests: concurrency)
        configuration.connections = connections
        let client = try APNSClient(configuration: configuration, logger: logger)
        let requests = tokens.map {
            APNSRequest(deviceToken: $0, pushType: .liveActivity, topic: BenchAPNS.bundleID, priority: .immediate, payload: payload)
        }
        do {
            _ = await client.sendForBenchmark(requests, count: 1000, concurrency: concurrency)  // connect, warm up
            let clock = ContinuousClock()
            let start = clock.now
            let failures = await client.sendForBenchmark(requests, count: pushes, concurrency: concurrency)
            let elapsed = (clock.now - start).asSeconds
            try await client.shutdown()
            if failures > 0 { print("  ours: \(failures) sends failed") }
            return Double(pushes - failures) / elapsed
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    // MARK: aioapns

    private func measureAioapns(apns: BenchAPNS, payload: Data, tokens: [String]) async throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-aioapns-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("output.log")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Self.pythonScript.write(to: directory.appendingPathComponent("bench.py"), atomically: true, encoding: .utf8)
            try apns.server.trustRootPEM.write(to: directory.appendingPathComponent("ca.pem"), atomically: true, encoding: .utf8)
            try apns.keyPEM.write(to: directory.appendingPathComponent("key.p8"), atomically: true, encoding: .utf8)
            try payload.write(to: directory.appendingPathComponent("payload.json"))
            let settings: [String: Any] = [
                "host": apns.server.configuration.host, "port": apns.server.port,
                "ca": directory.appendingPathComponent("ca.pem").path, "key": directory.appendingPathComponent("key.p8").path,
                "key_id": BenchAPNS.keyID, "team_id": BenchAPNS.teamID, "topic": BenchAPNS.bundleID + ".push-type.liveactivity",
                "payload": directory.appendingPathComponent("payload.json").path, "tokens": tokens,
                "pushes": pushes, "warmup": 1000, "concurrency": concurrency,
            ]
            try JSONSerialization.data(withJSONObject: settings).write(to: directory.appendingPathComponent("settings.json"))
        } catch {
            throw BenchError("could not write the aioapns script: \(error)")
        }
        print("aioapns: running \(python) \(directory.path)/bench.py …")
        let status: Int32
        do {
            status = try await ChildProcess.run(
                ["/usr/bin/env", python, directory.appendingPathComponent("bench.py").path, directory.appendingPathComponent("settings.json").path],
                environment: ProcessInfo.processInfo.environment, outputPath: output.path)
        } catch {
            throw BenchError("could not run \(python): \(error)")
        }
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("aioapns:") { print("  " + line) }
        guard status == 0, let line = text.split(separator: "\n").first(where: { $0.hasPrefix("RATE ") }),
              let rate = Double(line.dropFirst(5))
        else {
            throw BenchError("aioapns run failed (exit \(status)): \(text.prefix(800)) … \(text.suffix(300))")
        }
        return rate
    }

    /// aioapns connects to `APNS_SERVER:APNS_PORT` of its protocol class (api.push.apple.com:443)
    /// and has no option for another host; a subclass with the stand-in's host and port is put in
    /// its place. Its `ssl_context` parameter takes the stand-in's CA (and ALPN h2).
    static let pythonScript = #"""
    import asyncio, json, ssl, sys, time

    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsProductionClientProtocol

    settings = json.load(open(sys.argv[1]))
    payload = json.load(open(settings["payload"]))
    tokens = settings["tokens"]

    class LocalProtocol(APNsProductionClientProtocol):
        APNS_SERVER = settings["host"]
        APNS_PORT = settings["port"]

    context = ssl.create_default_context(cafile=settings["ca"])
    context.set_alpn_protocols(["h2"])

    async def main():
        client = APNs(key=open(settings["key"]).read(), key_id=settings["key_id"], team_id=settings["team_id"],
                      topic=settings["topic"], use_sandbox=False, ssl_context=context, max_connections=10)
        client.pool.protocol_class = LocalProtocol
        failures = 0

        async def run(count):
            nonlocal failures
            counter = iter(range(count))
            async def lane():
                nonlocal failures
                for i in counter:
                    request = NotificationRequest(device_token=tokens[i % len(tokens)], message=payload,
                                                  priority=10, push_type=PushType.LIVEACTIVITY)
                    result = await client.send_notification(request)
                    if not result.is_successful:
                        failures += 1
            await asyncio.gather(*(lane() for _ in range(settings["concurrency"])))

        await run(settings["warmup"])
        failures = 0
        started = time.perf_counter()
        await run(settings["pushes"])
        elapsed = time.perf_counter() - started
        sent = settings["pushes"] - failures
        print(f"aioapns: {sent} accepted, {failures} failed in {elapsed:.2f} s, {len(client.pool.connections)} connection(s)")
        print(f"RATE {sent / elapsed:.1f}")

    asyncio.run(main())
    """#

    /// A food-order Live Activity update like the worker sends (used when the worker part is skipped).
    static var syntheticPayload: Data {
        let content = #"{"status":"outForDelivery","message":"Sam is on the way.","eta":1795000000,"driverName":"Sam"}"#
        let payload = LiveActivityPayload.update(
            timestamp: Date(), contentState: (try? APNSJSONObject(json: Data(content.utf8)))!,
            alert: LiveActivityAlert(title: "On its way", body: "Sam is on the way with your order."))
        return (try? payload.encoded()) ?? Data(content.utf8)
    }

    // MARK: Worker drain

    /// Returns the body of one of the worker's pushes, for the sender comparison.
    private func measureWorker(logger: Logger) async throws -> Data? {
        let bench = try await BenchDatabase.make(url: database)
        let engine = OrderFlowEngine(
            configuration: OrderFlowConfiguration(database: bench.configuration, maximumConnections: 8), logger: logger)
        let apns = try await BenchAPNS.start(recordsPushes: true)
        do {
            _ = try await engine.applyWorkflow(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
            let rawTransition = rawSeconds > 0 ? try await RawTransition.prepare(engine: engine, orders: 10_000) : nil
            let count = workerOrders
            print("worker drain: queueing \(count) orders × (activity token + accept) with no worker running…")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        for index in stride(from: task, to: count, by: 8) {
                            _ = try await engine.createOrder(NewOrder(
                                orderID: "d-\(index)", workflow: "food-order",
                                attributes: ["merchantName": "Bench Bistro", "orderNumber": .string("\(index)"), "itemCount": 2]))
                            try await engine.registerActivityToken(orderID: "d-\(index)", deviceID: "phone-\(index)", token: BenchAPNS.randomToken(160))
                            _ = try await engine.advance("d-\(index)", to: "accept", input: ["eta": "+20m"])
                        }
                    }
                }
                try await group.waitForAll()
            }
            // The raw limit measured right before the drain and right after it, each turn from a
            // settled database, as the drain starts from one: the machine's pace drifts.
            func rawTurn() async throws -> Double? {
                guard let rawTransition else { return nil }
                try await settle(engine.pool)
                let rate = try await rawTransition.run(url: bench.configuration.connectionString, clients: 8, seconds: rawSeconds)
                try await RawTransition.removeCommands(engine.pool)
                print(String(format: "raw limit (pgbench, 8 clients, one-statement transition): %.0f transitions/s", rate))
                return rate
            }
            let rawBefore = try await rawTurn()
            try await settle(engine.pool)
            let depth = try await queueDepth(engine.pool)
            // The host's own engine stays idle: the worker drains what the engine above queued.
            var configuration = apns.hostConfiguration(database: bench.configuration, connections: 2, workerID: "bench-delivery")
            if let lanes { configuration.worker.concurrentBatches = lanes }
            if apnsDelay > 0 { apns.server.setResponseDelay(.milliseconds(apnsDelay)) }
            print("worker drain: \(configuration.worker.concurrentBatches) lanes of \(configuration.worker.batchSize) orders; pushes answered after \(apnsDelay) ms")
            let host = try OrderFlowHost(configuration: configuration, logger: logger)
            let clock = ContinuousClock()
            let statementsBefore = await StatementTime.read(engine.pool)
            let start = clock.now
            let (elapsed, remaining) = try await whileRunning(host, logger: logger) {
                var remaining = depth
                while remaining > 0 || apns.server.acceptedCount < count, clock.now - start < .seconds(300) {
                    try await Task.sleep(for: .milliseconds(20))
                    remaining = try await queueDepth(engine.pool)
                }
                return ((clock.now - start).asSeconds, remaining)
            }
            let accepted = apns.server.acceptedCount
            print(String(format: "worker drain: %ld commands (%ld orders) drained in %.2f s: %.0f commands/s, %.0f pushes/s (%ld pushes, %ld refused; %ld left)",
                         depth, count, elapsed, Double(depth - remaining) / elapsed, Double(accepted) / elapsed,
                         accepted, apns.server.rejectedCount, remaining))
            switch (statementsBefore, await StatementTime.read(engine.pool)) {
            case (.success(let before), .success(let after)):
                for line in StatementTime.report(after.since(before), over: elapsed, during: "during the drain") { print("  " + line) }
            case (.failure(let reason), _), (_, .failure(let reason)):
                print("  database execution time during the drain: not measured (\(reason))")
            }
            if let rawBefore, let rawAfter = try await rawTurn() {
                let raw = (rawBefore + rawAfter) / 2
                print(String(format: "worker drain / raw limit: %.2f (%.0f pushes/s against %.0f transitions/s, the mean of both pgbench turns; target ≥ 0.50)",
                             Double(accepted) / elapsed / raw, Double(accepted) / elapsed, raw))
            }
            let sample = apns.server.pushes().last.map { Data($0.rawPayload) }
            try? await apns.server.stop()
            await engine.shutdown()
            await bench.finish()
            return sample
        } catch {
            try? await apns.server.stop()
            await engine.shutdown()
            await bench.finish()
            throw error
        }
    }

    private func queueDepth(_ pool: PostgresPool) async throws -> Int {
        try await pool.query(PostgresQuery("SELECT count(*)::bigint AS n FROM activity_commands")).single().decode("n", as: Int.self)
    }
}
