import Foundation
import Testing
import WorkflowKit

#if canImport(Glibc)
import Glibc
#endif

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

// MARK: - Checking one document

struct FuzzResult {
    var accepted: Bool
    var failures: [String]
    var unpositioned: Int
    var millis: Double
}

struct FuzzSummary: Sendable {
    var documents = 0
    var accepted = 0
    var rejected = 0
    var unpositioned = 0
    var failures: [String] = []
    /// The five slowest documents, slowest first.
    var slowestFive: [(name: String, millis: Double)] = []
    var slowest: (name: String, millis: Double)? { slowestFive.first }

    mutating func record(_ result: FuzzResult, for document: FuzzDocument) {
        documents += 1
        if result.accepted { accepted += 1 } else { rejected += 1 }
        unpositioned += result.unpositioned
        failures += result.failures
        keepSlowest([(document.name, result.millis)])
    }

    mutating func merge(_ other: FuzzSummary) {
        documents += other.documents
        accepted += other.accepted
        rejected += other.rejected
        unpositioned += other.unpositioned
        failures += other.failures
        keepSlowest(other.slowestFive)
    }

    private mutating func keepSlowest(_ more: [(name: String, millis: Double)]) {
        slowestFive = Array((slowestFive + more).sorted { $0.millis > $1.millis }.prefix(5))
    }
}

enum FuzzCheck {
    static let file = "fuzz.yaml"
    /// Far above what any document needs in a debug build; a document over it counts as a hang.
    /// Measured in CPU time where available, so that a loaded machine does not trip it.
    static let budgetMillis = 3000.0

    /// CPU time of the current thread in milliseconds (a load runs on one thread: it has no
    /// suspension points), or wall time where thread CPU time is not available.
    static func now() -> Double {
        #if canImport(Glibc)
        var time = timespec()
        if clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 {
            return Double(time.tv_sec) * 1000 + Double(time.tv_nsec) / 1e6
        }
        #endif
        let duration = ContinuousClock.now - start
        return Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }

    private static let start = ContinuousClock.now

    static func run(_ document: FuzzDocument) -> FuzzResult {
        var failures: [String] = []
        var unpositioned = 0
        func fail(_ message: String) {
            failures.append("\(document.name): \(message)\n--- document (\(document.yaml.utf8.count) bytes) ---\n\(excerpt(document.yaml))")
        }

        let started = now()
        let outcome: Result<Workflow, WorkflowValidationError>
        do {
            outcome = .success(try WorkflowLoader.load(yaml: document.yaml, file: file))
        } catch {
            outcome = .failure(error)
        }
        let millis = now() - started
        if millis > budgetMillis {
            fail("loading took \(Int(millis)) ms, over the \(Int(budgetMillis)) ms budget")
        }

        switch outcome {
        case .failure(let error):
            if error.diagnostics.isEmpty { fail("rejected without any diagnostic") }
            let lines = YAMLLines(document.yaml)
            for diagnostic in error.diagnostics {
                if let problem = lines.problem(with: diagnostic) {
                    unpositioned += 1
                    fail("\(problem): \(diagnostic)")
                }
                if diagnostic.file != file { fail("diagnostic names file `\(diagnostic.file)`: \(diagnostic)") }
                if diagnostic.message.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { fail("empty message: \(diagnostic)") }
            }
            let order = error.diagnostics.map { [$0.line, $0.column] }
            if order != order.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                fail("diagnostics are not in file order:\n\(error)")
            }
            return FuzzResult(accepted: false, failures: failures, unpositioned: unpositioned, millis: millis)
        case .success(let workflow):
            for problem in AcceptedWorkflowCheck.problems(workflow, yaml: document.yaml) { fail(problem) }
            return FuzzResult(accepted: true, failures: failures, unpositioned: 0, millis: millis)
        }
    }

    static func excerpt(_ yaml: String) -> String {
        let limit = 1500
        guard yaml.count > limit else { return yaml }
        return String(yaml.prefix(limit)) + "\n[… \(yaml.count - limit) more characters]"
    }
}

/// The lines of a document as libyaml counts them: it breaks lines at LF, CR, CRLF and also at
/// NEL (U+0085), LS (U+2028) and PS (U+2029) (YAML 1.1), and counts columns in Unicode scalars.
struct YAMLLines {
    /// Unicode scalars per line; a document ending in a break has a last, empty line.
    var lengths: [Int] = [0]

    init(_ text: String) {
        var previousWasCR = false
        for scalar in text.unicodeScalars {
            defer { previousWasCR = scalar == "\r" }
            if scalar == "\n", previousWasCR { continue }
            switch scalar {
            case "\n", "\r", "\u{85}", "\u{2028}", "\u{2029}": lengths.append(0)
            default: lengths[lengths.count - 1] += 1
            }
        }
    }

    /// Why `diagnostic` does not point into the document, or nil when it does: line 1 through the
    /// last line (+1, for problems reported at the end of the input), and a column on that line
    /// or just past its end.
    func problem(with diagnostic: Diagnostic) -> String? {
        guard diagnostic.line >= 1, diagnostic.column >= 1 else { return "position \(diagnostic.line):\(diagnostic.column) is not 1-based" }
        guard diagnostic.line <= lengths.count + 1 else {
            return "line \(diagnostic.line) is past the end of the \(lengths.count)-line document"
        }
        let length = diagnostic.line <= lengths.count ? lengths[diagnostic.line - 1] : 0
        guard diagnostic.column <= length + 1 else {
            return "column \(diagnostic.column) is past the end of line \(diagnostic.line) (\(length) characters)"
        }
        return nil
    }
}

// MARK: - What an accepted workflow must survive

enum AcceptedWorkflowCheck {
    static let time = Date(timeIntervalSince1970: 1_746_100_800)

