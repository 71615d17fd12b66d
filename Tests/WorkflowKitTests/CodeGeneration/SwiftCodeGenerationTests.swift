import Foundation
import Testing
import WorkflowKit

/// The Swift compiler of this toolchain.
func findSwiftc() -> URL? {
    var candidates = ["/opt/swift/usr/bin/swiftc"]
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
        candidates.append("\(directory)/swiftc")
    }
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map(URL.init(fileURLWithPath:))
}

/// Runs a program, returning its exit status and combined output.
///
/// The output goes to a file, not a pipe: a blocking read of a pipe can be interrupted by the
/// SIGCHLD of another test's child process, and Foundation's `readDataToEndOfFile()` then stops
/// the whole test process (it `try!`s the EINTR).
func run(_ executable: URL, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("orderflow-run-\(UUID().uuidString).log")
    _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: outputURL) }
    let output = try FileHandle(forWritingTo: outputURL)
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.standardOutput = output
    process.standardError = output
    process.standardInput = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        try? output.close()
        throw error
    }
    try? output.close()
    process.waitUntilExit()
    return (process.terminationStatus, (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "")
}

@Suite("Swift ActivityAttributes code generation")
struct SwiftCodeGenerationTests {
    @Test func generatedSourceShape() throws {
        let source = try loadShipped("food-order").swiftActivityAttributes()
        #expect(source.contains("import ActivityKit\n"))
        #expect(source.contains("public struct FoodOrderAttributes: ActivityAttributes {"))
        #expect(source.contains("    public struct ContentState: Codable, Hashable, Sendable {"))
        #expect(source.contains("        public enum Status: String, Codable, Hashable, Sendable, CaseIterable {\n            case received\n"))
        #expect(source.contains("        public var eta: Date?\n"))
        #expect(source.contains("        public var driverName: String?  // at most 40 characters\n"))
        #expect(source.contains("        public var deliveryWindow: ClosedRange<Date>?\n"))
        #expect(source.contains("    public var itemCount: Int\n"))
    }

