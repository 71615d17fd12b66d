import Foundation
import LocalPostgres
import OrderFlow
import PGKit
import WorkflowKit

/// The database a benchmark runs on: `--database`/`ORDERFLOW_DATABASE_URL`, or a private
/// cluster under `.orderflow/bench-postgres`; each run gets a fresh database in it, dropped
/// when the run is over (a run leaves a few hundred megabytes otherwise). A private cluster
/// that this run started is stopped when the run is over, and the run says so: nothing is left
/// running (its data stays, for the next run). One that was already running is left running.
struct BenchDatabase {
    let configuration: PostgresConfiguration
    /// The run's database as a URL, for programs this benchmark starts (it may hold a password).
    let url: String
    let name: String
    let server: PostgresConfiguration
    /// The private cluster, when this run started it.
    let startedCluster: LocalPostgres?

    /// Runs `body` on the benchmark's database and finishes it afterwards, also when `body` throws.
    static func with(url: String?, _ body: (BenchDatabase) async throws -> Void) async throws {
        let bench = try await make(url: url)
        do {
            try await body(bench)
        } catch {
            await bench.finish()
            throw error
        }
        await bench.finish()
    }

    static func make(url: String?) async throws -> BenchDatabase {
        let serverURL: String
        var startedCluster: LocalPostgres?
        if let url = url ?? ProcessInfo.processInfo.environment["ORDERFLOW_DATABASE_URL"] {
            serverURL = url
        } else {
            let folder = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".orderflow/bench-postgres")
            let cluster = LocalPostgres(folder: folder)
            if case .running = try await cluster.status() {
                print("using the private PostgreSQL already running in \(folder.path) (left running afterwards)")
            } else {
                startedCluster = cluster
                print("starting a private PostgreSQL in \(folder.path) (stopped when the benchmark ends)")
            }
            do {
                serverURL = try await cluster.start()
            } catch {
                try? await startedCluster?.stop()
                throw error
            }
        }
        let server = try PostgresConfiguration(serverURL)
        let name = "orderflow_bench_\(Int(Date().timeIntervalSince1970))"
        var components = URLComponents(string: serverURL)!
        components.path = "/" + name
        let url = components.string!
        let bench = BenchDatabase(
            configuration: try PostgresConfiguration(url), url: url, name: name, server: server, startedCluster: startedCluster)
        do {
            try await PostgresConnection.withConnection(server) { connection in
                // CREATE DATABASE takes no parameters; the name is built from the clock above.
                try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
            }
            _ = try await Schema.migrate(bench.configuration)
        } catch {
            await bench.finish()
            throw error
        }
        return bench
    }

    /// Drops the run's database (its connections must be closed) and stops the private
    /// cluster if this run started it. A failure is only reported: the measurement stands.
    func finish() async {
        await drop()
        guard let cluster = startedCluster else { return }
        do {
            try await cluster.stop()
            print("stopped the private PostgreSQL this benchmark started in \(cluster.folder.path)")
        } catch {
            print("note: could not stop the private PostgreSQL in \(cluster.folder.path): \(error); it is still running, stop it with pg_ctl (as the postgres user)")
        }
    }

    private func drop() async {
        do {
            try await PostgresConnection.withConnection(server) { connection in
                // The name was built from the clock in `make`.
                try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            }
        } catch {
            print("note: could not drop the benchmark's database \(name): \(error)")
        }
    }
}

/// Vacuums, analyzes and checkpoints the database, so that what is measured next starts with no
/// dead rows, fresh statistics and no dirty pages: it inherits neither the work written before it
/// nor the autovacuum and checkpoint that work would set off in the middle of the measurement.
/// The benchmarks that compare turns or phases (`advance`, `http`, `e2e`, `delivery`'s drain and
/// its raw limit) call it before each.
func settle(_ pool: PostgresPool) async throws {
    try await pool.query(PostgresQuery("VACUUM ANALYZE"))
    try await pool.query(PostgresQuery("CHECKPOINT"))
}

/// Creates food orders `<prefix><n>` for every n of `range`, from `tasks` concurrent tasks.
func createFoodOrders(engine: OrderFlowEngine, prefix: String, range: Range<Int>, tasks: Int) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for task in 0..<tasks {
            group.addTask {
                for index in stride(from: range.lowerBound + task, to: range.upperBound, by: tasks) {
                    _ = try await engine.createOrder(NewOrder(
                        orderID: "\(prefix)\(index)", workflow: "food-order",
                        attributes: ["merchantName": "Bench Bistro", "orderNumber": .string("\(index)"), "itemCount": 2]))
                }
            }
        }
        try await group.waitForAll()
    }
}

/// Runs pgbench with a custom script and returns its transactions per second.
func runPgbench(url: String, script: String, clients: Int, seconds: Int, variables: [String: String] = [:]) async throws -> Double {
    let directory = FileManager.default.temporaryDirectory
    let scriptURL = directory.appendingPathComponent("orderflow-pgbench-\(UUID().uuidString).sql")
    let outputURL = directory.appendingPathComponent("orderflow-pgbench-\(UUID().uuidString).log")
    try script.write(to: scriptURL, atomically: true, encoding: .utf8)
    defer {
        try? FileManager.default.removeItem(at: scriptURL)
        try? FileManager.default.removeItem(at: outputURL)
    }
    guard let pgbench = ["/usr/bin/pgbench", "/usr/lib/postgresql/15/bin/pgbench"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
        throw BenchError("pgbench is not installed: apt-get install postgresql-client")
    }
    let arguments = [pgbench, "-n", "-M", "prepared", "-c", "\(clients)", "-j", "2", "-T", "\(seconds)", "-f", scriptURL.path]
        + variables.flatMap { ["-D", "\($0.key)=\($0.value)"] } + [url]
    let status = try await ChildProcess.run(arguments, environment: ProcessInfo.processInfo.environment, outputPath: outputURL.path)
    let text = (try? String(contentsOf: outputURL, encoding: .utf8)) ?? ""
    guard status == 0,
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
          let tps = Double(line.dropFirst(6).prefix { $0 != " " })
    else {
        throw BenchError("pgbench failed: \(text.suffix(400))")
    }
    return tps
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
