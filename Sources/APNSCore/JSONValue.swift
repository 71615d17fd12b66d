import Foundation

/// The one JSON value type of OrderFlow: attributes, transition inputs, rendered ContentStates,
/// the canonical form of a workflow, APNs payloads and provider tokens, and what the local APNs
/// stand-in reads back. Its serialization is deterministic (object keys sorted by their UTF-8
/// bytes, no insignificant whitespace, `/` not escaped), and its parser tells `12` (``int(_:)``)
/// from `12.0` (``double(_:)``) by the text, as APNs' own checks of `aps.timestamp` do.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

// MARK: - Accessors

extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    public subscript(index: Int) -> JSONValue? {
        guard case .array(let array) = self, array.indices.contains(index) else { return nil }
        return array[index]
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The value as an `Int`, also for a `double` without a fractional part.
    public var intValue: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e18: return Int(value)
        default: return nil
        }
    }

    /// The value of an ``int(_:)`` only; `nil` for `12.0` and every other kind.
    public var integerValue: Int? {
        if case .int(let value) = self { return value }
        return nil
    }

    /// The value as a `Double`, also for an `int`.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// A short name of the value's JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .int: return "int"
        case .double: return "double"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Codable

extension JSONValue: Codable {
    /// Decodes whatever JSON value `decoder` holds. Strings first, then numbers and booleans: in
    /// the objects OrderFlow is sent most members are strings, and under `JSONDecoder` a value
    /// decodes as exactly one kind, so each kind tried in vain only costs a thrown error.
    public init(from decoder: any Decoder) throws {
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let value = try? single.decode(String.self) {
            self = .string(value)
        } else if let value = try? single.decode(Int.self) {
            self = .int(value)
        } else if let value = try? single.decode(Double.self) {
            self = .double(value)
        } else if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
            self = .array(values)
        } else if let object = try? decoder.container(keyedBy: MemberKey.self) {
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(object.allKeys.count)
            for key in object.allKeys { members[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(members)
        } else {
            throw DecodingError.dataCorruptedError(
                in: single,
                debugDescription: "expected a JSON value (null, bool, number, string, array or object)"
            )
        }
    }

    /// Encodes the value; an object's and an array's scalars go straight into their container,
    /// without a nested encoder each.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .object(let members):
            var container = encoder.container(keyedBy: MemberKey.self)
            for (name, value) in members {
                let key = MemberKey(name)
                switch value {
                case .null: try container.encodeNil(forKey: key)
                case .bool(let bool): try container.encode(bool, forKey: key)
                case .int(let int): try container.encode(int, forKey: key)
                case .double(let double): try container.encode(double, forKey: key)
                case .string(let string): try container.encode(string, forKey: key)
                case .array, .object: try container.encode(value, forKey: key)
                }
            }
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values {
                switch value {
                case .null: try container.encodeNil()
                case .bool(let bool): try container.encode(bool)
                case .int(let int): try container.encode(int)
                case .double(let double): try container.encode(double)
                case .string(let string): try container.encode(string)
                case .array, .object: try container.encode(value)
                }
            }
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .int(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .double(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        }
    }

    /// An object member's name, whatever it is.
    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

// MARK: - Foundation interop

extension JSONValue {
    /// Error thrown when a Foundation value has no JSON equivalent.
    public struct ConversionError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Converts the output of `JSONSerialization.jsonObject(with:)` (or any tree of
    /// `NSNull`, `Bool`, numbers, `String`, arrays and string-keyed dictionaries).
    public init(foundation value: Any) throws(ConversionError) {
        // Native Swift values first, by their exact type: an NSNumber 1 would also cast to `Bool`.
        let valueType = type(of: value)
        if valueType == Bool.self, let bool = value as? Bool {
            self = .bool(bool)
            return
        }
        if valueType == Int.self, let int = value as? Int {
            self = .int(int)
            return
        }
        if valueType == Double.self, let double = value as? Double {
            self = .double(double)
            return
        }
        switch value {
        case is NSNull:
            self = .null
        case let value as String:
            self = .string(value)
        case let value as NSNumber:
            self = JSONValue(number: value)
        case let value as [Any]:
            var array: [JSONValue] = []
            array.reserveCapacity(value.count)
            for element in value { array.append(try JSONValue(foundation: element)) }
            self = .array(array)
        case let value as [String: Any]:
            var object: [String: JSONValue] = [:]
            for (key, element) in value { object[key] = try JSONValue(foundation: element) }
            self = .object(object)
        default:
            throw ConversionError(description: "cannot represent a value of type \(type(of: value)) as JSON")
        }
    }

    private init(number: NSNumber) {
        // JSONSerialization returns booleans as an NSNumber subclass whose type encoding is "c";
        // a plain NSNumber holding 0 or 1 is a number.
        let objCType = String(cString: number.objCType)
        if objCType == "c" && type(of: number) != NSNumber.self {
            self = .bool(number.boolValue)
        } else if objCType == "f" || objCType == "d" {
            self = .double(number.doubleValue)
        } else if let int = Int(exactly: number.int64Value) {
            self = .int(int)
        } else {
            self = .double(number.doubleValue)
        }
    }

    /// Parses JSON text (RFC 8259).
    public init(json: String) throws(ParseError) {
        try self.init(parsing: json.utf8)
    }

    /// Parses JSON data (RFC 8259).
    public init(data: Data) throws(ParseError) {
        try self.init(parsing: data)
    }
}

// MARK: - Deterministic serialization

extension JSONValue: CustomStringConvertible {
    /// Compact JSON with object keys sorted (by UTF-8 bytes); equal values give equal strings.
    /// Non-finite doubles, which JSON cannot express, are written as `null`.
    public var jsonString: String {
        // Written as bytes and decoded once: appending piece by piece to a `String` is several
        // times dearer, and every advance writes three JSON parameters.
        String(decoding: serialized, as: UTF8.self)
    }

    public var description: String { jsonString }

    /// Number of bytes of `jsonString` in UTF-8, counted without building the string: every
    /// render checks its APNs payload against the 4 KB limit.
    public var jsonByteCount: Int {
        switch self {
        case .null: return 4
        case .bool(let value): return value ? 4 : 5
        case .int(let value): return String(value).utf8.count
        case .double(let value): return JSONValue.format(value).utf8.count
        case .string(let value): return JSONValue.stringByteCount(value)
        case .array(let values): return 2 + max(0, values.count - 1) + values.reduce(0) { $0 + $1.jsonByteCount }
        case .object(let object):
            return 2 + max(0, object.count - 1)
                + object.reduce(0) { $0 + JSONValue.stringByteCount($1.key) + 1 + $1.value.jsonByteCount }
        }
    }

    /// The UTF-8 length of `writeString(string)`'s output.
    static func stringByteCount(_ string: String) -> Int {
        var count = 2
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"", "\\", "\n", "\r", "\t", "\u{08}", "\u{0C}": count += 2
            default: count += scalar.value < 0x20 ? 6 : UTF8.width(scalar)
            }
        }
        return count
    }

    /// The serialization as UTF-8 bytes (the same bytes as ``jsonString``).
    public var serialized: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        write(into: &bytes)
        return bytes
    }

