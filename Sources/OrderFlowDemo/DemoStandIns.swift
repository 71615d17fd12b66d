import Crypto
import Foundation
import LocalAPNS
import LocalFCM
import OrderFlow

/// The two stand-ins the demo's worker sends to: APNs for the iPhones, FCM for the Android
/// phone. Both check and record what they receive; nothing leaves this machine.
struct DemoStandIns: Sendable {
    let apns: LocalAPNSServer
    let fcm: LocalFCMServer
    /// The APNs stand-in trusts this run's signing key, made in memory and never shown.
    let signingKey: P256.Signing.PrivateKey
    /// Seals the demo merchant's Firebase service account for this run only: made in memory,
    /// never shown, and the project is removed again at the end (``finish(engine:merchantID:)``),
    /// so no key sealed under it stays in the database.
    let masterKey: MasterKey

    static let projectID = "orderflow-demo"

    /// Starts both; when the second cannot start, the first is stopped again.
    static func start(masterKey given: MasterKey?) async throws -> DemoStandIns {
        let signingKey = P256.Signing.PrivateKey()
        let apns = try LocalAPNSServer(configuration: .init(
            signingKeys: [.init(keyID: Demo.keyID, teamID: Demo.teamID, publicKey: signingKey.publicKey)],
            acceptedBundleIDs: [Demo.bundleID]))
        try await apns.start()
        do {
            let fcm = try LocalFCMServer()
            try await fcm.start()
            let masterKey = given ?? MasterKey(bytes: Data((0..<MasterKey.byteCount).map { _ in UInt8.random(in: 0...255) }))
            return DemoStandIns(apns: apns, fcm: fcm, signingKey: signingKey, masterKey: masterKey)
        } catch {
            try? await apns.stop()
            throw error
        }
    }

    /// Gives the demo merchant a Firebase project whose service account the FCM stand-in trusts.
    func giveFirebaseProject(engine: OrderFlowEngine, merchantID: String) async throws {
        let account = try fcm.makeServiceAccount(projectID: Self.projectID, accountName: Self.accountName)
        do {
            _ = try await engine.addMerchant(merchantID, name: "OrderFlow demo")
        } catch let error as OrderFlowError where error.code == .alreadyExists {}
        do {
            try await engine.setFCMServiceAccount(merchantID: merchantID, serviceAccountJSON: account.json, masterKey: masterKey)
        } catch let error as OrderFlowError where error.code == .invalidConfiguration {
            // An earlier demo that was killed before its end left its project, sealed under a
            // key nobody has, and that refuses every other key: take those away, then again.
            guard try await removeLeftoverProjects(engine: engine) > 0 else {
                throw DemoError(.failed, "cannot give the demo merchant a Firebase project: \(error.message)",
                                remedy: "give the demo the master key this database's keys are sealed with (ORDERFLOW_SECRET_KEY or ORDERFLOW_SECRET_KEY_FILE), or run it on a scratch database (ORDERFLOW_DATABASE_URL=…)")
            }
            try await engine.setFCMServiceAccount(merchantID: merchantID, serviceAccountJSON: account.json, masterKey: masterKey)
        }
    }

    static let accountName = "orderflow-demo"

    /// Removes the Firebase projects earlier demo runs left: only a `demo-…` merchant's whose
    /// service account is the demo's own. Returns how many.
    private func removeLeftoverProjects(engine: OrderFlowEngine) async throws -> Int {
        var removed = 0
        for merchant in try await engine.merchants() where merchant.id.hasPrefix("demo-") {
            guard let project = try await engine.fcmProject(merchantID: merchant.id), project.projectID == Self.projectID,
                project.clientEmail == "\(Self.accountName)@\(Self.projectID).iam.gserviceaccount.com"
            else { continue }
            if try await engine.removeFCMServiceAccount(merchantID: merchant.id) { removed += 1 }
        }
        return removed
    }

    /// Removes the demo merchant's Firebase project (its key is sealed under a key this run
    /// forgets) and stops both stand-ins. Through an engine of its own: the host's has shut down
    /// with the host by now.
    ///
    /// - Parameter database: where the project was stored; nil when none was.
    func finish(database: DatabaseConfiguration?, merchantID: String) async {
        if let database {
            let engine = OrderFlowEngine(configuration: OrderFlowConfiguration(database: database, merchantID: merchantID, maximumConnections: 1))
            _ = try? await engine.removeFCMServiceAccount(merchantID: merchantID)
            await engine.shutdown()
        }
        try? await fcm.stop()
        try? await apns.stop()
    }
}
