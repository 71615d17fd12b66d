import Foundation
import Testing
@testable import PGKit

@Suite("Values in PostgreSQL's text format")
struct ValueTests {
    @Test func timestampsRoundTrip() throws {
        let dates = [
            Date(timeIntervalSince1970: 0),
            Date(timeIntervalSince1970: 1_795_000_000.123456),
            Date(timeIntervalSince1970: -86_400.5),
        ]
        for date in dates {
            let text = PostgresTimestamp.format(date)
            let parsed = try #require(PostgresTimestamp.parse(text))
            #expect(abs(parsed.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.000_001, "\(text)")
        }
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 0)) == "1970-01-01 00:00:00.000000+00")
    }

    /// `asStoredByPostgres` skips the text, but must give exactly what the text would:
    /// the engine returns it as the time of a transition that later reads give back parsed.
    @Test func storedTimeEqualsTheFormattedAndParsedTime() throws {
        var generator = SystemRandomNumberGenerator()
        var dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.000_000_4),
            Date(timeIntervalSince1970: 1_795_000_000.999_999_6), Date(timeIntervalSince1970: -86_400.500_000_5),
            Date(timeIntervalSince1970: 253_402_300_799.25), Date(timeIntervalSince1970: -62_135_596_800),
        ]
        for _ in 0..<20_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: -3e9...5e9, using: &generator)))
        }
        for _ in 0..<5_000 {  // now-ish, where every engine time lies
            dates.append(Date(timeIntervalSinceNow: Double.random(in: -1e6...1e6, using: &generator)))
        }
        for date in dates {
            let text = PostgresTimestamp.format(date)
            let parsed = try #require(PostgresTimestamp.parse(text), "\(text)")
            #expect(date.asStoredByPostgres == parsed, "\(date.timeIntervalSince1970) as \(text)")
            #expect(abs(parsed.timeIntervalSince1970 - date.timeIntervalSince1970) <= max(0.000_002, 2 * abs(date.timeIntervalSince1970).ulp), "\(text)")
        }
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 1_795_000_000.123_456)) == "2026-11-18 11:06:40.123456+00")
        #expect(PostgresTimestamp.parse("2026-11-18 11:06:40.5+00") == PostgresTimestamp.parse("2026-11-18 11:06:40.500000+00"))
    }

    @Test func timestampsWithOffsets() throws {
        let utc = try #require(PostgresTimestamp.parse("2026-11-22 13:07:22+00"))
        let shifted = try #require(PostgresTimestamp.parse("2026-11-22 18:37:22+05:30"))
        #expect(utc == shifted)
        #expect(PostgresTimestamp.parse("2026-11-22") == nil)
        #expect(PostgresTimestamp.parse("not a date") == nil)
    }

    @Test func arrayLiterals() {
        #expect(PostgresArrayLiteral.parse("{}")! == [])
        #expect(PostgresArrayLiteral.parse("{1,2,3}")! == ["1", "2", "3"])
        #expect(PostgresArrayLiteral.parse(#"{"a b","c\"d",NULL,"NULL"}"#)! == ["a b", "c\"d", nil, "NULL"])
        #expect(PostgresArrayLiteral.parse("{{1,2},{3,4}}") == nil)
        #expect(PostgresArrayLiteral.parse("[0:1]={7,8}")! == ["7", "8"])
    }

    @Test func arrayBindingEscapes() throws {
        let text = try ["plain", "with \"quote\"", "back\\slash", "comma,brace}"].postgresText()
        #expect(text == #"{"plain","with \"quote\"","back\\slash","comma,brace}"}"#)
        #expect(PostgresArrayLiteral.parse(text!)! == ["plain", "with \"quote\"", "back\\slash", "comma,brace}"])
    }

    @Test func nulIsRefusedNotTruncated() {
        #expect(throws: PostgresDecodingFailure.self) { try "a\u{0}b".postgresText() }
    }

    @Test func configurationErrorsNameTheProblemWithoutThePassword() {
        do {
            _ = try PostgresConfiguration("postgresql://alice:s3cret@db.example:5432/orders?sslmode=bogus&frobnicate=1")
            Issue.record("a bad URL was accepted")
        } catch {
            #expect(error.kind == .invalidConfiguration)
            #expect(error.message.contains("invalid database URL"))
            #expect(!error.description.contains("s3cret"))
        }
        let target = try? PostgresConfiguration("postgresql://alice:s3cret@db.example:6543/orders").target
        #expect(target?.hostAndPort == "db.example:6543")
        #expect(target?.database == "orders")
        #expect(!(target?.description.contains("s3cret") ?? true))
    }
}
