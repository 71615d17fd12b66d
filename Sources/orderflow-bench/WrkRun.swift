import Foundation
import LocalPostgres

/// Advances driven by `wrk` (Debian's package), the C load generator: keep-alive connections
/// over two threads, each request built by a small Lua script that walks every order of the
/// turn through the workflow's steps, one step of all its orders before the next.
///
/// Why not only AsyncHTTPClient: on this 2-core machine the client shares the cores with the
/// server and PostgreSQL, and AsyncHTTPClient spends several times wrk's CPU per request, so an
/// HTTP turn driven by it measures the client as much as the server (BENCHMARKS.md has both).
struct WrkRun {
    static var executable: String? {
        ["/usr/bin/wrk", "/usr/local/bin/wrk"].first(where: FileManager.default.isExecutableFile(atPath:))
    }

    let port: Int
    let key: String
    let connections: Int
    let seconds: Int
    let threads = 2

    /// Advances per second over the turn. Every answer must be the expected one (200 with the
    /// result, or 204 with `minimal`): any other fails the run, with the first such answer.
    func advances(orders: Range<Int>, prefix: String, steps: [String], minimal: Bool) async throws -> Double {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-wrk-\(UUID().uuidString).lua")
        try Self.script(steps: steps).write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let (status, text) = try await wrk([
            "-s", script.path, "http://127.0.0.1:\(port)",
            "--", prefix, "\(orders.lowerBound)", "\(orders.upperBound)", "\(threads)", minimal ? "1" : "0", key,
        ])
        guard status == 0, let rate = Self.number(after: "Requests/sec:", in: text) else {
            throw BenchError("wrk failed (exit \(status)): \(text.suffix(600))")
        }
        let unexpected = Self.number(after: "orderflow-unexpected:", in: text) ?? 0
        let walkedOff = Self.number(after: "orderflow-walked-off:", in: text) ?? 0
        guard unexpected == 0, walkedOff == 0 else {
            throw BenchError("wrk: \(Int(unexpected)) unexpected answers, \(Int(walkedOff)) orders past their last step: \(text.suffix(600))")
        }
        return rate
    }

    /// Reads per second of `GET /v1/orders/{id}`, thread t of n reading the orders first + t,
    /// first + t + n, … in turn, round and round. Every answer must be a 200.
    func reads(orders: Range<Int>, prefix: String) async throws -> Double {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-wrk-\(UUID().uuidString).lua")
        try Self.readScript.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let (status, text) = try await wrk([
            "-s", script.path, "http://127.0.0.1:\(port)", "--", prefix, "\(orders.lowerBound)", "\(orders.upperBound)", "\(threads)", key,
        ])
        guard status == 0, let rate = Self.number(after: "Requests/sec:", in: text) else {
            throw BenchError("wrk (reads) failed (exit \(status)): \(text.suffix(600))")
        }
        guard Self.number(after: "Non-2xx or 3xx responses:", in: text) == nil else {
            throw BenchError("wrk (reads): answers other than 200: \(text.suffix(600))")
        }
        return rate
    }

    static let readScript = """
        function init(args)
          prefix, first, last, count = args[1], tonumber(args[2]), tonumber(args[3]), tonumber(args[4])
          headers = {["Authorization"] = "Bearer " .. args[5]}
          mine = math.floor((last - first - id - 1) / count) + 1
          sent = 0
        end
        local created = 0
        function setup(thread)
          thread:set("id", created)
          created = created + 1
        end
        function request()
          local slot = sent % mine
          sent = sent + 1
          return wrk.format("GET", "/v1/orders/" .. prefix .. (first + id + slot * count), headers)
        end
        """