    static func problems(_ workflow: Workflow, yaml: String) -> [String] {
        var problems: [String] = []

        // The canonical form is JSON that reads back as itself. (Through JSONSerialization, which
        // keeps `50.0` a double; `JSONValue(json:)` reads it as the int 50, and is slow in debug
        // builds, hence also the size cap for huge adversarial workflows. JSONSerialization may
        // read a long double a unit in the last place off, so numbers compare approximately.)
        let canonical = workflow.canonicalJSON
        if canonical.utf8.count <= 256 * 1024 {
            do {
                let object = try JSONSerialization.jsonObject(with: Data(canonical.utf8), options: [.fragmentsAllowed])
                let reread = try JSONValue(foundation: object).jsonString
                if reread != canonical, !sameApartFromRounding(reread, canonical) {
                    problems.append("canonical JSON does not survive a round trip:\n\(canonical)\n\(reread)")
                }
            } catch {
                problems.append("canonical JSON does not parse: \(error)\n\(canonical)")
            }
        }
        // Loading is deterministic.
        do {
            let again = try WorkflowLoader.load(yaml: yaml, file: FuzzCheck.file)
            if again != workflow || again.canonicalJSON != canonical { problems.append("loading the same text twice gives different workflows") }
        } catch {
            problems.append("loaded once, rejected the second time: \(error)")
        }

        // Code and diagrams.
        let swift = workflow.swiftActivityAttributes()
        if !swift.contains("struct \(workflow.attributesType): ActivityAttributes") { problems.append("generated Swift lacks the attributes type") }
        _ = workflow.mermaid()
        _ = workflow.graphviz()

        // The structure the loader promises. Lookups and rendering go through the API's linear
        // searches, so huge (adversarial) workflows are sampled rather than walked in full.
        let sample = 200
        if workflow.state(named: workflow.initialState)?.isInitial != true { problems.append("initial state `\(workflow.initialState)` is not marked initial") }
        if workflow.finalStates.isEmpty { problems.append("no final state") }
        for transition in workflow.transitions.prefix(sample) {
            if workflow.state(named: transition.from) == nil || workflow.state(named: transition.to) == nil {
                problems.append("transition \(transition) names a missing state")
            }
            if workflow.isFinal(transition.from) { problems.append("transition \(transition) leaves a final state") }
            let size = workflow.maximumPayloadSize(for: transition)
            if size > 4096 { problems.append("accepted transition \(transition) with a payload bound of \(size) bytes") }
            // Every transition can be asked for by its target state or its event.
            for target in [transition.to] + (transition.event.map { [$0] } ?? []) {
                do {
                    let resolved = try workflow.resolveTransition(from: transition.from, target: target)
                    if resolved.id != transition.id, target != transition.to {
                        problems.append("event `\(target)` from `\(transition.from)` resolves to \(resolved), not \(transition)")
                    }
                } catch {
                    problems.append("`\(target)` from `\(transition.from)` does not resolve: \(error)")
                }
            }
        }
        if workflow.lifecycle.start == .pushToStart || workflow.lifecycle.onTimeLimit == .restart {
            let size = workflow.maximumStartPayloadSize
            if size > 4096 { problems.append("accepted a push-to-start with a payload bound of \(size) bytes") }
        }

        // Rendering with the largest values the schemas allow must work or fail with a render
        // or data error, never crash; a rendered payload is within the APNs limit.
        func rendered(_ what: String, _ body: () throws -> LiveActivityPayload) {
            do {
                let payload = try body()
                if payload.encodedSize > 4096 { problems.append("\(what) rendered \(payload.encodedSize) bytes") }
            } catch is RenderError {
            } catch is DataValidationError {
            } catch {
                problems.append("\(what) threw an unexpected \(type(of: error)): \(error)")
            }
        }
        let attributes = SampleData.object(workflow.attributesSchema)
        var previous: JSONValue?
        rendered("the start") {
            let start = try workflow.renderStart(attributes: attributes, input: SampleData.object(workflow.lifecycle.startInputs), at: time)
            previous = start.update.contentState
            return start.apnsPayload()
        }
        for transition in workflow.transitions.prefix(sample) {
            rendered("transition \(transition)") {
                try workflow.render(transition: transition, attributes: attributes, input: SampleData.object(transition.inputs),
                                    previous: previous, at: time).apnsPayload()
            }
        }
        for state in workflow.states.prefix(sample) {
            rendered("state `\(state.name)`") {
                try workflow.render(state: state.name, attributes: attributes, at: time).apnsPayload()
            }
        }
        return problems
    }
}

/// True when two texts are equal apart from numbers that differ by at most a relative 1e-12.
func sameApartFromRounding(_ a: String, _ b: String) -> Bool {
    guard let number = try? Regex("-?[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?") else { return false }
    guard a.split(separator: number, omittingEmptySubsequences: false) == b.split(separator: number, omittingEmptySubsequences: false)
    else { return false }
    let left = a.matches(of: number).map { Double(a[$0.range]) ?? .nan }
    let right = b.matches(of: number).map { Double(b[$0.range]) ?? .nan }
    return left.count == right.count
        && zip(left, right).allSatisfy { $0 == $1 || abs($0 - $1) <= 1e-12 * max(abs($0), abs($1)) }
}

/// The largest (ASCII) values a schema allows.
enum SampleData {
    static func object(_ schema: [FieldSpec]) -> JSONValue {
        .object(Dictionary(schema.map { ($0.name, value($0.type)) }, uniquingKeysWith: { first, _ in first }))
    }

    static func value(_ type: FieldType) -> JSONValue {
        switch type {
        case .string(let maxLength): return .string(String(repeating: "x", count: min(maxLength ?? 256, 10_000)))
        case .int: return .int(Int.max)
        case .double: return .double(-1.7976931348623157e308)
        case .bool: return .bool(false)
        case .date: return .string("2025-05-01T12:00:00.123Z")
        case .enumeration(let values): return .string(values.max { $0.utf8.count < $1.utf8.count } ?? "")
        case .optional(let wrapped): return value(wrapped)
        case .array(let element, let maxCount): return .array(Array(repeating: value(element), count: min(maxCount, 100)))
        case .structure(let structure): return object(structure.fields)
        }
    }
}

// MARK: - Mutations

/// Changes a YAML document the way typos, bad merges and hostile input do.
struct Mutator {
    var rng: SplitMix64

    typealias Mutation = @Sendable (inout Mutator, String) -> String

    static let mutations: [(name: String, apply: Mutation)] = [
        ("delete line", { m, s in m.editLines(s) { m, lines in lines.remove(at: m.rng.below(lines.count)) } }),
        ("duplicate line", { m, s in m.editLines(s) { m, lines in let i = m.rng.below(lines.count); lines.insert(lines[i], at: i) } }),
        ("swap lines", { m, s in m.editLines(s) { m, lines in lines.swapAt(m.rng.below(lines.count), m.rng.below(lines.count)) } }),
        ("move line", { m, s in m.editLines(s) { m, lines in let line = lines.remove(at: m.rng.below(lines.count)); lines.insert(line, at: m.rng.below(lines.count + 1)) } }),
        ("reindent", { m, s in m.reindent(s) }),
        ("truncate", { m, s in m.truncate(s) }),
        ("insert junk", { m, s in m.insertJunk(s) }),
        ("wrong type", { m, s in let value = m.rng.pick(Mutator.wrongValues); return m.replaceValue(s, with: value) }),
        ("huge number", { m, s in m.hugeNumber(s) }),
        ("rename key", { m, s in m.renameKey(s) }),
        ("drop block", { m, s in m.dropBlock(s) }),
        ("duplicate key", { m, s in m.duplicateKey(s) }),
        ("mutate type", { m, s in m.mutateType(s) }),
        ("mutate template", { m, s in m.mutateTemplate(s) }),
        ("long string", { m, s in m.longString(s) }),
        ("deep nesting", { m, s in m.deepNesting(s) }),
        ("anchors and aliases", { m, s in m.aliases(s) }),
        ("alias bomb", { m, s in m.aliasBomb(s) }),
        ("line endings", { m, s in m.lineEndings(s) }),
        ("flow style", { m, s in m.flowStyle(s) }),
        ("odd unicode", { m, s in m.oddUnicode(s) }),
    ]

    mutating func mutate(_ text: String, times: Int) -> (String, [String]) {
        var text = text
        var applied: [String] = []
        for _ in 0..<times {
            let mutation = rng.pick(Self.mutations)
            text = mutation.apply(&self, text)
            applied.append(mutation.name)
        }
        return (text, applied)
    }

    // MARK: Lines

    func lines(_ text: String) -> [String] { text.components(separatedBy: "\n") }

    mutating func editLines(_ text: String, _ edit: (inout Mutator, inout [String]) -> Void) -> String {
        var lines = lines(text)
        guard !lines.isEmpty else { return text }
        edit(&self, &lines)
        return lines.joined(separator: "\n")
    }

    /// Index of a random line that is `key: value` or `key:` (not a comment), if any.
    mutating func keyLine(in lines: [String], where predicate: (String) -> Bool = { _ in true }) -> Int? {
        let candidates = lines.indices.filter { index in
            let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
            return !trimmed.hasPrefix("#") && (trimmed.contains(": ") || trimmed.hasSuffix(":")) && predicate(lines[index])
        }
        return candidates.isEmpty ? nil : rng.pick(candidates)
    }

    static func indentation(of line: String) -> Int { line.prefix { $0 == " " }.count }

