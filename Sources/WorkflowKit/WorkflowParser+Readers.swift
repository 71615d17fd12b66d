import Yams

/// The readers every section uses: each checks a node's shape and YAML type and reports what it
/// expected, so that a section's code only says which key it reads and what for.
extension WorkflowParser {
    struct Entries {
        var node: Node
        var entries: [(key: String, keyNode: Node, value: Node)]

        subscript(key: String) -> Node? { entries.first { $0.key == key }?.value }
        func keyNode(_ key: String) -> Node? { entries.first { $0.key == key }?.keyNode }
    }

    /// Reads a mapping, reporting unknown keys (with a suggestion) and missing required ones.
    /// `allowed == nil` accepts any key (maps whose keys are names: states, fields).
    mutating func mapping(_ node: Node, what: String, allowed: [String]?, required: [String] = [],
                          nullIsEmpty: Bool = false) -> Entries?
    {
        if nullIsEmpty, case .scalar = node, node.tagName == .null {
            return Entries(node: node, entries: [])
        }
        guard case .mapping(let map) = node else {
            let hint = allowed.map { " with keys such as \(codeList($0.prefix(4)))" } ?? ""
            error("\(what) must be a mapping (`key: value` lines)\(hint), not \(describe(node))", at: node)
            return nil
        }
        var entries: [(String, Node, Node)] = []
        for (keyNode, value) in map {
            guard case .scalar(let keyScalar) = keyNode else {
                error("keys in \(what) must be plain names, not \(describe(keyNode))", at: keyNode)
                continue
            }
            let key = keyScalar.string
            if let allowed, !allowed.contains(key) {
                error("unknown key `\(key)` in \(what)\(didYouMean(key, in: allowed)); allowed keys: \(codeList(allowed))",
                      at: keyNode)
                continue
            }
            entries.append((key, keyNode, value))
        }
        for key in required where !entries.contains(where: { $0.0 == key }) {
            error("\(what) is missing the required key `\(key)`", at: node)
        }
        return Entries(node: node, entries: entries)
    }

    func describe(_ node: Node) -> String {
        switch node {
        case .scalar(let scalar):
            if node.tagName == .null { return "an empty value" }
            return "the value `\(scalar.string)`"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        }
    }

    mutating func string(_ node: Node, what: String) -> String? {
        guard case .scalar(let scalar) = node, node.tagName != .null else {
            error("\(what) must be a text value, not \(describe(node))", at: node)
            return nil
        }
        return scalar.string
    }

    mutating func name(_ node: Node, what: String) -> String? {
        guard let text = string(node, what: what) else { return nil }
        guard SwiftNames.isIdentifier(text) else {
            error("\(what) `\(text)` must be a name made of letters, digits and `_` (not starting with a digit)", at: node)
            return nil
        }
        return text
    }

    mutating func bool(_ node: Node, what: String) -> Bool? {
        guard case .scalar = node, node.tagName == .bool, let value = node.bool else {
            error("\(what) must be `true` or `false`, not \(describe(node))", at: node)
            return nil
        }
        return value
    }

    mutating func number(_ node: Node, what: String) -> Double? {
        guard case .scalar = node, node.tagName == .int || node.tagName == .float,
            let value = node.float, value.isFinite
        else {
            error("\(what) must be a number, not \(describe(node))", at: node)
            return nil
        }
        return value
    }

    mutating func priority(_ node: Node) -> Int? {
        guard case .scalar = node, node.tagName == .int, let value = node.int, value == 5 || value == 10 else {
            error("`priority` must be 5 (opportunistic, free) or 10 (immediate, uses the device's budget), not \(describe(node))", at: node)
            return nil
        }
        return value
    }

    mutating func duration(_ node: Node, what: String) -> WorkflowDuration? {
        guard case .scalar(let scalar) = node, node.tagName != .null else {
            error("\(what) must be a duration like `45m`, `10s`, `2h` or `1h30m`, not \(describe(node))", at: node)
            return nil
        }
        guard let duration = WorkflowDuration(parsing: scalar.string) else {
            error("\(what): `\(scalar.string)` is not a duration; write a number with a unit, largest unit first, e.g. `45m`, `10s`, `2h`, `1h30m` (units d, h, m, s)", at: node)
            return nil
        }
        return duration
    }

    /// A single name or a list of names.
    mutating func names(_ node: Node, what: String) -> [Located<String>] {
        switch node {
        case .sequence(let sequence):
            if sequence.isEmpty { error("\(what) is an empty list; name at least one state", at: node) }
            return sequence.compactMap { item in string(item, what: what).map { Located(value: $0, position: SourcePosition(item)) } }
        default:
            return string(node, what: what).map { [Located(value: $0, position: SourcePosition(node))] } ?? []
        }
    }
}

extension Node {
    /// The resolved YAML tag (`str`, `int`, `bool`, `null`, …) of this node.
    var tagName: Tag.Name { Tag.Name(rawValue: tag.rawValue) }
}
