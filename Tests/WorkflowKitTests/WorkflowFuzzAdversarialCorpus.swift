import Foundation
import WorkflowKit

/// Documents aimed at the known ways YAML loaders fall over: alias bombs, deep nesting, huge
/// sizes and numbers, odd encodings. Always run, before the random ones.
enum AdversarialCorpus {
    static func documents(bases: [(String, String)]) -> [FuzzDocument] {
        let food = bases[0].1
        var documents: [FuzzDocument] = []
        func add(_ name: String, _ yaml: String) { documents.append(FuzzDocument(name: "adversarial: \(name)", yaml: yaml)) }
        func replacing(_ old: String, _ new: String, in text: String = food) -> String {
            precondition(text.contains(old), "`\(old)` is not in the base document")
            return text.replacingOccurrences(of: old, with: new)
        }

        // "Billion laughs": 9 levels of 9 aliases each name 9^9 (387 million) strings in ~1 KB.
        func bomb(levels: Int = 9, width: Int = 9, flow: Bool = true) -> String {
            var text = "lol0: &l0 [" + Array(repeating: "\"lol\"", count: width).joined(separator: ", ") + "]\n"
            for level in 1..<levels {
                if flow {
                    text += "lol\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: width).joined(separator: ", ") + "]\n"
                } else {
                    text += "lol\(level): &l\(level)\n" + String(repeating: "  - *l\(level - 1)\n", count: width)
                }
            }
            return text
        }
        add("billion laughs under an unknown key", bomb() + food)
        add("billion laughs in block style", bomb(flow: false) + food)
        add("billion laughs as a mapping key", bomb() + food + "\n? *l8\n: boom\n")
        add("billion laughs as a flow mapping key", bomb() + "x: {*l8 : 1}\n" + food)
        add("billion laughs as a state", replacing("\nstates:\n", "\nstates:\n  ? *l8\n  : {final: true}\n", in: bomb() + food))
        add("billion laughs as a content value", replacing("      status: received\n", "      status: *l8\n", in: bomb() + food))
        add("billion laughs as the transitions", replacing("\ntransitions:\n", "\ntransitions: *l8\nunused:\n", in: bomb() + food))
        var maps = "m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}\n"
        for level in 1..<9 {
            maps += "m\(level): &m\(level) {" + "abcdefgh".map { "\($0): *m\(level - 1)" }.joined(separator: ", ") + "}\n"
        }
        add("mapping bomb as a key", maps + "? *m8\n: 1\n" + food)
        add("mapping bomb as duplicate keys", maps + "x: {? *m8 : 1, ? *m8 : 2}\n" + food)
        add("merge-key bomb", maps + "merged:\n  <<: [*m8, *m7, *m6]\n" + food)
        add("small legitimate aliases", replacing("    alert:\n      title: \"Order {{attributes.orderNumber}} is ready\"",
                                                  "    alert: &readyAlert\n      title: \"Order {{attributes.orderNumber}} is ready\""))
        add("undefined alias", food + "\nextra: *nowhere\n")
        add("alias before its anchor", "a: *b\nb: &b 1\n" + food)
        add("anchor on an alias", food + "\nx: &a 1\ny: &b *a\n")

