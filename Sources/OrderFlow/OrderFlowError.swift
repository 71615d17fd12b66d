import PGKit
import WorkflowKit

/// An error from the engine: a code, a sentence saying what went wrong, the facts behind it
/// (the order, its state, the candidates) and, when there is one, a ``Remedy``. The engine
/// names no command and no route: each door words the remedy its own way (the CLI names a
/// command, HTTP a route), after ``message``.
public struct OrderFlowError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The order, workflow, state or delivery does not exist.
        case notFound
        /// An order with this id exists already (and the idempotency key does not match).
        case alreadyExists
        /// The order changed while the request ran, or is not in the state the caller expected.
        case conflict
        /// The workflow does not allow this transition from the order's current state.
        case invalidTransition
        /// A value the caller gave is not acceptable (attributes, input, token, ambiguous name).
        case invalidInput
        /// The caller's credential may not make this call, or reach this device or order
        /// (an order's client secret used on another customer's device). Nothing changed.
        case forbidden
        /// The database cannot be reached now, or has no (current) schema; the message says which.
        case databaseUnavailable
        /// The database is fine but the engine is at capacity: every connection of the pool in
        /// use and more callers waiting than it can serve in time. Nothing was written; retry
        /// after `retryAfter` (HTTP 503 with `Retry-After`), or raise the pool size.
        case busy
        /// A setting cannot be used: a malformed database URL, an unknown connection option.
        case invalidConfiguration
        /// Something no rule foresaw: a bug, or a database error of a kind the engine does not
        /// expect. The message says what failed.
        case unexpected
    }

    /// What the caller can do about an error, for each door to word. Nil when the message
    /// says it already (the caller's own value to correct) or there is nothing to do.
    public enum Remedy: Sendable, Hashable {
        /// An order that does not exist: create it first, or check the id among the orders.
        case createOrFindOrder
        /// A pinned workflow version that does not exist: see the workflows' versions.
        case listWorkflowVersions
        /// No workflow is stored yet: apply one.
        case applyWorkflow
        /// A merchant that does not exist, where listing the merchants helps.
        case listMerchants
        /// A merchant that exists already: the merchants' list shows it.
        case findMerchant
        /// A merchant that does not exist, where adding it is the next step.
        case addMerchant(String)
        /// An API key the merchant does not have: list its keys.
        case listAPIKeys(merchantID: String)
        /// A delivery that is no dead letter: list the dead letters.
        case listDeadLetters
        /// A delivery that does not exist: the dead letters' list has the ids.
        case findDeadLetterIDs
        /// The database has no (current) OrderFlow schema: migrate it.
        case migrate
        /// The same data changed at the same time: doing it again is safe.
        case retry
    }

    public var code: Code
    /// What went wrong (and, where it is the caller's own value, how to correct it), in words
    /// that fit every door; the door adds its wording of ``remedy``.
    public var message: String
    /// What the caller can do, for the door to word; nil when ``message`` says it all.
    public var remedy: Remedy?
    /// The order the error is about, where there is one.
    public var orderID: String?
    /// The order's state when the error was decided, where it matters.
    public var currentState: String?
    /// States, events or names the caller may have meant.
    public var candidates: [String]
    /// When the engine was busy (`isBusy`): how long the work already queued should take, at
    /// the pool's recent pace — a `Retry-After` for an HTTP 503. Nil for every other error.
    public var retryAfter: Duration?
    /// The engine refused or gave up on the call because every pooled connection was in use
    /// (admission control, `PostgresError.Kind.poolBusy`, or the acquire timeout): nothing was
    /// written, the database is fine, and the same call may be retried shortly.
    public var isBusy = false

    public init(_ code: Code, _ message: String, remedy: Remedy? = nil, orderID: String? = nil,
                currentState: String? = nil, candidates: [String] = []) {
        self.code = code
        self.message = message
        self.remedy = remedy
        self.orderID = orderID
        self.currentState = currentState
        self.candidates = candidates
    }

    /// The message alone: a library's caller words the remedy (``remedy``) for its own users.
    public var description: String { message }

    /// The engine's reading of an error from a layer below it (PostgreSQL, workflow values and
    /// rendering), or nil when `error` is none of those. Callers above the engine (a CLI, an
    /// HTTP API) use it so that they need not know those layers' error types.
    public static func translating(_ error: any Error) -> OrderFlowError? {
        switch error {
        case let error as OrderFlowError:
            return error
        case let error as PostgresError:
            return translating(error)
        case let error as DataValidationError:
            return OrderFlowError(.invalidInput, error.description)
        case let error as RenderError:
            return OrderFlowError(.invalidInput, error.description)
        default:
            return nil
        }
    }

    static func translating(_ error: PostgresError) -> OrderFlowError {
        var text = error.message
        if let hint = error.hint, !hint.isEmpty { text += "; \(hint)" }
        switch error {
        case _ where error.kind == .connectionFailed && refusal(in: error.message) != nil:
            // The server answered and said no: retrying the same settings cannot help.
            return OrderFlowError(.databaseUnavailable, "\(error.message); \(refusal(in: error.message)!)")
        case _ where error.isConnectionLoss:
            // One sentence for every way a connection is cut: where, libpq's or the server's
            // reason, what to do. (A hint like "the server may have restarted" says no more.)
            let lost = "lost the connection to PostgreSQL at \(error.context ?? "the server")"
            let reason = error.message.hasPrefix("lost the connection") ? error.message : "\(lost): \(error.message)"
            return OrderFlowError(.databaseUnavailable, "\(reason); retry when it is back")
        case _ where error.isBusy:
            // Not "unavailable": the database answers, the pool is full. Said as the pool said it.
            var busy = OrderFlowError(.busy, error.message)
            busy.isBusy = true
            busy.retryAfter = error.retryAfter ?? .seconds(1)
            return busy
        case _ where error.isConnectionProblem:
            let advice = (error.hint.flatMap { $0.isEmpty ? nil : $0 + "; " } ?? "") + "retry when it is back"
            return OrderFlowError(.databaseUnavailable, "the database is unavailable (\(error.message)); \(advice)")
        case _ where error.kind == .shutdown:
            return OrderFlowError(.databaseUnavailable, text)
        case _ where error.kind == .invalidConfiguration:
            return OrderFlowError(.invalidConfiguration, text)
        // 42P01 undefined_table, 3F000 invalid_schema_name: the schema was never migrated.
        case _ where error.sqlState == "42P01" || error.sqlState == "3F000":
            return OrderFlowError(.databaseUnavailable, "the database has no OrderFlow schema", remedy: .migrate)
        // The engine checks what callers give before writing; these are the database's own
        // refusals of a value, should one slip past: still the caller's input, not a crash.
        case _ where error.kind == .invalidParameter:
            let reason = error.message.range(of: ": ").map { String(error.message[$0.upperBound...]) } ?? error.message
            return OrderFlowError(.invalidInput, "a value given cannot be stored: \(reason); correct it and try again")
        case _ where error.sqlState?.hasPrefix("22") == true:
            return OrderFlowError(.invalidInput, "a value given cannot be stored: \(error.message); correct it and try again")
        case _ where error.sqlState == "54000":
            return OrderFlowError(.invalidInput, "a value given is too large to store; shorten it and try again")
        case _ where error.isSerializationFailure || error.isUniqueViolation:
            return OrderFlowError(.conflict, "\(error.message); someone changed the same data at the same time", remedy: .retry)
        default:
            return OrderFlowError(.unexpected, "database error: \(error.description)")
        }
    }

    /// What to do when PostgreSQL refused the connection itself (libpq's words): the settings
    /// are wrong, not the moment.
    private static func refusal(in message: String) -> String? {
        if message.contains("password authentication failed") || message.contains("role \"") && message.contains("does not exist") {
            return "check the user name and password in the database URL; retrying with the same ones will not help"
        }
        if message.contains("no pg_hba.conf entry") {
            return "the server does not accept this user from this host (pg_hba.conf); ask its administrator, retrying will not help"
        }
        if message.contains("database \""), message.contains("does not exist") {
            return "create the database (createdb) or correct its name in the database URL"
        }
        return nil
    }

    /// Translates lower layers' errors into the engine's vocabulary; others pass through.
    static func wrap(_ error: any Error) -> any Error {
        translating(error) ?? error
    }
}

/// Runs `body`, translating errors with `OrderFlowError.wrap`.
func translatingErrors<T>(
    isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
) async throws -> T {
    do {
        return try await body()
    } catch {
        throw OrderFlowError.wrap(error)
    }
}