    public func write(into bytes: inout [UInt8]) {
        switch self {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let value):
            bytes.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value):
            bytes.append(contentsOf: String(value).utf8)
        case .double(let value):
            bytes.append(contentsOf: JSONValue.format(value).utf8)
        case .string(let value):
            JSONValue.writeString(value, into: &bytes)
        case .array(let values):
            bytes.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                value.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            // The members sorted with their values: no second hash lookup per key.
            for (index, member) in object.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONValue.writeString(member.key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                member.value.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value.rounded() == value && abs(value) < 1e15 {
            // Integral values print without an exponent; keep a ".0" so they read back as doubles.
            return String(Int64(value)) + ".0"
        }
        return "\(value)"
    }

    /// `string` as a JSON string literal, appended to `output` (the same text as
    /// ``writeString(_:into:)`` writes as bytes).
    public static func writeString(_ string: String, to output: inout String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(string.utf8.count + 2)
        writeString(string, into: &bytes)
        output += String(decoding: bytes, as: UTF8.self)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes `string` as a JSON string: quoted, with `"`, `\\` and control characters escaped.
    /// Byte by byte: only ASCII needs escaping, and UTF-8's multi-byte sequences never contain
    /// an ASCII byte, so they pass through unchanged.
    public static func writeString(_ string: String, into bytes: inout [UInt8]) {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        bytes.append(quote)
        // Most strings need no escape at all: append them whole.
        if !string.utf8.contains(where: { $0 < 0x20 || $0 == quote || $0 == backslash }) {
            bytes.append(contentsOf: string.utf8)
            bytes.append(quote)
            return
        }
        for byte in string.utf8 {
            switch byte {
            case quote, backslash: bytes.append(backslash); bytes.append(byte)
            case UInt8(ascii: "\n"): bytes.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): bytes.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): bytes.append(contentsOf: #"\t"#.utf8)
            case 0x08: bytes.append(contentsOf: #"\b"#.utf8)
            case 0x0C: bytes.append(contentsOf: #"\f"#.utf8)
            case ..<0x20:
                bytes.append(contentsOf: #"\u00"#.utf8)
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(quote)
    }
}
