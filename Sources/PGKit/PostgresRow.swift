/// The rows of a result, materialised.
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: [PostgresColumn]
    let values: [[String?]]
    /// Rows affected by an INSERT/UPDATE/DELETE (`PQcmdTuples`), or the row count of a SELECT.
    public let affectedRows: Int
    private let index: [String: Int]

    init(columns: [PostgresColumn], values: [[String?]], affectedRows: Int) {
        self.columns = columns
        self.values = values
        self.affectedRows = affectedRows
        var index: [String: Int] = [:]
        for (position, column) in columns.enumerated() where index[column.name] == nil {
            index[column.name] = position
        }
        self.index = index
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { values.count }
    public subscript(position: Int) -> PostgresRow { PostgresRow(rows: self, row: position) }

    func columnIndex(_ name: String) -> Int? { index[name] }

    /// The only row, or an error saying how many there were.
    public func single() throws(PostgresError) -> PostgresRow {
        guard count == 1 else {
            throw PostgresError(.unexpectedResult, "expected exactly one row, got \(count)")
        }
        return self[0]
    }
}

public struct PostgresColumn: Sendable, Hashable {
    public let name: String
    public let type: PostgresType
}

/// One row; read columns by name with their Swift type.
public struct PostgresRow: Sendable {
    let rows: PostgresRows
    let row: Int

    /// Decodes column `name`. A NULL is an error unless `T` is optional: use
    /// `decode(_:as:)` with `String?.self` to accept NULL.
    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws(PostgresError) -> T {
        guard let text = try raw(name) else {
            throw PostgresError(.decoding, "column \"\(name)\" is NULL but \(T.self) was expected; decode it as \(T.self)?",
                                context: name)
        }
        return try decodeValue(text, name)
    }

    public func decode<T: PostgresDecodable>(_ name: String, as type: T?.Type) throws(PostgresError) -> T? {
        guard let text = try raw(name) else { return nil }
        return try decodeValue(text, name) as T
    }

    /// Whether the column is NULL in this row.
    public func isNull(_ name: String) throws(PostgresError) -> Bool { try raw(name) == nil }

    private func raw(_ name: String) throws(PostgresError) -> String? {
        guard let column = rows.columnIndex(name) else {
            let known = rows.columns.map(\.name).joined(separator: ", ")
            throw PostgresError(.decoding, "the result has no column \"\(name)\" (it has: \(known))", context: name)
        }
        return rows.values[row][column]
    }

    private func decodeValue<T: PostgresDecodable>(_ text: String, _ name: String) throws(PostgresError) -> T {
        let type = rows.columns[rows.columnIndex(name)!].type
        do {
            return try T(postgresText: text, type: type)
        } catch {
            throw PostgresError(
                .decoding, "column \"\(name)\" of type \(type) could not be read as \(T.self): \(error.reason)",
                context: name)
        }
    }
}

extension PostgresRows {
    /// The rows of a batch statement (see `PostgresPool.queryCommittingTogether`), split by
    /// their `batch_ordinal` column into the rows of each of the `count` statements, in order.
    func splitByBatchOrdinal(count: Int) throws(PostgresError) -> [PostgresRows] {
        guard let ordinalColumn = columnIndex("batch_ordinal") else {
            throw PostgresError(.unexpectedResult, "a batch statement's rows must name their statement in a column batch_ordinal")
        }
        var split = Array(repeating: [[String?]](), count: count)
        for row in values {
            guard let text = row[ordinalColumn], let ordinal = Int(text), (1...count).contains(ordinal) else {
                throw PostgresError(.unexpectedResult, "a batch statement returned a row for no statement of it (batch_ordinal \(row[ordinalColumn] ?? "NULL"))")
            }
            split[ordinal - 1].append(row)
        }
        return split.map { PostgresRows(columns: columns, values: $0, affectedRows: $0.count) }
    }
}
