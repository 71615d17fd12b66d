import Foundation
import OrderFlowTesting
import Testing

/// `orderflow serve` and `orderflow worker run` through PgBouncer (Debian's package): in
/// transaction pooling they refuse to start, saying what to use instead; in session pooling
/// they work as on a direct connection.
@Suite("Connection poolers", .serialized)
struct ConnectionPoolerTests {
    @Test(.timeLimit(.minutes(2)))
    func transactionPoolingIsRefusedAtStart() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "pooler")
        let bouncer = try await PgBouncer.start(before: setup.cli.databaseURL!, mode: "transaction")
        defer { bouncer.stop() }
        let pooled = try CLI(databaseURL: bouncer.url)
        for arguments in [["serve", "--port", "0", "--no-worker"], ["serve", "--port", "0"] + setup.workerArguments.dropFirst(2),
                          setup.workerArguments] {
            let refused = try await pooled.run(arguments)
            #expect(refused.status == 64, "\(arguments.prefix(2)): \(refused)")
            #expect(refused.stderrLines.count == 1, "one sentence: \(refused)")
            #expect(refused.stderr.contains("transaction pooling") && refused.stderr.contains("pool_mode = session")
                    && refused.stderr.contains("directly"), "\(refused)")
            #expect(!refused.stderr.contains(bouncer.url), "no database URL in the refusal: \(refused)")
        }
        // The same database, directly: the refusal was the pooler's mode, not the database.
        let direct = try setup.cli.start(["serve", "--port", "0", "--no-worker"])
        _ = try await ReliabilitySoakTests.listeningPort(direct)
        direct.interrupt()
        #expect(try await direct.finish().status == 0)
        try await setup.shutdown()
    }

    @Test(.timeLimit(.minutes(2)))
    func sessionPoolingWorks() async throws {
        let setup = try await WorkerProcessSetup.make(prefix: "pooler")
        let bouncer = try await PgBouncer.start(before: setup.cli.databaseURL!, mode: "session")
        defer { bouncer.stop() }
        let pooled = try CLI(databaseURL: bouncer.url)
        #expect(try await pooled.run("merchant", "add", "pooled").status == 0)
        let created = try await pooled.run("api-key", "create", "--merchant", "pooled")
        let key = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let server = try pooled.start(["serve", "--port", "0", "--no-worker"])
        let worker = try pooled.start(setup.workerArguments)
        let base = "http://127.0.0.1:\(try await ReliabilitySoakTests.listeningPort(server))"
        let client = ReplicaClient()
        do {
            let applied = try await client.call(.POST, base + "/v1/workflows", body: try EngineFixture.shippedWorkflow("food-order"),
                                                apiKey: key, contentType: "application/yaml")
            #expect([200, 201].contains(applied.status), "\(applied)")
            let token = EngineFixture.token(70_001)
            setup.tokens.withLock { $0.append(token) }
            let problems = try await ReliabilityReplicaTests.takeThrough("pooled-1", token: token, base: base, client: client, apiKey: key,
                                                                           calls: LockedValue(0))
            #expect(problems.isEmpty, "\(problems)")
            try await setup.waitUntilDrained(timeout: .seconds(30))
            #expect(setup.apns.pushes().contains { $0.aps?["event"]?.stringValue == "end" }, "the worker through PgBouncer sent the end")
        } catch {
            try? await client.shutdown()
            server.interrupt()
            worker.interrupt()
            _ = try? await server.finish()
            _ = try? await worker.finish()
            throw error
        }
        try await client.shutdown()
        server.interrupt()
        worker.interrupt()
        #expect(try await server.finish().status == 0)
        #expect(try await worker.finish().status == 0)
        try await setup.shutdown()
    }
}
