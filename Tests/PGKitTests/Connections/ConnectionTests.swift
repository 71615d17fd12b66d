import Foundation
import PGKit
import PostgresTesting
import Synchronization
import Testing

@Suite("PostgreSQL connections, pool and errors")
struct ConnectionTests {
    @Test func decodesTypedValues() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let row = try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery("""
                SELECT $1::text AS t, 42::int AS i4, 9007199254740993::bigint AS i8, 2.5::float8 AS d,
                       true AS b, '2026-11-22 13:07:22.25+00'::timestamptz AS ts,
                       'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS u, '{"k": [1, "x"]}'::jsonb AS j,
                       ARRAY['a', 'b c', NULL] AS arr, ARRAY[1, 2, 3] AS ints, NULL::text AS nothing
                """, "héllo ' \\ 🍕")).single()
        }
        #expect(try row.decode("t", as: String.self) == "héllo ' \\ 🍕")
        #expect(try row.decode("i4", as: Int.self) == 42)
        #expect(try row.decode("i8", as: Int64.self) == 9_007_199_254_740_993)
        #expect(try row.decode("d", as: Double.self) == 2.5)
        #expect(try row.decode("b", as: Bool.self) == true)
        #expect(try row.decode("ts", as: Date.self) == Date(timeIntervalSince1970: 1_795_352_842.25))
        #expect(try row.decode("u", as: UUID.self) == UUID(uuidString: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"))
        #expect(try row.decode("j", as: PostgresJSON.self).text == #"{"k": [1, "x"]}"#)
        #expect(try row.decode("ints", as: [Int].self) == [1, 2, 3])
        #expect(try row.decode("nothing", as: String?.self) == nil)
        #expect(try row.isNull("nothing"))
        #expect(throws: PostgresError.self) { try row.decode("arr", as: [String].self) }  // holds a NULL
    }

    @Test func mismatchNamesColumnAndType() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let row = try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery("SELECT 'abc'::text AS word, NULL::int AS missing")).single()
        }
        do {
            _ = try row.decode("word", as: Int.self)
            Issue.record("decoded text as Int")
        } catch {
            #expect(error.kind == .decoding)
            #expect(error.message.contains("column \"word\" of type text could not be read as Int"))
        }
        #expect(throws: PostgresError.self) { try row.decode("missing", as: Int.self) }
        #expect(throws: PostgresError.self) { try row.decode("nope", as: Int.self) }
    }

    @Test func boundParametersRoundTripHostileText() async throws {
        let configuration = try await TestDatabase.fresh()
        let hostile = ["'; DROP TABLE t; --", "\\x00\\", "\"quoted\"", "emoji 🚗💨", String(repeating: "x", count: 100_000)]
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.execute("CREATE TABLE t (v text)")
            for value in hostile {
                try await connection.query(PostgresQuery("INSERT INTO t (v) VALUES ($1)", value))
            }
            let stored = try await connection.query(PostgresQuery("SELECT v FROM t")).map { try $0.decode("v", as: String.self) }
            #expect(Set(stored) == Set(hostile))
            do {
                try await connection.query(PostgresQuery("INSERT INTO t (v) VALUES ($1)", "nul\u{0}inside"))
                Issue.record("a NUL was sent")
            } catch let error as PostgresError {
                #expect(error.kind == .invalidParameter)
                #expect(error.message.contains("$1"))
            }
            let count = try await connection.query(PostgresQuery("SELECT count(*) AS n FROM t")).single().decode("n", as: Int.self)
            #expect(count == hostile.count)
        }
    }

    /// JSON documents bound as one `jsonb[]` (each escaped inside the array literal) arrive as
    /// the documents they were: the worker's record sends its keyed rows this way.
    @Test func jsonDocumentsBoundAsAnArrayArriveIntact() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let ids = ["plain", "quote \" inside", "back\\slash", "comma, {brace}", "NULL", "émoji 🍕", ""]
        let documents = try ids.map { id in
            PostgresJSON(String(decoding: try JSONSerialization.data(withJSONObject: ["id": id, "n": 1]), as: UTF8.self))
        }
        let read = try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery("""
                SELECT r.id, r.n FROM unnest((SELECT $1::jsonb[])) WITH ORDINALITY AS e(row, i)
                CROSS JOIN LATERAL jsonb_to_record(e.row) AS r(id text, n integer) ORDER BY e.i
                """, documents)).map { try $0.decode("id", as: String.self) }
        }
        #expect(read == ids)
        let none = try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery("SELECT count(*) AS n FROM unnest($1::jsonb[])", [PostgresJSON]()))
                .single().decode("n", as: Int.self)
        }
        #expect(none == 0)
    }

    @Test func uniqueViolationIsRecognisable() async throws {
        let configuration = try await TestDatabase.fresh()
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.execute("CREATE TABLE u (id int PRIMARY KEY)")
            try await connection.query(PostgresQuery("INSERT INTO u VALUES ($1)", 1))
            do {
                try await connection.query(PostgresQuery("INSERT INTO u VALUES ($1)", 1))
                Issue.record("duplicate accepted")
            } catch let error as PostgresError {
                #expect(error.isUniqueViolation)
                #expect(error.sqlState == "23505")
                #expect(error.constraint == "u_pkey")
                #expect(!error.isConnectionProblem)
                #expect(error.detail?.contains("already exists") == true)
            }
        }
    }

    @Test func transactionRollsBackWhenBodyThrows() async throws {
        struct Boom: Error {}
        let configuration = try await TestDatabase.fresh()
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.execute("CREATE TABLE r (v int)")
            await #expect(throws: Boom.self) {
                try await connection.transaction { connection in
                    try await connection.query(PostgresQuery("INSERT INTO r VALUES ($1)", 1))
                    throw Boom()
                }
            }
            // A swallowed statement error must not let COMMIT silently roll back.
            await #expect(throws: PostgresError.self) {
                try await connection.transaction { connection in
                    try await connection.query(PostgresQuery("INSERT INTO r VALUES ($1)", 2))
                    _ = try? await connection.query(PostgresQuery("SELECT 1 / 0 AS x"))
                }
            }
            try await connection.transaction { connection in
                try await connection.query(PostgresQuery("INSERT INTO r VALUES ($1)", 3))
            }
            let values = try await connection.query(PostgresQuery("SELECT v FROM r")).map { try $0.decode("v", as: Int.self) }
            #expect(values == [3])
        }
    }

    @Test func unreachableServerNamesHostAndPort() async throws {
        let configuration = try PostgresConfiguration("postgresql://nobody:topsecret@127.0.0.1:1/none?connect_timeout=2")
        do {
            _ = try await PostgresConnection.connect(configuration)
            Issue.record("connected to port 1")
        } catch {
            #expect(error.kind == .connectionFailed)
            #expect(error.message.contains("127.0.0.1:1"))
            #expect(!error.description.contains("topsecret"))
            #expect(!error.description.contains("\n"))
        }
    }

    /// The connect loop (started so that notices of the login reach the logger) applies
    /// connect_timeout itself: a server that accepts the connection and never answers ends the
    /// attempt after the URL's timeout, with a sentence, not a hang.
    @Test func silentServerTimesOutAsTheURLSays() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0 && listen(listener, 8) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let configuration = try PostgresConfiguration("postgresql://nobody@127.0.0.1:\(port)/none?connect_timeout=2&sslmode=disable")
        let started = ContinuousClock.now
        do {
            _ = try await PostgresConnection.connect(configuration)
            Issue.record("connected to a socket that never answers")
        } catch {
            let waited = ContinuousClock.now - started
            #expect(error.kind == .connectionFailed)
            #expect(error.message.contains("no answer within 2 s") && error.message.contains("127.0.0.1:\(port)"), "\(error)")
            #expect(waited >= .milliseconds(1_900) && waited < .seconds(6), "\(waited)")
        }
    }

    @Test func statementsOnOneConnectionRunInTurn() async throws {
        // The actor is reentrant while a statement waits for its socket; libpq's protocol is
        // not. Forty statements from concurrent tasks on one connection must each get their own
        // answer, none another's.
        let configuration = try TestDatabase.serverConfiguration()
        try await PostgresConnection.withConnection(configuration) { connection in
            try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                for value in 0..<40 {
                    group.addTask {
                        let row = try await connection.query(PostgresQuery(
                            "SELECT $1::int AS v, pg_sleep(0.001 * ($1::int % 3))::text AS slept", value)).single()
                        return (value, try row.decode("v", as: Int.self))
                    }
                }
                var answered = 0
                for try await (asked, answer) in group {
                    #expect(answer == asked)
                    answered += 1
                }
                #expect(answered == 40)
            }
        }
    }

    @Test func aTransactionHasItsConnectionToItself() async throws {
        // Another caller's statement, sent while a transaction body is suspended, waits for the
        // transaction to end: it must not run inside it and be rolled back with it.
        struct Boom: Error {}
        let configuration = try await TestDatabase.fresh()
        let connection = try await PostgresConnection.connect(configuration)
        try await connection.execute("CREATE TABLE x (v int)")
        let (began, begin) = AsyncStream<Void>.makeStream()
        let rolledBack = Task {
            defer { begin.finish() }  // a body that fails early ends the wait below
            try await connection.transaction { connection in
                try await connection.query(PostgresQuery("INSERT INTO x VALUES ($1)", 1))
                // A statement of the body's own, through a nested run: no deadlock.
                _ = try await connection.run { connection in
                    try await connection.query(PostgresQuery("INSERT INTO x VALUES ($1)", 10))
                }
                begin.yield()
                try await Task.sleep(for: .milliseconds(200))
                throw Boom()
            }
        }
        var iterator = began.makeAsyncIterator()
        await iterator.next()
        try await connection.query(PostgresQuery("INSERT INTO x VALUES ($1)", 2))
        await #expect(throws: Boom.self) { try await rolledBack.value }
        let values = try await connection.query(PostgresQuery("SELECT v FROM x ORDER BY v")).map { try $0.decode("v", as: Int.self) }
        #expect(values == [2])
        await connection.close()
    }

    @Test(.timeLimit(.minutes(3)))
    func copyIsRefusedNotHung() async throws {
        // libpq would wait forever for COPY data; the connection says no and closes instead.
        let configuration = try TestDatabase.serverConfiguration()
        let connection = try await PostgresConnection.connect(configuration)
        do {
            try await connection.query(PostgresQuery("COPY (SELECT 1) TO STDOUT"))
            Issue.record("COPY TO STDOUT ran")
        } catch {
            #expect(error.kind == .unexpectedResult)
            #expect(error.message.contains("COPY"))
        }
        await #expect(throws: PostgresError.self) { try await connection.query(PostgresQuery("SELECT 1 AS one")) }
    }

    @Test func closeWaitsForTheStatementInFlight() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let connection = try await PostgresConnection.connect(configuration)
        let (started, start) = AsyncStream<Void>.makeStream()
        let slow = Task {
            start.yield()
            return try await connection.query(PostgresQuery("SELECT pg_sleep(0.3)::text AS slept, 7 AS seven")).single()
                .decode("seven", as: Int.self)
        }
        var iterator = started.makeAsyncIterator()
        await iterator.next()
        try await Task.sleep(for: .milliseconds(50))
        await connection.close()
        // The statement already sent is read to its end, not cut off mid-answer.
        #expect(try await slow.value == 7)
        do {
            try await connection.query(PostgresQuery("SELECT 1 AS one"))
            Issue.record("a closed connection ran a statement")
        } catch {
            #expect(error.kind == .connectionLost)
            #expect(error.message.contains("is closed"))
        }
        #expect(await connection.isUsable() == false)
    }

    @Test(.serialized, arguments: ["disable", "require"])
    func largeParametersAndResultsCrossTheSocketInPieces(sslmode: String) async throws {
        // Far more than a socket buffer each way: sending waits for the socket to drain, and
        // the answer arrives in many reads — in plain TCP, and in TLS records, whose decrypted
        // bytes may wait inside OpenSSL where the socket does not signal them.
        let server = try TestDatabase.serverConfiguration().connectionString
        let configuration = try PostgresConfiguration(server + (server.contains("?") ? "&" : "?") + "sslmode=\(sslmode)")
        let big = String(repeating: "orderflow ", count: 400_000)  // 4 MB, past loopback's socket buffers
        try await PostgresConnection.withConnection(configuration) { connection in
            let tls = try await connection.query(PostgresQuery("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
                .single().decode("ssl", as: Bool.self)
            #expect(tls == (sslmode == "require"), "scripts/test starts the test server with TLS on")
            let echoed = try await connection.query(PostgresQuery("SELECT $1::text AS v, length($1::text) AS n", big)).single()
            #expect(try echoed.decode("n", as: Int.self) == big.utf8.count)
            #expect(try echoed.decode("v", as: String.self) == big)
            let rows = try await connection.query(PostgresQuery("SELECT n, md5(n::text) AS h FROM generate_series(1, 50000) AS n"))
            #expect(rows.count == 50_000)
            #expect(try rows.last?.decode("n", as: Int.self) == 50_000)
        }
    }

    @Test func errorInTheMiddleOfSeveralStatementsIsReportedAndTheConnectionStaysUsable() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        try await PostgresConnection.withConnection(configuration) { connection in
            do {
                try await connection.query(PostgresQuery(unsafeSQL: "SELECT 1; SELECT 1 / 0; SELECT 3"))
                Issue.record("a division by zero went unreported")
            } catch let error as PostgresError {
                #expect(error.kind == .server)
                #expect(error.sqlState == "22012")
            }
            // Every result of the failed exchange was read: the next statement gets its own.
            #expect(try await connection.query(PostgresQuery("SELECT 4 AS four")).single().decode("four", as: Int.self) == 4)
            #expect(await connection.isUsable())
        }
    }

    @Test func brokenConnectionIsReplaced() async throws {
        let configuration = try TestDatabase.serverConfiguration()
        let pool = PostgresPool(.init(connection: configuration, maximumConnections: 1))
        let pid = try await pool.query(PostgresQuery("SELECT pg_backend_pid() AS pid")).single().decode("pid", as: Int.self)
        try await PostgresConnection.withConnection(configuration) { admin in
            try await admin.query(PostgresQuery("SELECT pg_terminate_backend($1)", pid))
        }
        try await Task.sleep(for: .milliseconds(300))
        // The idle connection's death is noticed at acquire; the query runs on a fresh one.
        let newPID = try await pool.query(PostgresQuery("SELECT pg_backend_pid() AS pid")).single().decode("pid", as: Int.self)
        #expect(newPID != pid)
        await pool.close()
    }
}
