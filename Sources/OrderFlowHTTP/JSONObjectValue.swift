import APNSCore

/// The contract's free-form `JSONObject` (an order's attributes and content, a transition's
/// input and `aps` payload), as the engine holds it: `[String: JSONValue]`.
///
/// The generator's own type for an object with `additionalProperties: true` keeps its members
/// as `(any Sendable)?` and casts each one against every JSON kind to encode it; with the
/// conversion from and to `JSONValue` that was a fifth of the server's CPU on the hottest route
/// (perf, `orderflow-bench http`). `openapi/openapi-generator-config.yaml` maps the schema to
/// this type instead (`typeOverrides`), so the generated server stays the contract's.
///
/// Not `JSONValue` itself, which the override could name as well: its `Codable` serves any
/// coder, so it tries `Bool` and numbers before strings (a thrown error per kind tried in vain,
/// for most members) and encodes every member through a nested encoder; and it would take an
/// array or a string where the contract says object.
struct JSONObjectValue: Codable, Hashable, Sendable {
    var members: [String: JSONValue]

    init(_ members: [String: JSONValue] = [:]) {
        self.members = members
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: MemberKey.self)
        var members: [String: JSONValue] = [:]
        members.reserveCapacity(container.allKeys.count)
        for key in container.allKeys {
            members[key.stringValue] = try Self.value(in: try container.superDecoder(forKey: key))
        }
        self.members = members
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: MemberKey.self)
        for (name, value) in members {
            try Self.encode(value, forKey: MemberKey(name), in: &container)
        }
    }

    /// A value as the request's JSON has it. Strings first, then numbers: most members of an
    /// advance's input are strings, and each kind tried in vain costs a thrown error. (Not
    /// `JSONValue`'s own `Decodable`: it serves any decoder, and tries `Bool` and numbers before
    /// strings so that a decoder that turns any scalar into a string cannot; here the decoder is
    /// always the API's `JSONDecoder`, where a value decodes as exactly one kind.)
    private static func value(in decoder: any Decoder) throws -> JSONValue {
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { return .null }
        if let string = try? single.decode(String.self) { return .string(string) }
        if let int = try? single.decode(Int.self) { return .int(int) }
        if let double = try? single.decode(Double.self) { return .double(double) }
        if let bool = try? single.decode(Bool.self) { return .bool(bool) }
        if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try value(in: try array.superDecoder())) }
            return .array(values)
        }
        return .object(try JSONObjectValue(from: decoder).members)
    }

    /// Scalars straight into the container (no nested encoder for a string or a number).
    private static func encode(_ value: JSONValue, forKey key: MemberKey,
                               in container: inout KeyedEncodingContainer<MemberKey>) throws {
        switch value {
        case .null: try container.encodeNil(forKey: key)
        case .bool(let bool): try container.encode(bool, forKey: key)
        case .int(let int): try container.encode(int, forKey: key)
        case .double(let double): try container.encode(double, forKey: key)
        case .string(let string): try container.encode(string, forKey: key)
        case .array, .object: try container.encode(value, forKey: key)
        }
    }

    /// A member's name, whatever it is.
    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
