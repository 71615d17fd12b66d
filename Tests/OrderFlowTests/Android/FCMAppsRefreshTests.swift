import Foundation
import LocalFCM
@testable import OrderFlow
import OrderFlowTesting
import PGKit
import PostgresTesting
import Testing

/// A worker's Firebase projects are looked up again: a `merchant set-fcm` reaches a running
/// worker once the route is older than the refresh interval (not before), an unchanged project
/// keeps its client, and while the database cannot be read the known route is kept.
@Suite("FCM apps: each merchant's Firebase project looked up again", .serialized)
struct FCMAppsRefreshTests {
    static let masterKey = MasterKey(bytes: Data((0..<32).map { UInt8($0 &* 3) }))

    static func account(_ projectID: String) throws -> String {
        try LocalFCMServiceAccountKey.generate(projectID: projectID, tokenURI: "https://oauth2.googleapis.com/token",
                                               accountName: "orderflow").json
    }

    static func apps(_ fixture: EngineFixture, refreshInterval: Duration, logs: LogRecorder = LogRecorder()) -> FCMApps {
        FCMApps(settings: .init(masterKey: masterKey, baseURL: "https://fcm.invalid", refreshInterval: refreshInterval,
                                sharesAccessTokens: false),
                pool: fixture.engine.pool, logger: logs.logger(label: "fcm-apps"))
    }

    func withFixture(_ body: (EngineFixture) async throws -> Void) async throws {
        let fixture = try await EngineFixture.make()
        do {
            try await fixture.engine.addMerchant("bravo")
            try await fixture.engine.setFCMServiceAccount(merchantID: "bravo", serviceAccountJSON: Self.account("bravo-one"),
                                                          masterKey: Self.masterKey)
            try await body(fixture)
        } catch {
            await fixture.shutdown()
            throw error
        }
        await fixture.shutdown()
    }

    @Test("within the interval the known route is used; a set-fcm is seen after it", .timeLimit(.minutes(3)))
    func aNewProjectIsSeenOnlyAfterTheInterval() async throws {
        try await withFixture { fixture in
            let patient = Self.apps(fixture, refreshInterval: .seconds(3600))
            let eager = Self.apps(fixture, refreshInterval: .zero)
            let first = try #require(await patient.route(for: "bravo"))
            #expect(first.app == "fcm:bravo#1" && first.projectID == "bravo-one" && first.unusable == nil && first.client != nil)
            let eagerFirst = try #require(await eager.route(for: "bravo"))
            // Read again, unchanged: the same client, not a second one.
            let eagerAgain = try #require(await eager.route(for: "bravo"))
            #expect(eagerAgain.app == "fcm:bravo#1" && eagerAgain.client === eagerFirst.client)

            try await fixture.engine.setFCMServiceAccount(merchantID: "bravo", serviceAccountJSON: Self.account("bravo-two"),
                                                          masterKey: Self.masterKey)
            let patientAfter = try #require(await patient.route(for: "bravo"))
            #expect(patientAfter.app == "fcm:bravo#1" && patientAfter.projectID == "bravo-one" && patientAfter.client === first.client,
                    "within the interval the database is not read again")
            let eagerAfter = try #require(await eager.route(for: "bravo"))
            #expect(eagerAfter.app == "fcm:bravo#2" && eagerAfter.projectID == "bravo-two" && eagerAfter.unusable == nil)
            #expect(eagerAfter.client != nil && eagerAfter.client !== eagerFirst.client, "a new key is a new client")
            // A merchant without a project has no route, and one removed goes away at the next look.
            #expect(await eager.route(for: "default") == nil)
            _ = try await fixture.engine.removeFCMServiceAccount(merchantID: "bravo")
            #expect(await eager.route(for: "bravo") == nil)
            await patient.shutdown()
            await eager.shutdown()
        }
    }

    @Test("while the database cannot be read the known route is kept and an unknown merchant waits",
          .timeLimit(.minutes(3)))
    func anUnreadableDatabaseKeepsTheKnownRoute() async throws {
        try await withFixture { fixture in
            let logs = LogRecorder()
            let apps = Self.apps(fixture, refreshInterval: .zero, logs: logs)
            let known = try #require(await apps.route(for: "bravo"))
            // This test's own database: its projects cannot be read while the table is renamed.
            try await fixture.engine.pool.query(PostgresQuery(unsafeSQL: "ALTER TABLE merchant_fcm_apps RENAME TO merchant_fcm_apps_away"))
            let kept = try #require(await apps.route(for: "bravo"))
            #expect(kept.app == known.app && kept.client === known.client && !kept.transient)
            let unknown = try #require(await apps.route(for: "charlie"))
            #expect(unknown.app == "fcm:charlie" && unknown.transient && unknown.client == nil)
            #expect(unknown.unusable == "the merchant's Firebase project cannot be read now")
            let warnings = logs.records.filter { $0.level == .warning }
            #expect(warnings.map(\.message) == Array(repeating: "cannot read a merchant's Firebase project; its Android messages wait", count: 2))
            #expect(warnings.map { $0.metadata["orderflow.merchant"]?.description } == ["bravo", "charlie"])
            try await fixture.engine.pool.query(PostgresQuery(unsafeSQL: "ALTER TABLE merchant_fcm_apps_away RENAME TO merchant_fcm_apps"))
            #expect(await apps.route(for: "charlie") == nil, "readable again: charlie has no project")
            await apps.shutdown()
        }
    }
}