        // Nesting. libyaml refuses more than 1000 levels; below that Yams composes recursively.
        for depth in [100, 999, 1_000, 1_001, 10_000] {
            add("flow sequences \(depth) deep", "x: " + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "\n" + food)
            add("flow mappings \(depth) deep", "x: " + String(repeating: "{a: ", count: depth) + "1" + String(repeating: "}", count: depth) + "\n" + food)
        }
        add("unclosed flow sequences", "x: " + String(repeating: "[", count: 100_000) + "\n" + food)
        for depth in [500, 999, 2_000] {
            add("block sequences \(depth) deep on one line", food + "\nx:\n  " + String(repeating: "- ", count: depth) + "x\n")
            add("block mappings \(depth) deep", food + "\nx:\n" + (1...depth).map { String(repeating: " ", count: $0) + "a:" }.joined(separator: "\n") + " 1\n")
        }
        for depth in [100, 1_000, 20_000] {
            let sections = String(repeating: "{{#input.eta}}", count: depth) + "x" + String(repeating: "{{/input.eta}}", count: depth)
            add("template sections \(depth) deep", replacing("      message: \"{{attributes.merchantName}} received your order.\"",
                                                             "      message: \"\(sections)\""))
            add("unclosed template sections \(depth) deep", replacing("      message: \"{{attributes.merchantName}} received your order.\"",
                                                                      "      message: \"\(String(repeating: "{{#input.eta}}", count: depth))\""))
            add("array types \(depth) deep", replacing("    message: string(120)",
                                                       "    message: \"\(String(repeating: "[", count: depth))int\(String(repeating: "]", count: depth))\""))
            add("unclosed array types \(depth) deep", replacing("    message: string(120)", "    message: \"\(String(repeating: "[", count: depth))\""))
        }

        // Size.
        add("1 MB value", replacing("Your order is ready.", String(repeating: "ready ", count: 180_000)))
        add("1 MB template", replacing("Your order is ready.", String(repeating: "{{attributes.merchantName}}", count: 40_000)))
        add("100k-character key", replacing("  ready:\n", "  \(String(repeating: "r", count: 100_000)):\n"))
        add("100k-character unknown key", replacing("name: food-order", "nmae\(String(repeating: "e", count: 100_000)): food-order"))
        add("100k-character enum value and a near miss", replacing(
            "    status: enum(received, preparing, ready, outForDelivery, delivered, pickedUp, cancelled)",
            "    status: enum(received, preparing, ready, outForDelivery, delivered, pickedUp, cancelled, \(String(repeating: "v", count: 100_000)))",
            in: replacing("      status: ready\n", "      status: \(String(repeating: "v", count: 99_999))w\n")))
        add("100k-character state name typo", replacing("    to: in_progress\n", "    to: \(String(repeating: "in_progress", count: 10_000))x\n"))
        add("10k unknown keys", replacing("  ready:\n    description:", "  ready:\n" + (0..<10_000).map { "    k\($0): 1\n" }.joined() + "    description:"))
        add("10k unknown states in transitions", food + (0..<10_000).map { "  - {from: s\($0), to: t\($0)}\n" }.joined())
        // Before validation was linear, 5,000 states in a chain took 27 s or more.
        add("3k states in a chain", longChain(states: 3_000))
        add("1k states reached by any", anyFan(states: 1_000))
        add("3k duplicate transitions", food + String(repeating: "  - {from: received, to: in_progress}\n", count: 3_000))

        // Numbers.
        for number in ["9223372036854775807", "9223372036854775806", "4611686018427387904", "99999999999999999999", "2147483648"] {
            add("string(\(number)) in the ContentState", replacing("    message: string(120)", "    message: string(\(number))"))
            add("string(\(number)) attribute of a push-to-start", replacing("    merchantName: string(40)", "    merchantName: string(\(number))"))
            add("array of \(number) elements", replacing("    driverName: {type: string(40)?, carry-over: true}", "    driverName: \"[string(40); \(number)]?\""))
            add("array of \(number) elements in an input", replacing("    input: {reason: string(80)?}", "    input: {reason: string(80)?, all: \"[string; \(number)]\"}"))
            add("relevance \(number)", replacing("relevance: 50", "relevance: \(number)"))
            add("after \(number)d", replacing("after: 45m", "after: \(number)d"))
            add("+\(number)s as a date", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"+\(number)s\"\n  in_progress:"))
        }
        add("the largest date offset, read back through previous", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"+2562047788015215h\"\n  in_progress:"))
        add("the earliest date offset, read back through previous", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"-2562047788015215h\"\n  in_progress:"))
        add("year 9999 and year 0", replacing("      eta: \"{{input.eta}}\"\n  in_progress:", "      eta: \"0000-01-01T00:00:00Z\"\n  in_progress:"))
        add("sections over arrays nested 25 deep", replacing(
            "    input: {reason: string(80)?}",
            "    input: {reason: string(80)?, all: \"[string(1); 10]\"}",
            in: replacing("      message: \"{{#input.reason}}Cancelled: {{input.reason}}{{/input.reason}}{{^input.reason}}Your order was cancelled.{{/input.reason}}\"",
                          "      message: \"\(String(repeating: "{{#input.all}}", count: 25))x\(String(repeating: "{{/input.all}}", count: 25))\"")))
        for value in ["1e308", "-1e308", "1.0e+400", ".inf", "-.inf", ".nan", "-0.0", "0x7fffffffffffffff", "0o777", "1_000"] {
            add("relevance \(value)", replacing("relevance: 50", "relevance: \(value)"))
            add("itemCount literal \(value)", replacing("      status: received\n", "      status: received\n      driverName: \(value)\n"))
        }

        // Encodings and odd streams.
        add("empty", "")
        add("only whitespace", " \n\t\n  ")
        add("only a comment", "# nothing\n")
        add("only ---", "---\n")
        add("only ...", "...\n")
        add("two documents", food + "\n---\n" + food)
        add("YAML 1.1 directive", "%YAML 1.1\n---\n" + food)
        add("YAML 2.0 directive", "%YAML 2.0\n---\n" + food)
        add("unknown directive", "%FOO bar\n---\n" + food)
        add("NUL first", "\0" + food)
        add("NUL in a value", replacing("Your order is ready.", "Your order\0is ready."))
        add("NUL in a comment", replacing("# Format reference", "# Format\0reference"))
        add("NUL after a multi-byte line", replacing("Your order is ready.", "Ça été prêt 🍕.\"\n  x: \"\0"))
        add("control character on line 40", replacing("Your order is ready.", "Your order is\u{7} ready."))
        add("BOM", "\u{FEFF}" + food)
        add("BOM in the middle", replacing("states:\n", "\u{FEFF}states:\n"))
        add("CRLF", food.replacingOccurrences(of: "\n", with: "\r\n"))
        add("CR only", food.replacingOccurrences(of: "\n", with: "\r"))
        add("line separators", food.replacingOccurrences(of: "\n", with: "\u{2028}"))
        add("next-line characters", food.replacingOccurrences(of: "\n", with: "\u{85}"))
        add("tabs for indentation", food.replacingOccurrences(of: "\n    ", with: "\n\t\t"))
        add("a tab after a key", replacing("name: food-order", "name:\tfood-order"))
        add("right-to-left override in a name", replacing("name: food-order", "name: food\u{202E}redro"))
        add("emoji state", replacing("  ready:\n", "  🍕:\n"))
        add("combining characters in keys", replacing("  ready:\n", "  re\u{301}ady:\n"))
        add("surrogate escape", replacing("Your order is ready.", "\\uD83D"))
        add("escaped NUL", replacing("Your order is ready.", "\\0"))

        // Tags.
        for tag in ["!!binary", "!!timestamp", "!!set", "!!omap", "!!python/object:os.system", "!foo", "!<tag:example.com,2000:x>", "!!str", "!!int", "!!null", "!!bool", "!!float", "!!map", "!!seq"] {
            add("\(tag) on a value", replacing("name: food-order", "name: \(tag) food-order"))
            add("\(tag) on a key", replacing("name: food-order", "\(tag) name: food-order"))
        }
        add("tagged root", "!!seq\n" + food)
        add("root is a list", "- " + food.replacingOccurrences(of: "\n", with: "\n  "))
        add("root is a scalar", "just text\n")
        add("root is a number", "42\n")
        add("root is null", "~\n")
        return documents
    }

    /// `states` in a chain s0 -> s1 -> … -> done: large but valid.
    static func longChain(states count: Int) -> String {
        var text = """
            name: long
            activity:
              attributes-type: LongAttributes
              content-state: {status: string(20)}
            lifecycle: {start: app}
            states:

            """
        for index in 0..<count {
            text += "  s\(index): {\(index == 0 ? "initial: true, " : "")content: {status: s\(index)}}\n"
        }
        text += "  done: {final: true, content: {status: done}}\ntransitions:\n"
        for index in 0..<count {
            text += "  - {from: s\(index), to: \(index == count - 1 ? "done" : "s\(index + 1)"), event: e\(index)}\n"
        }
        return text
    }

    /// Many states, each reached from the first, all leaving through one `from: any`.
    static func anyFan(states count: Int) -> String {
        var text = """
            name: fan
            activity:
              attributes-type: FanAttributes
              content-state: {status: string(20)}
            lifecycle: {start: app}
            states:
              start: {initial: true, content: {status: start}}
              done: {final: true, content: {status: done}}

            """
        for index in 0..<count { text += "  s\(index): {content: {status: s\(index)}}\n" }
        text += "transitions:\n  - {from: any, to: done}\n"
        for index in 0..<count { text += "  - {from: start, to: s\(index)}\n" }
        return text
    }
}
