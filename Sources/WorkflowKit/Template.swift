import Mustache

/// A Mustache template from a workflow file, compiled once, rendered as plain text (no HTML
/// escaping). Two templates are equal when their source text is.
///
/// Supported tags: `{{name}}`, `{{{name}}}`, `{{&name}}`, sections `{{#name}}…{{/name}}`,
/// inverted sections `{{^name}}…{{/name}}`, comments `{{! … }}`, and swift-mustache transforms
/// such as `{{uppercased(attributes.merchantName)}}`. Partials, inheritance, custom delimiters and
/// pragmas are rejected: a workflow's templates stand alone.
public struct Template: Sendable, Hashable, CustomStringConvertible {
    public let source: String
    let compiled: MustacheTemplate
    let nodes: [TemplateNode]

    public static func == (lhs: Template, rhs: Template) -> Bool { lhs.source == rhs.source }
    public func hash(into hasher: inout Hasher) { hasher.combine(source) }
    public var description: String { source }

    struct ParseError: Error {
        let message: String
    }

    /// Rendering swift-mustache in text mode: the pragma switches off HTML escaping; the empty
    /// comment after it keeps the pragma from being "standalone" and eating a leading newline.
    private static let textModePrefix = "{{%CONTENT_TYPE:TEXT}}{{!}}"

    init(_ source: String) throws(ParseError) {
        // No longer template fits in an APNs payload, and swift-mustache takes time quadratic in
        // the number of tags to compile one: a huge template of tags would stall loading.
        let length = source.utf8.count
        guard length <= APNSLimits.maximumPayloadSize else {
            throw ParseError(message: "the template is \(length) bytes long, more than the \(APNSLimits.maximumPayloadSize) bytes a whole APNs payload may have; shorten it")
        }
        var scanner = TemplateScanner(source: source)
        let nodes = try scanner.parse()
        do {
            self.compiled = try MustacheTemplate(string: Template.textModePrefix + source)
        } catch let error as MustacheTemplate.ParserError {
            throw ParseError(message: "template does not parse: \(error.error) (near `\(error.context.line.trimmingCharacters(in: .whitespaces))`)")
        } catch {
            throw ParseError(message: "template does not parse: \(error)")
        }
        self.source = source
        self.nodes = nodes
    }

    /// `{{previous.field}}`: what a field that carries over shows when nothing sets it.
    static func previousValue(of field: String) -> Template {
        do {
            return try Template("{{previous.\(field)}}")
        } catch {
            // Field names are Swift identifiers, checked when the file loads: this always parses.
            preconditionFailure("`{{previous.\(field)}}` does not parse: \(error.message)")
        }
    }

    /// Renders the template straight from typed values — text, variables and sections over
    /// text, numbers, booleans and null, the templates workflows are made of — as swift-mustache
    /// renders them against the same values, without building its `[String: Any]` context and
    /// casting every value on the way (a third of an advance's rendering time). `variables` are
    /// keyed by full name (`input.eta`). Returns nil for anything else (transforms, `.`, arrays,
    /// a name not in `variables`, several lines): render with swift-mustache then.
    func renderDirect(_ variables: [String: JSONValue]) -> String? {
        guard rendersDirectly else { return nil }
        var output = ""
        return Self.renderDirect(nodes, variables, into: &output) ? output : nil
    }

    /// Whether `renderDirect` may render this template. Mustache's "standalone tag" rules strip
    /// whole lines around sections and comments; a template of one line has no such lines.
    /// (Decided per call, from the few bytes of a template, rather than stored.)
    var rendersDirectly: Bool {
        !source.utf8.contains { $0 == 0x0A || $0 == 0x0D } && nodes.allSatisfy(\.isDirectlyRenderable)
    }