    mutating func reindent(_ text: String) -> String {
        editLines(text) { m, lines in
            let index = m.rng.below(lines.count)
            let line = lines[index]
            switch m.rng.below(4) {
            case 0: lines[index] = String(repeating: " ", count: m.rng.int(1...3)) + line
            case 1: lines[index] = String(line.dropFirst(min(Self.indentation(of: line), m.rng.int(1...2))))
            case 2: lines[index] = "\t" + line.drop { $0 == " " }
            default:
                // Shift a whole block.
                let end = min(lines.count, index + m.rng.int(2...8))
                for i in index..<end { lines[i] = "  " + lines[i] }
            }
        }
    }

    mutating func truncate(_ text: String) -> String {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return text }
        // Cutting inside a multi-byte character leaves U+FFFD: Swift strings are always valid Unicode.
        return String(decoding: bytes.prefix(rng.below(bytes.count)), as: UTF8.self)
    }

    static let junk: [String] = [
        "\0", "\t", "\r", "\r\n", "\u{1}", "\u{7}", "\u{8}", "\u{1B}[31m", "\u{7F}", "\u{85}", "\u{A0}", "\u{2028}", "\u{2029}",
        "\u{FEFF}", "\u{200B}", "\u{202E}", "\u{FFFD}", "\u{FFFE}", "\u{10FFFF}", "\u{E000}", "e\u{301}", "👩‍👩‍👧‍👦", "🇺🇳", "𝔘𝔫𝔦",
        ":", ": ", " :", "-", "- ", "? ", "{", "}", "[", "]", ",", "&", "&a ", "*", "*a", "!", "!!str ", "!!map ", "!<tag:x> ",
        "|", ">", "|-", "'", "\"", "%", "%YAML 1.1\n", "@", "`", "#", " # comment", "---", "\n---\n", "...", "\n...\n", "{{", "}}",
        "{{#", "{{/", "\\", "\\u", "\"\\x\"", "\"\\uD800\"", "~", "null", "<<: ", "=", "'''",
    ]

    mutating func insertJunk(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        var result = String.UnicodeScalarView()
        let at = rng.below(scalars.count + 1)
        result.append(contentsOf: scalars[..<at])
        for _ in 0..<rng.int(1...3) { result.append(contentsOf: rng.pick(Self.junk).unicodeScalars) }
        result.append(contentsOf: scalars[at...])
        return String(result)
    }

    static let wrongValues: [String] = [
        "[a, b]", "[]", "{x: 1}", "{}", "42", "-1", "0", "3.5", "-0.0", "1e400", "-1e400", ".nan", ".inf", "-.inf", "0x1F", "0o17",
        "true", "false", "yes", "no", "on", "null", "~", "", "\"\"", "''", "2025-05-01", "2025-05-01T12:00:00Z", "12:30:00",
        "!!binary aGVsbG8=", "!!int \"12\"", "!!str 12", "!custom x", "!!set {a, b}", "&anchor value", "*undefined", "|\n  block",
        ">-\n  folded", "\"unterminated", "'single", "[unclosed", "{unclosed: 1", "- item", "a: b: c", "? complex", "@reserved", "`tick`",
        "99999999999999999999999999", "-9223372036854775809", "9223372036854775807", "1_000", "+15m", "now", "-1h", "0s", "00:00",
        "any", "none", "immediate", "after 30m", "push-to-start", "restart", "enum(a, b)", "string(0)", "\"{{input.x}}\"",
        "\"{{attributes.nope}}\"", "\"{{previous.status}}\"", "\"{{#a}}\"", "\"\\0\\a\\e\"",
    ]

    mutating func replaceValue(_ text: String, with value: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines) else { return }
            let line = lines[index]
            let colon = line.range(of: ": ") ?? line.range(of: ":", options: .backwards)!
            lines[index] = String(line[..<colon.lowerBound]) + ": " + value
        }
    }

    mutating func hugeNumber(_ text: String) -> String {
        let huge = [
            "9223372036854775807", "9223372036854775806", "4611686018427387904", "99999999999999999999", "18446744073709551615",
            "2147483648", "4097", "100000",
        ]
        let number = rng.pick(huge)
        // Into a type (max length, array count), a duration or a plain number.
        let replacements: [(String, String)] = [
            ("string(", "string(\(number)"), ("; ", "; \(number)"), ("after: ", "after: \(number)"), ("after ", "after \(number)"),
            ("relevance: ", "relevance: \(number)"), ("priority: ", "priority: \(number)"), ("+", "+\(number)"),
        ]
        let (old, new) = rng.pick(replacements)
        let ranges = ranges(of: old, in: text)
        guard !ranges.isEmpty else {
            let value = rng.pick(["\(number)", "string(\(number))", "\"[int; \(number)]\""])
            return replaceValue(text, with: value)
        }
        var text = text
        let range = rng.pick(ranges)
        // `string(40)` becomes `string(999…40)`: the digits stay a number, just far larger.
        text.replaceSubrange(range, with: new)
        return text
    }

    func ranges(of needle: String, in text: String) -> [Range<String.Index>] {
        var result: [Range<String.Index>] = []
        var start = text.startIndex
        while let range = text.range(of: needle, range: start..<text.endIndex) {
            result.append(range)
            start = range.upperBound
        }
        return result
    }

    static let keyTypos: [@Sendable (String) -> String] = [
        { $0 + "s" }, { String($0.dropLast()) }, { $0.uppercased() }, { $0.capitalized }, { $0 + "_" }, { "_" + $0 },
        { _ in "" }, { _ in "default" }, { _ in "any" }, { _ in "self" }, { _ in "ContentState" }, { _ in "1abc" }, { _ in "a-b" },
        { _ in "\"quoted key\"" }, { _ in "ключ" }, { _ in "🔑" }, { _ in "? [a, b]" }, { _ in "[a, b]" }, { _ in "{a: b}" },
        { _ in "*undefined" }, { _ in "!!int 1" }, { _ in "null" }, { _ in "true" }, { _ in "<<" },
        { String($0.reversed()) }, { $0.replacingOccurrences(of: "-", with: "_") }, { $0.replacingOccurrences(of: "_", with: "-") },
    ]

    mutating func renameKey(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines) else { return }
            let line = lines[index]
            let indent = line.prefix { $0 == " " || $0 == "-" }
            let rest = line.dropFirst(indent.count)
            guard let colon = rest.firstIndex(of: ":") else { return }
            let key = String(rest[..<colon])
            lines[index] = String(indent) + m.rng.pick(Self.keyTypos)(key) + String(rest[colon...])
        }
    }

    /// Deletes a key line and everything indented under it: drops required keys and whole sections.
    mutating func dropBlock(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines) else { return }
            let indent = Self.indentation(of: lines[index])
            var end = index + 1
            while end < lines.count, lines[end].trimmingCharacters(in: .whitespaces).isEmpty || Self.indentation(of: lines[end]) > indent {
                end += 1
            }
            lines.removeSubrange(index..<end)
        }
    }

    mutating func duplicateKey(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines, where: { $0.trimmingCharacters(in: .whitespaces).hasSuffix(":") == false }) else { return }
            var copy = lines[index]
            if copy.trimmingCharacters(in: .whitespaces).hasPrefix("- ") {
                // The key of a list item: repeat it on the next line, at the item's key indentation.
                let dash = copy.range(of: "- ")!
                copy.replaceSubrange(dash, with: "  ")
            }
            lines.insert(copy, at: index + 1)
        }
    }

    static let types: [String] = [
        "string", "string(1)", "string(0)", "string(-1)", "string()", "string(x)", "string(40", "int", "int?", "int??", "double",
        "bool", "date", "date?", "enum(a)", "enum()", "enum(a,,b)", "enum(a, a)", "enum(default, case)", "enum(1a, b)",
        "\"enum(a, b)\"", "\"enum(a, b)?\"", "enum(a, b", "[int]", "\"[int; 0]\"", "\"[int; 3]\"", "\"[[int]]\"", "\"[int?; 2]?\"",
        "\"[enum(x, y); 2]\"", "[string(10); 3]", "\"[string(10); 3\"", "strng", "String", "integer", "float", "any", "?", "[]", "{}",
        "\"string(4096)\"", "\"string(9223372036854775807)\"", "\"[string(4000); 9223372036854775807]\"", "\"[[[[[[[[[[int]]]]]]]]]]\"",
        "\"enum(\(String(repeating: "v", count: 300)), b)\"", "\"string(\u{0663})\"", "\"enum(é, ü)\"", "\"enum(a-b, c)\"",
    ]

    mutating func mutateType(_ text: String) -> String {
        let needles = ["string(", "int", "date", "enum(", "double", "bool", "[string"]
        let candidates = needles.flatMap { ranges(of: ": " + $0, in: text) }
        guard !candidates.isEmpty else {
            let type = rng.pick(Self.types)
            return replaceValue(text, with: type)
        }
        let range = rng.pick(candidates)
        let lineEnd = text[range.lowerBound...].firstIndex { $0 == "\n" || $0 == "," || $0 == "}" } ?? text.endIndex
        var text = text
        text.replaceSubrange(range.lowerBound..<lineEnd, with: ": " + rng.pick(Self.types))
        return text
    }

    static let templateEdits: [(old: String, new: String)] = [
        ("}}", ""), ("}}", "}"), ("{{", "{{{"), ("{{", "{{#"), ("{{", "{{^"), ("{{", "{{/"), ("{{", "{{!"), ("{{", "{{>"),
        ("{{", "{{="), ("{{", "{{%"), ("{{", "{{&"), ("{{", "{{$"), ("{{", "{{<"), ("{{", "{{ "), ("{{/", "{{#"), ("{{#", "{{/"),
        ("attributes.", "attributes.x"), ("attributes.", "attribute."), ("input.", "input.zz"), ("input.", "previous."),
        ("previous.", "input."), ("previous.", "attributes."), ("{{", "{{uppercased("), ("{{", "{{nosuch("), ("}}", ")}}"),
        ("}}", ".x}}"), ("{{", "{{."), ("{{", "{{now}}{{"), ("{{", "{{.}}{{"), ("{{", "{{#input.x}}{{"), ("{{", "{{{{"),
        ("}}", "}}}}"), ("{{", "{{ \u{0}"), ("{{", "{{attributes}}{{"), ("{{", "{{input..x}}{{"),
    ]

    mutating func mutateTemplate(_ text: String) -> String {
        var candidates: [(Range<String.Index>, String)] = []
        for (old, new) in Self.templateEdits {
            for range in ranges(of: old, in: text) { candidates.append((range, new)) }
        }
        guard !candidates.isEmpty else {
            let value = rng.pick(["\"{{\"", "\"{{#input.x}}\"", "\"{{input.eta}\"", "\"}}{{\"", "\"{{uppercased(attributes.x}}\""])
            return replaceValue(text, with: value)
        }
        let (range, new) = rng.pick(candidates)
        var text = text
        text.replaceSubrange(range, with: new)
        return text
    }

    mutating func longString(_ text: String) -> String {
        let length = rng.pick([300, 4_097, 20_000, 200_000])
        let unit = rng.pick(["x", "é", "🍕", "{{attributes.merchantName}}", "ab ", "\\n"])
        let body = String(repeating: unit, count: max(1, length / unit.count))
        if rng.chance(0.2) {
            // A very long key.
            return editLines(text) { m, lines in
                guard let index = m.keyLine(in: lines) else { return }
                let line = lines[index]
                let indent = line.prefix { $0 == " " }
                lines.insert(String(indent) + String(repeating: "k", count: length) + ": 1", at: index)
            }
        }
        let value = rng.chance(0.5) ? "\"\(body)\"" : body
        return replaceValue(text, with: value)
    }

    mutating func deepNesting(_ text: String) -> String {
        let depth = rng.pick([50, 500, 999, 1_001, 5_000])
        let nested: String
        switch rng.below(5) {
        case 0: nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        case 1: nested = String(repeating: "{a: ", count: depth) + "1" + String(repeating: "}", count: depth)
        case 2: nested = String(repeating: "[", count: depth)  // never closed
        case 3: nested = "\"" + String(repeating: "{{#input.eta}}", count: depth) + String(repeating: "{{/input.eta}}", count: depth) + "\""
        default: nested = "\"" + String(repeating: "[", count: depth) + "int" + String(repeating: "]", count: depth) + "\""
        }
        if rng.chance(0.3) {
            // Block nesting: every `- ` on one line opens a sequence.
            return text + "\nextra:\n  " + String(repeating: "- ", count: min(depth, 2_000)) + "x\n"
        }
        return replaceValue(text, with: nested)
    }

    mutating func aliases(_ text: String) -> String {
        // Anchor a random value and refer to it elsewhere: legal YAML that puts a copy of a value
        // where a different shape may be expected.
        editLines(text) { m, lines in
            guard let source = m.keyLine(in: lines), let target = m.keyLine(in: lines) else { return }
            let name = m.rng.pick(["a", "x", "anchor", "a1"])
            let line = lines[source]
            if let colon = line.range(of: ": ") {
                lines[source] = String(line[..<colon.upperBound]) + "&\(name) " + String(line[colon.upperBound...])
            } else {
                lines[source] = line + " &\(name)"
            }
            let targetLine = lines[target]
            if m.rng.chance(0.2) {
                lines.insert(String(repeating: " ", count: Self.indentation(of: targetLine)) + "<<: *\(name)", at: target + 1)
            } else if let colon = targetLine.range(of: ": ") {
                lines[target] = String(targetLine[..<colon.upperBound]) + "*\(name)"
            } else {
                lines[target] = targetLine + " *\(name)"
            }
        }
    }

    mutating func aliasBomb(_ text: String) -> String {
        let levels = rng.int(3...10)
        let width = rng.int(2...10)
        var bomb = "lol0: &l0 [" + Array(repeating: "\"lol\"", count: width).joined(separator: ", ") + "]\n"
        for level in 1..<levels {
            bomb += "lol\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: width).joined(separator: ", ") + "]\n"
        }
        let top = "*l\(levels - 1)"
        switch rng.below(4) {
        case 0: return bomb + text  // unknown root keys holding the bomb
        case 1: return bomb + text + "\n? \(top)\n: boom\n"  // the bomb as a mapping key
        case 2: return bomb + text.replacingOccurrences(of: "\nstates:\n", with: "\nstates:\n  ? \(top)\n  : {final: true}\n")
        default: return bomb + replaceValue(text, with: top)
        }
    }

    mutating func lineEndings(_ text: String) -> String {
        switch rng.below(4) {
        case 0: return text.replacingOccurrences(of: "\n", with: "\r\n")
        case 1: return text.replacingOccurrences(of: "\n", with: "\r")
        case 2: return "\u{FEFF}" + text
        default: return text.replacingOccurrences(of: "\n", with: "\u{2028}")
        }
    }

    /// Rewrites a `key:` block header with its children as one `{…}` flow mapping (often wrongly).
    mutating func flowStyle(_ text: String) -> String {
        editLines(text) { m, lines in
            guard let index = m.keyLine(in: lines, where: { $0.hasSuffix(":") }) else { return }
            let indent = Self.indentation(of: lines[index])
            var end = index + 1
            var children: [String] = []
            while end < lines.count, Self.indentation(of: lines[end]) > indent, !lines[end].trimmingCharacters(in: .whitespaces).isEmpty {
                children.append(lines[end].trimmingCharacters(in: .whitespaces))
                end += 1
            }
            guard !children.isEmpty else { return }
            lines.replaceSubrange(index..<end, with: [lines[index] + " {" + children.joined(separator: ", ") + "}"])
        }
    }

    mutating func oddUnicode(_ text: String) -> String {
        let odd = ["\u{0}", "\u{1F}", "\u{7F}", "\u{9F}", "\u{200D}", "\u{2066}", "\u{FE0F}", "\u{1F9D1}\u{200D}\u{1F373}", "\u{E0041}",
                   "\u{D7FF}", "\u{FFFF}", "İ", "ß", "ﬁ", "\u{0130}"]
        let scalars = Array(text.unicodeScalars)
        guard !scalars.isEmpty else { return rng.pick(odd) }
        // Replace a letter of a key or value.
        let letters = scalars.indices.filter { scalars[$0].properties.isAlphabetic }
        guard !letters.isEmpty else { return text + rng.pick(odd) }
        let index = rng.pick(letters)
        var result = String.UnicodeScalarView(scalars[..<index])
        result.append(contentsOf: rng.pick(odd).unicodeScalars)
        result.append(contentsOf: scalars[(index + 1)...])
        return String(result)
    }
}

