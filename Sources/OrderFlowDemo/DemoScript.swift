import ConsoleOutput
import Foundation
import LocalAPNS
import LocalFCM
import OrderFlow
import WorkflowKit

/// The people, devices and tokens of the demo. Tokens are random hex, as APNs issues them, and
/// are only ever shown masked.
struct DemoCast: Sendable {
    struct Order: Sendable {
        var label: String
        var id: String
        var story: String
    }

    let orderA = Order(label: "A", id: "1042", story: "food order, a step every 1.2 s: each step is its own update")
    let orderB = Order(label: "B", id: "1043", story: "food order, accept, ready and dispatch within milliseconds")
    let orderC = Order(label: "C", id: "1044", story: "food order, cancelled by the restaurant")
    let ride = Order(label: "R", id: "R-2087", story: "ride, started by the app, driver details on the Lock Screen")
    var orders: [Order] { [orderA, orderB, orderC, ride] }
    /// A shared event: one APNs broadcast channel, however many phones follow it.
    let race = Order(label: "F", id: "monza-2026", story: "F1 race, audience: broadcast: three fans follow it through one APNs channel")
    let fans = ["fia-iphone", "gio-iphone", "hana-iphone"]
    let fanStarts = (0..<3).map { _ in Self.token(160) }

    /// Follows order A with a Live Activity started by push.
    let anna = "anna-iphone"
    /// Follows order A too, but registered no Live Activity token: ordinary alerts.
    let ben = "ben-iphone"
    let chloe = "chloe-iphone"
    let dan = "dan-iphone"
    let erin = "erin-iphone"
    /// Follows order A on Android: FCM data messages, one notification the app replaces in place.
    let annaPixel = "anna-pixel"
    let annaPixelToken = LocalFCMServer.registrationToken(Int.random(in: 1...0xFFFF_FFFF))

    let annaStart = Self.token(160)
    let annaActivity = Self.token(160)
    let benDevice = Self.token(64)
    let chloeStart = Self.token(160)
    let chloeActivity = Self.token(160)
    let danStart = Self.token(160)
    let danActivity = Self.token(160)
    let erinActivity = Self.token(160)

    /// Token → who holds it and what kind it is.
    var holders: [String: TokenHolder] {
        [
            annaStart: .init(device: anna, kind: "push-to-start"), annaActivity: .init(device: anna, kind: "activity"),
            benDevice: .init(device: ben, kind: "device"),
            chloeStart: .init(device: chloe, kind: "push-to-start"), chloeActivity: .init(device: chloe, kind: "activity"),
            danStart: .init(device: dan, kind: "push-to-start"), danActivity: .init(device: dan, kind: "activity"),
            erinActivity: .init(device: erin, kind: "activity"),
        ].merging(zip(fanStarts, fans).map { ($0, TokenHolder(device: $1, kind: "push-to-start")) }) { first, _ in first }
    }

    static func token(_ length: Int) -> String {
        (0..<length / 2).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}

/// Who holds a token, and which kind of APNs token it is.
struct TokenHolder: Sendable {
    var device: String
    var kind: String
}

struct DemoScript: Sendable {
    let engine: OrderFlowEngine
    let apns: LocalAPNSServer
    let fcm: LocalFCMServer
    let cast: DemoCast
    let merchantID: String
    /// Between two steps of one order: over the worker's one-push-per-second pace, so each
    /// step becomes an update of its own.
    let pause: Duration

    static let actor = "demo"

