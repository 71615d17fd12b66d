import Testing
import WorkflowKit

@Suite("Canonical JSON")
struct CanonicalFormTests {
    @Test func stableAcrossFormatting() throws {
        let original = try shippedYAML("food-order")
        let canonical = try load(original).canonicalJSON

        // Comments, blank lines, flow vs block style and quoting.
        let restyled = original
            .replacingOccurrences(of: "# A food order", with: "# Reformatted copy of a food order")
            .replacingOccurrences(of: "\nstates:\n", with: "\n\n# the states\nstates:   # ordered as in the file\n")
            .replacingOccurrences(of: "    input: {eta: date?}\n", with: "    input:\n      eta: 'date?'\n")
            .replacingOccurrences(of: "  - {in: ready, after: 45m, go-to: cancelled}\n",
                                  with: "  - in: ready\n    go-to: cancelled\n    after: \"45m\"\n")
        #expect(restyled != original)
        #expect(try load(restyled).canonicalJSON == canonical)

        // Reordered keys: the lifecycle block moved to the end, keys inside a transition swapped.
        let lifecycleStart = try #require(original.range(of: "lifecycle:\n"))
        let lifecycleEnd = try #require(original.range(of: "states:\n"))
        let lifecycle = String(original[lifecycleStart.lowerBound..<lifecycleEnd.lowerBound])
        let reordered = (original.replacingCharacters(in: lifecycleStart.lowerBound..<lifecycleEnd.lowerBound, with: "") + "\n" + lifecycle)
            .replacingOccurrences(of: "  - from: ready\n    to: picked_up\n    event: pickup\n",
                                  with: "  - event: pickup\n    to: picked_up\n    from: ready\n")
        #expect(try load(reordered).canonicalJSON == canonical)

        // Equal definitions are equal values too.
        #expect(try load(restyled) == load(original))
    }

    @Test func changesWithContent() throws {
        let original = try shippedYAML("food-order")
        let canonical = try load(original).canonicalJSON
        let changes = [
            ("message: \"Your order is ready.\"", "message: \"Your food is ready.\""),
            ("after: 45m", "after: 50m"),
            ("merchantName: string(40)", "merchantName: string(41)"),
            ("cancelled: immediate", "cancelled: default"),
            ("    event: pickup\n", "    event: collect\n"),
            ("relevance: 50", "relevance: 60"),
        ]
        for (old, new) in changes {
            #expect(original.contains(old))
            let changed = try load(original.replacingOccurrences(of: old, with: new)).canonicalJSON
            #expect(changed != canonical, "canonical JSON did not change for \(new)")
        }
    }

    @Test func isSortedCompactJSON() throws {
        let json = try load(miniWorkflow).canonicalJSON
        #expect(json.hasPrefix(#"{"attributes":[{"name":"shop","type":"string(20)"}],"attributes-type":"MiniAttributes","#))
        #expect(try JSONValue(json: json).jsonString == json)
    }
}