// MARK: - Generated workflows

/// Writes random workflows from a small grammar. Unmutated, most are valid: every state reachable
/// and able to finish, every required ContentState field set, templates naming declared variables.
struct WorkflowGenerator {
    var rng: SplitMix64

    indirect enum YAML {
        case scalar(String)
        case map([(String, YAML)])
        case list([YAML])
    }

    // MARK: Emitting YAML

    mutating func emit(_ node: YAML, indent: Int, flowProbability: Double) -> String {
        switch node {
        case .scalar(let text): return " " + text
        case .map(let entries) where entries.isEmpty: return " {}"
        case .list(let items) where items.isEmpty: return " []"
        case .map(let entries):
            if rng.chance(flowProbability) { return " " + flow(node) }
            let pad = String(repeating: " ", count: indent)
            return entries.map { key, value in "\n\(pad)\(key):" + emit(value, indent: indent + 2, flowProbability: flowProbability) }
                .joined()
        case .list(let items):
            if rng.chance(flowProbability) { return " " + flow(node) }
            let pad = String(repeating: " ", count: indent)
            return items.map { item in
                if case .map(let entries) = item, !entries.isEmpty, !rng.chance(flowProbability) {
                    // `- key: value` with the rest of the mapping indented under the first key.
                    var lines: [String] = []
                    for (offset, (key, value)) in entries.enumerated() {
                        lines.append("\n\(pad)\(offset == 0 ? "- " : "  ")\(key):" + emit(value, indent: indent + 4, flowProbability: flowProbability))
                    }
                    return lines.joined()
                }
                return "\n\(pad)-" + emit(item, indent: indent + 2, flowProbability: 1)
            }.joined()
        }
    }

