import Foundation
import WorkflowKit

// What an accepted workflow must survive: the rest of the API, from its canonical form to
// rendering with the largest values its schemas allow.

enum AcceptedWorkflowCheck {
    static let time = Date(timeIntervalSince1970: 1_746_100_800)

    static func problems(_ workflow: Workflow, yaml: String) -> [String] {
        var problems: [String] = []

        // The canonical form is JSON that reads back as itself. (Through JSONSerialization, which
        // keeps `50.0` a double; `JSONValue(json:)` reads it as the int 50, and is slow in debug
        // builds, hence also the size cap for huge adversarial workflows. JSONSerialization may
        // read a long double a unit in the last place off, so numbers compare approximately.)
        let canonical = workflow.canonicalJSON
        if canonical.utf8.count <= 256 * 1024 {
            do {
                let object = try JSONSerialization.jsonObject(with: Data(canonical.utf8), options: [.fragmentsAllowed])
                let reread = try JSONValue(foundation: object).jsonString
                if reread != canonical, !sameApartFromRounding(reread, canonical) {
                    problems.append("canonical JSON does not survive a round trip:\n\(canonical)\n\(reread)")
                }
            } catch {
                problems.append("canonical JSON does not parse: \(error)\n\(canonical)")
            }
        }
        // Loading is deterministic.
        do {
            let again = try WorkflowLoader.load(yaml: yaml, file: FuzzCheck.file)
            if again != workflow || again.canonicalJSON != canonical { problems.append("loading the same text twice gives different workflows") }
        } catch {
            problems.append("loaded once, rejected the second time: \(error)")
        }

        // Code and diagrams.
        let swift = workflow.swiftActivityAttributes()
        if !swift.contains("struct \(workflow.attributesType): ActivityAttributes") { problems.append("generated Swift lacks the attributes type") }
        _ = workflow.mermaid()
        _ = workflow.graphviz()

        // The structure the loader promises. Lookups and rendering go through the API's linear
        // searches, so huge (adversarial) workflows are sampled rather than walked in full.
        let sample = 200
        if workflow.state(named: workflow.initialState)?.isInitial != true { problems.append("initial state `\(workflow.initialState)` is not marked initial") }
        if workflow.finalStates.isEmpty { problems.append("no final state") }
        for transition in workflow.transitions.prefix(sample) {
            if workflow.state(named: transition.from) == nil || workflow.state(named: transition.to) == nil {
                problems.append("transition \(transition) names a missing state")
            }
            if workflow.isFinal(transition.from) { problems.append("transition \(transition) leaves a final state") }
            let size = workflow.maximumPayloadSize(for: transition)
            if size > 4096 { problems.append("accepted transition \(transition) with a payload bound of \(size) bytes") }
            // Every transition can be asked for by its target state or its event.
            for target in [transition.to] + (transition.event.map { [$0] } ?? []) {
                do {
                    let resolved = try workflow.resolveTransition(from: transition.from, target: target)
                    if resolved.id != transition.id, target != transition.to {
                        problems.append("event `\(target)` from `\(transition.from)` resolves to \(resolved), not \(transition)")
                    }
                } catch {
                    problems.append("`\(target)` from `\(transition.from)` does not resolve: \(error)")
                }
            }
        }
        if workflow.lifecycle.start == .pushToStart || workflow.lifecycle.onTimeLimit == .restart {
            let size = workflow.maximumStartPayloadSize
            if size > 4096 { problems.append("accepted a push-to-start with a payload bound of \(size) bytes") }
        }

        // Rendering with the largest values the schemas allow must work or fail with a render
        // or data error, never crash; a rendered payload is within the APNs limit.
        func rendered(_ what: String, _ body: () throws -> LiveActivityPayload) {
            do {
                let payload = try body()
                if payload.encodedSize > 4096 { problems.append("\(what) rendered \(payload.encodedSize) bytes") }
            } catch is RenderError {
            } catch is DataValidationError {
            } catch {
                problems.append("\(what) threw an unexpected \(type(of: error)): \(error)")
            }
        }
        let attributes = SampleData.object(workflow.attributesSchema)
        var previous: JSONValue?
        rendered("the start") {
            let start = try workflow.renderStart(attributes: attributes, input: SampleData.object(workflow.lifecycle.startInputs), at: time)
            previous = start.update.contentState
            return start.apnsPayload()
        }
        for transition in workflow.transitions.prefix(sample) {
            rendered("transition \(transition)") {
                try workflow.render(transition: transition, attributes: attributes, input: SampleData.object(transition.inputs),
                                    previous: previous, at: time).apnsPayload()
            }
        }
        for state in workflow.states.prefix(sample) {
            rendered("state `\(state.name)`") {
                try workflow.render(state: state.name, attributes: attributes, at: time).apnsPayload()
            }
        }
        return problems
    }
}

/// True when two texts are equal apart from numbers that differ by at most a relative 1e-12.
func sameApartFromRounding(_ a: String, _ b: String) -> Bool {
    guard let number = try? Regex("-?[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?") else { return false }
    guard a.split(separator: number, omittingEmptySubsequences: false) == b.split(separator: number, omittingEmptySubsequences: false)
    else { return false }
    let left = a.matches(of: number).map { Double(a[$0.range]) ?? .nan }
    let right = b.matches(of: number).map { Double(b[$0.range]) ?? .nan }
    return left.count == right.count
        && zip(left, right).allSatisfy { $0 == $1 || abs($0 - $1) <= 1e-12 * max(abs($0), abs($1)) }
}

/// The largest (ASCII) values a schema allows.
enum SampleData {
    static func object(_ schema: [FieldSpec]) -> JSONValue {
        .object(Dictionary(schema.map { ($0.name, value($0.type)) }, uniquingKeysWith: { first, _ in first }))
    }

    static func value(_ type: FieldType) -> JSONValue {
        switch type {
        case .string(let maxLength): return .string(String(repeating: "x", count: min(maxLength ?? 256, 10_000)))
        case .int: return .int(Int.max)
        case .double: return .double(-1.7976931348623157e308)
        case .bool: return .bool(false)
        case .date: return .string("2025-05-01T12:00:00.123Z")
        case .daterange: return .string("2025-05-01T12:00:00.123Z..2025-05-01T12:30:00.123Z")
        case .enumeration(let values): return .string(values.max { $0.utf8.count < $1.utf8.count } ?? "")
        case .optional(let wrapped): return value(wrapped)
        case .array(let element, let maxCount): return .array(Array(repeating: value(element), count: min(maxCount, 100)))
        case .structure(let structure): return object(structure.fields)
        }
    }
}
