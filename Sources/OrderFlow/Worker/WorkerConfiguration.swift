import Foundation

/// How an ``OrderFlowWorker`` claims orders and paces its pushes.
///
/// Every field has a default that suits production; tests shrink the intervals. Environment
/// variables and flags are read by the CLI (`orderflow worker run`), never here.
public struct WorkerConfiguration: Sendable {
    /// The app's bundle id: the `apns-topic` of alert notifications, and the base of the Live
    /// Activity topic (`<bundle id>.push-type.liveactivity`). Required.
    public var bundleID: String
    /// Names this worker in `orders.dispatch_owner` and in logs. Default: host, process id and a
    /// random suffix, so two workers never share one.
    public var workerID: String
    /// Orders claimed by one statement. Default 100.
    public var batchSize: Int
    /// Claim loops running side by side in one worker, each with its own batch in flight, so
    /// that a slow APNs answer for one batch does not hold up the next. Default 4.
    public var concurrentBatches: Int
    /// How long a claimed order belongs to this worker. A worker that dies leaves its orders
    /// leased until then. A request starts only in the first half of its batch's lease (a
    /// batch that takes longer leaves the rest to the next claim, with a warning), and the
    /// second half is for answers: keep it above the APNs request timeout (the lease at least
    /// twice that timeout), so that no other worker can claim an order while this one may still
    /// be sending to it. Default 60 seconds.
    public var lease: Duration
    /// Pushes in flight at once within one batch (sequential within one activity). Default 64.
    public var concurrentSends: Int
    /// At most one push per activity in this interval; later transitions wait and merge into
    /// one update. APNs throttles updates faster than about once a second. Default 1 second.
    public var minimumPushInterval: Duration
    /// Consecutive failed attempts (5xx, transport errors, expired provider tokens) after which a
    /// push becomes a dead letter (`deliveries.outcome = 'dead'`). Default 8.
    public var maximumAttempts: Int
    /// First retry delay after a failure; doubles per attempt, with jitter. Default 1 second.
    public var backoffBase: Duration
    /// The longest retry delay. Default 5 minutes.
    public var backoffCap: Duration
    /// How long before the 8-hour Live Activity limit the workflow's `on-time-limit` policy
    /// is applied. Default 15 minutes (the policy runs at 7 h 45 min).
    public var timeLimitMargin: Duration
    /// The active lifetime APNs allows a Live Activity. Default 8 hours; tests shorten it.
    public var activityLifetime: Duration
    /// How often activities near the time limit are looked for. Default 60 seconds.
    public var timeLimitCheckInterval: Duration
    /// The shortest idle poll after the last claim found nothing; the poll interval doubles up
    /// to ``idlePollMaximum`` while nothing arrives. Default 5 ms.
    public var idlePollMinimum: Duration
    /// The longest idle poll: the wake-up latency when both the in-process signal and LISTEN
    /// are unavailable. Default 250 ms.
    public var idlePollMaximum: Duration
    /// After a configuration or credentials error stopped all sending, try again this often
    /// (an operator may have fixed the credentials). Default 5 minutes.
    public var pausedRetryInterval: Duration
    /// At graceful shutdown, how long in-flight sends may take to finish before they are
    /// abandoned and their orders released. Default 10 seconds.
    public var shutdownGracePeriod: Duration
    /// How often the queue depth gauge is sampled (`SELECT count(*) FROM activity_commands`).
    /// Default 10 seconds; `nil` turns sampling off.
    public var queueDepthSampleInterval: Duration?
    /// Transitions loaded per order to merge (the newest ones). Default 100.
    public var maximumTransitionsMerged: Int
    /// `429 TooManyRequests` answers for one merchant in a row (without a sent push between)
    /// after which its orders are held back, so that its storm leaves the sending slots to the
    /// other merchants. Default 20.
    public var throttleAfter: Int = 20
    /// The first hold; it doubles for every further storm, up to ``backoffCap``. Default 1 second.
    public var throttleHold: Duration = .seconds(1)
    /// How long a broadcast channel whose storage policy keeps the newest message stays after
    /// its end was accepted, so that devices offline at the end (or joining late) still get the
    /// stored end; then it is deleted. A channel that stores nothing is deleted after
    /// ``minimumPushInterval``. Default 10 minutes.
    public var channelRetention: Duration = .seconds(600)
    /// Channels one broadcast order may create: APNs forgetting a channel
    /// (`ChannelNotRegistered`) makes the worker create a new one, at most this many in all.
    /// Default 3.
    public var maximumChannelsPerOrder: Int = 3
    /// How often the worker purges what ``retention`` says is old enough (its merchants' rows
    /// only); the first purge runs at start. Default 10 minutes; `nil` turns the purge off
    /// (`orderflow purge` from a timer instead).
    public var purgeInterval: Duration? = .seconds(600)
    /// What the purge deletes and how gently. Its merchants are this worker's ``merchants``.
    public var retention = RetentionPolicy()
    /// Where the worker sends Android followers' FCM messages: `https://fcm.googleapis.com` by
    /// default, a stand-in in tests and demos. The OAuth token endpoint is each service
    /// account's own `token_uri`. Default FCM's.
    public var fcmBaseURL: String = "https://fcm.googleapis.com"
    /// PEM certificates that replace the system's trust roots for ``fcmBaseURL`` and the token
    /// endpoint (a stand-in's); nil for the system's. Default nil.
    public var fcmTrustRootsPEM: String? = nil
    /// Whose orders this worker claims, and (in an ``OrderFlowHost``) whose timers it fires.
    /// Default every merchant's.
    public var merchants: MerchantScope

