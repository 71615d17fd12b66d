/// A SQL statement and its bound parameters.
///
/// The SQL is a `StaticString`: it is written in the source, never assembled from input, and
/// every value travels as a bound `$n` parameter. Text that really must come from elsewhere
/// (migration files) goes through the loudly named `init(unsafeSQL:_:)`.
public struct PostgresQuery: Sendable {
    /// The statement as written in the source, or (`unsafeSQL`) as given.
    private let text: Text
    public let bindings: [any PostgresBindable]
    /// How the server plans the statement (``Planning``).
    public private(set) var planning: Planning = .cached
    /// Settings in effect while the statement is planned, run and committed
    /// (``withLocalSettings(_:)``), by name.
    public private(set) var localSettings: [(name: StaticString, value: StaticString)] = []

    /// How the server plans a statement written in the source.
    public enum Planning: Sendable {
        /// Prepared once per connection and reused: PostgreSQL plans it for its values a few
        /// times, then may keep one generic plan for every later run, made with the tables'
        /// statistics and sizes of that moment, until the statistics change.
        case cached
        /// Planned afresh at each run, for its values and the tables' sizes at that moment:
        /// for a statement over a table that empties and fills (a queue), where a plan kept
        /// from while the table was empty — scan it whole, it is nothing — becomes quadratic
        /// once thousands of rows wait, and stays so until autovacuum next analyzes the table.
        case eachRun
    }

    private enum Text: Sendable {
        case literal(StaticString)
        /// Several statements in one round trip, which only the simple protocol runs: never prepared.
        case severalStatements(StaticString)
        case unsafe(String)
    }

    public init(_ sql: StaticString, _ bindings: any PostgresBindable...) {
        self.text = .literal(sql)
        self.bindings = bindings
    }

    public init(_ sql: StaticString, bindings: [any PostgresBindable]) {
        self.text = .literal(sql)
        self.bindings = bindings
    }

    /// Several statements written in the source, run in one round trip by the simple protocol
    /// (which cannot prepare them or bind parameters).
    init(severalStatements sql: StaticString) {
        self.text = .severalStatements(sql)
        self.bindings = []
    }

    /// SQL text that does not come from a literal in the source, such as a migration file.
    /// Never pass text built from user input: bind values as parameters instead.
    public init(unsafeSQL sql: String, bindings: [any PostgresBindable] = []) {
        self.text = .unsafe(sql)
        self.bindings = bindings
    }

    /// This statement, planned afresh at each run (``Planning/eachRun``) instead of prepared
    /// once per connection: it costs a parse and a plan per run.
    public func plannedEachRun() -> PostgresQuery {
        var copy = self
        copy.planning = .eachRun
        return copy
    }

    /// This statement with server settings of its own: `set_config(name, value, true)` for each,
    /// sent ahead of it in the same round trip and the same transaction, so they hold while the
    /// server plans it (a prepared statement is planned when it is bound, after the settings
    /// ran), runs it and commits it, and end with that commit. For a statement whose plan must
    /// not depend on a table's statistics of the moment — a queue's, which say it is empty
    /// while the pages of its last burst's dead rows are still there (`enable_seqscan`) — or
    /// whose commit need not wait for the WAL flush (`synchronous_commit`). Runs outside a
    /// transaction only: it commits by itself.
    public func withLocalSettings(_ settings: [(name: StaticString, value: StaticString)]) -> PostgresQuery {
        var copy = self
        copy.localSettings = settings
        return copy
    }

    /// The statement that applies ``localSettings`` for the transaction it runs in.
    var localSettingsStatement: PostgresQuery {
        PostgresQuery(
            "SELECT set_config(s.name, s.value, true) FROM unnest($1::text[], $2::text[]) AS s(name, value)",
            localSettings.map { $0.name.description }, localSettings.map { $0.value.description })
    }

    /// A statement written in the source (either planning), which a pipeline can send.
    var isSingleStatementOfTheSource: Bool {
        if case .literal(let literal) = text { return literal.hasPointerRepresentation }
        return false
    }

    public var sql: String {
        switch text {
        case .literal(let literal), .severalStatements(let literal): return literal.description
        case .unsafe(let sql): return sql
        }
    }

    /// Identifies a statement written in the source, which is prepared once per connection and
    /// reused: the address of its literal, which no other text can have. The hot path thus
    /// neither copies nor hashes the statement's text. Nil for `unsafeSQL` text and for a
    /// statement planned at each run.
    var preparedKey: UInt? {
        guard planning == .cached, case .literal(let literal) = text, literal.hasPointerRepresentation else { return nil }
        return UInt(bitPattern: literal.utf8Start)
    }
}
