import APNS
import Foundation
import Logging
import Synchronization

/// Which app each merchant's pushes go through, and whether they may go now: an app whose
/// credentials or topic APNs refused is paused (its merchants' orders wait in the queue), and a
/// merchant APNs throttles is held back, while the other merchants send on. Pauses and holds are
/// recorded on the merchants' rows for `orderflow merchant list`.
final class MerchantRouter: Sendable {
    private let configuration: WorkerConfiguration
    /// The default app's sender: every merchant without an app of its own sends through it.
    private let sender: any PushSender
    /// The merchants' own apps; nil sends every push through ``sender``.
    private let apps: MerchantApps?
    /// The merchants' Firebase projects, for their Android followers; nil sends nothing to them.
    let fcmApps: FCMApps?
    private let merchantStore: MerchantStore
    private let logger: Logger
    /// Per app (`default`, `merchant:<id>`): paused after APNs refused its credentials or topic.
    private let pauses = Mutex([String: Double]())
    /// Apps whose pause was said at error level; forgotten when one of their pushes goes out.
    private let announcedPauses = Mutex(Set<String>())
    /// Per merchant: the app its pushes went through last, and how throttled it is.
    private let merchantStates = Mutex([String: MerchantSendState]())

    private struct MerchantSendState {
        var app = "default"
        /// The merchant's Firebase project's app (`fcm:<id>#<revision>`), once a message went through it.
        var fcmApp: String?
        /// `429 TooManyRequests` answers since the merchant's last sent push.
        var throttledAnswers = 0
        /// While set and in the future, the merchant's orders are not claimed.
        var heldUntil: Double?
        var holds = 0
        /// The state last written to `merchants` (only changes are written).
        var recorded: MerchantPushState.Status = .ok
    }

    /// Where pauses are counted (`orderflow_sending_paused`); none in tests that make a router alone.
    private let metrics: WorkerMetrics?

    init(configuration: WorkerConfiguration, sender: any PushSender, apps: MerchantApps?, merchantStore: MerchantStore,
         logger: Logger, metrics: WorkerMetrics? = nil, fcmApps: FCMApps? = nil) {
        self.configuration = configuration
        self.fcmApps = fcmApps
        self.metrics = metrics
        self.sender = sender
        self.apps = apps
        self.merchantStore = merchantStore
        self.logger = logger
    }

    // MARK: Routes

    /// The merchant's own app, or the default one; remembered for pausing by app.
    func route(for merchantID: String) async -> PushRoute {
        let route = await apps?.route(for: merchantID)
            ?? PushRoute(app: "default", sender: sender, bundleID: configuration.bundleID)
        if !route.transient { merchantStates.withLock { $0[merchantID, default: MerchantSendState()].app = route.app } }
        if let why = route.unusable, !route.transient {
            await pauseSending(app: route.app, bundleID: route.bundleID, merchantID: merchantID, because: why, what: "app")
        }
        return route
    }

    /// The routes of a batch's merchants, each looked up once.
    func routes(for merchantIDs: Set<String>) async -> [String: PushRoute] {
        var found: [String: PushRoute] = [:]
        for merchantID in merchantIDs {
            found[merchantID] = await route(for: merchantID)
        }
        return found
    }

    /// The merchant's Firebase project's route (nil: it has none, or the worker sends no FCM);
    /// remembered for holding the merchant back while FCM refuses the project.
    func fcmRoute(for merchantID: String) async -> FCMRoute? {
        guard let route = await fcmApps?.route(for: merchantID) else { return nil }
        if !route.transient { merchantStates.withLock { $0[merchantID, default: MerchantSendState()].fcmApp = route.app } }
        if let why = route.unusable, !route.transient {
            await pauseSending(app: route.app, bundleID: "Firebase project \(route.projectID)", merchantID: merchantID,
                               because: why, what: "service account", service: "FCM")
        }
        return route
    }

    /// The FCM routes of a batch's merchants with Android followers, each looked up once.
    func fcmRoutes(for merchantIDs: Set<String>) async -> [String: FCMRoute] {
        var found: [String: FCMRoute] = [:]
        for merchantID in merchantIDs {
            found[merchantID] = await fcmRoute(for: merchantID)
        }
        return found
    }

    // MARK: Pauses

    /// Stops sending through one app after APNs refused its configuration or credentials (or
    /// the app cannot be used): said once, loudly, and recorded on its merchants for
    /// `orderflow merchant list`. The other apps' merchants send on.
    func pauseSending(app: String, bundleID: String, merchantID: String, because reason: String, what: String,
                      service: String = "APNs") async {
        let resume = WorkerClock.now() + configuration.pausedRetryInterval.inSeconds
        let first = pauses.withLock { pauses -> Bool in
            if let until = pauses[app], until > WorkerClock.now() { return false }
            pauses[app] = resume
            return true
        }
        guard first else { return }
        metrics?.recordSendingPaused(app: app)
        let merchants = merchantStates.withLock { states in
            Set(states.filter { $0.value.app == app }.map(\.key)).union([merchantID]).sorted()
        }
        let whose = app == "default" ? "the default app's merchants (\(merchants.joined(separator: ", ")))" : "merchant \(merchantID)"
        let fix = app == "default"
            ? "fix the default app's settings and restart the worker"
            : service == "FCM"
            ? "give the merchant a service account of the Firebase project its app uses: `orderflow merchant set-fcm`"
            : "give the merchant working APNs settings: its key, key id, team and bundle"
        let message: Logger.Message = "\(service) refused the \(what) of \(bundleID): sending is paused for \(whose); other merchants send on. \(reason) Pending pushes stay queued; sending is tried again every \(configuration.pausedRetryInterval) and resumes once \(service) accepts it (or \(fix))."
        let metadata: Logger.Metadata = ["orderflow.bundle_id": "\(bundleID)", "orderflow.app": "\(app)", "orderflow.merchant": "\(merchantID)"]
        // Loud once; while the app stays broken, each further try is a quieter record.
        if announcedPauses.withLock({ $0.insert(app).inserted }) {
            logger.error(message, metadata: metadata)
        } else {
            logger.info(message, metadata: metadata)
        }
        await recordPushState(merchants, MerchantPushState(
            status: .paused, reason: String(reason.prefix(300)), until: Date(timeIntervalSince1970: resume)))
    }

