import Foundation
import LocalFCM
import Logging
import Metrics
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import Testing

/// A ``WorkerHarness`` with the FCM stand-in beside the APNs one, and a Firebase project (a
/// service account the stand-in trusts, sealed under ``masterKey``) for the merchants asked for.
struct AndroidDeliveryHarness: Sendable {
    let h: WorkerHarness
    let fcm: LocalFCMServer
    let apps: MerchantApps

    static let masterKey = MasterKey(bytes: Data((0..<32).map { UInt8($0 &* 7) }))

    var engine: OrderFlowEngine { h.engine }
    var pool: PostgresPool { h.pool }

    /// - Parameter merchants: each gets a Firebase project of its own (`<merchant>-orders`).
    static func make(merchants: [String] = ["default"]) async throws -> AndroidDeliveryHarness {
        let h = try await WorkerHarness.make()
        let fcm = try LocalFCMServer(eventLoopGroup: h.eventLoopGroup)
        try await fcm.start()
        for merchant in merchants {
            _ = try? await h.engine.addMerchant(merchant)
            let key = try fcm.makeServiceAccount(projectID: "\(merchant)-orders")
            try await h.engine.setFCMServiceAccount(merchantID: merchant, serviceAccountJSON: key.json, masterKey: masterKey)
        }
        let apps = MerchantApps(configuration: .init(masterKey: masterKey, refreshInterval: .milliseconds(100)),
                                pool: h.pool, logger: Logger(label: "apps", factory: { _ in SwiftLogNoOpLogHandler() }),
                                eventLoopGroup: h.eventLoopGroup)
        return AndroidDeliveryHarness(h: h, fcm: fcm, apps: apps)
    }

    func shutdown() async {
        await apps.shutdown()
        try? await fcm.stop()
        await h.shutdown()
    }

    /// The harness's test settings, sending FCM messages to the stand-in.
    func configuration(_ id: String = "w1", _ adjust: (inout WorkerConfiguration) -> Void = { _ in }) -> WorkerConfiguration {
        h.configuration(id) { configuration in
            configuration.fcmBaseURL = fcm.baseURL
            configuration.fcmTrustRootsPEM = fcm.trustRootPEM
            adjust(&configuration)
        }
    }

    func start(_ configuration: WorkerConfiguration, metrics: (any MetricsFactory)? = nil) -> RunningWorker {
        RunningWorker(OrderFlowWorker(
            configuration: configuration, pool: h.pool, sender: h.client, wakeSignal: h.engine.wakeSignal,
            logger: h.logs.logger(label: "worker.\(configuration.workerID)"), metricsFactory: metrics ?? NOOPMetricsHandler.instance,
            apps: apps), listener: nil)
    }

    /// A food order followed by an Android phone (`pixel-<order>`) with FCM token `token`.
    func androidOrder(_ orderID: String, token: String, engine: OrderFlowEngine? = nil) async throws {
        let engine = engine ?? h.engine
        _ = try await engine.createOrder(NewOrder(orderID: orderID, workflow: "food-order",
            attributes: ["merchantName": "Luigi's", "orderNumber": .string(orderID), "itemCount": 2]))
        try await engine.registerFCMToken(deviceID: "pixel-\(orderID)", token: token)
        try await engine.follow(orderID: orderID, deviceID: "pixel-\(orderID)")
    }

    func messages(_ token: String) -> [LocalFCMMessage] { fcm.messages().filter { $0.token == token } }

    /// `platform token_kind event outcome` of the order's deliveries, oldest first.
    func deliveries(_ orderID: String) async throws -> [String] {
        try await pool.query(PostgresQuery("""
            SELECT platform || ' ' || token_kind || ' ' || event || ' ' || outcome AS row FROM deliveries WHERE order_id = $1 ORDER BY id
            """, orderID)).map { try $0.decode("row") }
    }

    func reasons(_ orderID: String) async throws -> [String] {
        try await pool.query(PostgresQuery(
            "SELECT coalesce(reason, '') AS reason FROM deliveries WHERE order_id = $1 ORDER BY id", orderID)
        ).map { try $0.decode("reason") }
    }
}
