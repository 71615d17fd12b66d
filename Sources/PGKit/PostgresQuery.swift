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
