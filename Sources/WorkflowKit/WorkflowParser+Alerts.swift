import Foundation
import Yams

/// Alerts and the texts and templates in them.
extension WorkflowParser {
    static let alertKeys = ["title", "body", "sound"]

    mutating func alertOverride(_ node: Node, what: String) -> AlertOverride {
        if case .scalar(let scalar) = node, node.tagName == .bool || node.tagName == .null || scalar.string == "none" {
            if node.tagName == .bool, node.bool == true {
                error("\(what) must be a mapping with `title` and `body`, or `none`/`false` for no alert", at: node)
            }
            return .suppressed
        }
        guard let map = mapping(node, what: what, allowed: Self.alertKeys, required: ["title", "body"]) else { return .inherit }
        var templates: [TemplateUse] = []
        let title = map["title"].flatMap { text($0, what: "`title` of \(what)", templates: &templates) }
        let body = map["body"].flatMap { text($0, what: "`body` of \(what)", templates: &templates) }
        let sound = map["sound"].flatMap { string($0, what: "`sound` of \(what)") }
        guard let title, let body else { return .inherit }
        return .alert(ParsedAlert(spec: AlertSpec(title: title, body: body, sound: sound), templates: templates,
                                  position: SourcePosition(node)))
    }

    mutating func text(_ node: Node, what: String, templates: inout [TemplateUse]) -> TextSpec? {
        if case .mapping = node {
            guard let map = mapping(node, what: what, allowed: ["loc-key", "loc-args"], required: ["loc-key"]) else { return nil }
            guard let key = map["loc-key"].flatMap({ string($0, what: "`loc-key` of \(what)") }) else { return nil }
            var args: [Template] = []
            if let argsNode = map["loc-args"] {
                guard case .sequence(let items) = argsNode else {
                    error("`loc-args` of \(what) must be a list of texts or templates", at: argsNode)
                    return nil
                }
                for item in items {
                    guard let template = template(item, what: "`loc-args` of \(what)") else { return nil }
                    templates.append(TemplateUse(template: template, position: SourcePosition(item), label: "`loc-args` of \(what)"))
                    args.append(template)
                }
            }
            return .localized(key: key, args: args)
        }
        guard let template = template(node, what: what) else { return nil }
        if template.source.trimmingCharacters(in: .whitespaces).isEmpty {
            error("\(what) is empty; an alert needs text (an empty alert makes a push-to-start silently fail)", at: node)
            return nil
        }
        templates.append(TemplateUse(template: template, position: SourcePosition(node), label: what))
        return .plain(template)
    }

    mutating func template(_ node: Node, what: String) -> Template? {
        guard case .scalar(let scalar) = node, node.tagName != .null else {
            error("\(what) must be a text or a template, not \(describe(node))", at: node)
            return nil
        }
        do {
            return try Template(scalar.string)
        } catch {
            self.error("\(what): \(error.message)", at: node)
            return nil
        }
    }
}
