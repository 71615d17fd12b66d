import Foundation
import WorkflowKit

#if canImport(Glibc)
import Glibc
#endif

// Checking one document: loading it within a time budget, every diagnostic pointing into it,
// and what it accepted put through `AcceptedWorkflowCheck`.

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
