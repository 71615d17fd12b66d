import ConsoleOutput
import Foundation
@testable import OrderFlowDemo
import Testing

/// The Android phone's part of the demo's report: its messages as rows, and the checks that
/// make the demo fail when the notification did not end cleanly.
@Suite("The demo's Android follower")
struct DemoAndroidReportTests {
    static let token = "d000000000000000000002a:APA91b0000002a" + String(repeating: "Xk3_9-qZ", count: 16)

    static func message(_ event: String, title: String = "On the way", at offset: TimeInterval = 0) -> DemoReport.Android.Message {
        .init(receivedAt: Date(timeIntervalSince1970: 1_795_000_000 + offset),
              data: ["event": event, "title": title, "text": "Sam is on the way.", "progress": "300", "segments": "100,100:#4CAF50,100,100"],
              priority: "HIGH")
    }

    static func android(_ messages: [DemoReport.Android.Message], refused: Int = 0) -> DemoReport.Android {
        .init(device: "anna-pixel", token: token, orderLabel: "A", messages: messages, refused: refused)
    }

    @Test func updatesEndingInTheEndPassAndShowEachMessage() {
        let android = Self.android([Self.message("update"), Self.message("end", title: "Delivered", at: 1)])
        #expect(android.problem == nil)
        let lines = android.lines(Terminal(isInteractive: false, usesColor: false))
        #expect(lines.count == 3)
        #expect(lines[1].contains("update  HIGH  “On the way” · Sam is on the way. · progress 300/400"), "\(lines)")
        #expect(lines[2].contains("end     HIGH  “Delivered”"), "\(lines)")
        #expect(!android.deviceLine(Terminal(isInteractive: false, usesColor: false)).contains(Self.token), "never the whole token")
        #expect(android.summary.contains("2 FCM data messages, the last one the end"))
    }

    @Test(arguments: [
        ([String](), 0, "got no FCM message"),
        (["update", "update"], 0, "last FCM message was an update, not the end"),
        (["update", "end", "update"], 0, "an FCM message after the end"),
        (["end", "end"], 0, "2 end messages"),
        (["update", "end"], 1, "refused 1 message"),
    ])
    func aNotificationThatDidNotEndCleanlyFailsTheDemo(events: [String], refused: Int, expected: String) {
        let android = Self.android(events.map { Self.message($0) }, refused: refused)
        let problem = android.problem
        #expect(problem?.contains(expected) == true, "\(String(describing: problem))")
    }

    @Test func hostileTextInAMessageIsShownEscaped() {
        let android = Self.android([Self.message("end", title: "esc\u{1B}[2J\u{202E}fdp")])
        let text = android.lines(Terminal(isInteractive: true, usesColor: true)).joined(separator: "\n")
        #expect(!text.contains("\u{1B}[2J") && !text.contains("\u{202E}"))
        #expect(text.contains("esc\\u{1B}[2J\\u{202E}fdp"), "\(text.debugDescription)")
    }
}
