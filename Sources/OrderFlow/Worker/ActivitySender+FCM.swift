import FCM
import Foundation

extension ActivitySender {
    /// One Android message: its request to FCM through the merchant's Firebase project, and the
    /// answer. A refused project or service account pauses the merchant's FCM sending (its
    /// orders are held back, the other merchants' flow, ``MerchantRouter``).
    func attempt(_ message: PlannedAndroidMessage, merchantID: String, route: FCMRoute?, lease: BatchLease) async -> AndroidAttempt {
        guard let route else {
            // Nothing can carry it until the merchant has a Firebase project: a dead letter that
            // says so (`deliveries retry` sends it once `merchant set-fcm` is done).
            return .failed(status: nil, reason: router.fcmApps == nil
                               ? "this worker sends no FCM messages (it has no master key to open Firebase projects)"
                               : "merchant \(merchantID) has no Firebase project: `orderflow merchant set-fcm`",
                           action: .messageRejected, answeredAt: WorkerClock.now())
        }
        guard let client = route.client, gate.allows(fcm: route, lease: lease) else { return .notAttempted }
        guard let fcmMessage = message.message else {
            return .failed(status: nil, reason: message.renderFailure ?? "the Android message cannot be made",
                           action: .messageRejected, answeredAt: WorkerClock.now())
        }
        do {
            _ = try await client.send(fcmMessage)
            await router.noteSent(merchantID: merchantID)
            return .sent(status: 200, answeredAt: WorkerClock.now())
        } catch is CancellationError {
            return .notAttempted
        } catch let failure as any FCMSendFailure {
            if Task.isCancelled { return .notAttempted }
            let error = failure as? FCMError
            switch failure.action {
            case .configurationError, .credentialsError:
                await router.pauseSending(
                    app: route.app, bundleID: "Firebase project \(route.projectID)", merchantID: merchantID,
                    because: failure.description, what: failure.action == .credentialsError ? "service account" : "configuration",
                    service: "FCM")
            default:
                break
            }
            return .failed(status: error?.status, reason: failure.recordedReason, action: failure.action, answeredAt: WorkerClock.now())
        } catch {
            if Task.isCancelled { return .notAttempted }
            return .failed(status: nil, reason: String("\(error)".prefix(200)), action: .retry(after: nil), answeredAt: WorkerClock.now())
        }
    }
}

extension FCMSendFailure {
    /// The failure as a `deliveries` row's reason: FCM's code and the field it named, or what
    /// went wrong on the way.
    var recordedReason: String {
        if let error = self as? FCMError {
            let code = error.errorCode == .unspecified ? error.canonicalStatus : error.errorCode.rawValue
            return String("\(code): \(error.reason)".prefix(300))
        }
        if let transport = self as? FCMTransportError { return String("transport: \(transport.underlying)".prefix(200)) }
        return String(description.prefix(300))
    }
}
