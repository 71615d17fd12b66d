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
