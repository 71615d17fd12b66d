import APNS
import ArgumentParser
import CommandLineSupport
import ConsoleOutput
import Foundation
import Logging
import OrderFlow
import OrderFlowHTTP
import Prometheus
import ServiceLifecycle

/// `orderflow worker …`
struct WorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Send the Live Activity pushes that order transitions imply.",
        subcommands: [Run.self])

    /// `orderflow worker run`
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Claim activity commands and send them to APNs until stopped.",
            discussion: """
                Runs until SIGTERM or SIGINT, then finishes the pushes in flight, gives back \
                the orders it had claimed and exits 0. Any number of workers can run against \
                one database; none sends a push twice. A worker serves every merchant's pushes \
                and timers, or only those named by --merchant.

                APNs settings come from flags or the environment (a flag wins):
                  --apns-key FILE       ORDERFLOW_APNS_KEY      the team's .p8 signing key
                  --apns-key-id ID      ORDERFLOW_APNS_KEY_ID   its key id
                  --apns-team-id ID     ORDERFLOW_APNS_TEAM_ID  the team id
                  --apns-topic ID       ORDERFLOW_APNS_TOPIC    the app's bundle id
                  --apns-env ENV        ORDERFLOW_APNS_ENV      production (default) or sandbox
                  --apns-url URL        ORDERFLOW_APNS_URL      another endpoint (a local stand-in)
                  --apns-ca FILE        ORDERFLOW_APNS_CA       that endpoint's CA certificate (PEM)

                That is the default app. Merchants given their own app (`orderflow merchant \
                set-apns`) send through it instead; the worker opens their keys with the \
                master key in ORDERFLOW_SECRET_KEY or ORDERFLOW_SECRET_KEY_FILE. Each app's \
                provider token is kept in the database and shared by every worker.

                Android followers get FCM data messages through their merchant's Firebase \
                project (`orderflow merchant set-fcm`, opened with the same master key); its \
                access token is shared by every worker too. Only for a stand-in:
                  --fcm-url URL         ORDERFLOW_FCM_URL       another endpoint than FCM's
                  --fcm-ca FILE         ORDERFLOW_FCM_CA        its CA certificate (PEM)

                Keep the .p8 key readable by the worker's user alone (chmod 600): the worker \
                warns once at start, on stderr, when other users can read it. Push tokens \
                appear in its log only as their last 8 characters, the key and its provider \
                tokens never (ORDERFLOW_LOG_LEVEL=trace shows every record).

                Example:
                  ORDERFLOW_APNS_KEY=AuthKey_ABC123DEFG.p8 ORDERFLOW_APNS_KEY_ID=ABC123DEFG \\
                  ORDERFLOW_APNS_TEAM_ID=TEAM123456 ORDERFLOW_APNS_TOPIC=com.example.orders \\
                    orderflow worker run --metrics-port 9464
                """)

        @OptionGroup var host: HostOptions

        func run() async throws {
            // Taken first, before the embedded database (a child process) could inherit it.
            let systemd = SystemdNotifier.takenFromEnvironment()
            let context = CommandContext.current()
            let logger = context.logger("orderflow.worker", defaultLevel: .info)
            // The worker's metrics, on a listener of their own when asked for.
            let registry = PrometheusCollectorRegistry()
            let host = try await self.host.makeHost(
                context: context, logger: logger,
                metricsFactory: self.host.metricsListener == nil ? nil : PrometheusMetricsFactory(registry: registry))
            var services: [any Service] = [host] + self.host.metricsListener(registry: registry, logger: logger)
            if let systemd {
                services.append(SystemdReadiness(notifier: systemd, ready: {
                    try await host.readyForSystemd()
                    return "sending pushes"
                }, logger: logger))
            }
            let group = ServiceGroup(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            try await group.run()
        }
    }
}
