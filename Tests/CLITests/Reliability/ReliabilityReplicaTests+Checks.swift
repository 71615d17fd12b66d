import Foundation
import OrderFlowTesting
import PGKit
import Testing

/// What one replica did, asked of the other: the order cache, the board's session, a revoked
/// key; and the feed as the database holds it.
extension ReliabilityReplicaTests {
    struct Alternation {
        /// Each order's final state and its number of transitions.
        var finals: [String: (String, Int)] = [:]
        var problems: [String] = []
    }

    /// Orders created on the first replica, then advanced on the second, the first, the second…
    /// without idempotency keys, so that each replica starts from what its order cache holds,
    /// which the other made stale: half are taken to delivered (each step refused by the stale
    /// state, so read again), half cancelled on the first replica while it still knows them as
    /// just created (a move that is valid from there: the write's sequence guard sends it back
    /// to read the order).
    static func alternate(rig: ReplicaRig, client: ReplicaClient, apiKey: String, setup: WorkerProcessSetup) async throws -> Alternation {
        var result = Alternation()
        let (first, second) = (rig.replicas[0], rig.replicas[1])
        for number in 0..<8 {
            let order = "alt-\(number)"
            let created = try await client.call(.POST, first + "/v1/orders",
                body: #"{"id": "\#(order)", "workflow": "food-order", "attributes": {"merchantName": "Replica Kitchen", "orderNumber": "\#(order)", "itemCount": 1}}"#,
                apiKey: apiKey)
            if created.status != 201 { result.problems.append("create \(order) on replica 1: \(created)") }
            let moves: [(String, String, String)] = number < 4
                ? [(second, steps[0].body, "in_progress"), (first, steps[1].body, "ready"), (second, steps[2].body, "out_for_delivery"),
                   (first, steps[3].body, "delivered")]
                : [(second, steps[0].body, "in_progress"), (first, #"{"event": "cancel"}"#, "cancelled")]
            for (index, (base, body, state)) in moves.enumerated() {
                let answer = try await client.call(.POST, base + "/v1/orders/\(order)/advance", body: body, apiKey: apiKey)
                let json = answer.json
                let got = (json?["order"] as? [String: Any])?["state"] as? String
                let seq = (json?["transition"] as? [String: Any])?["seq"] as? Int
                if answer.status != 200 || got != state || seq != index + 2 {
                    result.problems.append("alternating \(order) step \(index + 2) on \(base == first ? "replica 1" : "replica 2"): \(answer)")
                }
            }
            result.finals[order] = (moves.last!.2, moves.count + 1)
        }
        return result
    }

    /// A board signed in on the first replica reads on the second, signs out there, and is
    /// refused on the first; returns what went wrong.
    static func boardOnEitherReplica(rig: ReplicaRig, client: ReplicaClient, order: String) async throws -> [String] {
        var problems: [String] = []
        let link = try await rig.setup.cli.run("board-link", "--merchant", merchant)
        guard link.status == 0, let range = link.stdout.range(of: "token=") else { return ["board-link: \(link)"] }
        let token = link.stdout[range.upperBound...].trimmingCharacters(in: .whitespacesAndNewlines)
        let (first, second) = (rig.replicas[0], rig.replicas[1])
        let signIn = try await client.call(.POST, first + "/board/sign-in", body: "token=\(token)", apiKey: nil,
                                           headers: [("Sec-Fetch-Site", "same-origin")], contentType: "application/x-www-form-urlencoded")
        guard let cookie = signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init), cookie.contains("of_board_") else {
            return ["board sign-in on replica 1: \(signIn)"]
        }
        let read = try await client.call(.GET, second + "/v1/orders/\(order)/history", apiKey: nil, headers: [("Cookie", cookie)])
        if read.status != 200 { problems.append("board read on replica 2: \(read)") }
        let signOut = try await client.call(.POST, second + "/board/sign-out", apiKey: nil,
                                            headers: [("Cookie", cookie), ("X-OrderFlow-Board", "1")])
        if !(200..<400).contains(signOut.status) { problems.append("board sign-out on replica 2: \(signOut)") }
        let after = try await client.call(.GET, first + "/v1/orders/\(order)", apiKey: nil, headers: [("Cookie", cookie)])
        if after.status != 401 { problems.append("a signed-out board on replica 1: \(after)") }
        return problems
    }

    /// A key in use on both replicas, revoked (`orderflow api-key revoke`): how long after the
    /// command returned each replica still took it, from requests sent every 20 ms to each.
    static func revokedOnBoth(rig: ReplicaRig, client: ReplicaClient, order: String) async throws -> [Duration] {
        let key = try await apiKey(rig.setup.cli, name: "revoked")
        let prefix = String(key.dropFirst("of_live_".count).prefix(10))
        let revokedAt = LockedValue<ContinuousClock.Instant?>(nil)
        let stop = LockedValue(false)
        let pollers = rig.replicas.map { base in
            Task {
                var answers: [(ContinuousClock.Instant, Int)] = []
                while !stop.value {
                    let sent = ContinuousClock.now
                    let status = (try? await client.call(.GET, base + "/v1/orders/\(order)", apiKey: key).status) ?? -1
                    answers.append((sent, status))
                    try? await Task.sleep(for: .milliseconds(20))
                }
                return answers
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let revoked = try await rig.setup.cli.run("api-key", "revoke", "--merchant", merchant, prefix)
        #expect(revoked.status == 0, "\(revoked)")
        let at = ContinuousClock.now
        revokedAt.withLock { $0 = at }
        try await Task.sleep(for: .milliseconds(2_500))
        stop.withLock { $0 = true }
        var latencies: [Duration] = []
        for poller in pollers {
            let answers = await poller.value
            #expect(answers.contains { $0.0 < at && $0.1 == 200 }, "the key was not in use before its revocation: \(answers.prefix(5))")
            // How long after the revocation a call was still taken: the send time of the last call
            // answered 200 (a call slowed by a busy machine is sent early and answered late; its
            // answer's arrival says nothing of the key). Every later call must be refused.
            let lastAccepted = answers.lastIndex { $0.1 == 200 }
            let refusedAfter = answers[((lastAccepted ?? -1) + 1)...]
            // (A call that failed in transport, -1, was not taken either.)
            #expect(refusedAfter.contains { $0.1 == 401 } && refusedAfter.allSatisfy { $0.1 == 401 || $0.1 == -1 },
                    "after the last acceptance: \(refusedAfter.prefix(5).map(\.1))")
            latencies.append(lastAccepted.map { max(.zero, answers[$0].0 - at) } ?? .zero)
        }
        return latencies
    }

    /// Every transition and push attempt of the merchant, keyed as `EventStreamFollower.Event`.
    static func feedKeys(_ setup: WorkerProcessSetup) async throws -> Set<String> {
        let rows = try await setup.engine.pool.query(PostgresQuery("""
            SELECT 'transition ' || order_id || ' ' || seq AS key FROM order_transitions WHERE merchant_id = $1
            UNION ALL
            SELECT 'push ' || id FROM deliveries WHERE merchant_id = $1
            """, merchant))
        return Set(try rows.map { try $0.decode("key", as: String.self) })
    }
}
