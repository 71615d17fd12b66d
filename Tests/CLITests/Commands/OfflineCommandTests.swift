import Foundation
import Testing

@Suite("orderflow without a database")
struct OfflineCommandTests {
    @Test("every command's help renders with an example")
    func helpTexts() async throws {
        let cli = try CLI(databaseURL: nil)
        let root = try await cli.run("--help")
        expectStatus(root, 0)
        for fragment in ["EXIT CODES", "64", "69", "--generate-completion-script", "ORDERFLOW_DATABASE_URL", "advance", "deliveries"] {
            #expect(root.stdout.contains(fragment), "root help lacks \(fragment):\n\(root.stdout)")
        }
        let commands: [[String]] = [
            ["migrate"], ["db"], ["db", "status"], ["db", "start"], ["db", "stop"],
            ["workflow"], ["workflow", "validate"], ["workflow", "apply"], ["workflow", "list"], ["workflow", "show"],
            ["workflow", "graph"], ["workflow", "swift"],
            ["order"], ["order", "create"], ["advance"], ["cancel"], ["show"], ["list"], ["watch"],
            ["token"], ["token", "register"], ["follow"], ["unfollow"],
            ["deliveries"], ["deliveries", "list"], ["deliveries", "retry"],
        ]
        for command in commands {
            let result = try await cli.run(command + ["--help"])
            expectStatus(result, 0)
            #expect(result.stdout.contains("OVERVIEW:") && result.stdout.contains("Example"),
                    "`orderflow \(command.joined(separator: " ")) --help` lacks an overview or example:\n\(result.stdout)")
        }
    }

    @Test("completion scripts are generated")
    func completion() async throws {
        let cli = try CLI(databaseURL: nil)
        for shell in ["bash", "zsh", "fish"] {
            let result = try await cli.run("--generate-completion-script", shell)
            expectStatus(result, 0)
            #expect(result.stdout.contains("advance"))
        }
    }

    @Test("usage errors are one line and exit 64")
    func usageErrors() async throws {
        let cli = try CLI(databaseURL: nil)
        let missing = try await cli.run("advance", "1042")
        expectStatus(missing, 64)
        expectOneLineError(missing, containing: ["orderflow advance --help"])

        let unknown = try await cli.run("frobnicate")
        expectStatus(unknown, 64)
        expectOneLineError(unknown, containing: ["frobnicate"])
        #expect(!unknown.stderr.contains("Did you mean"), "nothing is near frobnicate: \(unknown)")

        // Near misses of commands are named, as the parser names near misses of options.
        let typo = try await cli.run("lisst")
        expectStatus(typo, 64)
        expectOneLineError(typo, containing: ["'lisst'", "Did you mean 'list'?", "orderflow --help"])
        let nested = try await cli.run("deliveries", "retyr", "12")
        expectStatus(nested, 64)
        expectOneLineError(nested, containing: ["Did you mean 'retry'?", "orderflow deliveries --help"])
        let option = try await cli.run("list", "--stat", "ready")
        expectStatus(option, 64)
        expectOneLineError(option, containing: ["Did you mean '--state'?"])

        let tokens = try await cli.run("token", "register", "--device", "d1")
        expectStatus(tokens, 64)
        expectOneLineError(tokens, containing: ["exactly one of --push-to-start, --activity, --device-token"])
    }

    @Test("workflow validate: ok for the shipped files")
    func validateShippedWorkflows() async throws {
        let cli = try CLI(databaseURL: nil)
        let result = try await cli.run("workflow", "validate", Fixtures.foodOrder, Fixtures.ride)
        expectStatus(result, 0)
        #expect(result.stdout.contains("ok: food-order (7 states, "), "\(result)")
        #expect(result.stdout.contains("ok: ride ("), "\(result)")
        #expect(result.stdout.contains(" transitions)"))
    }

    @Test("workflow validate: a broken file gives file:line:col diagnostics and exit 65")
    func validateBrokenWorkflow() async throws {
        let cli = try CLI(databaseURL: nil)
        let broken = try Fixtures.file("broken.yaml", Fixtures.counterWorkflow.replacingOccurrences(of: "final: true", with: "finall: true"))
        let result = try await cli.run("workflow", "validate", broken)
        expectStatus(result, 65)
        #expect(result.stderr.contains("\(broken):20:"), "\(result)")
        #expect(result.stderr.contains(": error: "))
        #expect(result.stderr.contains("finall"))
        #expect(result.stderr.contains("did you mean `final`?"), "\(result)")
        #expect(result.stdout.isEmpty)

        let missing = try await cli.run("workflow", "validate", "/nonexistent/flow.yaml")
        expectStatus(missing, 66)
        expectOneLineError(missing, containing: ["/nonexistent/flow.yaml", "no such file"])
    }

    @Test("workflow graph, swift and show work on a file offline")
    func offlineWorkflowTools() async throws {
        let cli = try CLI(databaseURL: "postgresql://u:secret@127.0.0.1:1/x")  // never contacted
        let mermaid = try await cli.run("workflow", "graph", Fixtures.foodOrder)
        expectStatus(mermaid, 0)
        #expect(mermaid.stdout.hasPrefix("stateDiagram-v2"))
        #expect(mermaid.stdout.contains("ready --> out_for_delivery: dispatch"))

        let dot = try await cli.run("workflow", "graph", Fixtures.foodOrder, "--format", "dot")
        expectStatus(dot, 0)
        #expect(dot.stdout.hasPrefix("digraph \"food-order\""))

        let swift = try await cli.run("workflow", "swift", Fixtures.foodOrder)
        expectStatus(swift, 0)
        #expect(swift.stdout.contains("public struct FoodOrderAttributes: ActivityAttributes"))

        let show = try await cli.run("workflow", "show", Fixtures.foodOrder)
        expectStatus(show, 0)
        #expect(show.stdout.contains("food-order"))
        #expect(show.stdout.contains("out_for_delivery"))
        #expect(!show.stdout.contains("\u{1B}["), "no colours when piped")

        let json = try await cli.run("workflow", "show", Fixtures.foodOrder, "--json")
        expectStatus(json, 0)
        let object = try #require(try json.json() as? [String: Any])
        #expect(object["name"] as? String == "food-order")
        #expect((object["states"] as? [Any])?.count == 7)
    }

    @Test("an unreachable database exits 69 with one line naming host and port, never the password")
    func unreachableDatabase() async throws {
        let cli = try CLI(databaseURL: "postgresql://u:secret@127.0.0.1:1/x")
        for command in [["list"], ["advance", "1042", "ready"], ["migrate"]] {
            let result = try await cli.run(command)
            expectStatus(result, 69)
            expectOneLineError(result, containing: ["127.0.0.1:1"])
            #expect(!result.stderr.contains("secret"), "\(result)")
            #expect(!result.stdout.contains("secret"))
        }
    }

    @Test("db status shows an explicit URL with its password masked; db start refuses it")
    func databaseStatusExternal() async throws {
        let cli = try CLI(databaseURL: "postgresql://u:secret@127.0.0.1:1/x")
        let status = try await cli.run("db", "status")
        expectStatus(status, 0)
        #expect(status.stdout.contains("postgresql://u:***@127.0.0.1:1/x"), "\(status)")
        #expect(!status.stdout.contains("secret"))

        let json = try await cli.run("db", "status", "--json")
        let object = try #require(try json.json() as? [String: Any])
        #expect(object["port"] as? Int == 1)

        let start = try await cli.run("db", "start")
        expectStatus(start, 64)
        expectOneLineError(start, containing: ["ORDERFLOW_DATABASE_URL"])
    }

    @Test("db status of an embedded database that was never created")
    func databaseStatusEmbedded() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-home-\(UUID().uuidString)").path
        let cli = try CLI(databaseURL: nil, extraEnvironment: ["ORDERFLOW_HOME": home])
        let status = try await cli.run("db", "status")
        expectStatus(status, 0)
        #expect(status.stdout.contains("not created"), "\(status)")
        #expect(status.stdout.contains(home + "/postgres"))
    }

    @Test("the embedded database is found as git finds a repository: ORDERFLOW_HOME, a .orderflow folder above, else the data folder")
    func embeddedDatabaseDiscovery() async throws {
        var cli = try CLI(databaseURL: nil)
        let project = cli.directory.appendingPathComponent("project")
        cli.workingDirectory = project.appendingPathComponent("counter/tablet")
        try FileManager.default.createDirectory(at: cli.workingDirectory, withIntermediateDirectories: true)

        let data = try await cli.run("db", "status", "--json")
        expectStatus(data, 0)
        let dataObject = try #require(try data.json() as? [String: Any])
        #expect(dataObject["folder"] as? String == cli.directory.appendingPathComponent("data/orderflow/postgres").path, "\(data)")
        #expect((dataObject["chosenBecause"] as? String)?.contains("data folder") == true, "\(data)")

        try FileManager.default.createDirectory(at: project.appendingPathComponent(".orderflow"), withIntermediateDirectories: true)
        let nearest = try await cli.run("db", "status")
        expectStatus(nearest, 0)
        #expect(nearest.stdout.contains(project.appendingPathComponent(".orderflow/postgres").path), "\(nearest)")
        #expect(nearest.stdout.contains("the nearest .orderflow folder"), "\(nearest)")

        let home = cli.directory.appendingPathComponent("home").path
        let overridden = try await cli.run(["db", "status"], environment: ["ORDERFLOW_HOME": home])
        #expect(overridden.stdout.contains(home + "/postgres") && overridden.stdout.contains("ORDERFLOW_HOME is set"), "\(overridden)")
        #expect(!FileManager.default.fileExists(atPath: project.appendingPathComponent(".orderflow/postgres").path),
                "db status creates nothing")
    }

    @Test("negative numbers and offsets are option values: refused for the real reason, or passed on")
    func negativeOptionValues() async throws {
        let cli = try CLI(databaseURL: "postgresql://nobody@127.0.0.1:1/none")
        for (arguments, reason) in [
            (["list", "--limit", "-1"], "--limit must be between 1 and 1000"),
            (["deliveries", "list", "--limit", "-3"], "--limit must be between 1 and 10000"),
            (["order", "create", "x", "--workflow", "food-order", "--version", "-1"], "--version must be 1 or more"),
            // A negative number as a positional argument is a value too.
            (["deliveries", "retry", "-1"], "the delivery id must be 1 or more"),
            (["deliveries", "retry", "0"], "the delivery id must be 1 or more"),
            (["deliveries", "retry", "forty-two"], "the delivery id `forty-two` is not a whole number"),
        ] {
            let result = try await cli.run(arguments)
            expectStatus(result, 64)
            expectOneLineError(result, containing: [reason])
        }
        // An ETA five minutes ago is a time: it gets as far as the database (unreachable here).
        let past = try await cli.run("advance", "1042", "accept", "--eta", "-5m")
        expectStatus(past, 69)
        // Times are read as the engine reads them: a space for the T is fine, 30 February is not.
        let spaced = try await cli.run("advance", "1042", "accept", "--eta", "2030-05-01 12:00:00+02:00")
        expectStatus(spaced, 69)
        let impossible = try await cli.run("advance", "1042", "accept", "--eta", "2030-02-30T12:00:00Z")
        expectStatus(impossible, 65)
        expectOneLineError(impossible, containing: ["is not a time"])
    }

    @Test("db url prints an explicit URL as given, password included")
    func databaseURLExternal() async throws {
        let cli = try CLI(databaseURL: "postgresql://u:secret@127.0.0.1:1/x")
        let url = try await cli.run("db", "url")
        expectStatus(url, 0)
        #expect(url.stdout == "postgresql://u:secret@127.0.0.1:1/x\n", "\(url)")
    }

    @Test("a malformed database URL is a usage error")
    func malformedDatabaseURL() async throws {
        let cli = try CLI(databaseURL: "postgresql://[nope")
        let result = try await cli.run("list")
        expectStatus(result, 64)
        expectOneLineError(result, containing: ["ORDERFLOW_DATABASE_URL"])
    }
}