    func flow(_ node: YAML) -> String {
        switch node {
        case .scalar(let text): return text
        case .map(let entries): return "{" + entries.map { "\($0.0): \(flow($0.1))" }.joined(separator: ", ") + "}"
        case .list(let items): return "[" + items.map(flow).joined(separator: ", ") + "]"
        }
    }

    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    // MARK: The workflow

    static let words = ["open", "ready", "cooking", "packed", "waiting", "moving", "paused", "checked", "queued", "arrived",
                        "picked", "shipped", "held", "review", "approved"]
    static let fieldNames = ["message", "eta", "driverName", "count", "price", "urgent", "tags", "level", "note", "progress", "seats"]
    static let texts = ["Hello", "Your order", "On its way", "Ça arrive", "Fertig 🍕", "Готово", "Wait \\\"here\\\"", "50% done", "a: b",
                        "# not a comment", "x"]

    mutating func fieldType(allowArray: Bool = true) -> FieldType {
        var type: FieldType
        switch rng.below(allowArray ? 8 : 7) {
        case 0, 1: type = .string(maxLength: rng.chance(0.8) ? rng.int(1...60) : nil)
        case 2: type = .int
        case 3: type = .double
        case 4: type = .bool
        case 5: type = .date
        case 6: type = .enumeration(Array(Self.words.shuffled(using: &rng).prefix(rng.int(1...4))))
        default: type = .array(fieldType(allowArray: false).nonOptional, maxCount: rng.int(1...4))
        }
        if rng.chance(0.35) { type = .optional(type) }
        return type
    }

    func typeText(_ type: FieldType) -> String { Self.quoted(type.spelling) }

    /// A literal that fits `type`.
    mutating func literal(_ type: FieldType) -> String {
        switch type {
        case .optional(let wrapped): return rng.chance(0.2) ? rng.pick(["null", "~"]) : literal(wrapped)
        case .string(let maxLength):
            let text = String(rng.pick(Self.texts).prefix(maxLength ?? 200))
            return text.contains("\\") ? "\"\(text)\"" : Self.quoted(text)
        case .int: return String(rng.int(-1000...100_000))
        case .double: return rng.pick(["0.5", "1", "-2.25", "1.0e+3", "3.14159"])
        case .bool: return rng.pick(["true", "false"])
        case .date: return rng.pick(["now", "+15m", "-1h", "\"+1h30m\"", "2025-05-01T12:00:00Z", "\"2025-05-01T12:00:00+02:00\""])
        case .enumeration(let values): return rng.pick(values)
        case .array(let element, let maxCount):
            return "[" + (0..<rng.int(0...maxCount)).map { _ in literal(element) }.joined(separator: ", ") + "]"
        case .structure:
            // The generator declares no struct types: a struct takes a template, not a literal.
            preconditionFailure("fuzzed schemas have no struct types")
        }
    }

    struct Plan {
        var attributes: [FieldSpec] = []
        var content: [FieldSpec] = []
        var states: [String] = []
        var initial = ""
        var finals: [String] = []
        var startInputs: [FieldSpec] = []
    }

    /// A value for a content field: a literal, or a template over the variables in scope.
    mutating func value(for field: FieldSpec, plan: Plan, inputs: [FieldSpec], previous: Bool) -> String {
        let stringAttributes = plan.attributes.filter { if case .string = $0.type.nonOptional { true } else { false } }
        if case .string(let maxLength) = field.type.nonOptional, maxLength ?? 100 >= 40, rng.chance(0.5) {
            var parts = ["Now"]
            if let attribute = stringAttributes.first, rng.chance(0.7) {
                parts.append(rng.chance(0.2) ? "{{uppercased(attributes.\(attribute.name))}}" : "{{attributes.\(attribute.name)}}")
            }
            if let input = inputs.randomElement(using: &rng), rng.chance(0.6) {
                parts.append(input.type.isOptional
                    ? "{{#input.\(input.name)}}({{input.\(input.name)}}){{/input.\(input.name)}}{{^input.\(input.name)}}-{{/input.\(input.name)}}"
                    : "{{input.\(input.name)}}")
            }
            if previous, let other = plan.content.randomElement(using: &rng), rng.chance(0.4) {
                parts.append("{{previous.\(other.name)}}")
            }
            return Self.quoted(parts.joined(separator: " "))
        }
        if let input = inputs.first(where: { $0.type.nonOptional == field.type.nonOptional && (field.type.isOptional || !$0.type.isOptional) }),
            rng.chance(0.7)
        {
            return Self.quoted("{{input.\(input.name)}}")
        }
        if previous, field.type.isOptional, rng.chance(0.3) {
            return Self.quoted("{{previous.\(field.name)}}")
        }
        return literal(field.type)
    }

