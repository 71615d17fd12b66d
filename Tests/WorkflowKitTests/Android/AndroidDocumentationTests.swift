import Foundation
import Testing
import WorkflowKit

/// docs/android.md's Kotlin reads exactly the data keys OrderFlow sends: a key renamed, added or
/// dropped in ``Workflow/renderAndroid(_:from:order:attributes:input:previous:)`` without the
/// app developer's page following fails here, and so does a key the page reads that never comes.
@Suite("Android documentation")
struct AndroidDocumentationTests {
    let page: String

    init() throws {
        page = try String(contentsOf: workflowsDirectory.deletingLastPathComponent().appendingPathComponent("docs/android.md"),
                          encoding: .utf8)
    }

    @Test func theKotlinReadsEveryKeySentAndNoOther() throws {
        let sent = try Self.keysSent()
        let read = Self.keysRead(in: page)
        let ignored = try #require(Self.backticked(inLineStarting: "Keys the service does not read:", in: page),
                                   "docs/android.md lists no keys the service does not read")
        #expect(read.count >= 10, "found only \(read.sorted()) in docs/android.md's Kotlin: is the regex still right?")
        #expect(read.subtracting(sent).isEmpty, "docs/android.md's Kotlin reads keys OrderFlow never sends: \(read.subtracting(sent).sorted())")
        #expect(sent.subtracting(read).subtracting(ignored).isEmpty,
                "OrderFlow sends keys docs/android.md's Kotlin neither reads nor lists as ignored: \(sent.subtracting(read).subtracting(ignored).sorted())")
        #expect(ignored.intersection(read).isEmpty, "docs/android.md calls keys ignored that its Kotlin reads: \(ignored.intersection(read).sorted())")
        #expect(ignored.subtracting(sent).isEmpty, "docs/android.md ignores keys OrderFlow never sends: \(ignored.subtracting(sent).sorted())")
    }

    @Test func theKeyTableListsEveryKeySent() throws {
        let sent = try Self.keysSent()
        let listed = Self.keysListedInTable(of: page)
        #expect(listed == sent, "docs/android.md's table of keys: missing \(sent.subtracting(listed).sorted()), extra \(listed.subtracting(sent).sorted())")
    }

    // MARK: What is sent

    /// Every data key sent for the shipped food order and ride (the start and every transition,
    /// every input given) and for a localized alert, which the shipped workflows do not use.
    static func keysSent() throws -> Set<String> {
        var keys: Set<String> = []
        for workflow in [try loadShipped("food-order"), try loadShipped("ride"), try localizedWorkflow()] {
            for data in try messages(of: workflow) { keys.formUnion(data.keys) }
        }
        return keys
    }

    static func messages(of workflow: Workflow) throws -> [[String: String]] {
        let attributes = SampleData.object(workflow.attributesSchema)
        let start = try workflow.renderStart(attributes: attributes, input: SampleData.object(workflow.lifecycle.startInputs),
                                             at: transitionTime)
        var messages = [try workflow.renderAndroid(start.update, from: nil, order: "1042", attributes: attributes, input: [:],
                                                   previous: nil).data]
        for transition in workflow.transitions {
            let input = SampleData.object(transition.inputs)
            let update = try workflow.render(transition: transition, attributes: attributes, input: input,
                                             previous: start.update.contentState, at: transitionTime)
            messages.append(try workflow.renderAndroid(update, from: transition.from, order: "1042", attributes: attributes,
                                                       input: input, previous: start.update.contentState).data)
        }
        return messages
    }

    /// A workflow whose alert title and body are both the app's string resources, and whose
    /// content has no text: the `…_loc_key`/`…_loc_args` keys.
    static func localizedWorkflow() throws -> Workflow {
        try load("""
            name: localized
            activity:
              attributes-type: L
              attributes:
                code: string(6)
              content-state:
                step: int
            lifecycle:
              start: app
            states:
              placed:
                initial: true
                content: {step: 1}
              done:
                final: true
                content: {step: 2}
            transitions:
              - {from: placed, to: done, alert: {title: {loc-key: DONE_TITLE, loc-args: ["{{attributes.code}}"]}, body: {loc-key: DONE_BODY, loc-args: ["{{attributes.code}}"]}}}
            """)
    }

    // MARK: What the page says

    /// The `data["key"]` reads in the page's Kotlin blocks.
    static func keysRead(in page: String) -> Set<String> {
        var keys: Set<String> = []
        for block in page.matches(of: /```kotlin\n(?<code>[\s\S]*?)```/) {
            for read in block.output.code.matches(of: /data\["(?<key>[a-z_]+)"\]/) { keys.insert(String(read.output.key)) }
        }
        return keys
    }

    /// The backticked names on the line that starts with `prefix`; nil without such a line.
    static func backticked(inLineStarting prefix: String, in page: String) -> Set<String>? {
        guard let line = page.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return Set(line.matches(of: /`(?<name>[a-z_]+)`/).map { String($0.output.name) })
    }

    /// The backticked keys in the first column of the table whose header starts with `| key |`.
    static func keysListedInTable(of page: String) -> Set<String> {
        let lines = page.split(separator: "\n", omittingEmptySubsequences: false)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("| key |") }) else { return [] }
        var keys: Set<String> = []
        for row in lines[(header + 2)...].prefix(while: { $0.hasPrefix("|") }) {
            let firstCell = row.split(separator: "|", omittingEmptySubsequences: true).first ?? ""
            keys.formUnion(firstCell.matches(of: /`(?<name>[a-z_]+)`/).map { String($0.output.name) })
        }
        return keys
    }
}
