import Foundation
import Testing
import WorkflowKit

/// A race: nested struct types, a bounded array of them, defaults and values that carry over.
let raceYAML = """
    name: race
    types:
      Driver:
        name: string(30)
        number: int
        team: {type: string(20), default: Independent}
    activity:
      attributes-type: RaceAttributes
      attributes:
        track: string(40)
        series: {type: string(10), default: F1}
      content-state:
        status: {type: "enum(green, yellow, finished)", default: green}
        lap: {type: int, carry-over: true}
        leader: {type: Driver?, carry-over: true}
        podium: {type: "[Driver; 3]", default: []}
        note: string(40)?
    lifecycle:
      start: app
    states:
      racing:
        initial: true
        content: {lap: 1}
      yellow:
        content: {status: yellow}
      finished:
        final: true
        content: {status: finished}
        alert: {title: "{{previous.leader.name}} wins", body: "at {{attributes.track}}"}
    transitions:
      - from: racing
        to: racing
        event: lap
        input: {lap: int, leader: Driver, podium: "[Driver; 3]"}
        content: {lap: "{{input.lap}}", leader: "{{input.leader}}", podium: "{{input.podium}}", note: "{{input.leader.name}} leads"}
      - from: racing
        to: yellow
        event: caution
      - from: [racing, yellow]
        to: finished
    """

@Suite("Struct types, bounded arrays, defaults and carry-over")
struct RichSchemaTests {
    let hamilton: JSONValue = ["name": "Lewis Hamilton", "number": 44, "team": "Ferrari"]
    let norris: JSONValue = ["name": "Lando Norris", "number": 4]

    @Test func structInputsRenderAsObjectsWithDefaultsFilledIn() throws {
        let race = try load(raceYAML)
        let attributes = try race.validateAttributes(["track": "Monza"])
        #expect(attributes["series"] == "F1")
        let lap = try #require(race.transition(from: "racing", to: "racing"))
        let update = try race.render(transition: lap, attributes: attributes,
                                     input: ["lap": 12, "leader": norris, "podium": [norris, hamilton]],
                                     previous: ["status": "green", "lap": 11, "leader": hamilton, "podium": [], "note": .null], at: transitionTime)
        let content = update.contentState
        #expect(content["leader"] == ["name": "Lando Norris", "number": 4, "team": "Independent"])
        #expect(content["podium"]?.arrayValue?.count == 2)
        #expect(content["note"] == "Lando Norris leads")
        #expect(content["status"] == "green")
    }

    @Test func carriedFieldsKeepTheirValueAndOthersFallBackToDefaults() throws {
        let race = try load(raceYAML)
        let caution = try #require(race.transitions.first { $0.event == "caution" })
        let previous: JSONValue = ["status": "green", "lap": 30, "leader": hamilton, "podium": [hamilton], "note": "x"]
        let update = try race.render(transition: caution, attributes: ["track": "Monza"], input: [:], previous: previous,
                                     at: transitionTime)
        #expect(update.contentState["status"] == "yellow")
        #expect(update.contentState["lap"] == 30)
        #expect(update.contentState["leader"]?["name"] == "Lewis Hamilton")
        // Not carried: the default, and null for an optional without one.
        #expect(update.contentState["podium"] == [])
        #expect(update.contentState["note"] == .null)

        let finish = try #require(race.transition(from: "yellow", to: "finished"))
        let end = try race.render(transition: finish, attributes: ["track": "Monza"], input: [:], previous: previous, at: transitionTime)
        #expect(end.alert?.title == .plain("Lewis Hamilton wins"))
        #expect(end.contentState["leader"]?["number"] == 44)
    }

