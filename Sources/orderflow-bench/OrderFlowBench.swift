import ArgumentParser

/// Benchmarks: programs that measure, each reporting OrderFlow's rate as a ratio of the raw
/// limit measured in the same run. Results and commands are recorded in BENCHMARKS.md.
@main
struct OrderFlowBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "orderflow-bench",
        abstract: "Measure OrderFlow against the raw limits of this machine.",
        subcommands: [AdvanceBenchmark.self, EndToEndBenchmark.self, DeliveryBenchmark.self, HTTPBenchmark.self, BroadcastBenchmark.self,
                      PurgeBenchmark.self, PartitionBenchmark.self])
}