    private static func renderDirect(_ nodes: [TemplateNode], _ variables: [String: JSONValue], into output: inout String) -> Bool {
        for node in nodes {
            switch node {
            case .text(let text):
                output += text
            case .variable(let name, let transforms):
                // swift-mustache writes `String(describing:)` of the value; null renders nothing.
                let value = transforms.isEmpty ? variables[name] : TemplateNode.transformed(variables[name], transforms)
                switch value {
                case .null: break
                case .string(let text): output += text
                case .int(let int): output += String(describing: int)
                case .double(let double): output += String(describing: double)
                case .bool(let bool): output += String(describing: bool)
                case .array, .object, nil: return false
                }
            case .section(let name, let transforms, let inverted, let children):
                // A boolean decides; null is absent; any text or number (even "" or 0) is present
                // and is pushed on the context stack, where it has no children: names inside the
                // section still resolve from the top, as here.
                let present: Bool
                switch transforms.isEmpty ? variables[name] : TemplateNode.transformed(variables[name], transforms) {
                case .null: present = false
                case .bool(let bool): present = bool
                case .string, .int, .double: present = true
                case .array, .object, nil: return false
                }
                if present != inverted, !renderDirect(children, variables, into: &output) { return false }
            }
        }
        return true
    }

    /// True when the template is exactly one variable tag, e.g. `{{input.eta}}`: its value is then
    /// copied with its type (a date, an array, null) instead of going through text.
    var singleVariable: String? {
        guard nodes.count == 1, case .variable(let name, let transforms) = nodes[0], transforms.isEmpty else {
            return nil
        }
        return name
    }

    /// Every variable the template names, with whether it appears inside a section.
    var variables: [(name: String, transforms: [String], insideSection: Bool)] {
        var result: [(String, [String], Bool)] = []
        func visit(_ nodes: [TemplateNode], inside: Bool) {
            for node in nodes {
                switch node {
                case .text: break
                case .variable(let name, let transforms): result.append((name, transforms, inside))
                case .section(let name, let transforms, _, let children):
                    result.append((name, transforms, inside))
                    visit(children, inside: true)
                }
            }
        }
        visit(nodes, inside: false)
        return result
    }

    func render(_ context: [String: Any]) -> String {
        compiled.render(context)
    }

    /// Transforms swift-mustache 2.x knows (see its Transform.swift).
    static let knownTransforms: Set<String> = [
        "capitalized", "lowercased", "uppercased", "reversed", "empty", "count", "first", "last", "sorted",
        "equalzero", "plusone", "minusone", "even", "odd", "enumerated",
    ]
}

indirect enum TemplateNode: Sendable {
    case text(String)
    case variable(name: String, transforms: [String])
    case section(name: String, transforms: [String], inverted: Bool, children: [TemplateNode])

    /// No names relative to the current object (`.`, `.x`), and no transforms but the integer
    /// ones (`item{{^equalzero(minusone(n))}}s{{/…}}`, the plural idiom).
    var isDirectlyRenderable: Bool {
        switch self {
        case .text: return true
        case .variable(let name, let transforms):
            return !name.hasPrefix(".") && transforms.allSatisfy(Self.integerTransforms.contains)
        case .section(let name, let transforms, _, let children):
            return !name.hasPrefix(".") && transforms.allSatisfy(Self.integerTransforms.contains)
                && children.allSatisfy(\.isDirectlyRenderable)
        }
    }

    /// swift-mustache's transforms of an integer (its `FixedWidthInteger.transform`), which the
    /// direct path computes the same way.
    static let integerTransforms: Set<String> = ["equalzero", "plusone", "minusone", "even", "odd"]

    /// `value` after `transforms` (written outermost first, as in `equalzero(minusone(n))`), or
    /// nil when swift-mustache must render it: a transform of anything but an integer.
    static func transformed(_ value: JSONValue?, _ transforms: [String]) -> JSONValue? {
        var value = value
        for transform in transforms.reversed() {
            guard case .int(let number) = value else { return nil }
            switch transform {
            case "equalzero": value = .bool(number == 0)
            case "plusone": value = .int(number &+ 1)
            case "minusone": value = .int(number &- 1)
            case "even": value = .bool(number & 1 == 0)
            case "odd": value = .bool(number & 1 == 1)
            default: return nil
            }
        }
        return value
    }
}

/// Finds the tags of a template so its variables can be checked against the workflow's schemas
/// before anything is rendered. swift-mustache parses the same text for rendering.
private struct TemplateScanner {
    let source: String
    var index: String.Index

    init(source: String) {
        self.source = source
        self.index = source.startIndex
    }

