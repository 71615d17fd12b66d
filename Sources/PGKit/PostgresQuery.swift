/// A SQL statement and its bound parameters.
///
/// The SQL is a `StaticString`: it is written in the source, never assembled from input, and
/// every value travels as a bound `$n` parameter. Text that really must come from elsewhere
/// (migration files) goes through the loudly named `init(unsafeSQL:_:)`.
public struct PostgresQuery: Sendable {
    public let sql: String
    public let bindings: [any PostgresBindable]
    /// Statements written in the source are prepared once per connection and reused.
    let preparable: Bool

    public init(_ sql: StaticString, _ bindings: any PostgresBindable...) {
        self.sql = sql.description
        self.bindings = bindings
        self.preparable = true
    }

    public init(_ sql: StaticString, bindings: [any PostgresBindable]) {
        self.sql = sql.description
        self.bindings = bindings
        self.preparable = true
    }

    /// SQL text that does not come from a literal in the source, such as a migration file.
    /// Never pass text built from user input: bind values as parameters instead.
    public init(unsafeSQL sql: String, bindings: [any PostgresBindable] = []) {
        self.sql = sql
        self.bindings = bindings
        self.preparable = false
    }
}
