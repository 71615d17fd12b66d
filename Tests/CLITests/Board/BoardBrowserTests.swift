import Foundation
import LocalAPNS
import OrderFlow
import OrderFlowTesting
import PGKit
import TestTags
import Testing

/// The counter board in a real browser: `orderflow serve --port 0` with its worker pushing to
/// the local APNs stand-in, and Tests/BrowserTests/board_test.py driving Debian's Chromium
/// through Playwright (both installed by `scripts/setup --deps-only`). The screenshots go to
/// .build/artifacts/board/.
///
/// Besides the orders the script moves: 1047's device has a live token that the stand-in
/// answers `500 InternalServerError` for every time (the card says "failing"), and 1048 is of a
/// `food-order` version whose `out_for_delivery` goes stale 8 s after it is entered (the
/// preview shows the stale state). The script stops the server and starts it again on the same
/// port (the page reconnects by itself), and signs out at the end.
@Suite("Counter board in Chromium", .tags(.browser), .serialized)
struct BoardBrowserTests {
    static let python = Fixtures.repository.appendingPathComponent(".build/python-tools/bin/python3")
    static let artifacts = Fixtures.repository.appendingPathComponent(".build/artifacts/board")

    static func token(_ order: String) -> String {
        String(repeating: "ab", count: 28) + String(repeating: "0", count: 8 - order.count) + order
    }

    @Test("the board loads, follows the CLI's advances live, advances on a tap, shows conflicts and the pushed Lock Screen")
    func board() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python.path),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
        else {
            Issue.record("the browser tests need Chromium and Playwright: run scripts/setup --deps-only (scripts/test does)")
            return
        }
        let setup = try await WorkerProcessSetup.make(prefix: "board")
        let engine = setup.engine
        for (order, state) in [("1042", nil), ("1043", nil), ("1044", "in_progress"), ("1045", nil), ("1046", nil)] {
            _ = try await engine.createOrder(NewOrder(orderID: order, workflow: "food-order",
                attributes: ["merchantName": "Luigi's", "orderNumber": .string(order), "itemCount": 3]))
            try await engine.registerActivityToken(orderID: order, deviceID: "anna-iphone-\(order)", token: Self.token(order))
            if let state { _ = try await engine.advance(order, to: state) }
        }
        // 1047: APNs keeps failing for its (live) token; the worker pushes its accept at start.
        setup.apns.injectFault(.internalServerError, deviceToken: Self.token("1047"))
        _ = try await engine.createOrder(NewOrder(orderID: "1047", workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": "1047", "itemCount": 1]))
        try await engine.registerActivityToken(orderID: "1047", deviceID: "anna-iphone-1047", token: Self.token("1047"))
        _ = try await engine.advance("1047", to: "accept")
        // 1048: a version of food-order whose delivery content goes stale 8 s after dispatch
        // (the script dispatches it, then watches the preview turn stale).
        let quickStale = try EngineFixture.shippedWorkflow("food-order").replacingOccurrences(of: "stale-after: 30m", with: "stale-after: 8s")
        try #require(quickStale.contains("stale-after: 8s"))
        _ = try await engine.applyWorkflow(yaml: quickStale, file: "food-order.yaml")
        _ = try await engine.createOrder(NewOrder(orderID: "1048", workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": "1048", "itemCount": 2]))
        try await engine.registerActivityToken(orderID: "1048", deviceID: "anna-iphone-1048", token: Self.token("1048"))
        for state in ["in_progress", "ready"] { _ = try await engine.advance("1048", to: state) }

        let serveArguments = Array(setup.workerArguments.dropFirst(2))
        let serve = try setup.cli.start(["serve", "--port", "0"] + serveArguments)
        var origin: String?
        var link: String?
        let deadline = Date().addingTimeInterval(60)
        while link == nil, Date() < deadline, serve.process.isRunning {
            let said = (try? String(contentsOf: serve.stderrURL, encoding: .utf8)) ?? ""
            if let range = said.range(of: "the counter board: ") {
                link = String(said[range.upperBound...].prefix { !$0.isWhitespace })
                origin = link.map { String($0.prefix { $0 != "?" }.dropLast("/board".count)) }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard let link, let origin else {
            serve.interrupt()
            let result = try await serve.finish()
            Issue.record("serve printed no sign-in link: \(result)")
            try await setup.shutdown()
            return
        }
        #expect(link.hasPrefix("http://127.0.0.1:") && link.contains("/board?token=of_signin_"), "\(link)")

        try? FileManager.default.removeItem(at: Self.artifacts)
        let browser = Process()
        browser.executableURL = Self.python
        browser.arguments = [Fixtures.repository.appendingPathComponent("Tests/BrowserTests/board_test.py").path]
        browser.environment = setup.cli.environment.merging([
            "BOARD_ORIGIN": origin, "BOARD_LINK": link, "ORDERFLOW_BIN": setup.cli.binary.path,
            "BOARD_ARTIFACTS": Self.artifacts.path,
            // The script stops this server and starts another with these arguments on its port.
            "BOARD_SERVE_PID": String(serve.process.processIdentifier),
            "BOARD_SERVE_ARGUMENTS": String(decoding: try JSONEncoder().encode(serveArguments), as: UTF8.self),
        ]) { _, new in new }
        let output = setup.cli.directory.appendingPathComponent("browser-output")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        browser.standardOutput = handle
        browser.standardError = handle
        browser.standardInput = FileHandle.nullDevice
        try browser.run()
        try? handle.close()
        // Bounded: the whole browser run takes about a minute; three is a hang.
        let browserDeadline = Date().addingTimeInterval(180)
        while browser.isRunning, Date() < browserDeadline { try await Task.sleep(for: .milliseconds(100)) }
        if browser.isRunning { browser.terminate() }
        browser.waitUntilExit()
        let said = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        print(said)
        #expect(browser.terminationStatus == 0, "the browser checks failed:\n\(said)")

        // The tap on 1044's "Ready" reached the stand-in as an update showing "ready".
        let pushes = setup.apns.pushes(forToken: Self.token("1044"))
        #expect(pushes.contains { $0.aps?["event"] == "update" && $0.aps?["content-state"]?["status"] == "ready" },
                "the stand-in received \(pushes.map { $0.aps as Any })")
        // 1047's pushes were all refused: the worker kept retrying a live token.
        let refused = setup.apns.rejections().filter { $0.deviceToken == Self.token("1047") }
        #expect(refused.count >= 2 && refused.allSatisfy { $0.status == 500 }, "\(refused)")
        // Signing out deleted the session's row (the only session: the other contexts shared it).
        let sessions: Int = try await engine.pool.query(PostgresQuery("SELECT count(*) AS n FROM board_sessions")).single().decode("n")
        #expect(sessions == 0, "the board's session outlived its sign-out")
        for file in ["board-tablet", "board-phone", "board-tablet-preview", "preview-phone", "preview-stale", "board-reconnecting",
                     "board-failing-preview", "preview-android", "signed-out"] {
            #expect(FileManager.default.fileExists(atPath: Self.artifacts.appendingPathComponent("\(file).png").path), "\(file).png")
        }

        // The script stopped this server (SIGINT) before starting its own, and stops that one.
        if serve.process.isRunning { serve.interrupt() }
        let stopped = try await serve.finish()
        #expect(stopped.status == 0, "\(stopped)")
        // The link is for people: the token appears once (the link itself), the session never.
        #expect(stopped.stderr.components(separatedBy: "of_signin_").count == 2, "\(stopped.stderr)")
        #expect(!stopped.stderr.contains("of_board_"), "\(stopped.stderr)")
        try await setup.shutdown()
    }
}
