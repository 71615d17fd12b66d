import Foundation
import Testing
import WorkflowKit

/// The repository's `workflows/` directory, found from this file's path.
let workflowsDirectory: URL = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
    .deletingLastPathComponent()  // WorkflowKitTests
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()  // repository root
    .appendingPathComponent("workflows")

func loadShipped(_ name: String) throws -> Workflow {
    try WorkflowLoader.load(contentsOf: workflowsDirectory.appendingPathComponent("\(name).yaml"))
}

func shippedYAML(_ name: String) throws -> String {
    try String(contentsOf: workflowsDirectory.appendingPathComponent("\(name).yaml"), encoding: .utf8)
}

/// Loads YAML that must be valid, failing the test with every diagnostic otherwise.
func load(_ yaml: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Workflow {
    do {
        return try WorkflowLoader.load(yaml: yaml, file: "test.yaml")
    } catch {
        Issue.record("workflow did not load:\n\(error)", sourceLocation: sourceLocation)
        throw error
    }
}

/// The diagnostics of YAML that must be invalid.
func diagnostics(_ yaml: String, sourceLocation: SourceLocation = #_sourceLocation) -> [Diagnostic] {
    do {
        _ = try WorkflowLoader.load(yaml: yaml, file: "test.yaml")
        Issue.record("workflow loaded but should have been rejected", sourceLocation: sourceLocation)
        return []
    } catch {
        return error.diagnostics
    }
}

/// 2025-05-01T12:00:00Z
let transitionTime = Date(timeIntervalSince1970: 1_746_100_800)

/// Seconds since 2001-01-01, what the app's default JSONDecoder reads for a `Date`.
func appSeconds(_ date: Date) -> JSONValue { .double(date.timeIntervalSinceReferenceDate) }

let foodAttributes: JSONValue = ["merchantName": "Pizza Place", "orderNumber": "A-1042", "itemCount": 3]
