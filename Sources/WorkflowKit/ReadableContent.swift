import Foundation

extension Workflow {
    /// A ContentState in the app's JSON shape — dates as seconds since 2001-01-01, what the
    /// app's `JSONDecoder` reads — with its dates as ISO-8601 text, for people and for programs
    /// that read OrderFlow's JSON. Other values, and fields the schema does not know, stay as they are.
    public func readableContent(_ content: JSONValue) -> JSONValue {
        guard case .object(var fields) = content else { return content }
        for field in contentSchema {
            guard let value = fields[field.name] else { continue }
            fields[field.name] = Renderer.templateValue(value, type: field.type, time: Date(timeIntervalSince1970: 0))
        }
        return .object(fields)
    }
}
