import Testing
import WorkflowKit

/// `lifecycle.audience`: per-device by default, `broadcast` with its channel's storage policy.
struct AudienceTests {
    private func load(_ lifecycle: String) throws -> Workflow {
        try WorkflowLoader.load(yaml: miniWorkflow.replacingOccurrences(of: "  start: app\n", with: lifecycle), file: "mini.yaml")
    }

    @Test func perDeviceIsTheDefaultAndKeepsTheChecksum() throws {
        let plain = try WorkflowLoader.load(yaml: miniWorkflow, file: "mini.yaml")
        #expect(plain.lifecycle.audience == .perDevice)
        let explicit = try load("  start: app\n  audience: per-device\n")
        #expect(explicit.lifecycle.audience == .perDevice)
        #expect(explicit.canonicalJSON == plain.canonicalJSON)
        #expect(!plain.canonicalJSON.contains("audience"))
    }

    @Test func broadcastStoresTheLatestUpdateUnlessToldOtherwise() throws {
        let broadcast = try load("  start: app\n  audience: broadcast\n")
        #expect(broadcast.lifecycle.audience == .broadcast(storage: .latest))
        #expect(broadcast.canonicalJSON.contains(#""audience":"broadcast""#))
        let none = try load("  start: app\n  audience: broadcast\n  channel-storage: none\n")
        #expect(none.lifecycle.audience == .broadcast(storage: ChannelStorage.none))
        #expect(none.canonicalJSON != broadcast.canonicalJSON)
    }

    @Test(arguments: [
        ("  start: app\n  audience: everyone\n", "`lifecycle.audience` must be `per-device`"),
        ("  start: app\n  audience: brodcast\n", "did you mean `broadcast`?"),
        ("  start: app\n  channel-storage: none\n", "applies to `audience: broadcast` only"),
        ("  start: app\n  audience: broadcast\n  channel-storage: all\n", "`lifecycle.channel-storage` must be `latest`"),
        ("  start: app\n  audience: broadcast\n  on-time-limit: restart\n", "does not go with `audience: broadcast`"),
    ])
    func refusesWhatCannotWork(lifecycle: String, message: String) throws {
        do {
            _ = try load(lifecycle)
            Issue.record("loaded a workflow that should be refused (\(message))")
        } catch let error as WorkflowValidationError {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    @Test func theShippedRaceIsABroadcast() throws {
        let race = try loadShipped("f1-race")
        #expect(race.lifecycle.audience == .broadcast(storage: .latest))
        #expect(race.lifecycle.start == .pushToStart)
    }
}