    mutating func alert(plan: Plan, inputs: [FieldSpec]) -> YAML {
        var body = "Order"
        if let attribute = plan.attributes.first, rng.chance(0.5) { body += " {{attributes.\(attribute.name)}}" }
        if let input = inputs.first, rng.chance(0.5) { body += " ({{input.\(input.name)}})" }
        var entries: [(String, YAML)] = [("title", .scalar(Self.quoted(rng.pick(Self.texts)))), ("body", .scalar(Self.quoted(body)))]
        if rng.chance(0.3) {
            entries[0] = ("title", .map([("loc-key", .scalar("ORDER_TITLE")), ("loc-args", .list([.scalar(Self.quoted(body))]))]))
        }
        if rng.chance(0.4) { entries.append(("sound", .scalar("default"))) }
        return .map(entries)
    }

    mutating func schema(count: ClosedRange<Int>, names: [String]) -> [FieldSpec] {
        Array(names.shuffled(using: &rng).prefix(rng.int(count))).map { FieldSpec(name: $0, type: fieldType()) }
    }

    mutating func generate() -> String {
        var plan = Plan()
        plan.attributes = schema(count: 0...3, names: ["shop", "orderNumber", "city", "itemCount", "customer"])
        let stateCount = rng.int(2...7)
        let finalCount = rng.int(1...min(3, stateCount - 1))
        plan.states = Array(Self.words.shuffled(using: &rng).prefix(stateCount)).enumerated().map { rng.chance(0.3) ? "\($1)_\($0)" : $1 }
        plan.initial = plan.states[0]
        plan.finals = Array(plan.states.suffix(finalCount))
        let middle = Array(plan.states.dropFirst().dropLast(finalCount))
        let nonFinals = [plan.initial] + middle
        let status = FieldSpec(name: "status", type: .enumeration(plan.states.map { "is_\($0)" }))
        plan.content = [status] + schema(count: 0...4, names: Self.fieldNames)
        let pushToStart = rng.chance(0.5)
        if rng.chance(0.3) { plan.startInputs = schema(count: 1...2, names: ["eta", "note", "hint"]) }

        var root: [(String, YAML)] = []
        root.append(("name", .scalar(rng.pick(["gen", "generated-flow", "g_1", "Order-Flow"]))))
        if rng.chance(0.5) { root.append(("description", .scalar(Self.quoted(rng.pick(Self.texts))))) }
        var activity: [(String, YAML)] = [("attributes-type", .scalar(rng.pick(["GenAttributes", "OrderAttributes", "X"])))]
        if !plan.attributes.isEmpty || rng.chance(0.3) {
            activity.append(("attributes", .map(plan.attributes.map { ($0.name, .scalar(typeText($0.type))) })))
        }
        activity.append(("content-state", .map(plan.content.map { ($0.name, .scalar(typeText($0.type))) })))
        root.append(("activity", .map(activity)))

        // Lifecycle.
        var lifecycle: [(String, YAML)] = [("start", .scalar(pushToStart ? "push-to-start" : "app"))]
        if !plan.startInputs.isEmpty {
            lifecycle.append(("start-input", .map(plan.startInputs.map { ($0.name, .scalar(typeText($0.type))) })))
        }
        let restart = rng.chance(0.2)
        if pushToStart || restart || rng.chance(0.3) { lifecycle.append(("start-alert", alert(plan: plan, inputs: plan.startInputs))) }
        if rng.chance(0.6) {
            var end: [(String, YAML)] = []
            for final in plan.finals where rng.chance(0.7) {
                end.append((final, rng.chance(0.2) ? .map([("after", .scalar("10m"))]) : .scalar(rng.pick(["immediate", "default", "after 30m", "after 4h"]))))
            }
            lifecycle.append(("end", .map(end)))
        }
        if restart || rng.chance(0.3) { lifecycle.append(("on-time-limit", .scalar(restart ? "restart" : "end"))) }
        root.append(("lifecycle", .map(lifecycle)))

        // Transitions: a chain through every state, more into the other finals, some extras.
        struct Transition {
            var from: [String]
            var fromAny = false
            var to: String
            var inputs: [FieldSpec] = []
        }
        var transitions: [Transition] = []
        var pairs = Set<String>()
        func add(_ transition: Transition, expandedFrom: [String]) {
            guard expandedFrom.allSatisfy({ !pairs.contains("\($0)->\(transition.to)") }) else { return }
            for from in expandedFrom { pairs.insert("\(from)->\(transition.to)") }
            transitions.append(transition)
        }
        let chain = nonFinals + [plan.finals[0]]
        for (from, to) in zip(chain, chain.dropFirst()) { add(Transition(from: [from], to: to), expandedFrom: [from]) }
        for final in plan.finals.dropFirst() {
            if rng.chance(0.4) {
                add(Transition(from: [], fromAny: true, to: final), expandedFrom: nonFinals)
            } else {
                let from = rng.pick(nonFinals)
                add(Transition(from: [from], to: final), expandedFrom: [from])
            }
        }
        for _ in 0..<rng.int(0...3) {
            let to = rng.pick(plan.states.dropFirst().map { $0 })
            let sources = Array(nonFinals.shuffled(using: &rng).prefix(rng.int(1...2)))
            add(Transition(from: sources, to: to), expandedFrom: sources)
        }
        // Reachability: states not on the chain are reached by the extras, or by `from: any`.
        for index in transitions.indices where rng.chance(0.4) {
            transitions[index].inputs = schema(count: 1...2, names: ["eta", "driver", "reason", "amount", "items"])
        }

        // States.
        var states: [(String, YAML)] = []
        for name in plan.states {
            let isInitial = name == plan.initial
            let isFinal = plan.finals.contains(name)
            var entries: [(String, YAML)] = []
            if isInitial { entries.append(("initial", .scalar("true"))) }
            if isFinal { entries.append(("final", .scalar("true"))) }
            if rng.chance(0.3) { entries.append(("description", .scalar(Self.quoted("State \(name)")))) }
            var content: [(String, YAML)] = [("status", .scalar("is_\(name)"))]
            let scopeInputs = isInitial ? plan.startInputs : []
            for field in plan.content.dropFirst() where !field.type.isOptional || rng.chance(0.5) {
                // State defaults use only attributes and literals: every transition into the state must be able to use them.
                content.append((field.name, .scalar(value(for: field, plan: plan, inputs: scopeInputs, previous: false))))
            }
            entries.append(("content", .map(content.shuffled(using: &rng))))
            if rng.chance(0.3) { entries.append(("alert", alert(plan: plan, inputs: scopeInputs))) }
            if !isFinal, rng.chance(0.2) { entries.append(("stale-after", .scalar(rng.pick(["30m", "1h", "90s", "1d"])))) }
            if rng.chance(0.2) { entries.append(("relevance", .scalar(rng.pick(["50", "100", "0.5", "1.0e+2"])))) }
            if rng.chance(0.15) { entries.append(("priority", .scalar(rng.pick(["5", "10"])))) }
            states.append((name, .map(entries)))
        }
        let statesNode = YAML.map(states)

        var transitionNodes: [YAML] = []
        var events = 0
        for transition in transitions {
            var entries: [(String, YAML)] = []
            if transition.fromAny {
                entries.append(("from", .scalar("any")))
            } else if transition.from.count == 1, rng.chance(0.8) {
                entries.append(("from", .scalar(transition.from[0])))
            } else {
                entries.append(("from", .list(transition.from.map { .scalar($0) })))
            }
            entries.append(("to", .scalar(transition.to)))
            if rng.chance(0.6) {
                events += 1
                entries.append(("event", .scalar("do_\(events)")))
            }
            if !transition.inputs.isEmpty {
                entries.append(("input", .map(transition.inputs.map { ($0.name, .scalar(typeText($0.type))) })))
            }
            if rng.chance(0.5) {
                var content: [(String, YAML)] = []
                for field in plan.content.dropFirst() where rng.chance(0.5) {
                    content.append((field.name, .scalar(value(for: field, plan: plan, inputs: transition.inputs, previous: true))))
                }
                entries.append(("content", .map(content)))
            }
            switch rng.below(5) {
            case 0: entries.append(("alert", alert(plan: plan, inputs: transition.inputs)))
            case 1: entries.append(("alert", .scalar(rng.pick(["none", "false"]))))
            default: break
            }
            if rng.chance(0.15) { entries.append(("priority", .scalar(rng.pick(["5", "10"])))) }
            if rng.chance(0.15) { entries.append(("relevance", .scalar(rng.pick(["25", "75.5"])))) }
            transitionNodes.append(.map(rng.chance(0.2) ? entries.shuffled(using: &rng) : entries))
        }

        // Timers: mark-stale anywhere not final; go-to only along a transition without required input.
        var timers: [YAML] = []
        for state in nonFinals where rng.chance(0.3) {
            if rng.chance(0.5) {
                timers.append(.map([("in", .scalar(state)), ("after", .scalar(rng.pick(["10m", "1h30m", "45s"]))), ("mark-stale", .scalar("true"))]))
            } else if let transition = transitions.first(where: {
                ($0.fromAny ? $0.to != state : $0.from.contains(state)) && $0.inputs.allSatisfy(\.type.isOptional)
            }) {
                timers.append(.map([("in", .scalar(state)), ("after", .scalar("45m")), ("go-to", .scalar(transition.to))]))
            }
        }

        // Sections in a random order, as people write them.
        var sections: [(String, YAML)] = [("states", statesNode), ("transitions", .list(transitionNodes))]
        if !timers.isEmpty { sections.append(("timers", .list(timers))) }
        root += sections
        if rng.chance(0.3) { root.shuffle(using: &rng) }

        let flowProbability = rng.pick([0.0, 0.2, 0.5])
        var text = rng.chance(0.3) ? "# generated\n" : ""
        for (key, value) in root {
            text += "\(key):" + emit(value, indent: 2, flowProbability: flowProbability) + "\n"
            if rng.chance(0.3) { text += "\n" }
        }
        return text
    }
}

