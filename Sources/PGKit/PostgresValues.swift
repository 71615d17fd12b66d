import Foundation
import Timestamps

/// PostgreSQL type OIDs the decoder knows by number.
public struct PostgresType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let bool = PostgresType(rawValue: 16)
    public static let bytea = PostgresType(rawValue: 17)
    public static let int8 = PostgresType(rawValue: 20)
    public static let int2 = PostgresType(rawValue: 21)
    public static let int4 = PostgresType(rawValue: 23)
    public static let text = PostgresType(rawValue: 25)
    public static let oid = PostgresType(rawValue: 26)
    public static let json = PostgresType(rawValue: 114)
    public static let float4 = PostgresType(rawValue: 700)
    public static let float8 = PostgresType(rawValue: 701)
    public static let bpchar = PostgresType(rawValue: 1042)
    public static let varchar = PostgresType(rawValue: 1043)
    public static let timestamp = PostgresType(rawValue: 1114)
    public static let timestamptz = PostgresType(rawValue: 1184)
    public static let interval = PostgresType(rawValue: 1186)
    public static let numeric = PostgresType(rawValue: 1700)
    public static let uuid = PostgresType(rawValue: 2950)
    public static let jsonb = PostgresType(rawValue: 3802)
    public static let name = PostgresType(rawValue: 19)
    public static let boolArray = PostgresType(rawValue: 1000)
    public static let int2Array = PostgresType(rawValue: 1005)
    public static let int4Array = PostgresType(rawValue: 1007)
    public static let textArray = PostgresType(rawValue: 1009)
    public static let varcharArray = PostgresType(rawValue: 1015)
    public static let int8Array = PostgresType(rawValue: 1016)
    public static let float8Array = PostgresType(rawValue: 1022)
    public static let uuidArray = PostgresType(rawValue: 2951)
    public static let jsonbArray = PostgresType(rawValue: 3807)
    public static let timestamptzArray = PostgresType(rawValue: 1185)

    public var description: String {
        switch self {
        case .bool: "boolean"
        case .bytea: "bytea"
        case .int8: "bigint"
        case .int2: "smallint"
        case .int4: "integer"
        case .text: "text"
        case .oid: "oid"
        case .json: "json"
        case .float4: "real"
        case .float8: "double precision"
        case .bpchar: "character"
        case .varchar: "character varying"
        case .timestamp: "timestamp"
        case .timestamptz: "timestamp with time zone"
        case .interval: "interval"
        case .numeric: "numeric"
        case .uuid: "uuid"
        case .jsonb: "jsonb"
        case .name: "name"
        case .boolArray: "boolean[]"
        case .int2Array: "smallint[]"
        case .int4Array: "integer[]"
        case .textArray: "text[]"
        case .varcharArray: "character varying[]"
        case .int8Array: "bigint[]"
        case .float8Array: "double precision[]"
        case .uuidArray: "uuid[]"
        case .jsonbArray: "jsonb[]"
        case .timestamptzArray: "timestamp with time zone[]"
        default: "type oid \(rawValue)"
        }
    }

    var isTextual: Bool { [.text, .varchar, .bpchar, .name].contains(self) }
    var isArray: Bool {
        [.boolArray, .int2Array, .int4Array, .textArray, .varcharArray, .int8Array, .float8Array,
         .uuidArray, .jsonbArray, .timestamptzArray].contains(self)
    }
}

/// Why a value did not decode; `PostgresRow` turns it into a `PostgresError` naming the column.
public struct PostgresDecodingFailure: Error, Sendable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// A Swift type that can be read from a column in PostgreSQL's text format.
public protocol PostgresDecodable: Sendable {
    /// Decode from the server's text representation of a value of type `type`.
    init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure)
}

/// A Swift value that can be sent as a bound parameter (`$1`…), in text format.
///
/// `nil` (through `Optional`) sends SQL NULL. Values never become part of the SQL text.
public protocol PostgresBindable: Sendable {
    /// The text PostgreSQL parses for this value, or `nil` for NULL.
    func postgresText() throws(PostgresDecodingFailure) -> String?
}

// MARK: - Scalars

extension String: PostgresDecodable, PostgresBindable {
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        self = text
    }
    public func postgresText() throws(PostgresDecodingFailure) -> String? {
        // libpq passes parameters as C strings, and PostgreSQL text cannot hold NUL at all:
        // refuse rather than let the value be silently cut at the NUL.
        if utf8.contains(0) {
            throw PostgresDecodingFailure("it contains a NUL character, which PostgreSQL text cannot store")
        }
        return self
    }
}

extension Substring: PostgresBindable {
    public func postgresText() throws(PostgresDecodingFailure) -> String? { try String(self).postgresText() }
}

