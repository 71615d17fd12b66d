import Foundation
import PGKit
import PostgresTesting
import Testing

@Suite("Migrations")
struct MigratorTests {
    static let migrations = [
        Migration(version: 1, name: "0001_people", sql: "CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL);"),
        Migration(version: 2, name: "0002_pets", sql: """
            CREATE TABLE pets (id int PRIMARY KEY, owner int REFERENCES people);
            CREATE INDEX pets_owner ON pets (owner);
            """),
    ]

    @Test func appliesInOrderOnceAndRefusesEditedFiles() async throws {
        let configuration = try await TestDatabase.fresh()
        let first = try await Migrator(migrations: Self.migrations).migrate(configuration)
        #expect(first.applied.map(\.version) == [1, 2])
        let again = try await Migrator(migrations: Self.migrations).migrate(configuration)
        #expect(again.applied.isEmpty)
        #expect(again.alreadyApplied == 2)

        var edited = Self.migrations
        edited[0].sql += "\nALTER TABLE people ADD COLUMN age int;"
        do {
            _ = try await Migrator(migrations: edited).migrate(configuration)
            Issue.record("an edited migration was accepted")
        } catch let error as PostgresError {
            #expect(error.message.contains("0001_people.sql was edited after it was applied"))
        }
        let status = try await Migrator(migrations: Self.migrations).status(configuration)
        #expect(status.allSatisfy { $0.appliedAt != nil })
    }

    @Test func appliedVersionIsZeroBeforeTheFirstMigrationThenTheNewest() async throws {
        let configuration = try await TestDatabase.fresh()
        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 1))
        #expect(try await Migrator.appliedVersion(on: pool) == 0, "no schema_migrations table yet")
        _ = try await Migrator(migrations: [Self.migrations[0]]).migrate(configuration)
        #expect(try await Migrator.appliedVersion(on: pool) == 1)
        _ = try await Migrator(migrations: Self.migrations).migrate(configuration)
        #expect(try await Migrator.appliedVersion(on: pool) == 2)
        // The table exists but holds nothing (created by hand, say): still 0.
        try await pool.query(PostgresQuery("DELETE FROM schema_migrations"))
        #expect(try await Migrator.appliedVersion(on: pool) == 0)
        await pool.close()
        // A database that cannot be read is an error, not "no schema".
        await #expect(throws: PostgresError.self) { try await Migrator.appliedVersion(on: pool) }
    }

    @Test func concurrentMigratesLeaveOneSchema() async throws {
        let configuration = try await TestDatabase.fresh()
        let reports = try await withThrowingTaskGroup(of: Migrator.Report.self) { group in
            for _ in 0..<4 { group.addTask { try await Migrator(migrations: Self.migrations).migrate(configuration) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(reports.map(\.applied.count).reduce(0, +) == 2, "each migration applied exactly once")
        let count = try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery("SELECT count(*) AS n FROM schema_migrations")).single().decode("n", as: Int.self)
        }
        #expect(count == 2)
    }

    /// A migration that cannot take its lock while the running system holds it gives up after
    /// the lock timeout (so live queries do not queue behind it for long) and is tried again.
    @Test func aMigrationThatLosesALockRaceIsTriedAgain() async throws {
        let configuration = try await TestDatabase.fresh()
        _ = try await Migrator(migrations: Self.migrations).migrate(configuration)
        let locked = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await PostgresConnection.withConnection(configuration) { connection in
                try await connection.transaction { connection in
                    _ = try await connection.query(PostgresQuery("SELECT count(*) AS n FROM people"))
                    locked.continuation.yield()
                    try await Task.sleep(for: .seconds(3))  // longer than one try's lock timeout
                }
            }
        }
        for await _ in locked.stream { break }
        let added = Self.migrations + [Migration(version: 3, name: "0003_nickname", sql: "ALTER TABLE people ADD COLUMN nickname text;")]
        let report = try await Migrator(migrations: added).migrate(configuration)
        try await holder.value
        #expect(report.applied.map(\.version) == [3])
        let present = try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery(
                "SELECT count(*) AS n FROM information_schema.columns WHERE table_name = 'people' AND column_name = 'nickname'"))
                .single().decode("n", as: Int.self)
        }
        #expect(present == 1)
    }

    @Test func failingMigrationRollsBackAndSaysWhich() async throws {
        let configuration = try await TestDatabase.fresh()
        let broken = Self.migrations + [Migration(version: 3, name: "0003_broken", sql: "CREATE TABLE ok (id int); SELECT nope FROM nowhere;")]
        do {
            _ = try await Migrator(migrations: broken).migrate(configuration)
            Issue.record("a broken migration was applied")
        } catch let error as PostgresError {
            #expect(error.message.contains("0003_broken.sql failed and was rolled back"))
            #expect(error.sqlState == "42P01")
        }
        let tables = try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery("SELECT to_regclass('ok') IS NULL AS absent")).single().decode("absent", as: Bool.self)
        }
        #expect(tables, "the failed migration's first statement must have been rolled back")
    }

    @Test func loadsNumberedFilesFromAFolder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("mig-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "SELECT 2;".write(to: folder.appendingPathComponent("0002_second.sql"), atomically: true, encoding: .utf8)
        try "SELECT 1;".write(to: folder.appendingPathComponent("0001_first.sql"), atomically: true, encoding: .utf8)
        try "notes".write(to: folder.appendingPathComponent("README.txt"), atomically: true, encoding: .utf8)
        let loaded = try Migration.load(from: folder)
        #expect(loaded.map(\.name) == ["0001_first", "0002_second"])
        try "SELECT 3;".write(to: folder.appendingPathComponent("third.sql"), atomically: true, encoding: .utf8)
        #expect(throws: PostgresError.self) { try Migration.load(from: folder) }
    }
}
