import ArgumentParser
import ConsoleOutput
import Foundation
import LocalPostgres
import Logging
import OrderFlow
import OrderFlowHTTP
import WorkflowKit

/// The process's exit codes (from BSD's sysexits), documented in `orderflow --help`.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    case success = 0
    /// Wrong command line: unknown option, missing argument, malformed value or database URL.
    case usage = 64
    /// The input is wrong: a workflow file, an attribute or input value.
    case invalidInput = 65
    /// The order, workflow, state, delivery or file does not exist.
    case notFound = 66
    /// A concurrent change, an idempotency key reused for something else, or it exists already.
    case conflict = 67
    /// The workflow does not allow the transition from the order's state.
    case invalidTransition = 68
    /// The database cannot be reached, has no schema, or the embedded PostgreSQL is missing.
    case databaseUnavailable = 69
    /// A bug or an unexpected condition.
    case internalError = 70

    public var exitCode: ExitCode { ExitCode(rawValue) }

    /// The table shown in the root command's help.
    public static let helpTable = """
          0  ok
         64  usage: unknown command or option, missing or malformed argument
         65  invalid input: broken workflow file, wrongly typed attribute or input
         66  not found: no such order, workflow, state, delivery or file
         67  conflict: changed concurrently, idempotency key reused, already exists
         68  invalid transition: not allowed from the order's state
         69  database unavailable: cannot connect, no schema, no PostgreSQL
         70  internal error
        """
}

/// An error the CLI itself decides: what is wrong, what to do, and the exit status.
public struct CLIError: Error, Sendable, CustomStringConvertible {
    public var status: ExitStatus
    public var problem: String
    public var remedy: String?

    public init(_ status: ExitStatus, _ problem: String, remedy: String? = nil) {
        self.status = status
        self.problem = problem
        self.remedy = remedy
    }

    public var description: String { remedy.map { "\(problem); \($0)" } ?? problem }
}

/// Turns any error into the lines a person reads on stderr and the exit status.
public enum FailureReport {
    public struct Report: Sendable, Equatable {
        public var status: ExitStatus
        /// Usually one line; a workflow file with several problems gives one per problem.
        public var lines: [String]
    }

    /// Prints `orderflow: …` on stderr and returns the status to exit with.
    public static func print(_ error: any Error) -> ExitStatus {
        let report = make(error)
        for line in report.lines { Terminal.writeError(line, level: .error) }
        return report.status
    }

    public static func make(_ error: any Error) -> Report {
        let (status, message) = classify(error)
        if let validation = error as? WorkflowValidationError, !validation.diagnostics.isEmpty {
            // Compiler-style diagnostics, which editors link, then a summary line.
            let count = validation.diagnostics.count
            let file = validation.diagnostics[0].file
            let summary = "orderflow: \(file) has \(Formatting.count(count, "problem")); fix \(count == 1 ? "it" : "them") and run again"
            return Report(status: status, lines: validation.diagnostics.map { Formatting.escaped($0.description) } + [summary])
        }
        // libpq's messages span lines ("…failed: Connection refused\n\tIs the server running…").
        let oneLine = message.split(whereSeparator: { $0 == "\n" || $0 == "\t" }).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: " ")
        // Messages quote values (the server's own may too): shown as text, never acted on.
        return Report(status: status, lines: ["orderflow: \(Formatting.escaped(oneLine))"])
    }

    static func classify(_ error: any Error) -> (ExitStatus, String) {
        // The engine's own errors, and those of the layers below it in the engine's words.
        if let error = OrderFlowError.translating(error) {
            return (status(for: error.code), error.commandLineSentence)
        }
        switch error {
        case let error as CLIError:
            return (error.status, error.description)
        case let error as WorkflowValidationError:
            return (.invalidInput, error.description)
        case let error as TransitionResolutionError:
            switch error.code {
            case .unknownState: return (.notFound, error.message)
            case .ambiguous: return (.usage, error.message)
            case .finalState, .notAllowed: return (.invalidTransition, error.message)
            }
        case let error as LocalPostgres.Error:
            return (.databaseUnavailable, error.description)
        case let error as OrderFlowHTTPListenError:
            return (.usage, error.description)
        case let error as MetricsListenError:
            return (.usage, "\(error.description) (--metrics-port)")
        case let error as CocoaError where error.code == .fileReadNoSuchFile || error.code == .fileNoSuchFile:
            let path = (error.userInfo[NSFilePathErrorKey] as? String) ?? (error.userInfo[NSURLErrorKey] as? URL)?.path ?? "the file"
            return (.notFound, "cannot read \(path): no such file; check the path")
        case let error as CocoaError where error.code == .fileReadNoPermission:
            let path = (error.userInfo[NSFilePathErrorKey] as? String) ?? "the file"
            return (.notFound, "cannot read \(path): permission denied")
        case let error as CocoaError where error.code == .fileReadInapplicableStringEncoding || error.code == .fileReadCorruptFile:
            let path = (error.userInfo[NSFilePathErrorKey] as? String) ?? "the file"
            return (.invalidInput, "cannot read \(path): it is not UTF-8 text")
        case is CancellationError:
            return (.internalError, "interrupted")
        default:
            let text = String(describing: error)
            return (.internalError, "unexpected error: \(text); please report it with the command you ran")
        }
    }

    static func status(for code: OrderFlowError.Code) -> ExitStatus {
        switch code {
        case .notFound: return .notFound
        case .alreadyExists, .conflict: return .conflict
        case .invalidTransition: return .invalidTransition
        case .invalidInput, .forbidden: return .invalidInput
        case .databaseUnavailable, .busy: return .databaseUnavailable
        case .invalidConfiguration: return .usage
        case .unexpected: return .internalError
        }
    }
}
