import Foundation
import Testing
import WorkflowKit

// Feeds thousands of generated and mutated workflow files to `WorkflowLoader` and checks that it
// never crashes or hangs, that it either accepts a file or rejects it with diagnostics that all
// point into the file, and that whatever it accepts survives the rest of the API (canonical form,
// code generation, payload bounds, transition lookup, rendering).
//
// Deterministic: every document is derived from the seed and its index. To reproduce a failure
// (the failure names the seed and the document index) or to fuzz longer:
//
//     ORDERFLOW_FUZZ_SEED=0x5eed ORDERFLOW_FUZZ_COUNT=50000 swift test --skip-build --filter WorkflowFuzzTests
//
// `ORDERFLOW_FUZZ_ONLY` runs only the documents whose name contains its text (`#15983`,
// `adversarial: billion`), to replay one failure.

@Suite("Workflow fuzzing")
struct WorkflowFuzzTests {
    // A backstop for hangs; the default run takes well under a minute, long runs take longer.
    @Test(.timeLimit(.minutes(10)))
    func loaderSurvivesGeneratedAndMutatedDocuments() async throws {
        let config = FuzzConfig.fromEnvironment()
        let bases = try [
            ("food-order", shippedYAML("food-order")),
            ("ride", shippedYAML("ride")),
            ("mini", miniWorkflow),
        ]
        let adversarial = AdversarialCorpus.documents(bases: bases)
        let total = adversarial.count + config.count
        let workers = max(1, min(4, ProcessInfo.processInfo.activeProcessorCount))
        let started = ContinuousClock.now

        let summaries = await withTaskGroup(of: FuzzSummary.self) { group in
            for worker in 0..<workers {
                // Seconds of CPU-bound work: on threads of their own, so that the two threads of
                // the concurrency pool stay free for the suites running beside this one (their
                // timers and timeouts would otherwise wait for the fuzzer).
                group.addTask { await onOwnThread(name: "fuzz \(worker)") {
                    var summary = FuzzSummary()
                    for index in stride(from: worker, to: total, by: workers) {
                        let document: FuzzDocument
                        if index < adversarial.count {
                            document = adversarial[index]
                        } else {
                            document = FuzzDocument.make(index: index - adversarial.count, seed: config.seed, bases: bases)
                        }
                        if let only = config.only, !document.name.contains(only) { continue }
                        summary.record(FuzzCheck.run(document), for: document)
                    }
                    return summary
                } }
            }
            var all: [FuzzSummary] = []
            for await summary in group { all.append(summary) }
            return all
        }
        let summary = summaries.reduce(into: FuzzSummary()) { $0.merge($1) }
        let elapsed = ContinuousClock.now - started

        for failure in summary.failures.prefix(20) {
            Issue.record(Comment(rawValue: failure))
        }
        if summary.failures.count > 20 {
            Issue.record("… and \(summary.failures.count - 20) more failures")
        }
        let slowest = summary.slowest.map { "\(String(format: "%.1f", $0.millis)) ms (\($0.name))" } ?? "-"
        let positioned = summary.unpositioned == 0 ? "all rejections positioned" : "\(summary.unpositioned) rejections WITHOUT a valid position"
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("workflow fuzz: slowest documents: " + summary.slowestFive.map { "\(Int($0.millis)) ms \($0.name.prefix(80))" }.joined(separator: "; "))
        print("workflow fuzz: seed \(config.seedText), \(summary.documents) documents (\(adversarial.count) adversarial), \(summary.accepted) accepted, \(summary.rejected) rejected, \(positioned), slowest \(slowest) CPU, total \(String(format: "%.1f", seconds)) s on \(workers) workers")
        guard config.only == nil else { return }
        #expect(summary.documents == total)
        // The generator must keep producing both kinds, or the fuzzing has gone blind on one side.
        #expect(summary.accepted >= config.count / 10, "too few accepted documents: the generator rarely produces valid workflows")
        #expect(summary.rejected >= config.count / 10)
    }
}

/// Runs `work` on a new thread and returns its result.
func onOwnThread<T: Sendable>(name: String, _ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.name = name
        thread.stackSize = 8 << 20
        thread.start()
    }
}

// MARK: - Configuration and randomness

struct FuzzConfig: Sendable {
    static let defaultSeed: UInt64 = 0x0DE1_1CE5_F00D_0007
    static let defaultCount = 4000

    var seed: UInt64
    var count: Int
    var only: String?

    var seedText: String { "0x" + String(seed, radix: 16) }

    static func fromEnvironment() -> FuzzConfig {
        let environment = ProcessInfo.processInfo.environment
        var config = FuzzConfig(seed: defaultSeed, count: defaultCount)
        if let text = environment["ORDERFLOW_FUZZ_SEED"]?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
            let parsed = text.lowercased().hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            // Any other text is hashed into a seed, so a run can be named (`ORDERFLOW_FUZZ_SEED=nightly-42`).
            config.seed = parsed ?? text.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
        }
        if let only = environment["ORDERFLOW_FUZZ_ONLY"], !only.isEmpty { config.only = only }
        if let text = environment["ORDERFLOW_FUZZ_COUNT"], let count = Int(text.trimmingCharacters(in: .whitespaces)), count >= 0 {
            config.count = count
        }
        return config
    }
}

/// SplitMix64: tiny, fast, and good enough to drive a fuzzer reproducibly.
struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in `0..<n` (n > 0).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + below(range.count) }

    mutating func chance(_ probability: Double) -> Bool { Double(next() >> 11) / Double(1 << 53) < probability }

    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
}

extension SplitMix64: RandomNumberGenerator {}

// MARK: - Documents

struct FuzzDocument: Sendable {
    /// What the document is, for messages: `#17 mutated ride (duplicate line, truncate)`.
    var name: String
    var yaml: String

    static func make(index: Int, seed: UInt64, bases: [(String, String)]) -> FuzzDocument {
        // Each document has its own stream, so one index can be reproduced without the others.
        var rng = SplitMix64(seed: seed ^ (UInt64(index) &* 0xD1B5_4A32_D192_ED03))
        _ = rng.next()
        switch index % 4 {
        case 0, 1:
            let (baseName, base) = rng.pick(bases)
            var mutator = Mutator(rng: rng)
            let (yaml, applied) = mutator.mutate(base, times: mutator.rng.int(1...4))
            return FuzzDocument(name: "#\(index) mutated \(baseName) (\(applied.joined(separator: ", ")))", yaml: yaml)
        case 2:
            var generator = WorkflowGenerator(rng: rng)
            return FuzzDocument(name: "#\(index) generated", yaml: generator.generate())
        default:
            var generator = WorkflowGenerator(rng: rng)
            let generated = generator.generate()
            var mutator = Mutator(rng: generator.rng)
            let (yaml, applied) = mutator.mutate(generated, times: mutator.rng.int(1...2))
            return FuzzDocument(name: "#\(index) generated+mutated (\(applied.joined(separator: ", ")))", yaml: yaml)
        }
    }
}
