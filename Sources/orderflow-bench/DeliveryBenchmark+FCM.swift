import FCM
import Foundation
import LocalFCM
import LocalPostgres
import Logging
import OrderFlowTesting
import WorkflowKit

/// The FCM half of `delivery`: our FCMClient against a Python peer (pyfcm), both sending the same
/// food-order Live Update data message to the same LocalFCM stand-in, which counts what it accepts
/// from each side.
extension DeliveryBenchmark {
    /// The Firebase project of the stand-in's service account.
    static let fcmProjectID = "orderflow-bench"
    /// Messages each side sends before it is timed (connections, access token, the peer's threads).
    static let fcmWarmup = 1000

    /// A count that does not add up: what a side says it sent and what the stand-in accepted from
    /// it differ. Never swallowed: a rate over messages that were not delivered means nothing.
    struct DeliveryMismatch: Error, CustomStringConvertible {
        var description: String
    }

    func compareFCMSenders(logger: Logger) async throws {
        let template = try Self.foodOrderAndroidMessage()
        let messages = (0..<1000).map { index in
            var message = template
            message.token = LocalFCMServer.registrationToken(index)
            return message
        }
        try await proveSameMessages(messages, logger: logger)

        let server = try LocalFCMServer(configuration: .init(recordsMessages: false))
        try await server.start()
        do {
            let account = try server.makeServiceAccount(projectID: Self.fcmProjectID)
            print("")
            print("FCM senders: \(fcmMessages) messages each (after \(Self.fcmWarmup) to warm up), data \(template.dataSize) bytes "
                + "(food-order ready → out_for_delivery, priority \(template.priority.rawValue)), to \(server.baseURL)")
            print("  ours: \(concurrency) in flight; pyfcm: \(fcmPeerThreads) \(fcmPeerMode == "threads" ? "threads" : "messages a batch") (--fcm-peer-mode \(fcmPeerMode))")

            let ours1 = try await measureOurFCM(server: server, account: account, messages: messages, logger: logger)
            print(String(format: "ours (FCMClient)       %8.0f messages/s", ours1))
            let peer: Result<Double, any Error>
            do {
                peer = .success(try await measurePyFCM(server: server, account: account, messages: messages, count: fcmMessages, warmup: Self.fcmWarmup))
            } catch let mismatch as DeliveryMismatch {
                throw mismatch
            } catch {
                peer = .failure(error)
            }
            if case .success(let rate) = peer { print(String(format: "pyfcm (Python)         %8.0f messages/s", rate)) }
            let ours2 = try await measureOurFCM(server: server, account: account, messages: messages, logger: logger)
            print(String(format: "ours again             %8.0f messages/s", ours2))
            let ours = (ours1 + ours2) / 2
            print("")
            print(String(format: "ours (mean of 2 runs)  %8.0f messages/s", ours))
            switch peer {
            case .success(let rate):
                print(String(format: "pyfcm                  %8.0f messages/s", rate))
                print(String(format: "ratio ours/pyfcm       %8.2f   (target ≥ 5)", ours / rate))
            case .failure(let error):
                print("pyfcm: not measured: \(error)")
            }
            print("refused by the stand-in: \(server.rejections().count); access tokens issued: \(server.tokenRequestCount)")
            try? await server.stop()
        } catch {
            try? await server.stop()
            throw error
        }
    }

