import Foundation
import Testing

/// docs/http-api.md's walkthrough and Python example run as written, against `orderflow serve`
/// on a free port (the one change: the document's 8080).
@Suite("HTTP API walkthrough", .serialized)
struct HTTPWalkthroughTests {
    static func blocks(_ language: String) throws -> [[String]] {
        let text = try String(contentsOf: Fixtures.repository.appendingPathComponent("docs/http-api.md"), encoding: .utf8)
        return text.components(separatedBy: "```\(language)\n").dropFirst().map { block in
            block.components(separatedBy: "```")[0].split(separator: "\n").map(String.init)
                .filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        }
    }

    @Test("the curl walkthrough and the Python example, then a clean stop on SIGINT")
    func walkthrough() async throws {
        var cli = try await CLI.withFreshDatabase()
        cli.workingDirectory = Fixtures.repository
        let setup = try #require(try Self.blocks("sh").first)
        #expect(setup.count == 3 && setup[2].hasPrefix("orderflow serve --port 8080"), "\(setup)")
        let added = try await cli.shell(setup[0])
        #expect(added.status == 0, "\(added)")
        let keyCommand = setup[1].replacingOccurrences(of: "export KEY=$(", with: "").dropLast()
        let created = try await cli.shell(String(keyCommand))
        let key = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(created.status == 0 && key.hasPrefix("of_live_"), "\(created)")

        let serve = try cli.start(["serve", "--port", "0", "--no-worker"])
        let listening = try #require(try await Self.port(of: serve), "serve never said where it listens")

        let lines = try #require(try Self.blocks("sh").dropFirst().first)
        let environment = ["KEY": key]
        var script = lines.map { $0.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(listening)") }
        let apiLine = script.removeFirst()
        for (index, line) in script.enumerated() {
            let result = try await cli.shell(apiLine + "; " + line, environment: environment)
            if index == script.count - 1 {
                #expect(result.stdout.contains("\"invalidTransition\"") && result.stdout.contains("\"candidates\""), "\(line)\n\(result)")
            } else {
                #expect(result.status == 0, "walkthrough line failed: \(line)\n\(result)")
            }
        }

        let python = try #require(try Self.blocks("python").first).joined(separator: "\n")
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(listening)")
        let pythonFile = cli.directory.appendingPathComponent("walkthrough.py")
        try python.write(to: pythonFile, atomically: true, encoding: .utf8)
        let ran = try await cli.shell("python3 \(pythonFile.path)", environment: environment)
        #expect(ran.status == 0 && ran.stdout.contains("delivered end"), "\(ran)")

        serve.interrupt()
        let stopped = try await serve.finish()
        #expect(stopped.status == 0, "\(stopped)")
        #expect(!stopped.stderr.contains(key) && !stopped.stdout.contains(key), "the key never appears in the server's output")
    }

    /// The port a started `orderflow serve` says it listens on.
    static func port(of serve: RunningCLI) async throws -> String? {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, serve.process.isRunning {
            let said = (try? String(contentsOf: serve.stderrURL, encoding: .utf8)) ?? ""
            if let range = said.range(of: "serving the API on http://127.0.0.1:") {
                return String(said[range.upperBound...].prefix { $0.isNumber })
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    @Test("a port in use: one sentence, exit 64, and the process ends")
    func portInUse() async throws {
        let cli = try await CLI.withFreshDatabase()
        let first = try cli.start(["serve", "--port", "0", "--no-worker"])
        let port = try #require(try await Self.port(of: first), "serve never said where it listens")
        let second = try await cli.run("serve", "--port", port, "--no-worker")
        #expect(second.status == 64, "\(second)")
        #expect(second.stderrLines == ["orderflow: cannot listen on 127.0.0.1:\(port): the port is in use by another program; stop it, or pick another --port (0 picks a free one)"], "\(second)")
        #expect(second.seconds < 20, "it exits at once instead of hanging: \(second.seconds) s")
        first.interrupt()
        #expect(try await first.finish().status == 0)
    }
}
