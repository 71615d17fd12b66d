/// The type of a field in the attributes schema, the ContentState schema or a transition's input.
///
/// Written in YAML in a compact form: `string`, `string(60)` (at most 60 characters), `int`,
/// `double`, `bool`, `date`, `daterange` (a window between two dates, Swift's `ClosedRange<Date>`),
/// `enum(a, b, c)`, a trailing `?` for optional (`date?`), and
/// `[T]` or `[T; N]` for an array of at most N elements (10 when not given), and the name of a
/// struct type declared under `types:` (`Driver`).
public indirect enum FieldType: Sendable, Hashable {
    case string(maxLength: Int?)
    case int
    case double
    case bool
    case date
    /// Two dates, lower ≤ upper (an ETA window): Swift's `ClosedRange<Date>`, `[lower, upper]` in JSON.
    case daterange
    /// A String-backed enum; the values are its raw values and its Swift case names.
    case enumeration([String])
    case optional(FieldType)
    case array(FieldType, maxCount: Int)
    /// A struct declared once under `types:`, generated as a nested Swift struct; a JSON object.
    case structure(StructType)

    /// The element count assumed for an array without `; N`.
    public static let defaultArrayMaxCount = 10

    public var isOptional: Bool {
        if case .optional = self { return true }
        return false
    }

    /// The type without its optional wrapper.
    public var nonOptional: FieldType {
        if case .optional(let wrapped) = self { return wrapped }
        return self
    }

    /// The struct type of a struct field, optional or not.
    public var structType: StructType? {
        if case .structure(let structure) = nonOptional { return structure }
        return nil
    }

    /// The type as written in a workflow file.
    public var spelling: String {
        switch self {
        case .string(let maxLength?): return "string(\(maxLength))"
        case .string(nil): return "string"
        case .int: return "int"
        case .double: return "double"
        case .bool: return "bool"
        case .date: return "date"
        case .daterange: return "daterange"
        case .enumeration(let values): return "enum(\(values.joined(separator: ", ")))"
        case .optional(let wrapped): return wrapped.spelling + "?"
        case .array(let element, let maxCount):
            return maxCount == FieldType.defaultArrayMaxCount
                ? "[\(element.spelling)]" : "[\(element.spelling); \(maxCount)]"
        case .structure(let structure): return structure.name
        }
    }

    /// A short description of the kind, for messages ("a date", "an enum").
    var kindDescription: String {
        switch self {
        case .string: return "a string"
        case .int: return "an int"
        case .double: return "a double"
        case .bool: return "a bool"
        case .date: return "a date"
        case .daterange: return "a date range"
        case .enumeration(let values): return "one of \(values.joined(separator: ", "))"
        case .optional(let wrapped): return wrapped.kindDescription + " or null"
        case .array(let element, _): return "an array of \(element.spelling)"
        case .structure(let structure): return "a \(structure.name) object"
        }
    }
}

/// A named, typed field.
public struct FieldSpec: Sendable, Hashable {
    public var name: String
    public var type: FieldType
    /// The value used when nothing sets the field (the app's `var status: Status = .received`):
    /// a literal, in the form data is given in (never a date, a date range or a struct).
    public var defaultValue: JSONValue?
    /// A ContentState field that keeps its previous value unless a transition or state sets it.
    public var carriesOver: Bool

    public init(name: String, type: FieldType, defaultValue: JSONValue? = nil, carriesOver: Bool = false) {
        self.name = name
        self.type = type
        self.defaultValue = defaultValue
        self.carriesOver = carriesOver
    }
}

/// A struct type declared once under `types:` and used by name in schemas; the app's nested
/// Codable struct. Its fields may use only types declared before it, so types never nest in
/// themselves.
public struct StructType: Sendable, Hashable {
    public var name: String
    public var fields: [FieldSpec]

    public init(name: String, fields: [FieldSpec]) {
        self.name = name
        self.fields = fields
    }
}

// MARK: - Parsing the compact type syntax

extension FieldType {
    struct SyntaxError: Error {
        let message: String
    }

    /// Parses `string(60)?`, `[enum(a, b); 3]`, `[Driver; 3]`, … ; `structs` are the struct types
    /// declared so far, by name.
    static func parse(_ text: String, structs: [String: StructType] = [:]) throws(SyntaxError) -> FieldType {
        var parser = TypeParser(text: Array(text.unicodeScalars), structs: structs)
        let type = try parser.parseType()
        parser.skipSpaces()
        guard parser.atEnd else {
            throw SyntaxError(message: "unexpected `\(parser.rest)` after type `\(type.spelling)`")
        }
        return type
    }
}

