/// One part of a payload as the payload format lays it out: a value, an object the caller
/// encoded (spliced byte for byte), members of an object, or — for a workflow's size bound,
/// checked before any value is known — only the most bytes the part can take.
///
/// The payload types build their body from these once, so that encoding a payload, counting
/// its bytes and bounding it from the parts' sizes cannot disagree about its shape.
enum PayloadMember: Sendable {
    case value(JSONValue)
    case encoded(APNSJSONObject)
    /// Members in any order: written with keys sorted by their UTF-8 bytes, as ``JSONValue`` does.
    case object([(String, PayloadMember)])
    case bound(Int)

    /// The bytes the part takes; sizes add up without trapping and stop at `Int.max` (a bound
    /// can be absurd: `string(9223372036854775807)`).
    var byteCount: Int {
        switch self {
        case .value(let value):
            return value.jsonByteCount
        case .encoded(let object):
            return object.byteCount
        case .bound(let bytes):
            return bytes
        case .object(let members):
            let sizes = members.map { Self.size(JSONValue.stringByteCount($0.0), 1, $0.1.byteCount) }
            return Self.size(2, Self.size(sizes), max(0, members.count - 1))
        }
    }

    static func size(_ parts: Int...) -> Int { PayloadSize.sum(parts) }

    static func size(_ parts: [Int]) -> Int { PayloadSize.sum(parts) }

    /// Appends the part's JSON; a ``bound(_:)`` has none and is never written.
    func write(into bytes: inout [UInt8]) {
        switch self {
        case .value(let value):
            value.write(into: &bytes)
        case .encoded(let object):
            object.write(into: &bytes)
        case .bound:
            preconditionFailure("a size bound is counted, never written")
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.sorted(by: { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }).enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONValue.writeString(member.0, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                member.1.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// The part as a ``JSONValue`` (an object encoded by its caller is parsed back; a bound
    /// reads as `null`).
    var value: JSONValue {
        switch self {
        case .value(let value): return value
        case .encoded(let object):
            // Held as values (a rendered ContentState): those, not their text read back — the
            // HTTP API shows every advance's `aps` this way.
            if case .value(let members) = object.storage { return .object(members) }
            var bytes: [UInt8] = []
            object.write(into: &bytes)
            return (try? JSONValue(parsing: bytes)) ?? .null
        case .bound: return .null
        case .object(let members):
            return .object(Dictionary(members.map { ($0.0, $0.1.value) }, uniquingKeysWith: { _, last in last }))
        }
    }
}

/// Sizes of payload parts, added without trapping.
public enum PayloadSize {
    /// The sum of `sizes`, or `Int.max` where it would overflow (a bound of an absurd schema,
    /// still over every limit).
    public static func sum(_ sizes: [Int]) -> Int {
        var total = 0
        for size in sizes {
            let (result, overflow) = total.addingReportingOverflow(size)
            if overflow { return .max }
            total = result
        }
        return total
    }
}
