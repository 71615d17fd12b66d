import Foundation
import OrderFlowTesting
import Testing

/// Several `orderflow serve --no-worker` replicas on fixed loopback ports (a replica restarted
/// after a kill comes back where the balancer expects it) and several `orderflow worker run`,
/// all on one database, behind HAProxy.
final class ReplicaRig: Sendable {
    let setup: WorkerProcessSetup
    let servePorts: [Int]
    let serves: LockedValue<[RunningCLI]>
    let workers: LockedValue<[RunningCLI]>
    let haproxy: HAProxy

    var balancer: String { "http://127.0.0.1:\(haproxy.port)" }
    var replicas: [String] { servePorts.map { "http://127.0.0.1:\($0)" } }

    private init(setup: WorkerProcessSetup, servePorts: [Int], serves: [RunningCLI], workers: [RunningCLI], haproxy: HAProxy) {
        self.setup = setup
        self.servePorts = servePorts
        self.serves = LockedValue(serves)
        self.workers = LockedValue(workers)
        self.haproxy = haproxy
    }

    static func start(setup: WorkerProcessSetup, serves count: Int, workers workerCount: Int) async throws -> ReplicaRig {
        let ports = try (0..<count).map { _ in try ExternalServer.freePort() }
        var serves: [RunningCLI] = []
        for port in ports { serves.append(try await startServe(setup.cli, port: port)) }
        let workers = try (0..<workerCount).map { _ in try setup.cli.start(setup.workerArguments) }
        let haproxy = try await HAProxy.start(backends: ports)
        return ReplicaRig(setup: setup, servePorts: ports, serves: serves, workers: workers, haproxy: haproxy)
    }

    static func startServe(_ cli: CLI, port: Int) async throws -> RunningCLI {
        let serve = try cli.start(["serve", "--port", "\(port)", "--no-worker"])
        try await ExternalServer.waitUntilListening(port, what: "orderflow serve")
        return serve
    }

    /// SIGKILLs replica `index` and starts it again at once, as a supervisor would.
    func killServe(_ index: Int) async throws {
        let victim = serves.value[index]
        kill(victim.process.processIdentifier, SIGKILL)
        _ = try await victim.finish()
        let next = try await Self.startServe(setup.cli, port: servePorts[index])
        serves.withLock { $0[index] = next }
    }

    /// SIGKILLs worker `index` and starts the next at once.
    func killWorker(_ index: Int) async throws {
        let victim = workers.value[index]
        kill(victim.process.processIdentifier, SIGKILL)
        _ = try await victim.finish()
        let next = try setup.cli.start(setup.workerArguments)
        workers.withLock { $0[index] = next }
    }

    /// Stops everything with SIGINT (HAProxy with SIGTERM); each `orderflow` must exit 0.
    func stop() async throws {
        for process in workers.value + serves.value { process.interrupt() }
        for process in workers.value + serves.value {
            let stopped = try await process.finish()
            #expect(stopped.status == 0, "\(process.process.arguments?.prefix(2) ?? []) did not stop cleanly: \(stopped)")
        }
        await haproxy.stop()
    }
}