    public init(
        bundleID: String,
        workerID: String = WorkerConfiguration.defaultWorkerID(),
        batchSize: Int = 100,
        concurrentBatches: Int = 4,
        lease: Duration = .seconds(60),
        concurrentSends: Int = 64,
        minimumPushInterval: Duration = .seconds(1),
        maximumAttempts: Int = 8,
        backoffBase: Duration = .seconds(1),
        backoffCap: Duration = .seconds(300),
        timeLimitMargin: Duration = .seconds(15 * 60),
        activityLifetime: Duration = .seconds(8 * 3600),
        timeLimitCheckInterval: Duration = .seconds(60),
        idlePollMinimum: Duration = .milliseconds(5),
        idlePollMaximum: Duration = .milliseconds(250),
        pausedRetryInterval: Duration = .seconds(300),
        shutdownGracePeriod: Duration = .seconds(10),
        queueDepthSampleInterval: Duration? = .seconds(10),
        maximumTransitionsMerged: Int = 100,
        merchants: MerchantScope = .all
    ) {
        self.bundleID = bundleID
        self.workerID = workerID
        self.batchSize = max(1, batchSize)
        self.concurrentBatches = max(1, concurrentBatches)
        self.lease = lease
        self.concurrentSends = max(1, concurrentSends)
        self.minimumPushInterval = minimumPushInterval
        self.maximumAttempts = max(1, maximumAttempts)
        self.backoffBase = backoffBase
        self.backoffCap = max(backoffBase, backoffCap)
        self.timeLimitMargin = timeLimitMargin
        self.activityLifetime = activityLifetime
        self.timeLimitCheckInterval = timeLimitCheckInterval
        self.idlePollMinimum = idlePollMinimum
        self.idlePollMaximum = max(idlePollMinimum, idlePollMaximum)
        self.pausedRetryInterval = pausedRetryInterval
        self.shutdownGracePeriod = shutdownGracePeriod
        self.queueDepthSampleInterval = queueDepthSampleInterval
        self.maximumTransitionsMerged = max(1, maximumTransitionsMerged)
        self.merchants = merchants
    }

    /// `<host>:<pid>:<random>`: unique per process, readable in `orders.dispatch_owner`.
    public static func defaultWorkerID() -> String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "worker"
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        return "\(host):\(ProcessInfo.processInfo.processIdentifier):\(suffix)"
    }

    /// The age at which the time-limit policy applies: lifetime minus margin.
    var timeLimitAge: TimeInterval {
        max(0, activityLifetime.inSeconds - timeLimitMargin.inSeconds)
    }

    /// The delay before attempt `failures + 1` after `failures` consecutive failures:
    /// `base · 2^(failures-1)` capped at ``backoffCap``, with "equal jitter" (half fixed, half
    /// random) so that workers retrying the same outage spread out.
    func backoff(afterFailures failures: Int) -> TimeInterval {
        let base = backoffBase.inSeconds
        let exponent = Double(min(max(failures - 1, 0), 30))
        let delay = min(backoffCap.inSeconds, base * pow(2, exponent))
        return delay / 2 + Double.random(in: 0...(delay / 2))
    }
}

extension Duration {
    /// The duration in seconds, as a `TimeInterval`.
    public var inSeconds: TimeInterval {
        let parts = components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}
