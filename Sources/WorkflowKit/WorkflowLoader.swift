import Foundation

/// Reads a workflow file and returns a validated `Workflow`, or throws every problem found.
public enum WorkflowLoader {
    /// Parses and validates `yaml`; `file` is used in diagnostics.
    public static func load(yaml: String, file: String) throws(WorkflowValidationError) -> Workflow {
        var parser = WorkflowParser(file: file, yaml: yaml)
        let workflow = parser.run()
        guard parser.diagnostics.isEmpty, let workflow else {
            let sorted = parser.diagnostics.enumerated().sorted {
                ($0.element.line, $0.element.column, $0.offset) < ($1.element.line, $1.element.column, $1.offset)
            }.map(\.element)
            throw WorkflowValidationError(diagnostics: sorted)
        }
        return workflow
    }

    /// Reads and validates the workflow file at `url` (diagnostics name the file's path).
    public static func load(contentsOf url: URL) throws -> Workflow {
        let yaml = try String(contentsOf: url, encoding: .utf8)
        return try load(yaml: yaml, file: url.path)
    }
}
