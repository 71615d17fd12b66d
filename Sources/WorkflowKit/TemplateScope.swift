/// The variables a template may name at one place in the file.
struct TemplateScope {
    var attributes: [FieldSpec]
    var content: [FieldSpec]
    var inputs: [FieldSpec]
    /// Whose inputs these are, for messages: "transition `a -> b`".
    var inputOwner: String
    /// Why `previous.*` is unavailable, or nil when it is available.
    var previousUnavailable: String?

    /// The type of `group.field`, or of a struct's member `group.field.member…`.
    func type(of variable: String) -> FieldType? {
        if variable == "now" { return .date }
        let parts = variable.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2 else { return nil }
        var type: FieldType
        switch parts[0] {
        case "attributes":
            guard let found = attributes.first(where: { $0.name == parts[1] })?.type else { return nil }
            type = found
        case "input":
            guard let found = inputs.first(where: { $0.name == parts[1] })?.type else { return nil }
            type = found
        case "previous":
            guard previousUnavailable == nil, let found = content.first(where: { $0.name == parts[1] })?.type else { return nil }
            type = found.isOptional ? found : .optional(found)
        default: return nil
        }
        for member in parts.dropFirst(2) {
            guard let structure = type.structType, let field = structure.fields.first(where: { $0.name == member }) else { return nil }
            // A member of an optional struct is absent when the struct is.
            type = type.isOptional && !field.type.isOptional ? .optional(field.type) : field.type
        }
        return type
    }

    var allNames: [String] {
        func names(_ prefix: String, _ fields: [FieldSpec]) -> [String] {
            fields.flatMap { field in
                [prefix + field.name] + (field.type.structType.map { names(prefix + field.name + ".", $0.fields) } ?? [])
            }
        }
        return names("attributes.", attributes) + names("input.", inputs)
            + (previousUnavailable == nil ? names("previous.", content) : []) + ["now"]
    }
}
