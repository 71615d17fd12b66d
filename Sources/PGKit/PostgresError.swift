/// An error from the PostgreSQL layer: what went wrong, said for a person, with the server's
/// SQLSTATE, message and detail when the server produced it.
///
/// Bound parameter values are never part of the description: they may hold personal data.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The connection string could not be parsed.
        case invalidConfiguration
        /// Could not open a connection (server down, wrong host/port, authentication failed).
        case connectionFailed
        /// An open connection broke (server restarted, network dropped).
        case connectionLost
        /// The server rejected the statement; see `sqlState`.
        case server
        /// A row's value did not decode into the requested Swift type.
        case decoding
        /// A parameter value cannot be sent (for example a string containing NUL).
        case invalidParameter
        /// No pooled connection became free within the acquire timeout.
        case poolTimeout
        /// Refused at once: every pooled connection is in use and more callers wait than the
        /// pool can serve before this caller's deadline (admission control). The database is
        /// fine, only busy; `retryAfter` says when the queue should have drained.
        case poolBusy
        /// The pool or listener was shut down.
        case shutdown
        /// The query ran but its result was not what the caller required (no rows, say).
        case unexpectedResult
    }

    public var kind: Kind
    /// What went wrong, in one sentence.
    public var message: String
    /// The five-character SQLSTATE for server errors (`23505`, `40001`, …).
    public var sqlState: String?
    public var detail: String?
    public var hint: String?
    /// The constraint a violation names, if any.
    public var constraint: String?
    /// Where it happened, for logs: "host:port", a column name, a migration file…
    public var context: String?
    /// For `poolBusy` and `poolTimeout`: how long the work already queued should take to drain,
    /// at the pool's recent pace (an HTTP layer's `Retry-After`). Nil otherwise.
    public var retryAfter: Duration?

    public init(
        _ kind: Kind, _ message: String, sqlState: String? = nil, detail: String? = nil,
        hint: String? = nil, constraint: String? = nil, context: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
        self.context = context
    }

    /// `23505`: a unique or primary-key constraint was violated.
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// `40001` or `40P01`: the transaction lost a race and may be retried as a whole.
    public var isSerializationFailure: Bool { sqlState == "40001" || sqlState == "40P01" }
    public var isDeadlock: Bool { sqlState == "40P01" }
    /// The connection is unusable: lost mid-use, could not be opened, or the server is shutting
    /// down (`57P01`…`57P03`) or unreachable (class `08`).
    public var isConnectionProblem: Bool {
        if kind == .connectionLost || kind == .connectionFailed { return true }
        guard let state = sqlState else { return false }
        return state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03"
    }
    /// An open connection broke: lost mid-use, or the server ended the session (`57P01`…`57P03`,
    /// class `08`). Not a connection that could not be opened (`connectionFailed`).
    public var isConnectionLoss: Bool {
        kind == .connectionLost || (kind != .connectionFailed && isConnectionProblem)
    }

    /// Worth retrying the whole operation later: a lost connection, an unreachable server, a
    /// serialization failure or deadlock, a pool that was momentarily exhausted or refused a
    /// caller because it was busy.
    public var isTransient: Bool {
        isConnectionProblem || isSerializationFailure || isBusy
    }

    /// The pool had no connection for this caller (`poolBusy`, `poolTimeout`): the database is
    /// reachable, only busy.
    public var isBusy: Bool { kind == .poolBusy || kind == .poolTimeout }

    public var description: String {
        var text = message
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let detail, !detail.isEmpty { text += ". Detail: \(detail)" }
        if let hint, !hint.isEmpty { text += ". Hint: \(hint)" }
        return text
    }
}
