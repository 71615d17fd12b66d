import APNS
import Logging
import OrderFlow
import ServiceLifecycle

extension BenchAPNS {
    /// The host the benchmarks run, as operators run it but for the stand-in and for a worker
    /// with a pool of its own (the engine's connections stay the driving side's).
    func hostConfiguration(
        database: DatabaseConfiguration, connections: Int, workerID: String, maximumConcurrentRequests: Int = 1000
    ) -> OrderFlowHostConfiguration {
        OrderFlowHostConfiguration(
            engine: OrderFlowConfiguration(database: database, maximumConnections: connections),
            apns: APNSClientConfiguration(
                environment: .custom(baseURL: server.baseURL, trustRootsPEM: server.trustRootPEM),
                credentials: .init(key: .pem(keyPEM), keyID: Self.keyID, teamID: Self.teamID),
                maximumConcurrentRequests: maximumConcurrentRequests),
            worker: WorkerConfiguration(bundleID: Self.bundleID, workerID: workerID, queueDepthSampleInterval: nil),
            timerInterval: nil, listensForOtherProcesses: false, workerConnections: 6)
    }
}

/// Runs `body` while `host` runs, then shuts the host down gracefully (in-flight pushes finish).
func whileRunning<T: Sendable>(
    _ host: OrderFlowHost, logger: Logger, _ body: @Sendable () async throws -> T
) async throws -> T {
    let group = ServiceGroup(configuration: .init(services: [host], logger: logger))
    return try await withThrowingTaskGroup(of: T?.self) { tasks in
        tasks.addTask {
            try await group.run()
            return nil
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return try result.get()
    }
}