    /// The four stories, side by side.
    func perform() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await orderA() }
            group.addTask { try await orderB() }
            group.addTask { try await orderC() }
            group.addTask { try await ride() }
            group.addTask { try await race() }
            try await group.waitForAll()
        }
    }

    /// Push-to-start on creation; the app reports the activity's token; four steps 1.2 s apart.
    /// Ben follows the same order with only an ordinary device token, Anna on her Android phone too.
    private func orderA() async throws {
        let id = cast.orderA.id
        try await engine.registerPushToStartToken(deviceID: cast.anna, attributesType: "FoodOrderAttributes", token: cast.annaStart)
        try await engine.registerDeviceToken(deviceID: cast.ben, token: cast.benDevice)
        try await engine.registerFCMToken(deviceID: cast.annaPixel, token: cast.annaPixelToken)
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": .string(id), "itemCount": 3],
            input: ["eta": "+35m"], actor: Self.actor))
        try await engine.follow(orderID: id, deviceID: cast.anna)
        try await engine.follow(orderID: id, deviceID: cast.ben)
        try await engine.follow(orderID: id, deviceID: cast.annaPixel)
        try await activityStarted(id, on: cast.anna)
        try await engine.registerActivityToken(orderID: id, deviceID: cast.anna, token: cast.annaActivity)
        let steps: [(String, JSONValue)] = [
            ("accept", ["eta": "+25m"]), ("ready", [:]), ("dispatch", ["eta": "+12m", "driver": "Sam", "window": "+8m..+18m"]), ("deliver", [:]),
        ]
        for (target, input) in steps {
            try await Task.sleep(for: pause)
            _ = try await engine.advance(id, to: target, input: input, actor: Self.actor)
        }
    }

    /// A burst: three steps within milliseconds of each other, less than a second after the
    /// start, reach the phone as one update.
    private func orderB() async throws {
        let id = cast.orderB.id
        try await engine.registerPushToStartToken(deviceID: cast.chloe, attributesType: "FoodOrderAttributes", token: cast.chloeStart)
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "food-order",
            attributes: ["merchantName": "Taqueria Sol", "orderNumber": .string(id), "itemCount": 2], actor: Self.actor))
        try await engine.follow(orderID: id, deviceID: cast.chloe)
        try await activityStarted(id, on: cast.chloe)
        try await engine.registerActivityToken(orderID: id, deviceID: cast.chloe, token: cast.chloeActivity)
        _ = try await engine.advance(id, to: "accept", input: ["eta": "+15m"], actor: Self.actor)
        _ = try await engine.advance(id, to: "ready", actor: Self.actor)
        _ = try await engine.advance(id, to: "dispatch", input: ["eta": "+9m", "driver": "Priya"], actor: Self.actor)
        try await Task.sleep(for: pause * 2)
        _ = try await engine.advance(id, to: "deliver", actor: Self.actor)
    }

    private func orderC() async throws {
        let id = cast.orderC.id
        try await engine.registerPushToStartToken(deviceID: cast.dan, attributesType: "FoodOrderAttributes", token: cast.danStart)
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "food-order",
            attributes: ["merchantName": "Noodle Bar", "orderNumber": .string(id), "itemCount": 1], actor: Self.actor))
        try await engine.follow(orderID: id, deviceID: cast.dan)
        try await activityStarted(id, on: cast.dan)
        try await engine.registerActivityToken(orderID: id, deviceID: cast.dan, token: cast.danActivity)
        try await Task.sleep(for: pause)
        _ = try await engine.cancel(id, reason: "the kitchen closed early", actor: Self.actor)
    }

    /// The ride workflow lets the app start the activity: the token arrives right after the
    /// order, and the first push brings the activity up to date.
    private func ride() async throws {
        let id = cast.ride.id
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "ride",
            attributes: ["pickupAddress": "1 Market St", "dropoffAddress": "Union Square"], actor: Self.actor))
        try await engine.registerActivityToken(orderID: id, deviceID: cast.erin, token: cast.erinActivity)
        let steps: [(String, JSONValue)] = [
            ("assign", ["driver": "Maria", "car": "blue Toyota Prius", "plate": "7ABC123", "eta": "+6m"]),
            ("arriving", ["eta": "+2m"]),
            ("driver_arrived", [:]),
            ("start_trip", ["eta": "+18m"]),
            ("drop_off", [:]),
        ]
        for (target, input) in steps {
            try await Task.sleep(for: pause)
            _ = try await engine.advance(id, to: target, input: input, actor: Self.actor)
        }
    }

    /// A race that three fans follow: they join by push-to-start carrying the race's channel
    /// id; every step after that is one broadcast request, fanned out by APNs to all three.
    private func race() async throws {
        let id = cast.race.id
        for (fan, token) in zip(cast.fans, cast.fanStarts) {
            try await engine.registerPushToStartToken(deviceID: fan, attributesType: "RaceAttributes", token: token)
        }
        _ = try await engine.createOrder(NewOrder(
            orderID: id, workflow: "f1-race",
            attributes: ["raceName": "Italian Grand Prix", "track": "Monza", "totalLaps": 53], actor: Self.actor))
        for fan in cast.fans { try await engine.follow(orderID: id, deviceID: fan) }
        for fan in cast.fans { try await activityStarted(id, on: fan) }
        func driver(_ name: String, _ code: String, _ number: Int, _ team: String) -> JSONValue {
            ["name": .string(name), "code": .string(code), "number": .int(number), "constructor": .string(team)]
        }
        let lec = driver("Charles Leclerc", "LEC", 16, "Ferrari")
        let nor = driver("Lando Norris", "NOR", 4, "McLaren")
        let ver = driver("Max Verstappen", "VER", 1, "Red Bull")
        let steps: [(String, JSONValue)] = [
            ("lights_out", ["first": lec, "second": nor, "third": ver]),
            ("lap", ["lap": 2, "first": lec, "second": ver, "third": nor, "fastestLap": ver, "fastestLapTime": "1:21.046"]),
            ("lap", ["lap": 3, "first": ver, "second": lec, "third": nor, "fastestLap": ver, "fastestLapTime": "1:20.912"]),
            ("chequered_flag", ["first": ver, "second": lec, "third": nor]),
        ]
        for (event, input) in steps {
            try await Task.sleep(for: pause)
            _ = try await engine.advance(id, to: event, input: input, actor: Self.actor)
        }
    }

    /// Waits until the worker has sent the push-to-start and recorded it.
    private func activityStarted(_ orderID: String, on device: String) async throws {
        try await waitUntil("the Live Activity of order \(orderID) starts on \(device)", timeout: .seconds(15)) {
            try await engine.order(orderID).activities.first { $0.deviceID == device }?.status == "starting"
        }
    }

    /// Every order's commands handled: nothing queued, nothing deferred.
    func waitForDrain() async throws {
        let ids = cast.orders.map(\.id)
        try await waitUntil("the worker has sent every push", timeout: .seconds(20)) {
            for id in ids {
                if try await engine.order(id).pendingCommands > 0 { return false }
            }
            // The race's channel keeps a wake-up queued for its deletion after the retention:
            // its end being sent is what counts here.
            let race = try await engine.order(cast.race.id).order.channel?.state
            return race == .ended || race == .deleted || race == .failed
        }
    }

    private func waitUntil(_ what: String, timeout: Duration, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(try await condition()) {
            guard ContinuousClock.now < deadline else {
                throw DemoError(.failed, "timed out after \(DemoOutput.seconds(timeout)) waiting until \(what)",
                                remedy: "run again with ORDERFLOW_LOG_LEVEL=info to see the worker's log")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// What happened, read back from the engine and the stand-in.
    func report(elapsed: Duration) async throws -> DemoReport {
        let holders = cast.holders
        let all = apns.pushes().filter { holders[$0.deviceToken] != nil }
        // The fans' push-to-starts are told with the race, not in the per-order summary.
        let received = all.filter { !cast.fanStarts.contains($0.deviceToken) }
        var orders: [DemoReport.Order] = []
        for order in cast.orders {
            let history = try await engine.history(order.id)
            let details = try await engine.order(order.id)
            orders.append(DemoReport.Order(
                label: order.label, story: order.story, history: history, activities: details.activities))
        }
        let race = try await engine.history(cast.race.id)
        let counts = apns.broadcastCounts
        let broadcast = DemoReport.Broadcast(
            label: cast.race.label, story: cast.race.story, channel: race.order.channel,
            updates: race.transitions.count - 1, requests: counts.requests, deliveries: counts.deliveries, fans: cast.fans.count,
            starts: all.filter { cast.fanStarts.contains($0.deviceToken) }.count)
        let android = DemoReport.Android(
            device: cast.annaPixel, token: cast.annaPixelToken, orderLabel: cast.orderA.label,
            messages: fcm.messages().filter { $0.token == cast.annaPixelToken }
                .map { .init(receivedAt: $0.receivedAt, data: $0.data, priority: $0.priority) },
            refused: fcm.rejections().filter { $0.token == cast.annaPixelToken }.count)
        return DemoReport(orders: orders, pushes: received, holders: holders,
                          merchantID: merchantID, elapsed: elapsed, broadcast: broadcast, android: android)
    }
}
