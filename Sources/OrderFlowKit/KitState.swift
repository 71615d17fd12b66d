import Foundation

/// One call to the app's door the kit owes the server: kept until the server took it. The path
/// is made when it is sent, since the device id (and a push-started activity's order) may be
/// known only later.
struct PendingCall: Codable, Hashable, Sendable {
    enum Target: Codable, Hashable, Sendable {
        case pushToStart(attributesType: String)
        case follow(order: String)
        case activityToken(activity: String)
        case activityState(activity: String)
    }
    var target: Target
    /// The JSON object sent (PUT).
    var body: [String: String]
    /// What the server holds once it took the call: an unchanged value is not sent again.
    var value: String

    /// A newer call for the same key replaces an unsent older one.
    var key: String {
        switch target {
        case .pushToStart(let type): return "pts:" + type
        case .follow(let order): return "follow:" + order
        case .activityToken(let activity): return "token:" + activity
        case .activityState(let activity): return "state:" + activity
        }
    }
}

/// Everything the kit keeps between launches.
struct KitState: Codable, Sendable {
    var device: String?
    var credential: String?
    /// Order id → client secret, in the order followed (newest last).
    var follows: [Followed] = []
    /// ActivityKit's activity id → the order it shows.
    var activityOrders: [String: String] = [:]
    /// Key → the value the server took last.
    var sent: [String: String] = [:]
    var queue: [PendingCall] = []
    /// Activities that ended or were dismissed: content they report later changes nothing.
    var finished: Set<String> = []

    struct Followed: Codable, Sendable, Hashable {
        var order: String
        var clientSecret: String
    }

    func secret(for order: String?) -> String? {
        if let order { return follows.last(where: { $0.order == order })?.clientSecret }
        return follows.last?.clientSecret
    }

    /// Queues a call unless the server already holds its value; replaces an older unsent one.
    mutating func enqueue(_ call: PendingCall) {
        queue.removeAll { $0.key == call.key }
        if sent[call.key] != call.value { queue.append(call) }
    }
}
