import CommandLineSupport
import Foundation
import WorkflowKit

/// Turns `key=value` arguments into a JSON object typed by a workflow's schema, so that
/// `--attr itemCount=3` becomes the number 3. The engine still validates the result: keys the
/// schema does not know pass through as text and get the engine's "unknown field" message.
public enum TypedValues {
    /// Parses `key=value` pairs (`flag` alone is not accepted: a value is always needed).
    public static func pairs(_ arguments: [String], option: String) throws -> [(key: String, value: String)] {
        try arguments.map { argument in
            guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
                throw CLIError(.usage, "\(option) `\(argument)` is not key=value", remedy: "write it like \(option) itemCount=3")
            }
            return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
        }
    }

    /// The pairs as a JSON object typed by `schema`, on top of `base` (later keys win).
    public static func object(
        _ arguments: [String], option: String, schema: [FieldSpec], base: [String: JSONValue] = [:]
    ) throws -> JSONValue {
        var object = base
        for (key, text) in try pairs(arguments, option: option) {
            let type = schema.first { $0.name == key }?.type
            object[key] = try value(text, type: type, describing: "\(option) \(key)")
        }
        return .object(object)
    }

    /// Converts one text value to `type` (text when the type is unknown).
    public static func value(_ text: String, type: FieldType?, describing what: String) throws -> JSONValue {
        guard let type else { return .string(text) }
        func invalid(_ expected: String) -> CLIError {
            CLIError(.invalidInput, "\(what): `\(text)` is not \(expected)", remedy: "give \(expected)")
        }
        switch type {
        case .optional(let wrapped):
            if text.isEmpty || text == "null" { return .null }
            return try value(text, type: wrapped, describing: what)
        case .string, .enumeration:
            return .string(text)
        case .date:
            return .string(try eta(text, option: what))
        case .daterange:
            // `10m..25m` as `+10m..+25m`, each side read as `--eta` reads a time.
            guard let separator = text.range(of: "..") else {
                throw invalid("a time window, two times joined by `..` like 10m..25m or 2025-05-01T07:10:00Z..2025-05-01T07:25:00Z")
            }
            let upper = text[separator.upperBound...].drop { $0 == "." }
            return .string(try eta(String(text[..<separator.lowerBound]), option: what) + ".." + eta(String(upper), option: what))
        case .int:
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)) else { throw invalid("a whole number") }
            return .int(number)
        case .double:
            guard let number = Double(text.trimmingCharacters(in: .whitespaces)), number.isFinite else { throw invalid("a number") }
            return .double(number)
        case .bool:
            switch text.lowercased() {
            case "true", "yes", "1": return .bool(true)
            case "false", "no", "0": return .bool(false)
            default: throw invalid("true or false")
            }
        case .array(let element, _):
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("[") {
                guard let parsed = try? JSONValue(json: trimmed) else { throw invalid("a JSON array") }
                return parsed
            }
            let items = trimmed.isEmpty ? [] : trimmed.split(separator: ",", omittingEmptySubsequences: false)
            return .array(try items.map { try value(String($0).trimmingCharacters(in: .whitespaces), type: element, describing: what) })
        case .structure(let structure):
            guard let parsed = try? JSONValue(json: text), case .object = parsed else {
                throw invalid("a JSON object of type \(structure.name), like '{\"\(structure.fields.first?.name ?? "name")\": …}'")
            }
            return parsed
        }
    }

    /// A time as the engine takes it: ISO-8601 text as given, an offset such as `+15m` as given,
    /// and `15m` read as `+15m` (from now).
    public static func eta(_ text: String, option: String = "--eta") throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "now" { return trimmed }
        if let sign = trimmed.first, sign == "+" || sign == "-", WorkflowDuration(parsing: String(trimmed.dropFirst())) != nil {
            return trimmed
        }
        if WorkflowDuration(parsing: trimmed) != nil { return "+" + trimmed }
        // The engine's own reading of times: what it refuses is refused here, and the reverse.
        if WorkflowTime.isValid(trimmed) { return trimmed }
        throw CLIError(.invalidInput, "\(option): `\(text)` is not a time",
                       remedy: "give an offset like 15m or +1h30m, or ISO-8601 like 2025-05-01T12:00:00Z")
    }

    /// `--attributes-json` text as a JSON object.
    public static func jsonObject(_ text: String, option: String) throws -> [String: JSONValue] {
        guard let value = try? JSONValue(json: text) else {
            throw CLIError(.invalidInput, "\(option) is not valid JSON", remedy: #"give an object like '{"merchantName": "Luigi's"}'"#)
        }
        guard case .object(let object) = value else {
            throw CLIError(.invalidInput, "\(option) must be a JSON object, not \(value.typeName)", remedy: #"give an object like '{"itemCount": 3}'"#)
        }
        return object
    }
}
