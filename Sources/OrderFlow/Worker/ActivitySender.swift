import APNS
import Foundation
import Synchronization

/// Sends a batch's planned pushes to APNs, each through its merchant's app, and says what APNs
/// answered: the last step of a push's way from the claim. A refused configuration or credentials
/// pause the app and a `429` counts towards throttling the merchant (``MerchantRouter``); the
/// attempts themselves are recorded by the caller.
final class ActivitySender: Sendable {
    private let configuration: WorkerConfiguration
    let router: MerchantRouter
    let gate: SendGate
    private let stopping: StopLatch

    init(configuration: WorkerConfiguration, router: MerchantRouter, gate: SendGate, stopping: StopLatch) {
        self.configuration = configuration
        self.router = router
        self.gate = gate
        self.stopping = stopping
    }

    /// What a batch's sends came to, per plan: the APNs pushes' attempts, and the Android
    /// message's (nil where none was planned).
    struct Attempts: Sendable {
        var apns: [[PushAttempt]]
        var android: [AndroidAttempt?]
    }

    /// Sends every plan's pushes: activities concurrently (bounded), each activity's pushes in
    /// order, stopping at its first failure, then its Android message whatever became of them.
    /// At graceful shutdown, sends not yet started are skipped and those in flight get the
    /// grace period. Returns the attempts per plan.
    func send(_ plans: [ActivityPlan], lease: BatchLease) async -> Attempts {
        let results = AttemptLog(count: plans.count)
        let indices = plans.indices.filter { !plans[$0].pushes.isEmpty || plans[$0].android != nil }
        guard !indices.isEmpty else { return results.attempts }
        let routes = await router.routes(for: Set(indices.filter { !plans[$0].pushes.isEmpty }.map { plans[$0].merchantID }))
        let fcmRoutes = await router.fcmRoutes(for: Set(indices.filter { plans[$0].android != nil }.map { plans[$0].merchantID }))
        let limit = configuration.concurrentSends
        let grace = configuration.shutdownGracePeriod
        await withTaskGroup(of: Void.self) { watch in
            watch.addTask {
                await withTaskGroup(of: Void.self) { group in
                    var running = 0
                    for index in indices {
                        if running >= limit {
                            await group.next()
                            running -= 1
                        }
                        let pushes = plans[index].pushes
                        let android = plans[index].android
                        let merchantID = plans[index].merchantID
                        let route = routes[merchantID]
                        let fcmRoute = fcmRoutes[merchantID]
                        group.addTask {
                            if let route {
                                for push in pushes {
                                    let attempt = await self.attempt(push, merchantID: merchantID, route: route, lease: lease)
                                    results.append(attempt, at: index)
                                    guard case .sent = attempt else { break }
                                }
                            }
                            if let android {
                                results.set(await self.attempt(android, merchantID: merchantID, route: fcmRoute, lease: lease), at: index)
                            }
                        }
                        running += 1
                    }
                }
            }
            watch.addTask {
                await self.stopping.wait()
                try? await Task.sleep(for: grace)
            }
            await watch.next()
            watch.cancelAll()
        }
        return results.attempts
    }

    /// One push: its request to APNs and the answer.
    private func attempt(_ push: PlannedPush, merchantID: String, route: PushRoute, lease: BatchLease) async -> PushAttempt {
        guard gate.allows(route, lease: lease) else { return .notAttempted }
        do {
            let request = try push.request(bundleID: route.bundleID)
            let result = try await route.sender.send(request)
            await router.noteSent(merchantID: merchantID)
            return .sent(apnsID: result.apnsID, status: result.status, answeredAt: WorkerClock.now())
        } catch is CancellationError {
            return .notAttempted
        } catch let failure as any APNSSendFailure {
            if Task.isCancelled { return .notAttempted }
            let error = failure as? APNSError
            switch failure.action {
            case .configurationError, .credentialsError:
                await router.pauseSending(app: route.app, bundleID: route.bundleID, merchantID: merchantID, because: failure.description,
                                          what: failure.action == .credentialsError ? "credentials" : "configuration")
            case .backOffToken:
                await router.noteThrottled(merchantID: merchantID)
            default: break
            }
            return .failed(status: error?.status, reason: failure.recordedReason, action: failure.action,
                           apnsID: error?.apnsID, answeredAt: WorkerClock.now())
        } catch {
            if Task.isCancelled { return .notAttempted }
            return .failed(status: nil, reason: String("\(error)".prefix(200)), action: .retryWithBackoff, apnsID: nil,
                           answeredAt: WorkerClock.now())
        }
    }

}

extension APNSSendFailure {
    /// The failure as a `deliveries` row's reason: APNs' reason code, or what went wrong on the way.
    var recordedReason: String {
        if let error = self as? APNSError { return error.reason.rawValue }
        if let transport = self as? APNSTransportError { return String("transport: \(transport.underlying)".prefix(200)) }
        return String(description.prefix(200))
    }
}

/// The attempts of one batch, per plan; filled by concurrent sends, read when they are done
/// (or abandoned at shutdown).
private final class AttemptLog: Sendable {
    private let storage: Mutex<ActivitySender.Attempts>

    init(count: Int) {
        storage = Mutex(ActivitySender.Attempts(apns: Array(repeating: [], count: count), android: Array(repeating: nil, count: count)))
    }

    func append(_ attempt: PushAttempt, at index: Int) {
        storage.withLock { $0.apns[index].append(attempt) }
    }

    func set(_ attempt: AndroidAttempt, at index: Int) {
        storage.withLock { $0.android[index] = attempt }
    }

    var attempts: ActivitySender.Attempts { storage.withLock { $0 } }
}
