import Foundation
import PGKit
import Testing

@Suite("orderflow against PostgreSQL")
struct DatabaseCommandTests {
    @Test("a command that creates the embedded database says where and why; db url gives its full URL")
    func embeddedDatabaseCreation() async throws {
        let cli = try CLI(databaseURL: nil)
        let first = try await cli.run("list")
        expectStatus(first, 0)
        #expect(first.stderr.contains("creating a new embedded PostgreSQL in \(cli.directory.path)/data/orderflow/postgres"), "\(first)")
        #expect(first.stderr.contains("your data folder"), "\(first)")
        let second = try await cli.run("list")
        expectStatus(second, 0)
        #expect(second.stderr.isEmpty, "said once, when created: \(second)")
        let url = try await cli.run("db", "url")
        expectStatus(url, 0)
        #expect(url.stdout.hasPrefix("postgresql://orderflow:") && !url.stdout.contains("***"), "\(url)")

        // A refused login is not an outage: the message says what to fix, not to retry.
        let given = url.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let password = try #require(given.firstMatch(of: /orderflow:([^@]+)@/)?.1)
        let wrong = try await cli.run(["list"], environment: [
            "ORDERFLOW_DATABASE_URL": given.replacingOccurrences(of: ":\(password)@", with: ":not-the-password@"),
        ])
        expectStatus(wrong, 69)
        expectOneLineError(wrong, containing: ["password authentication failed", "check the user name and password"])
        #expect(!wrong.stderr.contains("retry when it is back") && !wrong.stderr.contains("not-the-password"), "\(wrong)")
        let missing = try await cli.run(["list"], environment: [
            "ORDERFLOW_DATABASE_URL": given.replacing(/\/orderflow$/, with: "/no_such_database"),
        ])
        expectStatus(missing, 69)
        expectOneLineError(missing, containing: ["does not exist", "create the database"])

        let stop = try await cli.run("db", "stop")
        expectStatus(stop, 0)
    }

    @Test("migrate applies the schema once; a database without it is reported")
    func migrate() async throws {
        let cli = try await CLI.withFreshDatabase(migrated: false)
        let missing = try await cli.run("list")
        expectStatus(missing, 69)
        expectOneLineError(missing, containing: ["the database has no OrderFlow schema", "run `orderflow migrate`"])

        let first = try await cli.run("migrate")
        expectStatus(first, 0)
        #expect(first.stdout.contains("applied 0001_initial.sql"), "\(first)")
        let second = try await cli.run("migrate")
        expectStatus(second, 0)
        #expect(second.stdout.contains("schema is up to date"), "\(second)")
    }

    @Test("workflow apply stores a version once; list, show and graph read it back")
    func workflows() async throws {
        let cli = try await CLI.withFreshDatabase()
        let empty = try await cli.run("workflow", "list")
        expectStatus(empty, 0)
        #expect(empty.stdout.contains("no workflows yet"))

        let first = try await cli.run("workflow", "apply", Fixtures.foodOrder)
        expectStatus(first, 0)
        #expect(first.stdout.contains("applied food-order version 1"), "\(first)")
        let second = try await cli.run("workflow", "apply", Fixtures.foodOrder)
        expectStatus(second, 0)
        #expect(second.stdout.contains("food-order unchanged (version 1)"), "\(second)")

        let broken = try Fixtures.file("broken.yaml", "name: broken\nstates: 3\n")
        let rejected = try await cli.run("workflow", "apply", broken)
        expectStatus(rejected, 65)
        #expect(rejected.stderr.contains("\(broken):"), "\(rejected)")

        let list = try await cli.run("workflow", "list")
        expectStatus(list, 0)
        #expect(list.stdout.contains("food-order"))
        let listJSON = try #require(try (try await cli.run("workflow", "list", "--json")).json() as? [[String: Any]])
        #expect(listJSON.first?["name"] as? String == "food-order")
        #expect(listJSON.first?["latestVersion"] as? Int == 1)

        let show = try await cli.run("workflow", "show", "food-order@1")
        expectStatus(show, 0)
        #expect(show.stdout.contains("food-order version 1"), "\(show)")
        let source = try await cli.run("workflow", "show", "food-order", "--source")
        #expect(source.stdout == (try String(contentsOfFile: Fixtures.foodOrder, encoding: .utf8)))

        let graph = try await cli.run("workflow", "graph", "food-order", "--format", "dot")
        expectStatus(graph, 0)
        #expect(graph.stdout.contains("digraph"))
        let swift = try await cli.run("workflow", "swift", "food-order")
        #expect(swift.stdout.contains("FoodOrderAttributes"))

        let unknown = try await cli.run("workflow", "show", "pizza")
        expectStatus(unknown, 66)
        expectOneLineError(unknown, containing: ["pizza", "food-order"])
        let unknownVersion = try await cli.run("workflow", "show", "food-order@7")
        expectStatus(unknownVersion, 66)
    }