    /// Requests per second of `GET /v1/orders` with no credential, which the server answers 401
    /// before any route or the engine runs: what a request costs the server's HTTP layer alone
    /// (reading, routing through the middlewares, a small answer). Every answer must be a 401.
    func unauthenticated() async throws -> Double {
        let (status, text) = try await wrk(["http://127.0.0.1:\(port)/v1/orders"])
        // wrk counts the answers that are not 2xx or 3xx: here, every one of them.
        let requests = text.split(separator: "\n").lazy.compactMap { line -> Double? in
            guard line.contains(" requests in ") else { return nil }
            return Double(line.trimmingCharacters(in: .whitespaces).prefix { !$0.isWhitespace })
        }.first
        guard status == 0, let rate = Self.number(after: "Requests/sec:", in: text), let requests, requests > 0,
              Self.number(after: "Non-2xx or 3xx responses:", in: text) == requests
        else { throw BenchError("wrk (unauthenticated requests) failed or got answers other than 401 (exit \(status)): \(text.suffix(600))") }
        return rate
    }

    /// wrk with this run's threads, connections and duration, then `arguments`: its exit status
    /// and what it printed.
    private func wrk(_ arguments: [String]) async throws -> (status: Int32, text: String) {
        guard let wrk = Self.executable else { throw BenchError("wrk is not installed: apt-get install wrk") }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-wrk-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: output) }
        let status = try await ChildProcess.run(
            [wrk, "-t", "\(threads)", "-c", "\(max(connections, threads))", "-d", "\(seconds)s", "--timeout", "30s"] + arguments,
            environment: ProcessInfo.processInfo.environment, outputPath: output.path)
        return (status, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }

    /// The number after `label` on the first line of wrk's output that has it.
    private static func number(after label: String, in text: String) -> Double? {
        text.split(separator: "\n").lazy.compactMap { line -> Double? in
            guard let range = line.range(of: label) else { return nil }
            return Double(line[range.upperBound...].trimmingCharacters(in: .whitespaces).prefix { !$0.isWhitespace })
        }.first
    }

    /// The Lua script: thread t of n takes the orders first + t, first + t + n, …; its k-th
    /// request advances its (k mod count)-th order by step k / count.
    static func script(steps: [String]) -> String {
        let bodies = steps.map { "[==[\($0)]==]" }.joined(separator: ", ")
        return """
        local threads, created = {}, 0
        function setup(thread)
          thread:set("id", created)
          created = created + 1
          table.insert(threads, thread)
        end
        function init(args)
          prefix, first, last, count = args[1], tonumber(args[2]), tonumber(args[3]), tonumber(args[4])
          expected = args[5] == "1" and 204 or 200
          headers = {["Authorization"] = "Bearer " .. args[6], ["Content-Type"] = "application/json"}
          if args[5] == "1" then headers["Prefer"] = "return=minimal" end
          bodies = {\(bodies)}
          mine = math.floor((last - first - id - 1) / count) + 1
          sent, unexpected, walked, sample = 0, 0, 0, ""
          -- wrk 4 calls the first thread's request() once to check the script, and never sends
          -- that request: it must not use up an order's step. Should a wrk send it after all,
          -- its order does not exist, and the 404 fails the run.
          checked = id ~= 0
        end
        function request()
          if not checked then
            checked = true
            return wrk.format("POST", "/v1/orders/" .. prefix .. "wrk-check/advance", headers, bodies[1])
          end
          local slot, step = sent % mine, math.floor(sent / mine) + 1
          sent = sent + 1
          if step > #bodies then walked = walked + 1; step = #bodies end
          local path = "/v1/orders/" .. prefix .. (first + id + slot * count) .. "/advance"
          return wrk.format("POST", path, headers, bodies[step])
        end
        function response(status, headers, body)
          if status ~= expected then
            unexpected = unexpected + 1
            if sample == "" then sample = status .. " " .. string.sub(body or "", 1, 300) end
          end
        end
        function done(summary, latency, requests)
          local bad, off, first = 0, 0, ""
          for _, thread in ipairs(threads) do
            bad = bad + thread:get("unexpected")
            off = off + thread:get("walked")
            if first == "" then first = thread:get("sample") end
          end
          io.write(string.format("orderflow-unexpected: %d\\norderflow-walked-off: %d\\n", bad, off))
          if first ~= "" then io.write("orderflow-first-unexpected: " .. first .. "\\n") end
        end
        """
    }
}
