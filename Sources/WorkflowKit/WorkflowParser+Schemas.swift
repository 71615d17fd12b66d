import Yams

/// `activity` (the app's ActivityAttributes and ContentState schemas), the fields of a schema,
/// and the struct types declared under `types:`.
extension WorkflowParser {
    struct ParsedActivity {
        var attributesType: String
        var attributes: [FieldSpec]
        var content: [FieldSpec]
    }

    mutating func parseActivity(_ node: Node, structs: [StructType]) -> ParsedActivity? {
        guard let map = mapping(node, what: "`activity`", allowed: ["attributes-type", "attributes", "content-state", "carry-over"],
                                required: ["attributes-type", "content-state"])
        else { return nil }
        var attributesType = ""
        if let typeNode = map["attributes-type"], let text = string(typeNode, what: "`attributes-type`") {
            if let problem = SwiftNames.problem(with: text) {
                error("`attributes-type`: \(problem); it must be the Swift name of the app's ActivityAttributes type", at: typeNode)
            } else if text == "ContentState" {
                error("`attributes-type` cannot be `ContentState`, the name of its nested type", at: typeNode)
            } else if structs.contains(where: { $0.name == text }) {
                error("`attributes-type` `\(text)` is also the name of a type under `types:`; rename one", at: typeNode)
            } else {
                attributesType = text
            }
        }
        var carryOverAll = false
        if let node = map["carry-over"] {
            carryOverAll = bool(node, what: "`activity.carry-over`") ?? false
        }
        let structsByName = Dictionary(structs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let attributes = map["attributes"].map {
            schema($0, what: "`activity.attributes`", swiftNames: true, structs: structsByName)
        } ?? []
        let content = map["content-state"].map {
            schema($0, what: "`activity.content-state`", swiftNames: true, structs: structsByName,
                   carryOver: carryOverAll ? .all : .perField)
        } ?? []
        guard !attributesType.isEmpty, map["content-state"] != nil else { return nil }
        return ParsedActivity(attributesType: attributesType, attributes: attributes, content: content)
    }

    /// Whether the fields of a schema may keep their previous value (ContentState only).
    enum CarryOver {
        /// Not a ContentState: `carry-over` is refused.
        case notAllowed
        /// Only fields that say `carry-over: true`.
        case perField
        /// `activity.carry-over: true`: every field unless it says `carry-over: false`.
        case all
    }

    static let fieldKeys = ["type", "default", "carry-over"]

    /// `name: type` lines, or `name: {type: T, default: V, carry-over: true}`. `swiftNames` requires
    /// names usable as Swift properties (schemas that become the app's Codable types).
    mutating func schema(_ node: Node, what: String, swiftNames: Bool, structs: [String: StructType],
                         carryOver: CarryOver = .notAllowed) -> [FieldSpec]
    {
        guard let map = mapping(node, what: what, allowed: nil, nullIsEmpty: true) else { return [] }
        var fields: [FieldSpec] = []
        var enumTypeNames: [String: String] = [:]
        for entry in map.entries {
            let fieldName = entry.key
            if swiftNames, let problem = SwiftNames.problem(with: fieldName) {
                error("field name in \(what): \(problem); schema keys become Swift property names in the app", at: entry.keyNode)
                continue
            }
            if !swiftNames, !SwiftNames.isIdentifier(fieldName) {
                error("`\(fieldName)` in \(what) must be a name made of letters, digits and `_`", at: entry.keyNode)
                continue
            }
            var typeNode = entry.value
            var long: Entries?
            if case .mapping = entry.value {
                guard let entries = mapping(entry.value, what: "field `\(fieldName)` in \(what)", allowed: Self.fieldKeys,
                                            required: ["type"]),
                    let node = entries["type"]
                else { continue }
                long = entries
                typeNode = node
            }
            let typeText: String
            switch typeNode {
            case .scalar(let scalar) where typeNode.tagName != .null:
                typeText = scalar.string
            // Unquoted, `[string(10); 3]` is a YAML list of one element: read it as the array type.
            case .sequence(let items) where items.count == 1:
                guard case .scalar(let element) = items[0] else { fallthrough }
                typeText = "[\(element.string)]"
            default:
                error("field `\(fieldName)` in \(what) needs a type such as `string(60)`, `int`, `date?`, `enum(a, b)` or `{type: int, default: 0}`, not \(describe(typeNode))",
                      at: typeNode)
                continue
            }
            let type: FieldType
            do {
                type = try FieldType.parse(typeText, structs: structs)
            } catch {
                self.error("field `\(fieldName)` in \(what): \(error.message)", at: typeNode)
                continue
            }
            if swiftNames, let values = Self.enumValues(type) {
                var bad = false
                for value in values {
                    if let problem = SwiftNames.problem(with: value) {
                        error("enum value in field `\(fieldName)`: \(problem); enum values become Swift case names", at: typeNode)
                        bad = true
                    }
                }
                if bad { continue }
                let typeName = CodeGenerator.enumTypeName(for: fieldName)
                if typeName == "ContentState" {
                    error("enum field `\(fieldName)` would generate a Swift type named `ContentState`, which clashes with the nested ContentState struct; rename the field", at: entry.keyNode)
                    continue
                }
                if let other = enumTypeNames[typeName] {
                    error("enum fields `\(other)` and `\(fieldName)` would both generate the Swift type `\(typeName)`; rename one", at: entry.keyNode)
                    continue
                }
                if structs[typeName] != nil {
                    error("enum field `\(fieldName)` would generate a Swift type named `\(typeName)`, which clashes with the struct type `\(typeName)` under `types:`; rename the field or the type", at: entry.keyNode)
                    continue
                }
                enumTypeNames[typeName] = fieldName
            }
            var field = FieldSpec(name: fieldName, type: type, carriesOver: carryOver == .all)
            if let long {
                if let node = long["default"] {
                    guard let value = defaultValue(node, field: fieldName, type: type) else { continue }
                    field.defaultValue = value
                }
                if let node = long["carry-over"] {
                    if carryOver == .notAllowed {
                        error("`carry-over` of field `\(fieldName)` in \(what): only ContentState fields keep their previous value", at: node)
                        continue
                    }
                    field.carriesOver = bool(node, what: "`carry-over` of field `\(fieldName)`") ?? false
                }
            }
            fields.append(field)
        }
        return fields
    }

    /// A field's `default`: a literal of its type; dates and structs have none (a fixed date is
    /// a mistake waiting to happen, and a struct's own fields can have defaults).
    mutating func defaultValue(_ node: Node, field: String, type: FieldType) -> JSONValue? {
        // An empty list is a default of any array type.
        let isEmptyList = if case .sequence(let items) = node { items.isEmpty } else { false }
        func hasDateOrStruct(_ type: FieldType) -> Bool {
            switch type {
            case .date, .daterange, .structure: return true
            case .optional(let wrapped): return hasDateOrStruct(wrapped)
            case .array(let element, _): return !isEmptyList && hasDateOrStruct(element)
            default: return false
            }
        }
        if hasDateOrStruct(type) {
            error("`default` of field `\(field)`: a \(type.spelling) field cannot have a default; set it in the initial state's `content`, or give the struct's own fields defaults",
                  at: node)
            return nil
        }
        guard let value = value(node, field: field, type: type) else { return nil }
        func literal(_ spec: ValueSpec) -> JSONValue? {
            switch spec {
            case .literal(let value): return value
            case .list(let items):
                var values: [JSONValue] = []
                for item in items {
                    guard let value = literal(item) else { return nil }
                    values.append(value)
                }
                return .array(values)
            case .template: return nil
            }
        }
        guard let result = literal(value) else {
            error("`default` of field `\(field)` must be a literal value, not a template: there is nothing to render it from", at: node)
            return nil
        }
        return result
    }

    // MARK: Struct types

    /// `types:` — `Name: {field: type, …}`, each usable by name in the schemas and in the types
    /// declared after it.
    mutating func parseStructTypes(_ node: Node) -> [StructType] {
        guard let map = mapping(node, what: "`types`", allowed: nil, nullIsEmpty: true) else { return [] }
        var result: [StructType] = []
        var byName: [String: StructType] = [:]
        for entry in map.entries {
            let typeName = entry.key
            if let problem = SwiftNames.problem(with: typeName) {
                error("type name `\(typeName)` under `types`: \(problem); it becomes a Swift struct name in the app", at: entry.keyNode)
                continue
            }
            guard let first = typeName.unicodeScalars.first, ("A"..."Z").contains(first) else {
                error("type name `\(typeName)` under `types` must start with a capital letter (`\(typeName.prefix(1).uppercased() + typeName.dropFirst())`), as Swift types do, so it cannot be taken for a built-in type like `string`",
                      at: entry.keyNode)
                continue
            }
            if typeName == "ContentState" {
                error("type name `ContentState` under `types` clashes with the ActivityAttributes' nested ContentState struct; rename it", at: entry.keyNode)
                continue
            }
            let fields = schema(entry.value, what: "type `\(typeName)`", swiftNames: true, structs: byName)
            if fields.isEmpty {
                if case .mapping(let fieldMap) = entry.value, !fieldMap.isEmpty { continue }  // reported above
                error("type `\(typeName)` has no fields; list them as `name: type` lines", at: entry.keyNode)
                continue
            }
            let structure = StructType(name: typeName, fields: fields)
            result.append(structure)
            byName[typeName] = structure
        }
        return result
    }

    static func enumValues(_ type: FieldType) -> [String]? {
        switch type {
        case .enumeration(let values): return values
        case .optional(let wrapped), .array(let wrapped, _): return enumValues(wrapped)
        default: return nil
        }
    }
}
