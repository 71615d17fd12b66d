import Foundation
import LocalPostgres
import Synchronization

/// `orderflow worker run` as operators run it, started by a benchmark as a child process against
/// the benchmark's database and APNs stand-in: woken by the engine's NOTIFY through LISTEN, not
/// by the in-process signal. Its resident memory is read from `/proc` twice a second.
final class SeparateWorker: Sendable {
    private let state = Observed()
    private let exit: Task<Int32, any Error>
    private let sampler: Task<Void, Never>
    private let folder: URL
    let logPath: String

    /// What the tasks watching the child write.
    private final class Observed: Sendable {
        let pid = Mutex<pid_t?>(nil)
        let samples = Mutex<[RSSSample]>([])
    }

    /// The child's process id, once it runs.
    var pid: pid_t? { state.pid.withLock { $0 } }

    struct RSSSample: Sendable {
        var second: Double
        var total: Double
        var anonymous: Double
        var file: Double
    }

    /// Starts the worker and returns once its process runs (not once it listens: the
    /// benchmark's first drain waits for that).
    init(executable: String, databaseURL: String, apns: BenchAPNS, arguments extra: [String] = []) async throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw BenchError("no orderflow executable at \(executable): build it with `swift build -c release --product orderflow --scratch-path .build-release`, or name it with --worker-executable")
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-bench-worker-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let keyPath = folder.appendingPathComponent("bench-key.p8").path
        let caPath = folder.appendingPathComponent("stand-in-ca.pem").path
        // The key is the run's own, made for the stand-in; still, only this user reads it.
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(apns.keyPEM.utf8), attributes: [.posixPermissions: 0o600]),
              FileManager.default.createFile(atPath: caPath, contents: Data(apns.server.trustRootPEM.utf8))
        else { throw BenchError("cannot write the worker's key and CA files in \(folder.path)") }
        logPath = folder.appendingPathComponent("worker.log").path

        var environment = ProcessInfo.processInfo.environment
        environment["ORDERFLOW_DATABASE_URL"] = databaseURL
        environment["ORDERFLOW_LOG_LEVEL"] = environment["ORDERFLOW_LOG_LEVEL"] ?? "warning"
        let arguments = [executable, "worker", "run",
                         "--apns-key", keyPath, "--apns-key-id", BenchAPNS.keyID, "--apns-team-id", BenchAPNS.teamID,
                         "--apns-topic", BenchAPNS.bundleID, "--apns-url", apns.server.baseURL, "--apns-ca", caPath,
                         "--worker-id", "bench-separate"] + extra
        let started = AsyncStream.makeStream(of: pid_t.self)
        let state = self.state
        let logPath = self.logPath
        exit = Task {
            defer { started.continuation.finish() }
            return try await ChildProcess.run(arguments, environment: environment, outputPath: logPath) { child in
                state.pid.withLock { $0 = child }
                started.continuation.yield(child)
            }
        }
        var iterator = started.stream.makeAsyncIterator()
        guard let child = await iterator.next() else {
            _ = try await exit.value  // throws why it could not start
            throw BenchError("the worker did not start")
        }
        sampler = Task {
            let clock = ContinuousClock()
            let start = clock.now
            var next = start
            while !Task.isCancelled {
                guard let sample = Self.residentMemory(of: child, second: (clock.now - start).asSeconds) else { return }
                state.samples.withLock { $0.append(sample) }
                next = next + .milliseconds(500)
                try? await clock.sleep(until: next)
            }
        }
    }

    /// The samples so far (every 0.5 s since the start).
    var rss: [RSSSample] { state.samples.withLock { $0 } }

    /// SIGTERM (the worker finishes its pushes and gives its leases back), then its exit status.
    func stop() async throws -> Int32 {
        sampler.cancel()
        if let pid = state.pid.withLock({ $0 }) { kill(pid, SIGTERM) }
        let status = try await exit.value
        return status
    }

    /// The last lines of the worker's output, for a failure's message.
    func logTail(_ lines: Int = 20) -> String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    func removeFiles() {
        try? FileManager.default.removeItem(at: folder)
    }

    /// `VmRSS`, `RssAnon` and `RssFile` of `/proc/<pid>/status`, in MB; nil once the process is gone.
    static func residentMemory(of pid: pid_t, second: Double) -> RSSSample? {
        guard let total = procStatusMegabytes(pid: pid, field: "VmRSS:") else { return nil }
        return RSSSample(second: second, total: total, anonymous: procStatusMegabytes(pid: pid, field: "RssAnon:") ?? 0,
                         file: procStatusMegabytes(pid: pid, field: "RssFile:") ?? 0)
    }

    /// One line: peak, first and last RSS, and the curve every 5 s.
    func rssSummary() -> String {
        let all = rss
        guard let peak = all.max(by: { $0.total < $1.total }), let first = all.first, let last = all.last else {
            return "worker RSS: no samples"
        }
        let curve = stride(from: 0, to: all.count, by: 10).map { String(format: "%.0f", all[$0].total) }.joined(separator: " ")
        return String(format: "worker RSS (VmRSS, /proc, every 0.5 s, %ld samples): first %.1f MB, peak %.1f MB (anon %.1f, file %.1f) at %.0f s, last %.1f MB; every 5 s: ",
                      all.count, first.total, peak.total, peak.anonymous, peak.file, peak.second, last.total) + curve
    }
}