extension Bool: PostgresDecodable, PostgresBindable {
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        switch text {
        case "t", "true": self = true
        case "f", "false": self = false
        default: throw PostgresDecodingFailure("'\(text.prefix(20))' is not a boolean")
        }
    }
    public func postgresText() -> String? { self ? "t" : "f" }
}

protocol PostgresInteger: FixedWidthInteger, PostgresDecodable, PostgresBindable {}
extension PostgresInteger {
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        guard type == .int2 || type == .int4 || type == .int8 || type == .oid || type == .numeric || type.isTextual
        else { throw PostgresDecodingFailure("a \(type) column cannot be read as an integer") }
        guard let value = Self(text) else {
            throw PostgresDecodingFailure("'\(text.prefix(30))' does not fit in \(Self.self)")
        }
        self = value
    }
    public func postgresText() -> String? { String(self) }
}
extension Int: PostgresInteger {}
extension Int64: PostgresInteger {}
extension Int32: PostgresInteger {}
extension Int16: PostgresInteger {}

extension Double: PostgresDecodable, PostgresBindable {
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        guard let value = Double(text) else {
            switch text {
            case "NaN": self = .nan
            case "Infinity": self = .infinity
            case "-Infinity": self = -.infinity
            default: throw PostgresDecodingFailure("'\(text.prefix(30))' is not a number")
            }
            return
        }
        guard type == .float4 || type == .float8 || type == .numeric || type == .int2 || type == .int4 || type == .int8
        else { throw PostgresDecodingFailure("a \(type) column cannot be read as a Double") }
        self = value
    }
    public func postgresText() -> String? {
        if isNaN { return "NaN" }
        if isInfinite { return self > 0 ? "Infinity" : "-Infinity" }
        return "\(self)"
    }
}

extension UUID: PostgresDecodable, PostgresBindable {
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        guard let value = UUID(uuidString: text) else {
            throw PostgresDecodingFailure("'\(text.prefix(40))' is not a UUID")
        }
        self = value
    }
    public func postgresText() -> String? { uuidString.lowercased() }
}

extension Date {
    /// This instant as a `timestamptz` column stores it (whole microseconds): a value returned
    /// from what was just written equals what a later read of the row gives.
    /// Computed as `PostgresTimestamp.parse(PostgresTimestamp.format(self))` would be, without
    /// the text: every advance takes its time this way.
    public var asStoredByPostgres: Date {
        ISO8601Timestamp.Instant(self).date
    }
}

extension Date: PostgresDecodable, PostgresBindable {
    /// Reads `timestamptz` in the ISO style every connection selects (`2026-11-22 13:07:22.5+00`).
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        guard type == .timestamptz || type == .timestamp else {
            throw PostgresDecodingFailure("a \(type) column cannot be read as a Date")
        }
        guard let date = PostgresTimestamp.parse(text) else {
            throw PostgresDecodingFailure("'\(text.prefix(40))' is not a timestamp in ISO style")
        }
        self = date
    }
    public func postgresText() -> String? { PostgresTimestamp.format(self) }
}

/// A `jsonb`/`json` value carried as its JSON text.
///
/// Bind it as `$1::jsonb`. Decoding accepts `json` and `jsonb` columns.
public struct PostgresJSON: PostgresDecodable, PostgresBindable, Hashable, CustomStringConvertible {
    public var text: String
    public init(_ text: String) { self.text = text }
    /// Encodes `value` with a `JSONEncoder` (sorted keys, so equal values give equal text).
    public init<T: Encodable>(encoding value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.text = String(decoding: try encoder.encode(value), as: UTF8.self)
    }
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(text.utf8))
    }
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        guard type == .json || type == .jsonb || type.isTextual else {
            throw PostgresDecodingFailure("a \(type) column cannot be read as JSON")
        }
        self.text = text
    }
    public func postgresText() throws(PostgresDecodingFailure) -> String? { try text.postgresText() }
    public var description: String { text }
}

extension Optional: PostgresBindable where Wrapped: PostgresBindable {
    public func postgresText() throws(PostgresDecodingFailure) -> String? {
        switch self {
        case .none: nil
        case .some(let value): try value.postgresText()
        }
    }
}

// MARK: - One-dimensional arrays

extension Array: PostgresBindable where Element: PostgresBindable {
    /// An array literal (`{"a","b",NULL}`) with every element quoted and escaped.
    public func postgresText() throws(PostgresDecodingFailure) -> String? {
        var literal = PostgresArrayLiteral.Builder()
        for element in self { literal.append(try element.postgresText()) }
        return literal.finished()
    }
}

