import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's half of OrderFlow: hands ActivityKit's tokens and the activities' states to
/// `orderflow serve`, across launches and offline periods.
///
/// Call ``connect(api:activities:store:retry:session:)`` once at launch and
/// ``follow(order:clientSecret:)`` for each order the merchant's backend hands over. The kit
/// registers the device once (its credential kept in the store), forwards each push-to-start
/// token, observes every activity on every launch (also those push-started while the app was not
/// running) and reports their token rotations, dismissal and applied content. Calls that cannot
/// be sent stay queued in the store and go out at the next launch; a value the server already
/// holds is not sent again.
public actor OrderFlowKit {
    private let client: DoorClient
    private let store: any KitStore
    private let source: any ActivitySource
    private var state: KitState
    private var observing: Set<String> = []
    private var tasks: [Task<Void, Never>] = []
    private var draining = false
    /// Set by ``disconnect()``: from then on this kit sends and writes nothing (a later launch's
    /// kit owns the store).
    private var disconnected = false
    private var problemLog: [String] = []

    /// Starts the kit: registers the device when it can, sends what an earlier launch left
    /// queued, and observes push-to-start tokens and activities.
    /// - Parameters:
    ///   - api: The API's base URL, ending in `/v1` (`https://orders.example.com/v1`).
    ///   - activities: The app's activities: ``ActivityKitSource`` on iOS.
    ///   - store: Where the credential and the queue are kept; the Keychain on Apple platforms.
    ///   - retry: How often and how patiently one call is tried before it waits for the next launch.
    ///   - session: The URL session the calls go through.
    /// - Returns: The running kit.
    public static func connect(
        api: URL, activities: any ActivitySource, store: (any KitStore)? = nil,
        retry: RetryPolicy = RetryPolicy(), session: URLSession = .shared
    ) -> OrderFlowKit {
        let kit = OrderFlowKit(api: api, activities: activities, store: store ?? defaultStore(), retry: retry, session: session)
        Task { await kit.start() }
        return kit
    }

    private static func defaultStore() -> any KitStore {
        #if canImport(Security)
        return KeychainStore()
        #else
        let directory = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return FileStore(url: directory.appendingPathComponent("OrderFlowKit.json"))
        #endif
    }

    private init(api: URL, activities: any ActivitySource, store: any KitStore, retry: RetryPolicy, session: URLSession) {
        client = DoorClient(api: api, session: session, retry: retry)
        self.store = store
        source = activities
        let saved = (try? store.load()).flatMap { try? JSONDecoder().decode(KitState.self, from: $0) }
        state = saved ?? KitState()
    }

    /// The device id the server gave this installation; `nil` until it registered.
    public var device: String? { state.device }

    /// Calls not yet taken by the server (they are sent at the next launch if not before).
    public var pendingCalls: Int { state.queue.count }

    /// Calls the server refused for good, for people (a 4xx: retrying cannot help).
    public var problems: [String] { problemLog }

    /// Follows an order the merchant's backend handed over: the server sends it to this device.
    /// - Parameters:
    ///   - order: The order's id.
    ///   - clientSecret: The order's client secret (`of_cs_…`), from the merchant's backend.
    public func follow(order: String, clientSecret: String) async {
        state.follows.removeAll { $0.order == order }
        state.follows.append(.init(order: order, clientSecret: clientSecret))
        state.enqueue(PendingCall(target: .follow(order: order), body: [:], value: "following"))
        save()
        await drain()
    }

    /// Sends what is queued now; returns when it was sent or the server could not be reached.
    public func flush() async { await drain() }

    /// Stops observing (what the end of the app's process does); the queue stays in the store.
    /// Returns once the observing has stopped; this kit writes nothing to the store after it.
    public func disconnect() async {
        disconnected = true
        let running = tasks
        tasks.removeAll()
        for task in running { task.cancel() }
        for task in running { await task.value }
    }

    private func start() async {
        guard !disconnected else { return }
        for type in source.attributesTypes {
            let updates = source.pushToStartTokenUpdates(for: type)
            tasks.append(Task { [weak self] in
                for await token in updates {
                    await self?.record(PendingCall(target: .pushToStart(attributesType: type), body: ["token": token.hexText], value: token.hexText))
                }
            })
        }
        for activity in source.currentActivities() { observe(activity) }
        let started = source.activityUpdates()
        tasks.append(Task { [weak self] in
            for await activity in started { await self?.observe(activity) }
        })
        await drain()
    }

    private func observe(_ activity: any ObservedActivity) {
        guard observing.insert(activity.id).inserted else { return }
        let id = activity.id
        if state.activityOrders[id] == nil, let order = activity.orderID ?? unclaimedOrder() {
            state.activityOrders[id] = order
            save()
        }
        let tokens = activity.pushTokenUpdates, states = activity.stateUpdates, contents = activity.contentUpdates
        tasks.append(Task { [weak self] in
            for await token in tokens {
                await self?.record(PendingCall(target: .activityToken(activity: id), body: ["token": token.hexText], value: token.hexText))
            }
        })
        tasks.append(Task { [weak self] in
            for await lifecycle in states { await self?.report(lifecycle, appliedAt: nil, activity: id) }
        })
        tasks.append(Task { [weak self] in
            for await applied in contents { await self?.report(.active, appliedAt: applied, activity: id) }
        })
    }

    /// The newest followed order that no activity shows yet.
    private func unclaimedOrder() -> String? {
        let claimed = Set(state.activityOrders.values)
        return state.follows.last(where: { !claimed.contains($0.order) })?.order
    }

    private func report(_ lifecycle: ActivityLifecycle, appliedAt: Date?, activity: String) async {
        if state.finished.contains(activity) { return }
        if lifecycle == .ended || lifecycle == .dismissed { state.finished.insert(activity) }
        var body = ["state": lifecycle.rawValue]
        if let appliedAt { body["applied_at"] = ISO8601DateFormatter().string(from: appliedAt) }
        let value = body.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        await record(PendingCall(target: .activityState(activity: activity), body: body, value: value))
    }

    private func record(_ call: PendingCall) async {
        state.enqueue(call)
        save()
        await drain()
    }

    private func save() {
        guard !disconnected else { return }
        do {
            try store.save(JSONEncoder().encode(state))
        } catch {
            problemLog.append("Could not save OrderFlowKit's state (\(error)); unsent tokens may be sent again or late.")
        }
    }
}