    @Test func structMembersAreCheckedLikeFields() throws {
        let race = try load(raceYAML)
        let lap = try #require(race.transition(from: "racing", to: "racing"))
        #expect {
            _ = try race.validateInput(["lap": 2, "leader": ["name": "A", "nmber": 1], "podium": []], for: lap, at: transitionTime)
        } throws: { error in
            let text = "\(error)"
            return text.contains("leader.nmber") && text.contains("did you mean `number`") && text.contains("leader.number")
        }
        #expect(throws: (any Error).self) {
            _ = try race.validateInput(["lap": 2, "leader": "Norris", "podium": []], for: lap, at: transitionTime)
        }
        #expect(throws: (any Error).self) {
            _ = try race.validateInput(["lap": 2, "leader": norris, "podium": [norris, norris, norris, norris]], for: lap,
                                       at: transitionTime)
        }
    }

    @Test func generatedSwiftNestsTheStructsAndSpellsDefaults() throws {
        let source = try load(raceYAML).swiftActivityAttributes()
        let expected = [
            "public struct RaceAttributes: ActivityAttributes {",
            "    public struct Driver: Codable, Hashable, Sendable {",
            "        public var name: String  // at most 30 characters",
            "        public var number: Int",
            "        public var team: String = \"Independent\"  // at most 20 characters",
            "",
            "        public init(name: String, number: Int, team: String = \"Independent\") {",
        ].joined(separator: "\n")
        #expect(source.contains(expected), "\(source)")
        #expect(source.contains("        public var status: Status = .green\n"))
        #expect(source.contains("        public var leader: Driver?\n"))
        #expect(source.contains("        public var podium: [Driver] = []  // at most 3 elements\n"))
        #expect(source.contains("    public var series: String = \"F1\"  // at most 10 characters\n"))
    }

    @Test func payloadBoundCountsStructMembers() throws {
        let race = try load(raceYAML)
        let lap = try #require(race.transition(from: "racing", to: "racing"))
        let small = race.maximumPayloadSize(for: lap)
        let bigger = try load(raceYAML.replacingOccurrences(of: "name: string(30)", with: "name: string(300)"))
        let biggerLap = try #require(bigger.transition(from: "racing", to: "racing"))
        // The leader, the podium's three drivers and the note's template each grow by 270.
        #expect(bigger.maximumPayloadSize(for: biggerLap) - small >= 4 * 270)
    }

    @Test func canonicalFormChangesWithAStructsMembersOnly() throws {
        let race = try load(raceYAML)
        let reformatted = try load(raceYAML.replacingOccurrences(of: "number: int\n", with: "number:   int   # the car\n"))
        #expect(race.canonicalJSON == reformatted.canonicalJSON)
        let changed = try load(raceYAML.replacingOccurrences(of: "number: int\n", with: "number: double\n"))
        #expect(race.canonicalJSON != changed.canonicalJSON)
        // Workflows without the new keys keep the form stored versions were compared by.
        #expect(try !loadShipped("ride").canonicalJSON.contains("\"types\""))
    }

    @Test func structTypeMistakesAreReportedWhereTheyAre() {
        let later = diagnostics(raceYAML.replacingOccurrences(of: """
            types:
              Driver:
            """, with: """
            types:
              Car:
                driver: Driver
              Driver:
            """))
        #expect(later.contains { $0.line == 4 && $0.message.contains("unknown type `Driver`") && $0.message.contains("declared above") })

        let lowercase = diagnostics(raceYAML.replacingOccurrences(of: "  Driver:\n", with: "  driver:\n"))
        #expect(lowercase.contains { $0.line == 3 && $0.message.contains("must start with a capital letter (`Driver`)") })

        let literal = diagnostics(raceYAML.replacingOccurrences(of: "content: {lap: 1}", with: "content: {lap: 1, leader: {name: A}}"))
        #expect(literal.contains { $0.message.contains("is a struct: fill it from a variable of the same type") })

        let wrongType = diagnostics(raceYAML.replacingOccurrences(of: "leader: \"{{input.leader}}\"", with: "leader: \"{{input.lap}}\""))
        #expect(wrongType.contains { $0.message.contains("a struct is filled only from a variable of the same struct type") })

        let member = diagnostics(raceYAML.replacingOccurrences(of: "{{input.leader.name}} leads", with: "{{input.leader.nam}} leads"))
        #expect(member.contains { $0.message.contains("`{{input.leader.nam}}`") && $0.message.contains("input.leader.name") })
    }

    @Test func carryOverAndDefaultsAreCheckedWhereTheyAreWritten() {
        let onAttribute = diagnostics(raceYAML.replacingOccurrences(of: "track: string(40)", with: "track: {type: string(40), carry-over: true}"))
        #expect(onAttribute.contains { $0.message.contains("only ContentState fields keep their previous value") })

        let dateDefault = diagnostics(raceYAML.replacingOccurrences(of: "note: string(40)?", with: "note: {type: date?, default: now}"))
        #expect(dateDefault.contains { $0.message.contains("a date? field cannot have a default") })

        let wrongDefault = diagnostics(raceYAML.replacingOccurrences(of: "default: green", with: "default: blue"))
        #expect(wrongDefault.contains { $0.message.contains("`blue` is not one of the enum's values") })

        let unknownKey = diagnostics(raceYAML.replacingOccurrences(of: "{type: int, carry-over: true}", with: "{type: int, carryover: true}"))
        #expect(unknownKey.contains { $0.message.contains("unknown key `carryover`") && $0.message.contains("did you mean `carry-over`") })

        // Without carry-over or a default, a required field nothing sets is still an error.
        let unset = diagnostics(raceYAML.replacingOccurrences(of: "{type: int, carry-over: true}", with: "int"))
        #expect(unset.contains { $0.message.contains("leaves required ContentState field `lap` (int) unset") })
    }

    @Test func wholeWorkflowCarryOverWithAnOptOut() throws {
        let yaml = raceYAML
            .replacingOccurrences(of: "  attributes-type: RaceAttributes\n", with: "  attributes-type: RaceAttributes\n  carry-over: true\n")
            .replacingOccurrences(of: "note: string(40)?", with: "note: {type: string(40)?, carry-over: false}")
        let race = try load(yaml)
        let caution = try #require(race.transitions.first { $0.event == "caution" })
        let previous: JSONValue = ["status": "green", "lap": 30, "leader": hamilton, "podium": [hamilton], "note": "x"]
        let update = try race.render(transition: caution, attributes: ["track": "Monza"], input: [:], previous: previous,
                                     at: transitionTime)
        #expect(update.contentState["podium"]?.arrayValue?.count == 1)
        #expect(update.contentState["note"] == .null)
    }

    /// The 4 KB error names the format's real syntax (there is no `max-length` key).
    @Test func oversizedArraysAreToldTheirBound() {
        let found = diagnostics("""
            name: tags
            activity:
              attributes-type: TagsAttributes
              content-state:
                tags: {type: "[string; 20]", carry-over: true}
            lifecycle: {start: app}
            states:
              open: {initial: true, content: {tags: []}}
              done: {final: true}
            transitions:
              - {from: open, to: open, input: {tags: "[string; 20]"}, content: {tags: "{{input.tags}}"}}
              - {from: open, to: done}
            """)
        let message = found.first { $0.message.contains("over the 4096-byte limit") }?.message ?? ""
        #expect(!message.contains("max-length"))
        #expect(message.contains("give the elements of `tags: [string; 20]` a max length and declare fewer of them, e.g. `[string(40); 10]`"), "\(message)")
        #expect(message.contains("a string without a max length counts as 256 bytes"))
    }

    @Test func shippedRideKeepsTheDriverToTheEnd() throws {
        let ride = try loadShipped("ride")
        let attributes: JSONValue = ["pickupAddress": "Main St 1", "dropoffAddress": "Airport"]
        var previous: JSONValue = try ride.render(state: "requested", attributes: attributes, at: transitionTime).contentState
        let steps: [(String, String, JSONValue)] = [
            ("requested", "driver_assigned", ["driver": "Anna", "car": "Blue Prius", "plate": "B-AN 42", "eta": "+5m"]),
            ("driver_assigned", "arriving", ["eta": "+2m"]),
            ("arriving", "waiting", [:]),
            ("waiting", "on_trip", ["eta": "+20m"]),
            ("on_trip", "completed", [:]),
        ]
        for (from, to, input) in steps {
            let transition = try #require(ride.transition(from: from, to: to))
            let update = try ride.render(transition: transition, attributes: attributes, input: input, previous: previous,
                                         at: transitionTime)
            #expect(update.contentState["driverName"] == "Anna", "\(from) -> \(to)")
            #expect(update.contentState["car"] == "Blue Prius", "\(from) -> \(to)")
            #expect(update.contentState["plate"] == "B-AN 42", "\(from) -> \(to)")
            previous = update.contentState
            if to == "completed" { #expect(update.alert?.body == .plain("Thanks for riding with Anna.")) }
        }
    }
}