extension Array: PostgresDecodable where Element: PostgresDecodable {
    public init(postgresText text: String, type: PostgresType) throws(PostgresDecodingFailure) {
        guard let elements = PostgresArrayLiteral.parse(text) else {
            throw PostgresDecodingFailure("'\(text.prefix(40))' is not a one-dimensional array")
        }
        let elementType = PostgresArrayLiteral.elementType(of: type)
        var result: [Element] = []
        result.reserveCapacity(elements.count)
        for element in elements {
            guard let element else { throw PostgresDecodingFailure("the array holds a NULL; read it as [T?]") }
            result.append(try Element(postgresText: element, type: elementType))
        }
        self = result
    }
}

enum PostgresArrayLiteral {
    /// Builds a one-dimensional array's text form (`{"a","b",NULL}`) from its elements' text:
    /// a bound array, and the parameters of a batch statement
    /// (`PostgresPool.queryCommittingTogether`), which the statement casts (`$1::jsonb[]`) so
    /// that each element is parsed by its type's own input function, as it would be as a
    /// parameter of its own. Hand-written because libpq has no array encoder.
    struct Builder {
        private var bytes: [UInt8] = [UInt8(ascii: "{")]
        private var isEmpty = true

        /// Appends one element; nil is SQL NULL. Every other element is quoted, with `"` and
        /// `\` escaped, so that no text (not even "NULL", commas or braces) is read as syntax.
        mutating func append(_ element: String?) {
            if !isEmpty { bytes.append(UInt8(ascii: ",")) }
            isEmpty = false
            guard let element else {
                bytes.append(contentsOf: "NULL".utf8)
                return
            }
            bytes.append(UInt8(ascii: "\""))
            for byte in element.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                bytes.append(byte)
            }
            bytes.append(UInt8(ascii: "\""))
        }

        /// The array's text.
        func finished() -> String {
            var bytes = self.bytes
            bytes.append(UInt8(ascii: "}"))
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    static func elementType(of arrayType: PostgresType) -> PostgresType {
        switch arrayType {
        case .boolArray: .bool
        case .int2Array: .int2
        case .int4Array: .int4
        case .int8Array: .int8
        case .float8Array: .float8
        case .uuidArray: .uuid
        case .jsonbArray: .jsonb
        case .timestamptzArray: .timestamptz
        case .varcharArray: .varchar
        default: .text
        }
    }

    /// Parses a one-dimensional array in PostgreSQL's output syntax; `nil` elements are NULLs.
    static func parse(_ text: String) -> [String?]? {
        var scalars = Substring(text).unicodeScalars[...]
        // An explicit lower bound ("[0:2]={…}") precedes non-default arrays.
        if scalars.first == "[" {
            guard let eq = scalars.firstIndex(of: "=") else { return nil }
            scalars = scalars[scalars.index(after: eq)...]
        }
        guard scalars.first == "{", scalars.last == "}" else { return nil }
        scalars = scalars.dropFirst().dropLast()
        var result: [String?] = []
        if scalars.isEmpty { return result }
        var iterator = scalars.makeIterator()
        var current = String.UnicodeScalarView()
        var quoted = false
        var wasQuoted = false
        while let ch = iterator.next() {
            if quoted {
                if ch == "\\" {
                    if let next = iterator.next() { current.append(next) }
                } else if ch == "\"" {
                    quoted = false
                } else {
                    current.append(ch)
                }
            } else if ch == "\"" {
                quoted = true
                wasQuoted = true
            } else if ch == "{" {
                return nil  // multi-dimensional arrays are not supported
            } else if ch == "," {
                result.append(finish(current, wasQuoted))
                current = String.UnicodeScalarView()
                wasQuoted = false
            } else {
                current.append(ch)
            }
        }
        result.append(finish(current, wasQuoted))
        return result
    }

    private static func finish(_ scalars: String.UnicodeScalarView, _ wasQuoted: Bool) -> String? {
        let value = String(scalars)
        if !wasQuoted && value == "NULL" { return nil }
        return value
    }
}

// MARK: - Timestamps

/// PostgreSQL's timestamps through the project's one ISO-8601 reading (`Timestamps`).
enum PostgresTimestamp {
    /// Formats in UTC with microseconds, which PostgreSQL parses exactly:
    /// `2026-11-22 13:07:22.500000+00`.
    static func format(_ date: Date) -> String {
        ISO8601Timestamp.formatForPostgres(ISO8601Timestamp.Instant(date))
    }

    /// Parses the ISO output style, `YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]`; without an
    /// offset (a `timestamp` column) the time reads as UTC.
    static func parse(_ text: String) -> Date? {
        ISO8601Timestamp.parse(text, zone: .optional)?.date
    }
}