extension SplitMix64: RandomNumberGenerator {}

// MARK: - Hand-written hostile documents

/// Documents aimed at the known ways YAML loaders fall over: alias bombs, deep nesting, huge
/// sizes and numbers, odd encodings. Always run, before the random ones.
enum AdversarialCorpus {
    static func documents(bases: [(String, String)]) -> [FuzzDocument] {
        let food = bases[0].1
        var documents: [FuzzDocument] = []
        func add(_ name: String, _ yaml: String) { documents.append(FuzzDocument(name: "adversarial: \(name)", yaml: yaml)) }
        func replacing(_ old: String, _ new: String, in text: String = food) -> String {
            precondition(text.contains(old), "`\(old)` is not in the base document")
            return text.replacingOccurrences(of: old, with: new)
        }

        // "Billion laughs": 9 levels of 9 aliases each name 9^9 (387 million) strings in ~1 KB.
        func bomb(levels: Int = 9, width: Int = 9, flow: Bool = true) -> String {
            var text = "lol0: &l0 [" + Array(repeating: "\"lol\"", count: width).joined(separator: ", ") + "]\n"
            for level in 1..<levels {
                if flow {
                    text += "lol\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: width).joined(separator: ", ") + "]\n"
                } else {
                    text += "lol\(level): &l\(level)\n" + String(repeating: "  - *l\(level - 1)\n", count: width)
                }
            }
            return text
        }
        add("billion laughs under an unknown key", bomb() + food)
        add("billion laughs in block style", bomb(flow: false) + food)
        add("billion laughs as a mapping key", bomb() + food + "\n? *l8\n: boom\n")
        add("billion laughs as a flow mapping key", bomb() + "x: {*l8 : 1}\n" + food)
        add("billion laughs as a state", replacing("\nstates:\n", "\nstates:\n  ? *l8\n  : {final: true}\n", in: bomb() + food))
        add("billion laughs as a content value", replacing("      status: received\n", "      status: *l8\n", in: bomb() + food))
        add("billion laughs as the transitions", replacing("\ntransitions:\n", "\ntransitions: *l8\nunused:\n", in: bomb() + food))
        var maps = "m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}\n"
        for level in 1..<9 {
            maps += "m\(level): &m\(level) {" + "abcdefgh".map { "\($0): *m\(level - 1)" }.joined(separator: ", ") + "}\n"
        }
        add("mapping bomb as a key", maps + "? *m8\n: 1\n" + food)
        add("mapping bomb as duplicate keys", maps + "x: {? *m8 : 1, ? *m8 : 2}\n" + food)
        add("merge-key bomb", maps + "merged:\n  <<: [*m8, *m7, *m6]\n" + food)
        add("small legitimate aliases", replacing("    alert:\n      title: \"Order {{attributes.orderNumber}} is ready\"",
                                                  "    alert: &readyAlert\n      title: \"Order {{attributes.orderNumber}} is ready\""))
        add("undefined alias", food + "\nextra: *nowhere\n")
        add("alias before its anchor", "a: *b\nb: &b 1\n" + food)
        add("anchor on an alias", food + "\nx: &a 1\ny: &b *a\n")

