import ArgumentParser
import CommandLineSupport

/// `orderflow demo`, left for those who remember it: says where the demo is. The demo runs an
/// APNs stand-in, which a production binary must not carry, so it is a program of its own
/// (`orderflow-demo`, built and run by `scripts/demo`). Not shown in the help.
struct DemoPointer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Say where the demo is: scripts/demo runs it.",
        shouldDisplay: false)

    /// Whatever followed `demo` (`--board`): it belongs to the demo, not to this pointer.
    @Argument(parsing: .allUnrecognized)
    var demoArguments: [String] = []

    func run() throws {
        throw CLIError(.usage, "the demo is a program of its own, orderflow-demo, kept out of orderflow with the APNs stand-in it runs",
                       remedy: "run scripts/demo in OrderFlow's checkout: it builds and runs it")
    }
}