    /// The message the worker sends an Android follower when a food order goes out for delivery,
    /// rendered from the shipped workflow as the worker renders it.
    static func foodOrderAndroidMessage() throws -> FCMMessage {
        let workflow = try WorkflowLoader.load(yaml: try EngineFixture.shippedWorkflow("food-order"), file: "food-order.yaml")
        guard let transition = workflow.transition(from: "ready", to: "out_for_delivery") else {
            throw BenchError("the shipped food-order workflow has no transition ready → out_for_delivery")
        }
        let now = Date()
        let attributes: JSONValue = ["merchantName": "Bench Bistro", "orderNumber": "B-1042", "itemCount": 2]
        let input: JSONValue = ["eta": .string(ISO8601DateFormatter().string(from: now.addingTimeInterval(20 * 60))), "driver": "Sam"]
        let update = try workflow.render(transition: transition, attributes: attributes, input: input, at: now)
        let android = try workflow.renderAndroid(update, from: "ready", order: "B-1042", attributes: attributes, input: input, previous: nil)
        return FCMMessage(
            token: LocalFCMServer.registrationToken(0), data: android.data, priority: android.priority == .high ? .high : .normal,
            collapseKey: android.collapseKey, timeToLive: android.ttl.seconds)
    }

    // MARK: Our client

