import Foundation
import Testing

/// The README's examples run as written: a newcomer copies them right after the demo.
@Suite("README examples", .serialized)
struct ReadmeExampleTests {
    /// The first ```sh block after `heading`, one command a line, comments kept (the shell
    /// drops them).
    static func shellBlock(after heading: String) throws -> [String] {
        let readme = try String(contentsOf: Fixtures.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: heading), "README.md has no \(heading) section")
        let rest = readme[section.upperBound...]
        let open = try #require(rest.range(of: "```sh\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        return rest[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
            .filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
    }

    @Test("Everyday commands: every line exits 0 on a fresh embedded database, run from the checkout")
    func everydayCommands() async throws {
        var cli = try CLI(databaseURL: nil)
        cli.workingDirectory = Fixtures.repository
        let home = cli.directory.appendingPathComponent("home").path
        let lines = try Self.shellBlock(after: "## Everyday commands")
        #expect(lines.count >= 6, "\(lines)")
        for line in lines {
            let result = try await cli.shell(line, environment: ["ORDERFLOW_HOME": home])
            #expect(result.status == 0, "README line failed: \(line)\n\(result)")
            if result.status != 0 { break }
        }
        let show = try await cli.shell("orderflow show 1042 --json", environment: ["ORDERFLOW_HOME": home])
        #expect(show.stdout.contains("\"out_for_delivery\""), "\(show)")
        _ = try await cli.run(["db", "stop"], environment: ["ORDERFLOW_HOME": home])
    }
}
