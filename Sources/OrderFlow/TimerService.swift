import Logging
import ServiceLifecycle

/// Fires the workflows' durable timers ("after 45m in ready, go to cancelled") while a worker
/// runs. Timers are evaluated from each order's `state_entered_at`, so one that fell due while
/// no process ran fires on the first scan; each fires exactly once (see `fireDueTimers`).
public struct TimerService: Service {
    private let engine: OrderFlowEngine
    private let merchants: MerchantScope?
    private let interval: Duration
    private let logger: Logger

    /// - Parameters:
    ///   - engine: whose connections to use.
    ///   - merchants: whose timers to fire; nil for the engine's own merchant alone. An
    ///     ``OrderFlowHost`` passes its worker's merchants.
    ///   - interval: how often to scan. Default 1 second.
    ///   - logger: one record per scan that fired timers, and failed scans.
    public init(
        engine: OrderFlowEngine, merchants: MerchantScope? = nil, interval: Duration = .seconds(1),
        logger: Logger = Logger(label: "orderflow.timers")
    ) {
        self.engine = engine
        self.merchants = merchants
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let fired = if let merchants {
                        try await engine.fireDueTimers(for: merchants)
                    } else {
                        try await engine.fireDueTimers()
                    }
                    if fired > 0 { logger.info("timers fired", metadata: ["timers.fired": "\(fired)"]) }
                } catch {
                    // The database may be restarting: say so, keep scanning.
                    logger.warning("timer scan failed; retrying", metadata: ["timers.error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
