import Foundation
import Testing
@testable import WorkflowKit

/// Templates of one line are rendered without swift-mustache (for speed); for every template
/// and every set of values, the result must be exactly what swift-mustache renders.
@Suite("Direct template rendering")
struct DirectRenderingTests {
    /// Values of every kind the renderer hands to templates, including the edges of truthiness
    /// (empty text, zero, false, null) and of number formatting.
    static let values: [JSONValue] = [
        .string("Sam"), .string(""), .string(" "), .string("{{x}}"), .string("Zoë & <Ünïcode> \"q\""), .string("0"),
        .int(0), .int(2), .int(-7), .int(Int.max),
        .double(0.5), .double(-0.0), .double(1e20), .double(3), .double(1.0 / 3),
        .bool(true), .bool(false), .null,
    ]

    static let names = ["attributes.merchantName", "attributes.itemCount", "input.driver", "input.eta", "previous.eta", "now"]

    /// Pieces of one-line text, with the characters mustache treats specially around tags.
    static let texts = ["", " ", "  ", "Order ", " is ready.", "{", "}", "{ {", "a}}b", "!", "#", "/", "\t", "é", "🍕 "]

    struct Generator {
        var random: SplitMix64

        mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }

        mutating func template(depth: Int = 0) -> String {
            var text = ""
            for _ in 0..<Int.random(in: 0...5, using: &random) {
                switch Int.random(in: 0..<10, using: &random) {
                case 0, 1, 2: text += pick(DirectRenderingTests.texts)
                case 3: text += "{{\(pick(DirectRenderingTests.names))}}"
                case 4: text += "{{ \(pick(DirectRenderingTests.names)) }}"
                case 5: text += Bool.random(using: &random) ? "{{{\(pick(DirectRenderingTests.names))}}}" : "{{&\(pick(DirectRenderingTests.names))}}"
                case 6: text += "{{! \(pick(["note", "", "#x"])) }}"
                default:
                    guard depth < 3 else { continue }
                    let name = pick(DirectRenderingTests.names)
                    let sigil = Bool.random(using: &random) ? "#" : "^"
                    text += "{{\(sigil)\(name)}}\(template(depth: depth + 1)){{/\(name)}}"
                }
            }
            return text
        }

        mutating func variables() -> [String: JSONValue] {
            var variables: [String: JSONValue] = [:]
            for name in DirectRenderingTests.names { variables[name] = pick(DirectRenderingTests.values) }
            return variables
        }
    }

    @Test func agreesWithSwiftMustache() async throws {
        // Rendered on a thread of its own (a second of CPU in debug builds): on the two-thread
        // concurrency pool it would delay the timers of the suites running beside it.
        let (cases, refused) = await onOwnThread(name: "direct rendering") { () -> ([RenderedCase], Int) in
            var generator = Generator(random: SplitMix64(seed: 20_261_122))
            var cases: [RenderedCase] = []
            var refused = 0
            for _ in 0..<3_000 {
                let source = generator.template()
                // Text pieces can run into a tag ("{" + "{{x}}"): such a template does not parse.
                guard let template = try? Template(source) else { refused += 1; continue }
                for _ in 0..<4 {
                    let variables = generator.variables()
                    cases.append(RenderedCase(
                        source: source, variables: variables, expected: template.render(Renderer.mustacheContext(variables)),
                        direct: template.renderDirect(variables)))
                }
            }
            return (cases, refused)
        }
        var direct = 0
        for item in cases {
            let rendered = try #require(item.direct, "\(item.source) was not rendered directly")
            #expect(rendered == item.expected, "\(item.source) with \(item.variables)")
            if rendered == item.expected { direct += 1 }
        }
        #expect(refused < 1_000)
        #expect(direct == (3_000 - refused) * 4)
    }

    /// One template rendered both ways.
    struct RenderedCase: Sendable {
        var source: String
        var variables: [String: JSONValue]
        var expected: String
        var direct: String?
    }

    @Test func leavesTheRestToSwiftMustache() throws {
        let variables: [String: JSONValue] = ["input.items": ["a", "b"], "input.driver": "Sam", "now": "2026-11-22T18:00:00Z"]
        let cases = [
            "{{#input.items}}{{.}},{{/input.items}}",  // a list is iterated
            "{{input.items}}",
            "{{uppercased(input.driver)}}",  // transforms
            "{{#input.driver}}{{.}}{{/input.driver}}",  // the current object
            "{{input.unknown}}",  // not a variable of this transition
            "Line one\n{{input.driver}}",  // standalone-tag rules apply across lines
        ]
        for source in cases {
            let template = try Template(source)
            #expect(template.renderDirect(variables) == nil, "\(source)")
        }
        // …and what swift-mustache then renders is what the renderer returns.
        #expect(try Template("{{#input.items}}{{.}},{{/input.items}}").render(Renderer.mustacheContext(variables)) == "a,b,")
        #expect(try Template("{{uppercased(input.driver)}}").render(Renderer.mustacheContext(variables)) == "SAM")
    }

    @Test("integer transforms (the plural idiom) render directly, as swift-mustache renders them")
    func integerTransforms() throws {
        let sources = [
            "item{{^equalzero(minusone(attributes.n))}}s{{/equalzero(minusone(attributes.n))}}",
            "{{plusone(attributes.n)}} {{minusone(attributes.n)}} {{even(attributes.n)}} {{odd(attributes.n)}} {{equalzero(attributes.n)}}",
            "{{#odd(plusone(attributes.n))}}even{{/odd(plusone(attributes.n))}}{{^even(attributes.n)}}odd{{/even(attributes.n)}}",
        ]
        for source in sources {
            let template = try Template(source)
            #expect(template.rendersDirectly, "\(source)")
            for n in [-3, -1, 0, 1, 2, 3, 1_000_000] {
                let variables: [String: JSONValue] = ["attributes.n": .int(n)]
                let direct = try #require(template.renderDirect(variables), "\(source) with \(n)")
                #expect(direct == template.render(Renderer.mustacheContext(variables)), "\(source) with \(n)")
            }
            // Not an integer: swift-mustache decides.
            #expect(template.renderDirect(["attributes.n": "three"]) == nil)
        }
        let plural = try Template("item{{^equalzero(minusone(attributes.n))}}s{{/equalzero(minusone(attributes.n))}}")
        #expect(plural.renderDirect(["attributes.n": 1]) == "item" && plural.renderDirect(["attributes.n": 2]) == "items")
    }

    @Test func shippedWorkflowsRenderDirectly() throws {
        // Every template of the shipped workflows takes the direct path.
        for name in ["food-order", "ride"] {
            let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../workflows/\(name).yaml")
            let source = try String(contentsOf: url, encoding: .utf8)
            var count = 0
            for line in source.split(separator: "\n") where line.contains("{{") {
                guard let open = line.firstIndex(of: "\""), let close = line.lastIndex(of: "\""), open < close else { continue }
                let template = try Template(String(line[line.index(after: open)..<close]))
                #expect(template.rendersDirectly, "\(name): \(template.source)")
                count += 1
            }
            #expect(count > 3)
        }
    }
}