    private func measureOurFCM(server: LocalFCMServer, account: LocalFCMServiceAccountKey, messages: [FCMMessage], logger: Logger) async throws -> Double {
        let configuration = FCMClientConfiguration(
            serviceAccount: try FCMServiceAccount(json: account.json), baseURL: server.baseURL, trustRootsPEM: server.trustRootPEM)
        let client = try FCMClient(configuration: configuration, logger: logger)
        do {
            let before = server.acceptedCount
            let warmupFailures = await client.sendForBenchmark(messages, count: Self.fcmWarmup, concurrency: concurrency)
            let clock = ContinuousClock()
            let start = clock.now
            let failures = await client.sendForBenchmark(messages, count: fcmMessages, concurrency: concurrency)
            let elapsed = (clock.now - start).asSeconds
            try await client.shutdown()
            try Self.checkDelivered(side: "ours", sent: Self.fcmWarmup + fcmMessages, failed: warmupFailures + failures,
                                    accepted: server.acceptedCount - before, server: server)
            return Double(fcmMessages) / elapsed
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// Fails unless every message was answered 200 and the stand-in counted each one once.
    static func checkDelivered(side: String, sent: Int, failed: Int, accepted: Int, server: LocalFCMServer) throws {
        guard failed == 0, accepted == sent else {
            let refusals = server.rejections().prefix(3).map { "\($0.status) \($0.code) at \($0.path): \($0.message.prefix(200))" }
            throw DeliveryMismatch(description: "\(side): \(sent) messages sent, \(failed) answered with an error, "
                + "the stand-in accepted \(accepted): the rates of this run mean nothing. "
                + "The stand-in's first refusals: \(refusals.isEmpty ? "none" : refusals.joined(separator: "; "))")
        }
    }

    // MARK: The same messages on both sides

    /// Before anything is timed: a few messages from each side to a stand-in that records them,
    /// compared field by field with the rendered message, so both sides are shown to send the
    /// same thing (the peer's JSON is its own; what the stand-in parsed from it must be ours).
    private func proveSameMessages(_ messages: [FCMMessage], logger: Logger) async throws {
        let server = try LocalFCMServer()
        try await server.start()
        do {
            let account = try server.makeServiceAccount(projectID: Self.fcmProjectID)
            let sample = Array(messages.prefix(10))
            let configuration = FCMClientConfiguration(
                serviceAccount: try FCMServiceAccount(json: account.json), baseURL: server.baseURL, trustRootsPEM: server.trustRootPEM)
            let client = try FCMClient(configuration: configuration, logger: logger)
            let failures = await client.sendForBenchmark(sample, count: sample.count, concurrency: 1)
            try await client.shutdown()
            try Self.checkDelivered(side: "ours (sample)", sent: sample.count, failed: failures, accepted: server.acceptedCount, server: server)
            let ours = server.messages()
            server.reset()
            do {
                _ = try await measurePyFCM(server: server, account: account, messages: sample, count: sample.count, warmup: 0, threads: 1)
            } catch let mismatch as DeliveryMismatch {
                throw mismatch
            } catch {
                print("FCM sample: pyfcm not run (\(error)); ours alone checked")
            }
            let theirs = server.messages()
            for (side, received) in [("ours", ours), ("pyfcm", theirs)] where !received.isEmpty {
                for (message, got) in zip(sample, received) {
                    guard got.token == message.token, got.data == message.data, got.priority == message.priority.rawValue,
                          got.collapseKey == message.collapseKey, got.ttl == message.timeToLive.map({ "\($0)s" })
                    else {
                        throw DeliveryMismatch(description: "\(side) sent another message than the one rendered: the stand-in "
                            + "received \(got.body.jsonString.prefix(600))")
                    }
                }
                print("FCM sample: \(side) sent \(received.count) messages identical to the rendered one, over HTTP/\(received[0].httpMajorVersion)")
            }
            try? await server.stop()
        } catch {
            try? await server.stop()
            throw error
        }
    }

    // MARK: pyfcm

    /// Runs the peer (`fcmPeerScript`) once: `warmup` messages untimed, then `count` timed.
    /// Throws ``DeliveryMismatch`` when what it reports or the stand-in counts differs from `count`.
    private func measurePyFCM(
        server: LocalFCMServer, account: LocalFCMServiceAccountKey, messages: [FCMMessage], count: Int, warmup: Int, threads: Int? = nil
    ) async throws -> Double {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-pyfcm-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("output.log")
        let ca = directory.appendingPathComponent("ca.pem").path
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Self.fcmPeerScript.write(to: directory.appendingPathComponent("bench.py"), atomically: true, encoding: .utf8)
            try server.trustRootPEM.write(toFile: ca, atomically: true, encoding: .utf8)
            try account.write(to: directory.appendingPathComponent("service-account.json").path)
            let first = messages[0]
            var android: [String: Any] = ["priority": first.priority.rawValue]
            if let collapseKey = first.collapseKey { android["collapse_key"] = collapseKey }
            if let ttl = first.timeToLive { android["ttl"] = "\(ttl)s" }
            let settings: [String: Any] = [
                "base_url": server.baseURL, "project_id": account.projectID,
                "service_account": directory.appendingPathComponent("service-account.json").path,
                "data": first.data, "android": android, "tokens": messages.map(\.token),
                "messages": count, "warmup": warmup, "threads": threads ?? fcmPeerThreads, "mode": threads == nil ? fcmPeerMode : "threads",
            ]
            try JSONSerialization.data(withJSONObject: settings).write(to: directory.appendingPathComponent("settings.json"))
        } catch {
            throw BenchError("could not write the pyfcm script: \(error)")
        }
        // requests (pyfcm's sends, google-auth's token exchange) reads REQUESTS_CA_BUNDLE;
        // aiohttp (pyfcm's async mode) the default SSL context, which reads SSL_CERT_FILE.
        var environment = ProcessInfo.processInfo.environment
        environment["REQUESTS_CA_BUNDLE"] = ca
        environment["SSL_CERT_FILE"] = ca
        let before = server.acceptedCount
        let status: Int32
        do {
            status = try await ChildProcess.run(
                ["/usr/bin/env", python, directory.appendingPathComponent("bench.py").path, directory.appendingPathComponent("settings.json").path],
                environment: environment, outputPath: output.path)
        } catch {
            throw BenchError("could not run \(python): \(error)")
        }
        let accepted = server.acceptedCount - before
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n")
        for line in lines where line.hasPrefix("pyfcm:") && (warmup > 0 || line.hasPrefix("pyfcm: error")) { print("  " + line) }
        func value(_ prefix: String) -> Double? { lines.first(where: { $0.hasPrefix(prefix + " ") }).flatMap { Double($0.dropFirst(prefix.count + 1)) } }
        guard status == 0, let rate = value("RATE"), let delivered = value("DELIVERED"), let failed = value("FAILED") else {
            if accepted > 0 {
                throw DeliveryMismatch(description: "pyfcm failed (exit \(status)) after the stand-in accepted \(accepted) of its messages: \(text.suffix(800))")
            }
            throw BenchError("pyfcm run failed (exit \(status)): \(text.prefix(800)) … \(text.suffix(300))")
        }
        try Self.checkDelivered(side: "pyfcm", sent: warmup + count, failed: Int(failed), accepted: accepted, server: server)
        guard Int(delivered) == warmup + count else {
            throw DeliveryMismatch(description: "pyfcm reports \(Int(delivered)) messages delivered of \(warmup + count)")
        }
        return rate
    }

    /// pyfcm posts to `FCM_END_POINT_BASE` + `/{project}/messages:send`, a class attribute a
    /// subclass sets to the stand-in. Its credentials are google-auth's, from the service-account
    /// file, whose `token_uri` is the stand-in's token endpoint; google-auth always names Google's
    /// endpoint as the assertion's audience, which the stand-in (checking `aud` against itself)
    /// refuses, so the credentials are given the stand-in's as an additional claim.
    ///
    /// `threads`: what pyfcm is built for — a requests session per thread (`thread_local`), each
    /// thread sending its next message once the last was answered (keep-alive connections).
    /// `async`: its `async_notify_multiple_devices`, one batch of `threads` messages at a time.
    static let fcmPeerScript = #"""
    import json, sys, threading, time

    from google.oauth2 import service_account
    from pyfcm import FCMNotification

    settings = json.load(open(sys.argv[1]))
    tokens = settings["tokens"]
    data = settings["data"]
    android = settings["android"]
    threads = settings["threads"]

    class LocalFCMNotification(FCMNotification):
        FCM_END_POINT_BASE = settings["base_url"] + "/v1/projects"

    account = json.load(open(settings["service_account"]))
    credentials = service_account.Credentials.from_service_account_file(
        settings["service_account"], scopes=["https://www.googleapis.com/auth/firebase.messaging"],
        additional_claims={"aud": account["token_uri"]})
    fcm = LocalFCMNotification(credentials=credentials, project_id=settings["project_id"])
    delivered = 0
    failed = 0
    errors = []
    lock = threading.Lock()

    def tally(ok, error=None):
        global delivered, failed
        with lock:
            if ok:
                delivered += 1
            else:
                failed += 1
                if error is not None and len(errors) < 3:
                    errors.append(repr(error)[:300])

    def run_threads(count):
        counter = iter(range(count))
        def lane():
            for i in counter:
                try:
                    result = fcm.notify(fcm_token=tokens[i % len(tokens)], data_payload=data, android_config=android, timeout=30)
                    tally(bool(result.get("name")))
                except Exception as error:
                    tally(False, error)
        lanes = [threading.Thread(target=lane) for _ in range(min(threads, count))]
        for t in lanes: t.start()
        for t in lanes: t.join()

    def run_async(count):
        for start in range(0, count, threads):
            params = [dict(fcm_token=tokens[i % len(tokens)], data_payload=data, android_config=android)
                      for i in range(start, min(count, start + threads))]
            try:
                results = fcm.async_notify_multiple_devices(params_list=params, timeout=30)
            except Exception as error:
                for _ in params: tally(False, error)
                continue
            for result in results:
                tally(isinstance(result, dict) and bool(result.get("name")), None if isinstance(result, dict) and result.get("name") else result)

    run = run_async if settings["mode"] == "async" else run_threads
    if settings["warmup"] > 0:
        run(settings["warmup"])
    started = time.perf_counter()
    run(settings["messages"])
    elapsed = time.perf_counter() - started
    print(f"pyfcm: {delivered} delivered, {failed} failed in all; timed: {settings['messages']} in {elapsed:.2f} s ({settings['mode']}, {threads})")
    for error in errors:
        print(f"pyfcm: error: {error}")
    print(f"DELIVERED {delivered}")
    print(f"FAILED {failed}")
    print(f"RATE {settings['messages'] / elapsed:.1f}")
    """#
}
