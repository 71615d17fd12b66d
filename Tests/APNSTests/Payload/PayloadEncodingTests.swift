import APNS
import Foundation
import LocalAPNS
import OrderFlowTesting
import Testing

@Suite("Payload encoding")
struct PayloadEncodingTests {
    let timestamp = Date(timeIntervalSince1970: 1_700_000_000.9)

    func json(_ text: String) throws -> APNSJSONObject {
        try APNSJSONObject(json: Data(text.utf8))
    }

    func text(_ data: Data) -> String {
        String(decoding: data, as: UTF8.self)
    }

    @Test("start carries alert (sound inside), attributes, content state and integer dates")
    func start() throws {
        let payload = LiveActivityPayload.start(
            timestamp: self.timestamp,
            attributesType: "DeliveryAttributes",
            attributes: try self.json(#"{"orderID":"A1"}"#),
            contentState: try self.json(#"{"status":"placed","etaMinutes":30}"#),
            alert: LiveActivityAlert(title: "Order placed", body: "We sent it to the kitchen"),
            staleDate: self.timestamp.addingTimeInterval(900),
            relevanceScore: 50,
            requestInputPushToken: true
        )
        #expect(
            try self.text(payload.encoded())
                == #"{"aps":{"alert":{"body":"We sent it to the kitchen","sound":"default","title":"Order placed"},"#
                + #""attributes":{"orderID":"A1"},"attributes-type":"DeliveryAttributes","#
                + #""content-state":{"status":"placed","etaMinutes":30},"event":"start","input-push-token":1,"#
                + #""relevance-score":50.0,"stale-date":1700000900,"timestamp":1700000000}}"#
        )
    }

    @Test("update with a localized alert nests loc-key and loc-args per field")
    func updateLocalized() throws {
        let payload = try LiveActivityPayload.update(
            timestamp: self.timestamp,
            contentState: DeliveryState(status: "on_the_way", etaMinutes: 5),
            alert: LiveActivityAlert(
                title: .localized(key: "DRIVER_NEAR"),
                body: .localized(key: "ETA_BODY", arguments: ["5", "Main St"]),
                sound: .named("chime.caf")
            ),
            staleDate: Date(timeIntervalSince1970: 1_700_000_600)
        )
        #expect(
            try self.text(payload.encoded())
                == #"{"aps":{"alert":{"body":{"loc-args":["5","Main St"],"loc-key":"ETA_BODY"},"sound":"chime.caf","#
                + #""title":{"loc-args":[],"loc-key":"DRIVER_NEAR"}},"#
                + #""content-state":{"etaMinutes":5,"status":"on_the_way"},"event":"update","#
                + #""stale-date":1700000600,"timestamp":1700000000}}"#
        )
    }