    /// When the app is paused, the time sending is tried again; nil when sending.
    func pausedUntil(app: String) -> Double? {
        pauses.withLock { pauses in
            guard let until = pauses[app] else { return nil }
            if until <= WorkerClock.now() {
                pauses[app] = nil
                logger.info("trying to send again after the pause", metadata: ["orderflow.app": "\(app)"])
                return nil
            }
            return until
        }
    }

    /// Merchants whose orders are not claimed now: their app is paused, or APNs throttles them.
    /// A merchant held by its own app's pause is released as soon as its stored app changes
    /// (`set-apns` again), looked up at most every `MerchantApps` refresh interval.
    func heldMerchants() async -> [String] {
        let pausedApps = Set(pauses.withLock { $0.keys }).filter { pausedUntil(app: $0) != nil }
        let time = WorkerClock.now()
        let states = merchantStates.withLock { $0 }
        var held: [String] = []
        for (merchantID, state) in states {
            if (state.heldUntil ?? 0) > time {
                held.append(merchantID)
            } else if let fcmApp = state.fcmApp, pausedApps.contains(fcmApp) {
                // FCM refused the merchant's project: held back whole, until a new `set-fcm`.
                if let current = await fcmApps?.route(for: merchantID)?.app, current != fcmApp {
                    merchantStates.withLock { $0[merchantID]?.fcmApp = current }
                    if !pausedApps.contains(current) { continue }
                }
                held.append(merchantID)
            } else if pausedApps.contains(state.app) {
                if state.app != "default", let apps {
                    let current = await apps.route(for: merchantID)?.app ?? "default"
                    if current != state.app {
                        merchantStates.withLock { $0[merchantID]?.app = current }
                        if !pausedApps.contains(current) { continue }
                    }
                }
                held.append(merchantID)
            }
        }
        return held.sorted()
    }

    // MARK: Throttling

    /// A 429 for one of the merchant's devices. Past ``WorkerConfiguration/throttleAfter`` in a
    /// row, the merchant's orders are held back (1 s, doubling up to the backoff cap) so that
    /// its storm does not take the sending slots of the others: said once, and recorded.
    func noteThrottled(merchantID: String) async {
        let held: Double? = merchantStates.withLock { states in
            var state = states[merchantID, default: MerchantSendState()]
            defer { states[merchantID] = state }
            state.throttledAnswers += 1
            guard state.throttledAnswers >= configuration.throttleAfter, (state.heldUntil ?? 0) <= WorkerClock.now() else { return nil }
            let delay = min(configuration.backoffCap.inSeconds, configuration.throttleHold.inSeconds * pow(2, Double(min(state.holds, 20))))
            state.holds += 1
            state.throttledAnswers = 0
            state.heldUntil = WorkerClock.now() + delay
            return state.heldUntil
        }
        guard let held else { return }
        let already = merchantStates.withLock { $0[merchantID]?.recorded == .throttled }
        if !already {
            logger.warning("APNs throttles merchant \(merchantID) (429 TooManyRequests): its pushes are sent more slowly; other merchants send on",
                           metadata: ["orderflow.merchant": "\(merchantID)"])
        }
        await recordPushState([merchantID], MerchantPushState(
            status: .throttled, reason: "APNs answers 429 TooManyRequests; pushes are held back and retried",
            until: Date(timeIntervalSince1970: held)))
    }

    /// A push went out: the merchant's pushes flow again.
    func noteSent(merchantID: String) async {
        let (wasHeld, app) = merchantStates.withLock { states -> (Bool, String?) in
            guard var state = states[merchantID] else { return (false, nil) }
            defer { states[merchantID] = state }
            state.throttledAnswers = 0
            state.holds = 0
            state.heldUntil = nil
            return (state.recorded != .ok, state.app)
        }
        if let app {
            announcedPauses.withLock { if !$0.isEmpty { _ = $0.remove(app) } }
            metrics?.recordSendingResumed(app: app)
        }
        if let fcmApp = merchantStates.withLock({ $0[merchantID]?.fcmApp }) {
            announcedPauses.withLock { if !$0.isEmpty { _ = $0.remove(fcmApp) } }
            metrics?.recordSendingResumed(app: fcmApp)
        }
        if wasHeld {
            logger.info("merchant's pushes flow again", metadata: ["orderflow.merchant": "\(merchantID)"])
            await recordPushState([merchantID], .ok)
        }
    }

    /// Writes a push state to `merchants` (rows of merchants that were never added are none).
    private func recordPushState(_ merchants: [String], _ state: MerchantPushState) async {
        merchantStates.withLock { states in
            for merchant in merchants { states[merchant, default: MerchantSendState()].recorded = state.status }
        }
        do {
            _ = try await merchantStore.setPushState(merchants, state)
        } catch {
            logger.warning("cannot record merchants' push state", metadata: ["orderflow.error": "\(error)"])
        }
    }
}
