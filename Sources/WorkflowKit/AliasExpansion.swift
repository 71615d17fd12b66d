import Yams

/// Guards against alias bombs ("billion laughs"): anchors (`&a`) whose values repeat other
/// anchors through aliases (`*a`) stand for exponentially many values. Nine levels of nine
/// aliases, about 1 KB of text, stand for 387 million strings.
///
/// Yams composes an alias cheaply, by sharing the anchored node, but it then hashes every
/// mapping key to find duplicates, and hashing walks the whole shared structure: one such alias
/// used as a key (`? *bomb`) keeps the loader busy for a minute and a half, and every further
/// level multiplies that by nine. So before Yams composes the document, the guard composes a
/// defused copy of it, in which nothing is shared: every `*` is replaced by a character the text
/// does not contain, so that each alias becomes a plain scalar in the alias's place (a plain
/// scalar cannot start with `*`). Walking that tree in document order adds up how many values
/// the aliases stand for, and the document is rejected past `limit`.
///
/// The copy is as long as the text, character for character: positions in it are positions in
/// the file, and its syntax errors are the file's.
enum AliasExpansion {
    /// Values all aliases of a document may stand for together. Sharing an alert or a content
    /// block through aliases costs tens; an alias bomb needs millions.
    static let limit = 10_000

    struct Excess {
        var alias: String
        var position: SourcePosition
    }

    /// The alias at which the aliases of `yaml` stand for more than `limit` values, if any.
    ///
    /// Throws the text's YAML error, if it has one, instead of leaving it to the caller's own
    /// reading: an error after a bomb would otherwise be found only after the bomb went off.
    static func firstExcess(in yaml: String) throws -> Excess? {
        // No alias without a `*`: most files skip the second reading.
        guard yaml.utf8.contains(UInt8(ascii: "*")) else { return nil }
        let standIn = standIn(for: yaml)
        let defused = String(String.UnicodeScalarView(yaml.unicodeScalars.map { $0 == "*" ? standIn : $0 }))
        // The parser holds the anchors, which nodes name only weakly: it lives until the walk is done.
        let parser: Parser
        let root: Node?
        do {
            parser = try Parser(yaml: defused)
            root = try parser.singleRoot()
        } catch let error as YamlError {
            throw restoringAliases(in: error, standIn: standIn)
        }
        guard let root else { return nil }
        return withExtendedLifetime(parser) {
            var tally = Tally(standIn: standIn)
            _ = tally.size(of: root)
            return tally.excess
        }
    }

    /// A character of Unicode's private use area that `yaml` does not contain: a plain scalar
    /// may start with it, and it is one character, as `*` is. A text holding all of them gets
    /// the first; a plain scalar of its own starting with it is then counted as an alias too,
    /// which can only reject more.
    private static func standIn(for yaml: String) -> Unicode.Scalar {
        let used = Set(yaml.unicodeScalars.filter { $0.value >= 0xE000 && $0.value <= 0xF8FF })
        let privateUse = (UInt32(0xE000)...0xF8FF).lazy.compactMap(Unicode.Scalar.init)
        return privateUse.first { !used.contains($0) } ?? "\u{E000}"
    }

    /// `error` as it reads for the text: keys it quotes show their aliases as written.
    private static func restoringAliases(in error: YamlError, standIn: Unicode.Scalar) -> YamlError {
        guard case .duplicatedKeysInMapping(let duplicates, let context) = error else { return error }
        let restored = duplicates.map { $0.replacingOccurrences(of: String(standIn), with: "*") }
        return .duplicatedKeysInMapping(duplicates: restored, context: context)
    }

    /// Adds up, in document order, the values each anchor and each alias stands for.
    private struct Tally {
        let standIn: Unicode.Scalar
        /// Values each anchor stands for, itself included, as last defined.
        var sizes: [String: Int] = [:]
        var expanded = 0
        var excess: Excess?

        /// The values `node` stands for, itself included; nil once the aliases exceed `limit`.
        mutating func size(of node: Node) -> Int? {
            var size = 1
            switch node {
            case .scalar(let scalar):
                if let alias = alias(in: scalar) {
                    // An undefined alias counts 1; Yams reports it.
                    size = sizes[alias] ?? 1
                    expanded += size
                    if expanded > AliasExpansion.limit {
                        excess = Excess(alias: alias, position: SourcePosition(node))
                        return nil
                    }
                }
            case .sequence(let sequence):
                for element in sequence {
                    guard let elementSize = self.size(of: element) else { return nil }
                    size += elementSize
                }
            case .mapping(let mapping):
                for (key, value) in mapping {
                    guard let keySize = self.size(of: key), let valueSize = self.size(of: value) else { return nil }
                    size += keySize + valueSize
                }
            case .alias:
                break  // Yams composes an alias as the node it names; the copy has none
            }
            if let anchor = node.anchor { sizes[anchor.rawValue] = size }
            return size
        }

        /// The anchor an alias of the text named, where the copy has a plain scalar in its place.
        private func alias(in scalar: Node.Scalar) -> String? {
            guard scalar.style == .plain, scalar.string.unicodeScalars.first == standIn else { return nil }
            return String(String.UnicodeScalarView(scalar.string.unicodeScalars.dropFirst()))
        }
    }
}
