import Yams

/// Content values: literals checked against the field's type here, templates kept for the
/// validator, which knows what variables each place can use.
extension WorkflowParser {
    mutating func content(_ node: Node, what: String, schema: [FieldSpec]) -> [String: Located<ValueSpec>] {
        guard let map = mapping(node, what: what, allowed: nil, nullIsEmpty: true) else { return [:] }
        var result: [String: Located<ValueSpec>] = [:]
        for entry in map.entries {
            guard let field = schema.first(where: { $0.name == entry.key }) else {
                error("\(what) sets `\(entry.key)`, which is not a ContentState field\(didYouMean(entry.key, in: schema.map(\.name))); fields: \(codeList(schema.map(\.name)))",
                      at: entry.keyNode)
                continue
            }
            if let value = value(entry.value, field: field.name, type: field.type) {
                result[field.name] = Located(value: value, position: SourcePosition(entry.value))
            }
        }
        return result
    }

    /// A literal or template for a field of `type`; literals are checked against the type here.
    mutating func value(_ node: Node, field: String, type: FieldType) -> ValueSpec? {
        let label = "`\(field)` (\(type.spelling))"
        switch node {
        case .sequence(let items):
            guard case .array(let element, let maxCount) = type.nonOptional else {
                if case .daterange = type.nonOptional {
                    error("\(label) is written as one text, two times joined by `..`: \(DateRangeValues.example)", at: node)
                    return nil
                }
                error("\(label) is not an array; give a single value, not a list", at: node)
                return nil
            }
            if items.count > maxCount {
                error("\(label) holds at most \(maxCount) elements, the list has \(items.count)", at: node)
                return nil
            }
            var values: [ValueSpec] = []
            for item in items {
                guard let value = value(item, field: field + "[]", type: element) else { return nil }
                values.append(value)
            }
            return .list(values)
        case .mapping where type.structType != nil:
            error("\(label) is a struct: fill it from a variable of the same type, like \"{{input.\(field)}}\" or \"{{previous.\(field)}}\"", at: node)
            return nil
        case .mapping, .alias:
            error("\(label) needs a value, a template like \"{{input.x}}\", or a list; not \(describe(node))", at: node)
            return nil
        case .scalar(let scalar):
            if node.tagName == .null {
                guard type.isOptional else {
                    error("\(label) is required and cannot be null; give a value or make the field optional (`\(type.spelling)?`)", at: node)
                    return nil
                }
                return .literal(.null)
            }
            let text = scalar.string
            let isText = node.tagName == .str || node.tagName == .timestamp
            if isText, text.contains("{{") {
                do {
                    return .template(try Template(text))
                } catch {
                    self.error("\(label): \(error.message)", at: node)
                    return nil
                }
            }
            if case .array = type.nonOptional {
                error("\(label) is an array: write a YAML list like `[a, b]` or a single template like \"{{input.\(field)}}\"", at: node)
                return nil
            }
            return literal(scalar, node: node, label: label, type: type.nonOptional)
        }
    }

    mutating func literal(_ scalar: Node.Scalar, node: Node, label: String, type: FieldType) -> ValueSpec? {
        let text = scalar.string
        let tag = node.tagName
        let yamlKind: String
        switch tag {
        case .int: yamlKind = "a number"
        case .float: yamlKind = "a number"
        case .bool: yamlKind = "a bool"
        default: yamlKind = "text"
        }
        func wrong(_ expected: String) -> ValueSpec? {
            error("\(label) expects \(expected), but `\(text)` is \(yamlKind)", at: node)
            return nil
        }
        switch type {
        case .string(let maxLength):
            guard tag == .str || tag == .timestamp else { return wrong("text; quote the value (\"\(text)\") to use it as text") }
            if let maxLength, text.count > maxLength {
                error("\(label) allows at most \(maxLength) characters, the text has \(text.count)", at: node)
                return nil
            }
            return .literal(.string(text))
        case .int:
            guard tag == .int, let value = node.int else { return wrong("a whole number") }
            return .literal(.int(value))
        case .double:
            guard tag == .int || tag == .float, let value = node.float, value.isFinite else { return wrong("a number") }
            return .literal(.double(value))
        case .bool:
            guard tag == .bool, let value = node.bool else { return wrong("`true` or `false`") }
            return .literal(.bool(value))
        case .date:
            guard tag == .str || tag == .timestamp, DateValues.isDateLiteral(text) else {
                return wrong("a date: an ISO-8601 time like `2025-05-01T12:00:00Z`, an offset from the transition time like `+15m`, `now`, or a template")
            }
            return .literal(.string(text))
        case .daterange:
            guard tag == .str || tag == .timestamp, DateRangeValues.isLiteral(text) else {
                return wrong("a date range: two times joined by `..`, each ISO-8601 like `2025-05-01T07:10:00Z`, an offset from the transition time like `+10m`, or `now` (\(DateRangeValues.example)), or a template")
            }
            if DateRangeValues.isInverted(text) {
                error("\(label): `\(text)` ends before it starts; give the earlier time first", at: node)
                return nil
            }
            return .literal(.string(text))
        case .enumeration(let values):
            guard values.contains(text) else {
                error("\(label): `\(text)` is not one of the enum's values\(didYouMean(text, in: values)); use one of \(codeList(values))", at: node)
                return nil
            }
            return .literal(.string(text))
        case .optional(let wrapped):
            return literal(scalar, node: node, label: label, type: wrapped)
        case .array:
            return wrong("a list")
        case .structure(let structure):
            return wrong("a \(structure.name) object: a template like \"{{input.x}}\" naming a \(structure.name)")
        }
    }
}
