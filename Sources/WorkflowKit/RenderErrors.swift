/// A rendering failure: a value that does not fit its field, or a payload over 4096 bytes.
public struct RenderError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// A rendered string is longer than the field's max length.
        case valueTooLong
        /// A rendered value cannot be converted to the field's type.
        case typeMismatch
        /// A required field rendered empty or null.
        case missingValue
        /// More array elements than the field allows.
        case tooManyElements
        /// The APNs payload would exceed 4096 bytes.
        case payloadTooLarge
        /// The state or transition is not part of this workflow.
        case unknownState
    }

    public var code: Code
    /// `workflow: transition from->to` or similar.
    public var context: String
    /// The ContentState field, when the problem is one field.
    public var field: String?
    public var message: String

    public var description: String {
        "\(context): \(field.map { "field `\($0)`: " } ?? "")\(message)"
    }
}

/// Attributes or a transition's input that do not match the workflow's declared types.
public struct DataValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// `merchantName`, `items[2]`, or empty for the whole value.
        public var path: String
        public var message: String
        public var description: String { path.isEmpty ? message : "`\(path)`: \(message)" }
    }

    /// What was checked: "attributes of workflow `food-order`", "input of transition `a -> b`".
    public var subject: String
    public var problems: [Problem]

    /// The first few problems; a value with hundreds of wrong keys does not make a page of text.
    public var description: String {
        let shown = problems.prefix(Self.problemsShown).map(\.description)
        let more = problems.count > Self.problemsShown ? "; and \(problems.count - Self.problemsShown) more" : ""
        return "invalid \(subject): " + shown.joined(separator: "; ") + more
    }

    static let problemsShown = 5
}