    @Test("a plain update has no alert and no sound anywhere")
    func updateQuiet() throws {
        let payload = LiveActivityPayload.update(timestamp: self.timestamp, contentState: try self.json(#"{"status":"ready"}"#))
        #expect(try self.text(payload.encoded()) == #"{"aps":{"content-state":{"status":"ready"},"event":"update","timestamp":1700000000}}"#)
    }

    @Test("end carries an optional final state and the dismissal date")
    func end() throws {
        let payload = LiveActivityPayload.end(
            timestamp: self.timestamp,
            contentState: try self.json(#"{"status":"delivered"}"#),
            alert: LiveActivityAlert(title: "Delivered", body: "Enjoy your meal", sound: nil),
            dismissalDate: Date(timeIntervalSince1970: 1_700_003_600)
        )
        #expect(
            try self.text(payload.encoded())
                == #"{"aps":{"alert":{"body":"Enjoy your meal","title":"Delivered"},"content-state":{"status":"delivered"},"#
                + #""dismissal-date":1700003600,"event":"end","timestamp":1700000000}}"#
        )
        let bare = LiveActivityPayload.end(timestamp: self.timestamp)
        #expect(try self.text(bare.encoded()) == #"{"aps":{"event":"end","timestamp":1700000000}}"#)
    }

    @Test("an alert notification puts sound beside the alert and custom data beside aps")
    func alertPayload() throws {
        let payload = AlertPayload(
            title: "Courier arrived",
            subtitle: "Order A1",
            body: "Your courier is at the door",
            badge: 1,
            threadID: "order-A1",
            interruptionLevel: .timeSensitive,
            customData: try APNSJSONObject(encoding: DeliveryAttributes(orderID: "A1"))
        )
        #expect(
            try self.text(payload.encoded())
                == #"{"aps":{"alert":{"body":"Your courier is at the door","subtitle":"Order A1","title":"Courier arrived"},"#
                + #""badge":1,"interruption-level":"time-sensitive","sound":"default","thread-id":"order-A1"},"orderID":"A1"}"#
        )
        let minimal = AlertPayload(title: .localized(key: "READY", arguments: ["A1"]), body: "", sound: nil)
        #expect(try self.text(minimal.encoded()) == #"{"aps":{"alert":{"body":"","title":{"loc-args":["A1"],"loc-key":"READY"}}}}"#)
    }

    @Test("an Encodable content state decodes back with the app's default JSONDecoder, dates included")
    func contentStateRoundTrip() throws {
        struct State: Codable, Sendable, Equatable {
            var status: String
            var eta: Date
        }
        let state = State(status: "cooking \"fast\" / hot\n", eta: Date(timeIntervalSinceReferenceDate: 754_000_000))
        let body = try LiveActivityPayload.update(timestamp: self.timestamp, contentState: state).encoded()
        struct Envelope: Decodable {
            struct APS: Decodable {
                var contentState: State
                var timestamp: Int
                enum CodingKeys: String, CodingKey {
                    case contentState = "content-state"
                    case timestamp
                }
            }
            var aps: APS
        }
        let decoded = try JSONDecoder().decode(Envelope.self, from: body)
        #expect(decoded.aps.contentState == state)
        #expect(decoded.aps.timestamp == 1_700_000_000)
        // The date is seconds since 2001, what the app's default decoder reads.
        #expect(self.text(body).contains(#""eta":754000000"#))
    }

    @Test("strings are escaped so the payload stays valid JSON")
    func escaping() throws {
        let payload = AlertPayload(title: "Tab\tquote\" back\\slash", body: "line\nbreak \u{1}ctl ünïcode 🍕")
        let body = try payload.encoded()
        let parsed = try JSONValue(parsing: body)
        #expect(parsed["aps"]?["alert"]?["title"]?.stringValue == "Tab\tquote\" back\\slash")
        #expect(parsed["aps"]?["alert"]?["body"]?.stringValue == "line\nbreak \u{1}ctl ünïcode 🍕")
    }

    @Test("a payload over 4096 bytes is refused with its actual size")
    func sizeLimit() throws {
        let big = String(repeating: "x", count: 4100)
        let error = #expect(throws: APNSPayloadError.self) {
            try LiveActivityPayload.update(timestamp: self.timestamp, contentState: ["note": big]).encoded()
        }
        let expectedSize = #"{"aps":{"content-state":{"note":""},"event":"update","timestamp":1700000000}}"#.utf8.count + 4100
        #expect(error?.code == .tooLarge(size: expectedSize, limit: 4096))
        #expect(error?.action == .payloadRejected)
        #expect(error?.description.contains("\(expectedSize) bytes") == true)

        // Exactly at the limit is fine.
        let fits = String(repeating: "x", count: 4096 - (expectedSize - 4100))
        let body = try LiveActivityPayload.update(timestamp: self.timestamp, contentState: ["note": fits]).encoded()
        #expect(body.count == 4096)
    }

    @Test("a start without alert or attributes, and a non-object content state, are refused")
    func invalidPayloads() throws {
        let state = try self.json(#"{"status":"placed"}"#)
        let noAlert = LiveActivityPayload(event: .start, timestamp: self.timestamp, contentState: state, attributesType: "A", attributes: state)
        #expect(throws: APNSPayloadError.self) { try noAlert.encoded() }
        let emptyAlert = LiveActivityPayload.start(
            timestamp: self.timestamp, attributesType: "A", attributes: state, contentState: state,
            alert: LiveActivityAlert(title: "", body: "")
        )
        #expect(throws: APNSPayloadError.self) { try emptyAlert.encoded() }
        let noType = LiveActivityPayload.start(
            timestamp: self.timestamp, attributesType: "", attributes: state, contentState: state,
            alert: LiveActivityAlert(title: "t", body: "b")
        )
        #expect(throws: APNSPayloadError.self) { try noType.encoded() }
        #expect(throws: APNSPayloadError.self) { try APNSJSONObject(json: Data("[1,2]".utf8)) }
        #expect(throws: APNSPayloadError.self) { try APNSJSONObject(encoding: "just a string") }
        let nanScore = LiveActivityPayload.update(timestamp: self.timestamp, contentState: state, relevanceScore: .nan)
        #expect(throws: APNSPayloadError.self) { try nanScore.encoded() }
        let apsClash = AlertPayload(title: "t", body: "b", customData: try self.json(#"{"aps":1}"#))
        #expect(throws: APNSPayloadError.self) { try apsClash.encoded() }
    }

    @Test("requests append the Live Activity topic suffix once and validate device tokens")
    func requestTopicAndToken() throws {
        let update = try liveActivityUpdate()
        #expect(update.headerTopic == "com.example.orderflow.push-type.liveactivity")
        var suffixed = update
        suffixed.topic = "com.example.orderflow.push-type.liveactivity"
        #expect(suffixed.headerTopic == "com.example.orderflow.push-type.liveactivity")
        let alert = try APNSRequest(alert: AlertPayload(title: "t", body: "b"), deviceToken: "abcd", bundleID: "com.example.orderflow")
        #expect(alert.headerTopic == "com.example.orderflow")
    }
}