private struct TypeParser {
    let text: [Unicode.Scalar]
    let structs: [String: StructType]
    var index = 0

    init(text: [Unicode.Scalar], structs: [String: StructType]) {
        self.text = text
        self.structs = structs
    }

    var atEnd: Bool { index >= text.count }
    var rest: String { String(String.UnicodeScalarView(text[index...])) }

    mutating func skipSpaces() {
        while !atEnd, text[index] == " " { index += 1 }
    }

    mutating func consume(_ scalar: Unicode.Scalar) -> Bool {
        skipSpaces()
        if !atEnd, text[index] == scalar {
            index += 1
            return true
        }
        return false
    }

    mutating func word() -> String {
        skipSpaces()
        var result = String.UnicodeScalarView()
        while !atEnd, text[index].properties.isAlphabetic || ("0"..."9").contains(text[index]) || text[index] == "_"
            || text[index] == "-"
        {
            result.append(text[index])
            index += 1
        }
        return String(result)
    }

    mutating func integer(_ what: String) throws(FieldType.SyntaxError) -> Int {
        let digits = word()
        guard let value = Int(digits), value > 0 else {
            throw .init(message: "\(what) must be a positive whole number, got `\(digits)`")
        }
        return value
    }

    mutating func parseType() throws(FieldType.SyntaxError) -> FieldType {
        var type: FieldType
        if consume("[") {
            // Checked before reading the element, so that `[[[[…` cannot recurse without bound.
            skipSpaces()
            if !atEnd, text[index] == "[" {
                throw .init(message: "arrays of arrays are not supported")
            }
            let element = try parseType()
            if case .array = element.nonOptional {
                throw .init(message: "arrays of arrays are not supported")
            }
            var maxCount = FieldType.defaultArrayMaxCount
            if consume(";") {
                maxCount = try integer("an array's maximum element count")
            }
            guard consume("]") else {
                throw .init(message: "expected `]` to close the array type, e.g. `[string(20); 5]`")
            }
            type = .array(element, maxCount: maxCount)
        } else {
            let name = word()
            switch name {
            case "string":
                if consume("(") {
                    let maxLength = try integer("a string's max length")
                    guard consume(")") else { throw .init(message: "expected `)` after the max length, e.g. `string(60)`") }
                    type = .string(maxLength: maxLength)
                } else {
                    type = .string(maxLength: nil)
                }
            case "int": type = .int
            case "double": type = .double
            case "bool": type = .bool
            case "date": type = .date
            case "daterange": type = .daterange
            case "enum":
                guard consume("(") else {
                    throw .init(message: "an enum lists its values in parentheses, e.g. `enum(ready, delivered)`")
                }
                var values: [String] = []
                repeat {
                    let value = word()
                    guard !value.isEmpty else { throw .init(message: "expected an enum value in `enum(…)`") }
                    guard !values.contains(value) else { throw .init(message: "enum value `\(value)` is listed twice") }
                    values.append(value)
                } while consume(",")
                guard consume(")") else {
                    if atEnd {
                        throw .init(message: "the enum's value list has no closing `)`; inside a `{…}` YAML mapping, quote a type that contains commas: \"enum(a, b)\"")
                    }
                    throw .init(message: "expected `,` or `)` in the enum's value list")
                }
                type = .enumeration(values)
            case "":
                throw .init(message: "expected a type: string, string(N), int, double, bool, date, daterange, enum(a, b), T? or [T; N]")
            default:
                if let structure = structs[name] {
                    type = .structure(structure)
                    break
                }
                let known = ["string", "int", "double", "bool", "date", "daterange", "enum"] + structs.keys.sorted()
                let hint = closestMatch(to: name, in: known).map { " (did you mean `\($0)`?)" } ?? ""
                throw .init(
                    message:
                        "unknown type `\(name)`\(hint); use string, string(N), int, double, bool, date, daterange, enum(a, b), T?, [T; N] or a struct type declared above under `types:`"
                )
            }
        }
        if consume("?") {
            type = .optional(type)
            if consume("?") { throw .init(message: "a type can be optional only once") }
        }
        return type
    }
}
