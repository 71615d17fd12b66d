import ServiceLifecycle
import Synchronization

/// Runs the script as a service; keeps its result (or error) for after the group has stopped.
final class DemoDriver: Service, Sendable {
    private let body: @Sendable () async throws -> DemoReport
    private let outcome = Mutex<Result<DemoReport, any Error>?>(nil)

    init(_ body: @escaping @Sendable () async throws -> DemoReport) {
        self.body = body
    }

    var result: Result<DemoReport, any Error>? { outcome.withLock { $0 } }

    func run() async throws {
        let body = self.body
        let result: Result<DemoReport, any Error>
        do {
            result = .success(try await cancelWhenGracefulShutdown { try await body() })
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
    }
}