    @Test("an order from creation to delivery, with prefixes, errors and the timeline")
    func orderLifecycle() async throws {
        let cli = try await CLI.withFreshDatabase()
        expectStatus(try await cli.run("workflow", "apply", Fixtures.foodOrder), 0)

        let badValue = try await cli.run(["order", "create", "1042", "--workflow", "food-order", "--attr", "merchantName=Luigi's",
                                          "--attr", "orderNumber=1042", "--attr", "itemCount=three"])
        expectStatus(badValue, 65)
        expectOneLineError(badValue, containing: ["itemCount", "three", "whole number"])

        let missingAttribute = try await cli.run("order", "create", "1042", "--workflow", "food-order", "--attr", "merchantName=Luigi's")
        expectStatus(missingAttribute, 65)
        expectOneLineError(missingAttribute, containing: ["orderNumber"])

        let unknownWorkflow = try await cli.run(["order", "create", "1042", "--workflow", "pizza"] + foodAttributes)
        expectStatus(unknownWorkflow, 66)

        let created = try await cli.run(["order", "create", "1042", "--workflow", "food-order"] + foodAttributes)
        expectStatus(created, 0)
        #expect(created.stdout.contains("created order 1042 (food-order v1) in received"), "\(created)")

        let duplicate = try await cli.run(["order", "create", "1042", "--workflow", "food-order"] + foodAttributes)
        expectStatus(duplicate, 67)
        expectOneLineError(duplicate, containing: ["1042 already exists"])

        let accepted = try await cli.run("advance", "1042", "ACC", "--eta", "20m")
        expectStatus(accepted, 0)
        #expect(accepted.stdout.contains("1042: received → in_progress (accept)"), "\(accepted)")

        let ready = try await cli.run("advance", "1042", "rea")
        expectStatus(ready, 0)
        #expect(ready.stdout.contains("in_progress → ready"), "\(ready)")
        #expect(ready.stdout.contains("alert: Order 1042 is ready"), "\(ready)")

        let unknownState = try await cli.run("advance", "1042", "teleported")
        expectStatus(unknownState, 66)
        expectOneLineError(unknownState, containing: ["teleported"])
        let typo = try await cli.run("advance", "1042", "dispach")
        expectStatus(typo, 66)
        expectOneLineError(typo, containing: ["\"dispach\"", "did you mean `dispatch`?"])

        let notAllowed = try await cli.run("advance", "1042", "delivered")
        expectStatus(notAllowed, 68)
        expectOneLineError(notAllowed, containing: ["ready", "out_for_delivery", "picked_up"])

        let wrongExpectation = try await cli.run("advance", "1042", "dispatch", "--eta", "15m", "--expect", "received")
        expectStatus(wrongExpectation, 67)
        expectOneLineError(wrongExpectation, containing: ["1042 is in ready"])

        let badETA = try await cli.run("advance", "1042", "dispatch", "--eta", "soonish")
        expectStatus(badETA, 65)
        expectOneLineError(badETA, containing: ["--eta", "soonish"])

        let dispatched = try await cli.run("advance", "1042", "out", "--eta", "+15m", "--driver", "Sam", "--idempotency-key", "k-1")
        expectStatus(dispatched, 0)
        #expect(dispatched.stdout.contains("ready → out_for_delivery (dispatch)"), "\(dispatched)")
        let replayed = try await cli.run("advance", "1042", "out", "--eta", "+15m", "--driver", "Sam", "--idempotency-key", "k-1")
        expectStatus(replayed, 0)
        #expect(replayed.stdout.contains("already done"), "\(replayed)")

        let delivered = try await cli.run("advance", "1042", "deliver", "--json")
        expectStatus(delivered, 0)
        let result = try #require(try delivered.json() as? [String: Any])
        let order = try #require(result["order"] as? [String: Any])
        #expect(order["state"] as? String == "delivered")
        #expect(order["isFinal"] as? Bool == true)

        let afterFinal = try await cli.run("advance", "1042", "ready")
        expectStatus(afterFinal, 68)
        expectOneLineError(afterFinal, containing: ["order 1042 is delivered, a final state; nothing can follow it"])

        let missingOrder = try await cli.run("advance", "9999", "ready")
        expectStatus(missingOrder, 66)
        expectOneLineError(missingOrder, containing: ["order 9999 does not exist"])

        // The timeline, as text and as JSON.
        let show = try await cli.run("show", "1042")
        expectStatus(show, 0)
        for fragment in ["order 1042", "food-order v1", "delivered", "received → in_progress", "accept", "ready → out_for_delivery",
                         "dispatch", "cli:tester", "alert: On the way", "no device follows this order"] {
            #expect(show.stdout.contains(fragment), "show lacks \(fragment):\n\(show.stdout)")
        }
        let showJSON = try #require(try (try await cli.run("show", "1042", "--json")).json() as? [String: Any])
        let transitions = try #require(showJSON["transitions"] as? [[String: Any]])
        #expect(transitions.map { $0["to"] as? String } == ["received", "in_progress", "ready", "out_for_delivery", "delivered"])
        let firstTime = try #require(transitions.first?["occurredAt"] as? String)
        #expect(ISO8601DateFormatter().date(from: firstTime) != nil, "JSON times are ISO-8601: \(firstTime)")
        #expect((showJSON["deliveries"] as? [Any])?.isEmpty == true)
        // Every time is ISO-8601, content dates included; the APNs payload is shown exactly as
        // APNs receives it, under `aps`: epoch seconds, and the app's 2001-based content dates.
        let dispatch = try #require(transitions.first { $0["to"] as? String == "out_for_delivery" })
        let eta = try #require((dispatch["content"] as? [String: Any])?["eta"] as? String, "\(dispatch)")
        #expect(isoDate(eta) != nil, "content dates are ISO-8601: \(eta)")
        let aps = try #require(dispatch["aps"] as? [String: Any], "\(dispatch)")
        let sentETA = try #require((aps["content-state"] as? [String: Any])?["eta"] as? Double)
        #expect(abs(Date(timeIntervalSinceReferenceDate: sentETA).timeIntervalSince(try #require(isoDate(eta)))) < 0.001)
        #expect(aps["timestamp"] is Int && aps["event"] as? String == "update" && dispatch["rendered"] == nil)
        let current = try #require((showJSON["order"] as? [String: Any])?["content"] as? [String: Any])
        #expect(!(current["eta"] is Double), "the order's content has no 2001-based date: \(current)")
        let listed = try #require(try (try await cli.run("list", "--json")).json() as? [String: Any])
        let listedOrder = try #require(((listed["orders"] as? [[String: Any]])?.first?["order"]) as? [String: Any])
        #expect(!((listedOrder["content"] as? [String: Any])?["eta"] is Double), "\(listedOrder)")

        let missingShow = try await cli.run("show", "9999")
        expectStatus(missingShow, 66)
    }

