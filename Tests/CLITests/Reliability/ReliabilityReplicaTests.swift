import Foundation
import OrderFlow
import OrderFlowTesting
import PGKit
import Synchronization
import TestTags
import Testing

/// Several replicas, as docs/operations.md deploys them: two `orderflow serve --no-worker`
/// behind HAProxy (round robin, health checks on /healthz) and two `orderflow worker run`, on
/// one PostgreSQL, under load through the balancer; each of the four processes SIGKILLed once
/// and started again. What one replica did, the other must know: the calls, a key revoked, an
/// order moved, an event stream's place, a board's session.
@Suite("Reliability: replicas", .tags(.reliability), .serialized)
struct ReliabilityReplicaTests {
    static let merchant = "replicas"
    static let steps: [(body: String, state: String)] = [
        (#"{"event": "accept"}"#, "in_progress"), (#"{"to": "ready"}"#, "ready"),
        (#"{"event": "dispatch", "input": {"eta": "+10m", "driver": "Kim"}}"#, "out_for_delivery"), (#"{"event": "deliver"}"#, "delivered"),
    ]

    @Test(.timeLimit(.minutes(4)))
    func twoServesTwoWorkersEachKilledOnceLoseNothing() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "replicas")
        setup.apns.setResponseDelay(.milliseconds(20))
        #expect(try await setup.cli.run("merchant", "add", Self.merchant, "--name", "Replica Kitchen").status == 0)
        let apiKey = try await Self.apiKey(setup.cli, name: "load")
        let rig = try await ReplicaRig.start(setup: setup, serves: 2, workers: 2)
        let client = ReplicaClient()
        let wrong = LockedValue<[String]>([])
        do {
            let applied = try await client.retrying(.POST, rig.balancer + "/v1/workflows",
                body: try EngineFixture.shippedWorkflow("food-order"), apiKey: apiKey, contentType: "application/yaml")
            #expect([200, 201].contains(applied.status), "\(applied)")

            // A stream on the first replica from before the first order: it is cut twice.
            let follower = EventStreamFollower(client: client, apiKey: apiKey)
            let stream = Task { await follower.follow(bases: rig.replicas) }
            try await Task.sleep(for: .milliseconds(500))

            // The load: 6 clients through the balancer for 16 s; each replica and each worker
            // SIGKILLed once meanwhile, and the order cache's case beside them (below).
            let loadFor: Duration = .seconds(16)
            let started = ContinuousClock.now
            let orders = LockedValue<[String]>([])
            let calls = LockedValue(0)
            let load = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for clientNumber in 0..<6 {
                        group.addTask {
                            var number = 0
                            while ContinuousClock.now - started < loadFor {
                                number += 1
                                let order = "r\(clientNumber)-\(number)"
                                let token = EngineFixture.token(60_000 + clientNumber * 1_000 + number)
                                setup.tokens.withLock { $0.append(token) }
                                orders.withLock { $0.append(order) }
                                let problems = try await Self.takeThrough(order, token: token, base: rig.balancer, client: client, apiKey: apiKey, calls: calls)
                                if !problems.isEmpty { wrong.withLock { $0 += problems } }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            var kills: [String] = []
            for (second, victim) in [(2, "serve 1"), (5, "worker 1"), (8, "serve 2"), (11, "worker 2")] {
                try await Task.sleep(until: started + .seconds(second))
                switch victim {
                case "serve 1": try await rig.killServe(0)
                case "serve 2": try await rig.killServe(1)
                case "worker 1": try await rig.killWorker(0)
                default: try await rig.killWorker(1)
                }
                kills.append("\(victim) at \(DeliveryAudit.format(ContinuousClock.now - started))")
            }
            // Advances alternating between the replicas, each refreshed from a cache the other
            // made stale, without idempotency keys (a keyed advance always reads the order).
            let alternating = try await Self.alternate(rig: rig, client: client, apiKey: apiKey, setup: setup)
            wrong.withLock { $0 += alternating.problems }
            try await load.value
            let loadTime = DeliveryAudit.format(ContinuousClock.now - started)

            let board = try await Self.boardOnEitherReplica(rig: rig, client: client, order: orders.value[0])
            wrong.withLock { $0 += board }
            let revocation = try await Self.revokedOnBoth(rig: rig, client: client, order: orders.value[0])

            try await setup.waitUntilDrained(timeout: .seconds(90))
            // Every transition and push of the merchant, as the database holds them, in the stream.
            let expected = try await Self.feedKeys(setup)
            let deadline = ContinuousClock.now + .seconds(15)
            var missing: Set<String> = []
            repeat {
                missing = expected.subtracting(follower.received.value.map(\.key))
                if missing.isEmpty { break }
                try await Task.sleep(for: .milliseconds(200))
            } while ContinuousClock.now < deadline
            stream.cancel()
            await stream.value
            let received = follower.received.value
            let repeated = received.count - Set(received.map(\.id)).count

            // Exactly one effect per request: every history gapless, once per step.
            let histories = try await setup.engine.pool.query(PostgresQuery("""
                SELECT o.order_id, o.state, count(t.seq)::int AS n, max(t.seq) AS last
                FROM orders o JOIN order_transitions t ON t.merchant_id = o.merchant_id AND t.order_id = o.order_id
                WHERE o.merchant_id = $1 GROUP BY o.order_id, o.state
                """, Self.merchant))
            var badHistories: [String] = []
            for row in histories {
                let order: String = try row.decode("order_id")
                let (count, last, state): (Int, Int, String) = (try row.decode("n"), try row.decode("last"), try row.decode("state"))
                let want = alternating.finals[order] ?? ("delivered", 5)
                if count != want.1 || last != want.1 || state != want.0 { badHistories.append("\(order): \(state), \(count) steps, last \(last)") }
            }
            try await rig.stop()

            let audit = DeliveryAudit(
                scenario: "two serves behind HAProxy, two workers, each SIGKILLed once",
                load: "6 clients through HAProxy, \(orders.value.count) orders created, followed and taken through 4 steps with idempotency keys (\(calls.value) calls) in \(loadTime); \(alternating.finals.count) orders advanced alternately on each replica without keys",
                faults: "SIGKILL: \(kills.joined(separator: ", ")); calls retried with their key \(client.retried.load(ordering: .relaxed))",
                tokens: setup.tokens.value, pushes: setup.apns.pushes(),
                notes: [
                    "wrong answers \(wrong.value.count), histories not exactly once \(badHistories.count)",
                    "revoked key last taken for a call sent \(DeliveryAudit.format(revocation[0])) after its revocation by replica 1, \(DeliveryAudit.format(revocation[1])) by replica 2",
                    "event stream: \(received.count) events over \(follower.reconnections.value.count + 1) connections, \(missing.count) missing, \(repeated) repeated",
                    "board session: signed in on replica 1, used and signed out on replica 2",
                    "dead letters \(try await setup.deadLetters())",
                ],
                isFinal: { $0.aps?["event"]?.stringValue == "end" })
            audit.report()
            let wrongAnswers = wrong.value
            #expect(wrongAnswers.count == 0, "\(wrongAnswers.prefix(10))")
            #expect(badHistories.count == 0, "\(badHistories.prefix(10))")
            #expect(missing.isEmpty, "the stream missed \(missing.count): \(missing.prefix(10)); reconnections \(follower.reconnections.value)")
            #expect(repeated == 0)
            #expect(follower.reconnections.value.count >= 2, "the kills did not cut the stream: \(follower.reconnections.value)")
            #expect(revocation.allSatisfy { $0 < .seconds(1) }, "\(revocation)")
            #expect(audit.lost == 0, "\(audit)")
            #expect(try await setup.deadLetters() == 0)
        } catch {
            try? await rig.stop()
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        try await setup.shutdown()
    }

    /// An API key created for the test's merchant.
    static func apiKey(_ cli: CLI, name: String) async throws -> String {
        let created = try await cli.run("api-key", "create", "--merchant", merchant, "--name", name)
        let key = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(created.status == 0 && key.hasPrefix("of_live_"), "\(created)")
        return key
    }

    /// Creates `order`, registers its activity's token, makes a second device follow it and
    /// takes it through the four steps, every call through `base` and retried with its key;
    /// returns what was answered wrongly.
    static func takeThrough(_ order: String, token: String, base: String, client: ReplicaClient, apiKey: String,
                            calls: LockedValue<Int>) async throws -> [String] {
        var problems: [String] = []
        let created = try await client.retrying(.POST, base + "/v1/orders",
            body: #"{"id": "\#(order)", "workflow": "food-order", "attributes": {"merchantName": "Replica Kitchen", "orderNumber": "\#(order)", "itemCount": 2}}"#,
            apiKey: apiKey, idempotencyKey: "create-\(order)")
        if ![200, 201].contains(created.status) || created.json?["state"] as? String != "received" || created.json?["seq"] as? Int != 1 {
            problems.append("create \(order): \(created)")
        }
        let registered = try await client.retrying(.PUT, base + "/v1/orders/\(order)/activities/phone/token",
                                                   body: #"{"token": "\#(token)"}"#, apiKey: apiKey)
        if !(200..<300).contains(registered.status) { problems.append("token \(order): \(registered)") }
        let followed = try await client.retrying(.PUT, base + "/v1/orders/\(order)/followers/watch", apiKey: apiKey)
        if followed.status != 204 { problems.append("follow \(order): \(followed)") }
        calls.withLock { $0 += 3 }
        for (index, step) in steps.enumerated() {
            let answer = try await client.retrying(.POST, base + "/v1/orders/\(order)/advance", body: step.body, apiKey: apiKey,
                                                   idempotencyKey: "\(order)-\(index)")
            let result = answer.json
            let state = (result?["order"] as? [String: Any])?["state"] as? String
            let seq = (result?["transition"] as? [String: Any])?["seq"] as? Int
            if answer.status != 200 || state != step.state || seq != index + 2 {
                problems.append("advance \(order) step \(index + 2): \(answer)")
            }
            calls.withLock { $0 += 1 }
        }
        return problems
    }
}
