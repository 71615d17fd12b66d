import ActivityKit
import Foundation
import TestTags
import Testing
import WorkflowKit

/// The app's side of the contract: the Swift types `orderflow workflow swift` generates (committed
/// under Generated/, compiled here against the ActivityKit stub) decode, with a default
/// `JSONDecoder`, every payload the engine renders for every shipped workflow.
@Suite("The generated attributes types decode the shipped workflows' payloads", .tags(.kit))
struct OrderFlowKitGeneratedTypesTests {
    /// The generated type of each shipped workflow, by its attributes type's name.
    static var generatedTypes: [String: GeneratedType] { [
        "FoodOrderAttributes": GeneratedType(FoodOrderAttributes.self),
        "RideAttributes": GeneratedType(RideAttributes.self),
        "RaceAttributes": GeneratedType(RaceAttributes.self),
    ] }

    @Test("the committed types are what the generator makes of the shipped workflows now")
    func committedTypesAreCurrent() throws {
        var expectedFiles: Set<String> = []
        for (file, workflow) in try shippedWorkflows() {
            let name = "\(workflow.attributesType).swift"
            expectedFiles.insert(name)
            let committed = try? String(contentsOf: generatedDirectory.appendingPathComponent(name), encoding: .utf8)
            #expect(committed == workflow.swiftActivityAttributes(),
                    "Tests/OrderFlowKitTests/Generated/\(name) is not what the generator makes of workflows/\(file) now: regenerate it with `swift run orderflow workflow swift workflows/\(file) > Tests/OrderFlowKitTests/Generated/\(name)` (and add it to generatedTypes)")
            #expect(Self.generatedTypes[workflow.attributesType] != nil,
                    "add \(workflow.attributesType) to OrderFlowKitGeneratedTypesTests.generatedTypes so that its payloads are decoded")
        }
        let committedFiles = Set(try FileManager.default.contentsOfDirectory(atPath: generatedDirectory.path))
        #expect(committedFiles == expectedFiles, "Generated/ holds exactly one file per shipped workflow")
    }

    @Test("every payload of every shipped workflow decodes, and encodes back to what was sent")
    func renderedPayloadsDecode() throws {
        for (file, workflow) in try shippedWorkflows() {
            let type = try #require(Self.generatedTypes[workflow.attributesType], "no generated type for workflows/\(file)")
            var fieldsSeen: Set<String> = []
            for (what, payload) in try renderedPayloads(of: workflow) {
                let aps = try #require(try apsObject(payload), "\(file), \(what): no aps object")
                let content = try #require(aps["content-state"], "\(file), \(what): no content-state")
                let contentData = try JSONSerialization.data(withJSONObject: content)
                let decoded = try type.contentState(contentData)
                #expect(equalJSON(decoded, content), "\(file), \(what): the content state decoded and encoded again is \(String(decoding: decoded, as: UTF8.self)), the server sent \(String(decoding: contentData, as: UTF8.self))")
                fieldsSeen.formUnion(try Self.presentKeys(decoded))
                if let attributes = aps["attributes"] {
                    let attributesData = try JSONSerialization.data(withJSONObject: attributes)
                    let decodedAttributes = try type.attributes(attributesData)
                    #expect(equalJSON(decodedAttributes, attributes), "\(file), \(what): the attributes lost something in decoding")
                }
            }
            // Every field, so every field type present, was decoded with a value at least once.
            let never = workflow.contentSchema.map(\.name).filter { !fieldsSeen.contains($0) }
            #expect(never.isEmpty, "workflows/\(file): no rendered payload set \(never), so their types were never decoded with a value")
        }
    }

    // MARK: What the engine renders

    /// The start (with every start input), each transition (with every input it declares, the
    /// start's content as the previous one) and each state shown late, as APNs payloads.
    private func renderedPayloads(of workflow: Workflow) throws -> [(String, Data)] {
        let time = Date(timeIntervalSince1970: 1_746_100_000)
        let attributes = Self.sampleObject(workflow.attributesSchema)
        let start = try workflow.renderStart(attributes: attributes, input: Self.sampleObject(workflow.lifecycle.startInputs), at: time)
        var payloads = [("start", try start.apnsPayload().encoded())]
        for transition in workflow.transitions {
            let update = try workflow.render(transition: transition, attributes: attributes, input: Self.sampleObject(transition.inputs),
                                             previous: start.update.contentState, at: time)
            payloads.append(("\(transition)", try update.apnsPayload().encoded()))
        }
        for state in workflow.states {
            let update = try workflow.render(state: state.name, attributes: attributes, previous: start.update.contentState, at: time)
            payloads.append(("state \(state.name)", try update.apnsPayload().encoded()))
        }
        return payloads
    }

    /// A valid value of every field, in the form the engine takes input.
    static func sampleObject(_ fields: [FieldSpec]) -> JSONValue {
        .object(Dictionary(uniqueKeysWithValues: fields.map { ($0.name, sample($0.type)) }))
    }

    /// A valid value of a type: set, never null, so that each type is decoded with a value.
    static func sample(_ type: FieldType) -> JSONValue {
        switch type {
        case .string(let maxLength): return .string(String("Sample text".prefix(maxLength ?? 11)))
        case .int: return 3
        case .double: return 0.25
        case .bool: return true
        case .date: return "2025-05-01T12:30:00Z"
        case .daterange: return "2025-05-01T12:40:00Z..2025-05-01T12:55:00Z"
        case .enumeration(let values): return .string(values.last ?? "")
        case .optional(let wrapped): return sample(wrapped)
        case .array(let element, _): return [sample(element), sample(element)]
        case .structure(let structure): return sampleObject(structure.fields)
        }
    }

    // MARK: JSON

    private func apsObject(_ payload: Data) throws -> [String: Any]? {
        (try JSONSerialization.jsonObject(with: payload) as? [String: Any])?["aps"] as? [String: Any]
    }

    /// The keys of a JSON object with a value (a nil optional is left out by the encoder).
    private static func presentKeys(_ data: Data) throws -> Set<String> {
        Set((try JSONSerialization.jsonObject(with: data) as? [String: Any])?.keys.map { $0 } ?? [])
    }

    /// Whether what the app encodes again equals what the server sent, nulls aside (the app's
    /// encoder leaves a nil optional out; the server may send it as null).
    private func equalJSON(_ encoded: Data, _ sent: Any) -> Bool {
        guard let reencoded = try? JSONSerialization.jsonObject(with: encoded) else { return false }
        return withoutNulls(reencoded) as? NSObject == withoutNulls(sent) as? NSObject
    }

    private func withoutNulls(_ value: Any) -> Any {
        if let object = value as? [String: Any] {
            return object.filter { !($0.value is NSNull) }.mapValues(withoutNulls)
        }
        if let array = value as? [Any] { return array.map(withoutNulls) }
        return value
    }
}

/// One generated type, opened for the test: decodes with a default `JSONDecoder` and encodes
/// back with a default `JSONEncoder`, as the app and ActivityKit do.
struct GeneratedType {
    let contentState: (Data) throws -> Data
    let attributes: (Data) throws -> Data

    init<A: ActivityAttributes>(_ type: A.Type) {
        contentState = { try JSONEncoder().encode(try JSONDecoder().decode(A.ContentState.self, from: $0)) }
        attributes = { try JSONEncoder().encode(try JSONDecoder().decode(A.self, from: $0)) }
    }
}

/// The repository's shipped workflows, `workflows/*.yaml`, by file name.
func shippedWorkflows() throws -> [(String, Workflow)] {
    let files = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("workflows").path)
        .filter { $0.hasSuffix(".yaml") }.sorted()
    return try files.map { ($0, try WorkflowLoader.load(contentsOf: repositoryRoot.appendingPathComponent("workflows").appendingPathComponent($0))) }
}

let repositoryRoot = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
    .deletingLastPathComponent()  // OrderFlowKitTests
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()

let generatedDirectory = repositoryRoot.appendingPathComponent("Tests/OrderFlowKitTests/Generated")