        // Nesting. libyaml refuses more than 1000 levels; below that Yams composes recursively.
        for depth in [100, 999, 1_000, 1_001, 10_000] {
            add("flow sequences \(depth) deep", "x: " + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "\n" + food)
            add("flow mappings \(depth) deep", "x: " + String(repeating: "{a: ", count: depth) + "1" + String(repeating: "}", count: depth) + "\n" + food)
        }
        add("unclosed flow sequences", "x: " + String(repeating: "[", count: 100_000) + "\n" + food)
        for depth in [500, 999, 2_000] {
            add("block sequences \(depth) deep on one line", food + "\nx:\n  " + String(repeating: "- ", count: depth) + "x\n")
            add("block mappings \(depth) deep", food + "\nx:\n" + (1...depth).map { String(repeating: " ", count: $0) + "a:" }.joined(separator: "\n") + " 1\n")
        }
        for depth in [100, 1_000, 20_000] {
            let sections = String(repeating: "{{#input.eta}}", count: depth) + "x" + String(repeating: "{{/input.eta}}", count: depth)
            add("template sections \(depth) deep", replacing("      message: \"{{attributes.merchantName}} received your order.\"",
                                                             "      message: \"\(sections)\""))
            add("unclosed template sections \(depth) deep", replacing("      message: \"{{attributes.merchantName}} received your order.\"",
                                                                      "      message: \"\(String(repeating: "{{#input.eta}}", count: depth))\""))
            add("array types \(depth) deep", replacing("    message: string(120)",
                                                       "    message: \"\(String(repeating: "[", count: depth))int\(String(repeating: "]", count: depth))\""))
            add("unclosed array types \(depth) deep", replacing("    message: string(120)", "    message: \"\(String(repeating: "[", count: depth))\""))
        }

        // Size.
        add("1 MB value", replacing("Your order is ready.", String(repeating: "ready ", count: 180_000)))
        add("1 MB template", replacing("Your order is ready.", String(repeating: "{{attributes.merchantName}}", count: 40_000)))
        add("100k-character key", replacing("  ready:\n", "  \(String(repeating: "r", count: 100_000)):\n"))
        add("100k-character unknown key", replacing("name: food-order", "nmae\(String(repeating: "e", count: 100_000)): food-order"))
        add("100k-character enum value and a near miss", replacing(
            "    status: enum(received, preparing, ready, outForDelivery, delivered, pickedUp, cancelled)",
            "    status: enum(received, preparing, ready, outForDelivery, delivered, pickedUp, cancelled, \(String(repeating: "v", count: 100_000)))",
            in: replacing("      status: ready\n", "      status: \(String(repeating: "v", count: 99_999))w\n")))
        add("100k-character state name typo", replacing("    to: in_progress\n", "    to: \(String(repeating: "in_progress", count: 10_000))x\n"))
        add("10k unknown keys", replacing("  ready:\n    description:", "  ready:\n" + (0..<10_000).map { "    k\($0): 1\n" }.joined() + "    description:"))
        add("10k unknown states in transitions", food + (0..<10_000).map { "  - {from: s\($0), to: t\($0)}\n" }.joined())
        // Before validation was linear, 5,000 states in a chain took 27 s or more.
        add("3k states in a chain", longChain(states: 3_000))
        add("1k states reached by any", anyFan(states: 1_000))
        add("3k duplicate transitions", food + String(repeating: "  - {from: received, to: in_progress}\n", count: 3_000))

        // Numbers.
        for number in ["9223372036854775807", "9223372036854775806", "4611686018427387904", "99999999999999999999", "2147483648"] {
            add("string(\(number)) in the ContentState", replacing("    message: string(120)", "    message: string(\(number))"))
            add("string(\(number)) attribute of a push-to-start", replacing("    merchantName: string(40)", "    merchantName: string(\(number))"))
            add("array of \(number) elements", replacing("    driverName: {type: string(40)?, carry-over: true}", "    driverName: \"[string(40); \(number)]?\""))
            add("array of \(number) elements in an input", replacing("    input: {reason: string(80)?}", "    input: {reason: string(80)?, all: \"[string; \(number)]\"}"))
            add("relevance \(number)", replacing("relevance: 50", "relevance: \(number)"))
            add("after \(number)d", replacing("after: 45m", "after: \(number)d"))
            add("+\(number)s as a date", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"+\(number)s\"\n  in_progress:"))
        }
        add("the largest date offset, read back through previous", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"+2562047788015215h\"\n  in_progress:"))
        add("the earliest date offset, read back through previous", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"-2562047788015215h\"\n  in_progress:"))
        add("year 9999 and year 0", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"0000-01-01T00:00:00Z\"\n  in_progress:"))
        add("sections over arrays nested 25 deep", replacing(
            "    input: {reason: string(80)?}",
            "    input: {reason: string(80)?, all: \"[string(1); 10]\"}",
            in: replacing("      message: \"{{#input.reason}}Cancelled: {{input.reason}}{{/input.reason}}{{^input.reason}}Your order was cancelled.{{/input.reason}}\"",
                          "      message: \"\(String(repeating: "{{#input.all}}", count: 25))x\(String(repeating: "{{/input.all}}", count: 25))\"")))
        for value in ["1e308", "-1e308", "1.0e+400", ".inf", "-.inf", ".nan", "-0.0", "0x7fffffffffffffff", "0o777", "1_000"] {
            add("relevance \(value)", replacing("relevance: 50", "relevance: \(value)"))
            add("itemCount literal \(value)", replacing("      status: received\n", "      status: received\n      driverName: \(value)\n"))
        }

        // Encodings and odd streams.
        add("empty", "")
        add("only whitespace", " \n\t\n  ")
        add("only a comment", "# nothing\n")
        add("only ---", "---\n")
        add("only ...", "...\n")
        add("two documents", food + "\n---\n" + food)
        add("YAML 1.1 directive", "%YAML 1.1\n---\n" + food)
        add("YAML 2.0 directive", "%YAML 2.0\n---\n" + food)
        add("unknown directive", "%FOO bar\n---\n" + food)
        add("NUL first", "\0" + food)
        add("NUL in a value", replacing("Your order is ready.", "Your order\0is ready."))
        add("NUL in a comment", replacing("# Format reference", "# Format\0reference"))
        add("NUL after a multi-byte line", replacing("Your order is ready.", "Ça été prêt 🍕.\"\n  x: \"\0"))
        add("control character on line 40", replacing("Your order is ready.", "Your order is\u{7} ready."))
        add("BOM", "\u{FEFF}" + food)
        add("BOM in the middle", replacing("states:\n", "\u{FEFF}states:\n"))
        add("CRLF", food.replacingOccurrences(of: "\n", with: "\r\n"))
        add("CR only", food.replacingOccurrences(of: "\n", with: "\r"))
        add("line separators", food.replacingOccurrences(of: "\n", with: "\u{2028}"))
        add("next-line characters", food.replacingOccurrences(of: "\n", with: "\u{85}"))
        add("tabs for indentation", food.replacingOccurrences(of: "\n    ", with: "\n\t\t"))
        add("a tab after a key", replacing("name: food-order", "name:\tfood-order"))
        add("right-to-left override in a name", replacing("name: food-order", "name: food\u{202E}redro"))
        add("emoji state", replacing("  ready:\n", "  🍕:\n"))
        add("combining characters in keys", replacing("  ready:\n", "  re\u{301}ady:\n"))
        add("surrogate escape", replacing("Your order is ready.", "\\uD83D"))
        add("escaped NUL", replacing("Your order is ready.", "\\0"))

        // Tags.
        for tag in ["!!binary", "!!timestamp", "!!set", "!!omap", "!!python/object:os.system", "!foo", "!<tag:example.com,2000:x>", "!!str", "!!int", "!!null", "!!bool", "!!float", "!!map", "!!seq"] {
            add("\(tag) on a value", replacing("name: food-order", "name: \(tag) food-order"))
            add("\(tag) on a key", replacing("name: food-order", "\(tag) name: food-order"))
        }
        add("tagged root", "!!seq\n" + food)
        add("root is a list", "- " + food.replacingOccurrences(of: "\n", with: "\n  "))
        add("root is a scalar", "just text\n")
        add("root is a number", "42\n")
        add("root is null", "~\n")
        return documents
    }

    /// `states` in a chain s0 -> s1 -> … -> done: large but valid.
    static func longChain(states count: Int) -> String {
        var text = """
            name: long
            activity:
              attributes-type: LongAttributes
              content-state: {status: string(20)}
            lifecycle: {start: app}
            states:

            """
        for index in 0..<count {
            text += "  s\(index): {\(index == 0 ? "initial: true, " : "")content: {status: s\(index)}}\n"
        }
        text += "  done: {final: true, content: {status: done}}\ntransitions:\n"
        for index in 0..<count {
            text += "  - {from: s\(index), to: \(index == count - 1 ? "done" : "s\(index + 1)"), event: e\(index)}\n"
        }
        return text
    }

    /// Many states, each reached from the first, all leaving through one `from: any`.
    static func anyFan(states count: Int) -> String {
        var text = """
            name: fan
            activity:
              attributes-type: FanAttributes
              content-state: {status: string(20)}
            lifecycle: {start: app}
            states:
              start: {initial: true, content: {status: start}}
              done: {final: true, content: {status: done}}

            """
        for index in 0..<count { text += "  s\(index): {content: {status: s\(index)}}\n" }
        text += "transitions:\n  - {from: any, to: done}\n"
        for index in 0..<count { text += "  - {from: start, to: s\(index)}\n" }
        return text
    }
}