extension OrderFlowKit {
    /// Sends the queue front to back; stops at the first call the server could not be reached for.
    private func drain() async {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !disconnected {
            guard let secret = state.secret(for: nil) else { return }
            if state.credential == nil {
                guard await register(secret: secret) else { return }
                continue
            }
            guard let device = state.device, let index = state.queue.firstIndex(where: { path(for: $0, device: device) != nil }) else { return }
            let call = state.queue[index]
            guard let (path, order) = path(for: call, device: device) else { return }
            let body = try? JSONEncoder().encode(call.body)
            let outcome = await client.send(method: "PUT", path: path, body: body,
                                            secret: state.secret(for: order) ?? secret, credential: state.credential)
            switch outcome {
            case .later:
                return
            case .done:
                state.sent[call.key] = call.value
                state.queue.removeAll { $0 == call }
            case .refused(let status, let text):
                problemLog.append("The server refused PUT \(path) (\(status)): \(text)")
                state.queue.removeAll { $0 == call }
            }
            save()
        }
    }

    /// The call's path and the order whose secret authorizes it; `nil` while an activity's order is unknown.
    private func path(for call: PendingCall, device: String) -> (String, String?)? {
        switch call.target {
        case .pushToStart(let type):
            return ("devices/\(device)/push-to-start-tokens/\(type)", nil)
        case .follow(let order):
            return ("orders/\(order)/followers/\(device)", order)
        case .activityToken(let activity), .activityState(let activity):
            guard let order = state.activityOrders[activity] ?? adopt(activity) else { return nil }
            let suffix = if case .activityToken = call.target { "token" } else { "state" }
            return ("orders/\(order)/activities/\(device)/\(suffix)", order)
        }
    }

    /// Maps an activity that started before any order was followed, once one is.
    private func adopt(_ activity: String) -> String? {
        guard let order = unclaimedOrder() else { return nil }
        state.activityOrders[activity] = order
        return order
    }

    private struct Registered: Decodable {
        let device: String
        let device_credential: String
    }

    /// Registers the device once; `false` while the server cannot be reached or refuses.
    private func register(secret: String) async -> Bool {
        switch await client.send(method: "POST", path: "devices", body: Data("{}".utf8), secret: secret, credential: nil) {
        case .done(let data):
            guard let answer = try? JSONDecoder().decode(Registered.self, from: data) else {
                problemLog.append("POST /devices answered something other than a device and its credential.")
                return false
            }
            state.device = answer.device
            state.credential = answer.device_credential
            save()
            return true
        case .later:
            return false
        case .refused(let status, let text):
            problemLog.append("The server refused to register this device (\(status)): \(text)")
            return false
        }
    }
}