    @Test("a broadcast order: create says so, show gives the channel id the app subscribes with")
    func broadcastOrderShowsItsChannel() async throws {
        let cli = try await CLI.withFreshDatabase()
        let race = Fixtures.repository.appendingPathComponent("workflows/f1-race.yaml").path
        expectStatus(try await cli.run("workflow", "apply", race), 0)
        let created = try await cli.run(["order", "create", "monza", "--workflow", "f1-race", "--attr", "raceName=Italian GP",
                                         "--attr", "track=Monza", "--attr", "totalLaps=53"])
        expectStatus(created, 0)
        #expect(created.stdout.contains("a broadcast event: the worker creates its APNs channel"), "\(created)")
        let pending = try await cli.run("show", "monza")
        expectStatus(pending, 0)
        #expect(pending.stdout.contains("broadcast channel: (not created yet)  pending, storage latest"), "\(pending)")

        // As the worker records a channel APNs created.
        let configuration = try PostgresConfiguration(try #require(cli.databaseURL))
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery(
                "UPDATE order_channels SET channel_id = 'Y2hhbm5lbDE=', state = 'open', generation = 1 WHERE order_id = 'monza'"))
        }
        let open = try await cli.run("show", "monza")
        #expect(open.stdout.contains("broadcast channel: Y2hhbm5lbDE=  open"), "\(open)")
        let json = try #require(try (try await cli.run("show", "monza", "--json")).json() as? [String: Any])
        let channel = (json["order"] as? [String: Any])?["channel"] as? [String: Any]
        #expect(channel?["id"] as? String == "Y2hhbm5lbDE=" && channel?["state"] as? String == "open", "\(json)")
        let food = try await cli.run(["order", "create", "1042", "--workflow", "food-order"] + foodAttributes)
        if food.status == 0 {
            #expect(!(try await cli.run("show", "1042")).stdout.contains("broadcast channel"))
        }
    }

    @Test("ambiguous prefixes list the candidates; --input values are typed")
    func prefixesAndTypedInput() async throws {
        let cli = try await CLI.withFreshDatabase()
        let workflow = try Fixtures.file("counter.yaml", Fixtures.counterWorkflow)
        expectStatus(try await cli.run("workflow", "apply", workflow), 0)
        let created = try await cli.run("order", "create", "A-1", "--workflow", "counter", "--attributes-json",
                                        #"{"label": "front", "itemCount": 1}"#, "--attr", "itemCount=2", "--json")
        expectStatus(created, 0)
        let order = try #require(try created.json() as? [String: Any])
        let attributes = try #require(order["attributes"] as? [String: Any])
        #expect(attributes["itemCount"] as? Int == 2, "--attr wins over --attributes-json and is typed")

        let ambiguous = try await cli.run("advance", "A-1", "pa")
        #expect([64, 65].contains(ambiguous.status), "\(ambiguous)")
        expectOneLineError(ambiguous, containing: ["ambiguous", "packed", "paid"])

        expectStatus(try await cli.run("advance", "A-1", "pac"), 0)
        let badInput = try await cli.run("advance", "A-1", "done", "--input", "count=many")
        expectStatus(badInput, 65)
        expectOneLineError(badInput, containing: ["count", "many"])
        let unknownInput = try await cli.run("advance", "A-1", "done", "--input", "colour=red")
        expectStatus(unknownInput, 65)
        expectOneLineError(unknownInput, containing: ["colour"])

        let done = try await cli.run("advance", "A-1", "done", "--input", "count=3", "--input", "note=by the door", "--json")
        expectStatus(done, 0)
        let result = try #require(try done.json() as? [String: Any])
        let input = try #require((result["transition"] as? [String: Any])?["input"] as? [String: Any])
        #expect(input["count"] as? Int == 3)
        #expect(input["note"] as? String == "by the door")
    }

    @Test("cancel, list and the board")
    func cancelAndList() async throws {
        let cli = try await CLI.withFreshDatabase()
        expectStatus(try await cli.run("workflow", "apply", Fixtures.foodOrder), 0)
        let emptyBoard = try await cli.run("list")
        expectStatus(emptyBoard, 0)
        #expect(emptyBoard.stdout.contains("no orders"))

        for id in ["1", "2", "3"] {
            expectStatus(try await cli.run(["order", "create", id, "--workflow", "food-order"] + foodAttributes), 0)
        }
        expectStatus(try await cli.run("advance", "2", "accept"), 0)
        let cancelled = try await cli.run("cancel", "3", "--reason", "Out of dough")
        expectStatus(cancelled, 0)
        #expect(cancelled.stdout.contains("received → cancelled (cancel)"), "\(cancelled)")
        let cancelledAgain = try await cli.run("cancel", "3")
        expectStatus(cancelledAgain, 68)
        expectOneLineError(cancelledAgain, containing: ["final state"])

        let board = try await cli.run("list")
        expectStatus(board, 0)
        for fragment in ["food-order", "3 orders", "received (1)", "in_progress (1)", "cancelled (1)", "no device", "AGE"] {
            #expect(board.stdout.contains(fragment), "board lacks \(fragment):\n\(board.stdout)")
        }
        let states = board.stdout.components(separatedBy: "\n").compactMap { line -> String? in
            ["received", "in_progress", "cancelled"].first { line.contains($0 + " (") }
        }
        #expect(states == ["received", "in_progress", "cancelled"], "states in the workflow's order")

        let filtered = try await cli.run("list", "--state", "received", "--json")
        expectStatus(filtered, 0)
        let page = try #require(try filtered.json() as? [String: Any])
        let orders = try #require(page["orders"] as? [[String: Any]])
        #expect(orders.compactMap { ($0["order"] as? [String: Any])?["orderID"] as? String } == ["1"])
        // A state no workflow has is a mistake to name, not an empty board.
        let unknown = try await cli.run("list", "--state", "redy")
        expectStatus(unknown, 65)
        expectOneLineError(unknown, containing: ["has no state \"redy\"", "did you mean `ready`?", "out_for_delivery"])
        let unknownWorkflow = try await cli.run("list", "--workflow", "food-ordr")
        expectStatus(unknownWorkflow, 65)
        expectOneLineError(unknownWorkflow, containing: ["did you mean `food-order`?"])

        let firstPage = try await cli.run("list", "--limit", "2", "--json")
        let cursor = try #require((try firstPage.json() as? [String: Any])?["nextCursor"] as? String)
        let nextPage = try await cli.run("list", "--limit", "2", "--after", cursor)
        expectStatus(nextPage, 0)
        #expect(nextPage.stdout.contains("1 order"), "\(nextPage)")

        let badLimit = try await cli.run("list", "--limit", "0")
        expectStatus(badLimit, 64)

        // `#` starts a comment in a shell: the hint quotes it. (An id with a space or a quote,
        // `a b'c` before the id policy, is refused now.)
        let created = try await cli.run("order", "create", "#1042", "--workflow", "food-order",
                                        "--attr", "merchantName=M", "--attr", "orderNumber=9", "--attr", "itemCount=1")
        expectStatus(created, 0)
        #expect(created.stdout.contains("orderflow follow '#1042' DEVICE"), "the hint is quoted for a shell: \(created)")
        let refused = try await cli.run("order", "create", "a b'c", "--workflow", "food-order",
                                        "--attr", "merchantName=M", "--attr", "orderNumber=9", "--attr", "itemCount=1")
        expectStatus(refused, 65)
        #expect(refused.stderr.contains("ASCII letters, digits"), "\(refused)")
    }

    @Test("tokens are masked; follow and unfollow; deliveries are empty without a worker")
    func devicesAndDeliveries() async throws {
        let cli = try await CLI.withFreshDatabase()
        expectStatus(try await cli.run("workflow", "apply", Fixtures.foodOrder), 0)
        expectStatus(try await cli.run(["order", "create", "1042", "--workflow", "food-order"] + foodAttributes), 0)

        let pushToStart = String(repeating: "0123456789abcdef", count: 4) + "deadbeef"
        let registered = try await cli.run("token", "register", "--device", "alice-iphone", "--push-to-start", pushToStart,
                                           "--attributes-type", "FoodOrderAttributes")
        expectStatus(registered, 0)
        #expect(registered.stdout.contains("…deadbeef"), "\(registered)")
        #expect(!registered.stdout.contains(pushToStart))
        #expect(!registered.stdout.contains("0123456789abcdef"))

        let activity = String(repeating: "ab", count: 32) + "cafef00d"
        let activityResult = try await cli.run("token", "register", "--device", "alice-ipad", "--activity", activity, "--order", "1042")
        expectStatus(activityResult, 0)
        #expect(activityResult.stdout.contains("…cafef00d"))
        #expect(!activityResult.stdout.contains(activity))
        // Pasted with spaces around it and in capitals: the confirmation shows what was stored.
        let pasted = try await cli.run("token", "register", "--device", "alice-ipad", "--activity", " \(activity.uppercased())  ", "--order", "1042")
        expectStatus(pasted, 0)
        #expect(pasted.stdout.contains("…cafef00d for order"), "\(pasted)")

        let deviceToken = String(repeating: "12", count: 32)
        let deviceResult = try await cli.run("token", "register", "--device", "bob-phone", "--device-token", deviceToken)
        expectStatus(deviceResult, 0)
        #expect(!deviceResult.stdout.contains(deviceToken))

        let badToken = try await cli.run("token", "register", "--device", "d", "--device-token", "not-a-token")
        expectStatus(badToken, 65)
        expectOneLineError(badToken, containing: ["hexadecimal"])
        #expect(!badToken.stderr.contains("not-a-token"))

        let follow = try await cli.run("follow", "1042", "alice-iphone")
        expectStatus(follow, 0)
        #expect(follow.stdout.contains("alice-iphone follows order 1042"))
        let followMissing = try await cli.run("follow", "9999", "alice-iphone")
        expectStatus(followMissing, 66)

        let show = try await cli.run("show", "1042")
        #expect(show.stdout.contains("alice-iphone"), "\(show)")
        #expect(show.stdout.contains("alice-ipad"))
        #expect(show.stdout.contains("…cafef00d"))
        #expect(!show.stdout.contains(activity))
        #expect(show.stdout.contains("waiting for a worker"))

        let board = try await cli.run("list", "--json")
        let summary = try #require(((try board.json() as? [String: Any])?["orders"] as? [[String: Any]])?.first)
        #expect((summary["activityStatuses"] as? [String])?.sorted() == ["active", "waiting"])

        expectStatus(try await cli.run("unfollow", "1042", "alice-iphone"), 0)
        let unfollowAgain = try await cli.run("unfollow", "1042", "alice-iphone")
        expectStatus(unfollowAgain, 66)
        expectOneLineError(unfollowAgain, containing: ["does not follow order 1042"])

        let deliveries = try await cli.run("deliveries", "list")
        expectStatus(deliveries, 0)
        #expect(deliveries.stdout.contains("no deliveries yet"))
        let failed = try await cli.run("deliveries", "list", "--failed")
        #expect(failed.stdout.contains("no failed deliveries"))
        let json = try await cli.run("deliveries", "list", "--json")
        #expect((try json.json() as? [Any])?.isEmpty == true)
        let retry = try await cli.run("deliveries", "retry", "999")
        expectStatus(retry, 66)
        expectOneLineError(retry, containing: ["delivery 999 does not exist"])
    }

    @Test("recorded pushes show under their transition; a dead letter is listed and retried")
    func recordedDeliveries() async throws {
        let cli = try await CLI.withFreshDatabase()
        expectStatus(try await cli.run("workflow", "apply", Fixtures.foodOrder), 0)
        expectStatus(try await cli.run(["order", "create", "1042", "--workflow", "food-order"] + foodAttributes), 0)
        let token = String(repeating: "ab", count: 32) + "cafef00d"
        expectStatus(try await cli.run("token", "register", "--device", "alice-iphone", "--activity", token, "--order", "1042"), 0)
        expectStatus(try await cli.run("advance", "1042", "accept"), 0)
        expectStatus(try await cli.run("advance", "1042", "ready"), 0)
        // What a worker records (the worker itself is tested in OrderFlowTests).
        let configuration = try PostgresConfiguration(try #require(cli.databaseURL))
        try await PostgresConnection.withConnection(configuration) { connection in
            try await connection.query(PostgresQuery("""
                INSERT INTO deliveries (merchant_id, order_id, device_id, seq, merged, event, token_kind, token_suffix,
                                        priority, alert_title, status, reason, outcome)
                VALUES ('default', '1042', 'alice-iphone', 3, 2, 'update', 'activity', 'cafef00d', 10, 'Order 1042 is ready',
                        200, NULL, 'sent'),
                       ('default', '1042', 'alice-iphone', 3, 1, 'update', 'activity', 'cafef00d', 10, 'Order 1042 is ready',
                        500, 'InternalServerError', 'dead')
                """))
            // An Android phone's FCM data message for the same transition.
            try await connection.query(PostgresQuery("""
                INSERT INTO deliveries (merchant_id, order_id, device_id, seq, merged, event, token_kind, token_suffix,
                                        priority, alert_title, status, reason, outcome, platform)
                VALUES ('default', '1042', 'anna-pixel', 3, 2, 'update', 'fcm', '9-qZXk3_', 10, 'Order 1042 is ready',
                        200, NULL, 'sent', 'android')
                """))
        }
        let show = try await cli.run("show", "1042")
        expectStatus(show, 0)
        let lines = show.stdout.components(separatedBy: "\n")
        let ready = try #require(lines.firstIndex { $0.contains("in_progress → ready") }, "\(show)")
        let pushes = lines[(ready + 1)...].prefix { $0.hasPrefix("    ↳ ") }
        #expect(pushes.contains { $0.contains("alice-iphone  ios  update  p10  activity …cafef00d  sent 200  \"Order 1042 is ready\"") },
                "\(show)")
        #expect(pushes.contains { $0.contains("dead 500 InternalServerError") }, "\(show)")
        #expect(pushes.contains { $0.contains("anna-pixel  android  update  p10  fcm …9-qZXk3_  sent 200") }, "\(show)")
        #expect(pushes.contains { $0.contains("2 transitions merged") })
        #expect(!show.stdout.contains(token))

        let all = try await cli.run("deliveries", "list")
        expectStatus(all, 0)
        #expect(all.stdout.contains("OUTCOME"))
        #expect(all.stdout.split(separator: "\n").filter { $0.contains("alice-iphone") }.count == 2, "\(all)")
        let failed = try await cli.run("deliveries", "list", "--failed", "--json")
        let dead = try #require(try failed.json() as? [[String: Any]])
        #expect(dead.count == 1)
        #expect(dead.first?["outcome"] as? String == "dead")
        #expect((dead.first?["attemptedAt"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) } != nil)
        let id = try #require(dead.first?["id"] as? Int)

        let retried = try await cli.run("deliveries", "retry", String(id))
        expectStatus(retried, 0)
        #expect(retried.stdout.contains("delivery \(id) re-queued"))
        let again = try await cli.run("deliveries", "retry", String(id))
        expectStatus(again, 66)
        let none = try await cli.run("deliveries", "list", "--failed")
        #expect(none.stdout.contains("no failed deliveries"), "\(none)")
    }

    @Test("watch draws the board until SIGINT and exits 0")
    func watch() async throws {
        let cli = try await CLI.withFreshDatabase()
        expectStatus(try await cli.run("workflow", "apply", Fixtures.foodOrder), 0)
        expectStatus(try await cli.run(["order", "create", "1042", "--workflow", "food-order"] + foodAttributes), 0)
        // A couple of redraws, then Ctrl-C.
        let result = try await cli.watchBriefly(["--interval", "200ms"])
        expectStatus(result, 0)
        #expect(result.stdout.contains("1042"), "\(result)")
        #expect(result.stdout.contains("received (1)"))
        #expect(result.stderr.isEmpty, "\(result)")
    }
}
