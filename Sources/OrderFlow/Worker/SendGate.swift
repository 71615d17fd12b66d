import Synchronization

/// Whether a request to APNs may start now, for pushes and broadcasts alike: not while the
/// worker stops, not through an unusable or paused app, and not once the batch's lease may be
/// taken over (another worker could then send the same push).
final class SendGate: Sendable {
    private let stopping: StopLatch
    private let router: MerchantRouter

    init(stopping: StopLatch, router: MerchantRouter) {
        self.stopping = stopping
        self.router = router
    }

    func allows(_ route: PushRoute, lease: BatchLease) -> Bool {
        !(stopping.isSet || route.unusable != nil || router.pausedUntil(app: route.app) != nil || Task.isCancelled
            || lease.isRunningOut())
    }

    /// The same for an FCM message through a merchant's Firebase project.
    func allows(fcm route: FCMRoute, lease: BatchLease) -> Bool {
        !(stopping.isSet || route.unusable != nil || router.pausedUntil(app: route.app) != nil || Task.isCancelled
            || lease.isRunningOut())
    }
}

/// The lease on one claimed batch, by this process's clock. The database ends the leases `lease`
/// after the claim's `now()`, which comes after `claimedBefore`, so this deadline is never later
/// than the database's. Requests start only in the lease's first half: the second is for their
/// answers, so that no request is still in flight when another worker may claim the orders and
/// send the same pushes (see `WorkerConfiguration.lease`).
final class BatchLease: Sendable {
    private let sendBefore: ContinuousClock.Instant
    private let tooLate = Atomic<Bool>(false)

    init(claimedBefore: ContinuousClock.Instant, lease: Duration) {
        sendBefore = claimedBefore + lease / 2
    }

    /// Whether it is too late to start a request (and notes that it was).
    func isRunningOut() -> Bool {
        guard ContinuousClock.now >= sendBefore else { return false }
        tooLate.store(true, ordering: .relaxed)
        return true
    }

    /// Whether a request was not started because the lease was running out.
    var ranOut: Bool { tooLate.load(ordering: .relaxed) }
}
