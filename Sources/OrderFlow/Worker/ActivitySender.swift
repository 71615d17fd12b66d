import APNS
import Foundation
import Synchronization

/// Sends a batch's planned pushes to APNs, each through its merchant's app, and says what APNs
/// answered: the last step of a push's way from the claim. A refused configuration or credentials
/// pause the app and a `429` counts towards throttling the merchant (``MerchantRouter``); the
/// attempts themselves are recorded by the caller.
final class ActivitySender: Sendable {
    private let configuration: WorkerConfiguration
    private let router: MerchantRouter
    private let gate: SendGate
    private let stopping: StopLatch

    init(configuration: WorkerConfiguration, router: MerchantRouter, gate: SendGate, stopping: StopLatch) {
        self.configuration = configuration
        self.router = router
        self.gate = gate
        self.stopping = stopping
    }

    /// Sends every plan's pushes: activities concurrently (bounded), each activity's pushes in
    /// order, stopping at its first failure. At graceful shutdown, sends not yet started are
    /// skipped and those in flight get the grace period. Returns the attempts per plan.
    func send(_ plans: [ActivityPlan], lease: BatchLease) async -> [[PushAttempt]] {
        let results = AttemptLog(count: plans.count)
        let indices = plans.indices.filter { !plans[$0].pushes.isEmpty }
        guard !indices.isEmpty else { return results.attempts }
        let routes = await router.routes(for: Set(indices.map { plans[$0].merchantID }))
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
                        let merchantID = plans[index].merchantID
                        let route = routes[merchantID]!
                        group.addTask {
                            for push in pushes {
                                let attempt = await self.attempt(push, merchantID: merchantID, route: route, lease: lease)
                                results.append(attempt, at: index)
                                guard case .sent = attempt else { break }
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
    private let storage: Mutex<[[PushAttempt]]>

    init(count: Int) {
        storage = Mutex(Array(repeating: [], count: count))
    }

    func append(_ attempt: PushAttempt, at index: Int) {
        storage.withLock { $0[index].append(attempt) }
    }

    var attempts: [[PushAttempt]] { storage.withLock { $0 } }
}
