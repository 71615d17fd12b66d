// libyaml as bundled and built by Yams (its C module, not a product of the package, but always
// built with it): its event parser lets us look at anchors and aliases before Yams composes nodes.
import CYaml

/// Guards against alias bombs ("billion laughs"): anchors (`&a`) whose values repeat other
/// anchors through aliases (`*a`) stand for exponentially many values. Nine levels of nine
/// aliases, about 1 KB of text, stand for 387 million strings.
///
/// Yams composes an alias cheaply, by sharing the anchored node, but it then hashes every
/// mapping key to find duplicates, and hashing walks the whole shared structure: one such alias
/// used as a key (`? *bomb`) keeps the loader busy for a minute and a half, and every further
/// level multiplies that by nine. Before Yams sees a document, libyaml's event parser
/// (iterative, linear in the text) adds up how many values the aliases stand for, and the
/// document is rejected past `limit`.
enum AliasExpansion {
    /// Values all aliases of a document may stand for together. Sharing an alert or a content
    /// block through aliases costs tens; an alias bomb needs millions.
    static let limit = 10_000

    struct Excess {
        var alias: String
        var position: SourcePosition
    }

    /// The alias at which the aliases of `yaml` stand for more than `limit` values, if any. Nil too
    /// for text that is not valid YAML: Yams reports the syntax error when it reads the text.
    static func firstExcess(in yaml: String) -> Excess? {
        // No alias without a `*`: most files skip the second parse.
        guard yaml.utf8.contains(UInt8(ascii: "*")) else { return nil }
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { return nil }
        defer { yaml_parser_delete(&parser) }
        var text = yaml
        return text.withUTF8 { bytes -> Excess? in
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            yaml_parser_set_input_string(&parser, bytes.baseAddress, bytes.count)
            var sizes: [String: Int] = [:]  // values each anchor stands for, itself included
            var open: [(size: Int, anchor: String?)] = []  // sequences and mappings being read
            var expanded = 0
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                var finished: (size: Int, anchor: String?)?
                switch event.type {
                case YAML_STREAM_END_EVENT:
                    return nil
                case YAML_SCALAR_EVENT:
                    finished = (1, name(event.data.scalar.anchor))
                case YAML_SEQUENCE_START_EVENT:
                    open.append((1, name(event.data.sequence_start.anchor)))
                case YAML_MAPPING_START_EVENT:
                    open.append((1, name(event.data.mapping_start.anchor)))
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    finished = open.popLast()
                case YAML_ALIAS_EVENT:
                    // An undefined alias counts 1; Yams reports it.
                    let alias = name(event.data.alias.anchor) ?? ""
                    let size = sizes[alias] ?? 1
                    expanded += size
                    if expanded > limit {
                        let mark = event.start_mark
                        return Excess(alias: alias, position: SourcePosition(line: Int(mark.line) + 1, column: Int(mark.column) + 1))
                    }
                    finished = (size, nil)
                default:
                    break  // stream start, document start and end
                }
                if let finished {
                    if let anchor = finished.anchor { sizes[anchor] = finished.size }
                    if !open.isEmpty { open[open.count - 1].size += finished.size }
                }
            }
        }
    }

    private static func name(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }
}