    /// Compiles the generated type with swiftc (a stand-in replaces ActivityKit) and decodes what
    /// `render` produced with a default JSONDecoder: proves the dates are 2001-based, the enums
    /// String-backed and the keys the property names.
    @Test(.timeLimit(.minutes(5)))
    func generatedCodeDecodesRenderedPayloads() throws {
        let swiftc = try #require(findSwiftc(), "swiftc not found in /opt/swift/usr/bin or PATH")
        let food = try loadShipped("food-order")
        let dispatch = try #require(food.transition(from: "ready", to: "out_for_delivery"))
        let update = try food.render(transition: dispatch, attributes: foodAttributes,
                                     input: ["eta": "2025-05-01T12:30:00Z", "driver": "Sam",
                                             "window": "2025-05-01T12:20:00Z...2025-05-01T12:35:00Z"], at: transitionTime)
        let start = try food.renderStart(attributes: foodAttributes, at: transitionTime)

        let typesWorkflow = try WorkflowLoader.load(yaml: typesWorkflowYAML, file: "types.yaml")
        let typesUpdate = try typesWorkflow.render(
            transition: try #require(typesWorkflow.transition(from: "a", to: "b")),
            attributes: ["name": "Ann", "since": "2024-01-01T00:00:00Z"],
            input: ["n": "7", "r": "0.25", "f": "true", "lvl": "high", "due": "+1h", "tags": ["x", "y"]], at: transitionTime)
        let typesAttributes = try typesWorkflow.appAttributes(["name": "Ann", "since": "2024-01-01T00:00:00Z"])

        // Nested struct types, defaults and carry-over: the race, and the ride's driver kept to the end.
        let race = try loadShipped("f1-race")
        let raceAttributes: JSONValue = ["raceName": "Italian Grand Prix", "track": "Monza", "totalLaps": 53]
        func driver(_ name: String, _ code: String, _ number: Int, _ constructor: String) -> JSONValue {
            ["name": .string(name), "code": .string(code), "number": .int(number), "constructor": .string(constructor)]
        }
        let scheduled = try race.render(state: "scheduled", attributes: raceAttributes, at: transitionTime)
        let lap = try race.render(
            transition: try #require(race.transitions.first { $0.event == "lap" }), attributes: raceAttributes,
            input: ["lap": 12, "first": driver("Charles Leclerc", "LEC", 16, "Ferrari"), "second": driver("Oscar Piastri", "PIA", 81, "McLaren"),
                    "third": driver("Lando Norris", "NOR", 4, "McLaren"), "fastestLap": driver("Lando Norris", "NOR", 4, "McLaren"),
                    "fastestLapTime": "1:21.046"],
            previous: scheduled.contentState, at: transitionTime)
        let raceStatic = try race.appAttributes(raceAttributes)
        let ride = try loadShipped("ride")
        let dropOff = try ride.render(
            transition: try #require(ride.transition(from: "on_trip", to: "completed")), attributes: ["pickupAddress": "Main St 1", "dropoffAddress": "Airport"],
            input: [:], previous: ["phase": "onTrip", "message": "x", "driverName": "Anna", "car": "Blue Prius", "plate": "B-AN 42", "eta": .null],
            at: transitionTime)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wk-codegen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        func strippingActivityKit(_ source: String) -> String {
            source.replacingOccurrences(of: "import ActivityKit\n", with: "")
        }
        let files: [(String, String)] = [
            ("ActivityKitStandIn.swift", """
                public protocol ActivityAttributes: Decodable, Encodable {
                    associatedtype ContentState: Codable & Hashable
                }

                """),
            ("FoodOrderAttributes.swift", strippingActivityKit(food.swiftActivityAttributes())),
            ("TypesAttributes.swift", strippingActivityKit(typesWorkflow.swiftActivityAttributes())),
            ("RaceAttributes.swift", strippingActivityKit(race.swiftActivityAttributes())),
            ("RideAttributes.swift", strippingActivityKit(ride.swiftActivityAttributes())),
            ("main.swift", """
                import Foundation

                let decoder = JSONDecoder()
                let update = try decoder.decode(FoodOrderAttributes.ContentState.self, from: Data(#"\(update.contentState.jsonString)"#.utf8))
                print("status", update.status.rawValue, update.status == .outForDelivery)
                print("message", update.message)
                print("eta", update.eta!.timeIntervalSince1970)
                print("driver", update.driverName ?? "nil")
                print("window", update.deliveryWindow!.lowerBound.timeIntervalSince1970, update.deliveryWindow!.upperBound.timeIntervalSince1970)
                let started = try decoder.decode(FoodOrderAttributes.ContentState.self, from: Data(#"\(start.update.contentState.jsonString)"#.utf8))
                print("start", started.status, started.eta == nil ? "no-eta" : "eta", started.driverName == nil ? "no-driver" : "driver",
                      started.deliveryWindow == nil ? "no-window" : "window")
                let attributes = try decoder.decode(FoodOrderAttributes.self, from: Data(#"\(start.attributes.jsonString)"#.utf8))
                print("attributes", attributes.merchantName, attributes.orderNumber, attributes.itemCount)
                let types = try decoder.decode(TypesAttributes.ContentState.self, from: Data(#"\(typesUpdate.contentState.jsonString)"#.utf8))
                print("types", types.greeting, types.count, types.ratio, types.flag, types.level, types.tags, types.note == nil,
                      types.due.timeIntervalSince1970, types.when!.timeIntervalSince1970)
                let typesStatic = try decoder.decode(TypesAttributes.self, from: Data(#"\(typesAttributes.jsonString)"#.utf8))
                print("since", typesStatic.since.timeIntervalSince1970)
                // And back: the app's own encoding is what the server sends.
                let encoder = JSONEncoder()
                encoder.outputFormatting = .sortedKeys
                print("reencoded", String(decoding: try encoder.encode(update), as: UTF8.self))
                let lap = try decoder.decode(RaceAttributes.ContentState.self, from: Data(#"\(lap.contentState.jsonString)"#.utf8))
                print("race", lap.status.rawValue, lap.lap, lap.first!.code, lap.second!.constructor, lap.third!.number,
                      lap.fastestLap!.name, lap.fastestLapTime!, lap.message)
                let scheduled = try decoder.decode(RaceAttributes.ContentState.self, from: Data(#"\(scheduled.contentState.jsonString)"#.utf8))
                print("scheduled", scheduled.status, scheduled.lap, scheduled.first == nil)
                let raceStatic = try decoder.decode(RaceAttributes.self, from: Data(#"\(raceStatic.jsonString)"#.utf8))
                print("race attributes", raceStatic.raceName, raceStatic.totalLaps)
                let dropOff = try decoder.decode(RideAttributes.ContentState.self, from: Data(#"\(dropOff.contentState.jsonString)"#.utf8))
                print("ride", dropOff.phase.rawValue, dropOff.driverName!, dropOff.car!, dropOff.plate!, dropOff.eta == nil)

                """),
        ]
        for (name, text) in files {
            try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let binary = directory.appendingPathComponent("decode")
        let compile = try run(swiftc, ["-swift-version", "6", "-o", binary.path] + files.map { directory.appendingPathComponent($0.0).path })
        #expect(compile.status == 0, "swiftc failed:\n\(compile.output)")
        #expect(!compile.output.contains("warning:"), "generated code has warnings:\n\(compile.output)")
        guard compile.status == 0 else { return }

        let result = try run(binary, [])
        #expect(result.status == 0, "decoder failed:\n\(result.output)")
        let expected = """
            status outForDelivery true
            message Sam is on the way.
            eta 1746102600.0
            driver Sam
            window 1746102000.0 1746102900.0
            start received no-eta no-driver no-window
            attributes Pizza Place A-1042 3
            types Hi Ann 7 0.25 true high ["x", "y"] true 1746104400.0 1746101700.0
            since 1704067200.0
            reencoded {"deliveryWindow":[767794800,767795700],"driverName":"Sam","eta":767795400,"message":"Sam is on the way.","status":"outForDelivery"}
            race racing 12 LEC McLaren 4 Lando Norris 1:21.046 Lap 12/53 · LEC leads
            scheduled scheduled 0 true
            race attributes Italian Grand Prix 53
            ride completed Anna Blue Prius B-AN 42 true

            """
        #expect(result.output == expected)
    }
}