    /// Sections nested deeper than this are refused: parsing, checking and rendering recurse per
    /// level (here and in swift-mustache), and thousands of levels would overflow the stack.
    static let maximumSectionDepth = 20

    mutating func parse() throws(Template.ParseError) -> [TemplateNode] {
        let (nodes, closing) = try parseNodes(until: nil, depth: 0)
        if let closing { throw .init(message: "`{{/\(closing)}}` closes a section that was never opened") }
        return nodes
    }

    private mutating func parseNodes(until section: String?, depth: Int) throws(Template.ParseError) -> ([TemplateNode], String?) {
        var nodes: [TemplateNode] = []
        var text = ""
        while index < source.endIndex {
            guard source[index...].hasPrefix("{{") else {
                text.append(source[index])
                index = source.index(after: index)
                continue
            }
            if !text.isEmpty {
                nodes.append(.text(text))
                text = ""
            }
            index = source.index(index, offsetBy: 2)
            let triple = index < source.endIndex && source[index] == "{"
            let closer = triple ? "}}}" : "}}"
            guard let end = source[index...].range(of: closer) else {
                throw .init(message: "unclosed tag: `{{` without a matching `\(closer)`")
            }
            var tag = String(source[index..<end.lowerBound])
            index = end.upperBound
            if triple { tag.removeFirst() }
            let sigil = tag.first
            switch sigil {
            case "!":
                continue
            case "#", "^":
                let (name, transforms) = try Self.parseName(String(tag.dropFirst()))
                guard depth < Self.maximumSectionDepth else {
                    throw .init(message: "sections are nested more than \(Self.maximumSectionDepth) deep at `{{\(sigil!)\(name)}}`; nest fewer sections")
                }
                let (children, closing) = try parseNodes(until: name, depth: depth + 1)
                guard closing == name else {
                    throw .init(message: "section `{{\(sigil!)\(name)}}` is not closed; add `{{/\(name)}}`")
                }
                nodes.append(.section(name: name, transforms: transforms, inverted: sigil == "^", children: children))
            case "/":
                let (name, _) = try Self.parseName(String(tag.dropFirst()))
                guard name == section else {
                    if let section {
                        throw .init(message: "`{{/\(name)}}` does not match the open section `\(section)`")
                    }
                    throw .init(message: "`{{/\(name)}}` closes a section that was never opened")
                }
                if !text.isEmpty { nodes.append(.text(text)) }
                return (nodes, name)
            case ">", "<", "$":
                throw .init(message: "partials and template inheritance (`{{\(sigil!)…}}`) are not supported in workflows")
            case "=":
                throw .init(message: "changing delimiters (`{{=…=}}`) is not supported in workflows")
            case "%":
                throw .init(message: "pragmas (`{{%…}}`) are not supported in workflows")
            case "&":
                let (name, transforms) = try Self.parseName(String(tag.dropFirst()))
                nodes.append(.variable(name: name, transforms: transforms))
            default:
                let (name, transforms) = try Self.parseName(tag)
                nodes.append(.variable(name: name, transforms: transforms))
            }
        }
        if let section {
            throw .init(message: "section `{{#\(section)}}` is not closed; add `{{/\(section)}}`")
        }
        if !text.isEmpty { nodes.append(.text(text)) }
        return (nodes, nil)
    }

    /// `name`, or transforms applied to it: `uppercased(name)`, `first(reversed(name))`.
    static func parseName(_ raw: String) throws(Template.ParseError) -> (String, [String]) {
        let text = raw.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else { throw .init(message: "empty tag `{{}}`: name a variable, e.g. `{{input.eta}}`") }
        var transforms: [String] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "(") {
            guard rest.hasSuffix(")") else { throw .init(message: "malformed tag `{{\(text)}}`: unbalanced parentheses") }
            transforms.append(String(rest[..<open]))
            rest = rest[rest.index(after: open)..<rest.index(before: rest.endIndex)]
        }
        let name = String(rest)
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._")
        guard !name.isEmpty, name.allSatisfy({ allowed.contains($0) }) else {
            throw .init(message: "malformed tag `{{\(text)}}`: a variable name uses letters, digits, `_` and `.`")
        }
        return (name, transforms)
    }
}
