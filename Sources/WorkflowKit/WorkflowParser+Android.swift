import Yams

/// An `android:` section as read, with positions for the checks that need the whole workflow.
struct ParsedAndroid {
    var presentation: AndroidPresentation
    var templates: [TemplateUse]
    var position: SourcePosition
    /// `when`: the field's name, or nil for `none`; absent when not written.
    var when: Located<String?>?
    var path: [Located<String>]?
}

/// `android:` at the top of the workflow and in a state: how the Android Live Update looks.
extension WorkflowParser {
    static let androidStateKeys = ["title", "text", "chip", "icon", "color", "channel", "promote", "ttl"]
    static let androidWorkflowKeys = androidStateKeys + ["when", "path"]
    /// The chip shows a few characters beside the clock; longer text is cut by the system.
    static let maximumChipLength = 12
    static let maximumAndroidNameLength = 64

    mutating func parseAndroid(_ node: Node, what: String, workflowLevel: Bool) -> ParsedAndroid? {
        let keys = workflowLevel ? Self.androidWorkflowKeys : Self.androidStateKeys
        guard let map = mapping(node, what: what, allowed: keys) else { return nil }
        var parsed = ParsedAndroid(presentation: AndroidPresentation(), templates: [], position: SourcePosition(node))
        func androidTemplate(_ key: String, into parser: inout WorkflowParser) -> Template? {
            guard let valueNode = map[key] else { return nil }
            let label = "`\(key)` of \(what)"
            guard let template = parser.template(valueNode, what: label) else { return nil }
            parsed.templates.append(TemplateUse(template: template, position: SourcePosition(valueNode), label: label))
            return template
        }
        parsed.presentation.title = androidTemplate("title", into: &self)
        parsed.presentation.text = androidTemplate("text", into: &self)
        parsed.presentation.chip = androidTemplate("chip", into: &self)
        if let valueNode = map["icon"] {
            parsed.presentation.icon = androidName(valueNode, what: "`icon` of \(what)", resource: true)
        }
        if let valueNode = map["channel"] {
            parsed.presentation.channel = androidName(valueNode, what: "`channel` of \(what)", resource: false)
        }
        if let valueNode = map["color"] { parsed.presentation.color = color(valueNode, what: "`color` of \(what)") }
        if let valueNode = map["promote"] { parsed.presentation.promote = bool(valueNode, what: "`promote` of \(what)") }
        if let valueNode = map["ttl"] {
            if let ttl = duration(valueNode, what: "`ttl` of \(what)") {
                if ttl.seconds > Self.maximumFCMTimeToLive.seconds {
                    error("`ttl` of \(what) is \(ttl), longer than FCM keeps a message (\(Self.maximumFCMTimeToLive)); give at most `\(Self.maximumFCMTimeToLive)`",
                          at: valueNode)
                } else {
                    parsed.presentation.ttl = ttl
                }
            }
        }
        if let valueNode = map["when"], let text = string(valueNode, what: "`when` of \(what)") {
            parsed.when = Located(value: text == "none" ? nil : text, position: SourcePosition(valueNode))
        }
        if let valueNode = map["path"] {
            if case .sequence(let items) = valueNode, !items.isEmpty {
                parsed.path = items.compactMap { item in
                    string(item, what: "`path` of \(what)").map { Located(value: $0, position: SourcePosition(item)) }
                }
            } else {
                error("`path` of \(what) must be a list of state names, e.g. `[received, in_progress, ready]`, not \(describe(valueNode))",
                      at: valueNode)
            }
        }
        return parsed
    }

    /// FCM keeps a message at most four weeks.
    static let maximumFCMTimeToLive = WorkflowDuration(seconds: 28 * 86_400)

    /// A drawable resource name (`ic_bag`: lowercase letters, digits and `_`, starting with a
    /// letter, as Android requires), or a channel id (letters, digits, `_`, `-`, `.`).
    mutating func androidName(_ node: Node, what: String, resource: Bool) -> String? {
        guard let text = string(node, what: what) else { return nil }
        let allowed: (Unicode.Scalar) -> Bool = resource
            ? { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
            : { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_-.".unicodeScalars.contains($0) }
        let startsWell = text.unicodeScalars.first.map { ("a"..."z").contains($0) || (!resource && ("A"..."Z").contains($0)) } ?? false
        guard startsWell, text.unicodeScalars.count <= Self.maximumAndroidNameLength, text.unicodeScalars.allSatisfy(allowed) else {
            let rule = resource
                ? "a drawable resource name: lowercase letters, digits and `_`, starting with a letter, like `ic_delivery`"
                : "a channel id: letters, digits, `_`, `-` and `.`, starting with a letter, like `order_updates`"
            error("\(what) `\(text)` must be \(rule) (at most \(Self.maximumAndroidNameLength) characters)", at: node)
            return nil
        }
        return text
    }

    /// `#RRGGBB`; an opaque colour, because Android does not promote colorized notifications and
    /// a translucent segment reads as an unfinished one.
    mutating func color(_ node: Node, what: String) -> String? {
        guard let text = string(node, what: what) else { return nil }
        let hex = text.dropFirst()
        guard text.hasPrefix("#"), hex.count == 6, hex.unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit }) else {
            error("\(what) `\(text)` must be a colour written `#RRGGBB`, like `#FF9800` (quote it in YAML: `\"#FF9800\"`)", at: node)
            return nil
        }
        return text.uppercased()
    }
}
