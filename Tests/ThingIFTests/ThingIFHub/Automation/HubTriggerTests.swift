// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
@testable import ThingIFRules
import ThingIFHubServer

/// A framework side that is never started (publishes fail, commands stay
/// SENDING): the trigger engine and the app API on a store (a MemoryStore
/// unless given). `sharing` another: a second hub on the same database,
/// with that one's user, thing and clock.
final class Offline {
    let hub: FrameworkSide
    let user: UserRecord
    let thingID: String
    let clock: Locked<Int64>

    init(store: HubStore = MemoryStore(), sharing other: Offline) throws {
        hub = try #require(FrameworkSide(.init(appID: "a", appKey: "k", brokerPort: 1), store: store))
        user = other.user
        thingID = other.thingID
        clock = other.clock
        let clock = self.clock
        hub.triggerEngine.now = { clock.withLock { $0 } }
    }

    init(store: HubStore = MemoryStore()) throws {
        clock = Locked<Int64>(1_700_000_000_000)
        hub = try #require(FrameworkSide(.init(appID: "a", appKey: "k", brokerPort: 1), store: store))
        user = try #require(hub.store.createUser(loginName: nil, passwordHash: nil))
        guard
            case .success(let t) = hub.store.registerThing(
                vendorThingID: "V-\(Platform.randomHex(bytes: 4))",
                password: "pw", thingType: nil, firmwareVersion: nil,
                dataGroupingInterval: nil, layoutPosition: nil)
        else {
            throw HarnessError("register")
        }
        thingID = t.thingID
        #expect(hub.store.addOwner(thingID: thingID, owner: "user:\(user.userID)"))
        let clock = self.clock
        hub.triggerEngine.now = { clock.withLock { $0 } }
    }

    func advance(to ms: Int64) { clock.withLock { $0 = ms } }

    func body(_ text: String) throws -> JSON { try JSON.parse(text).get() }

    func command(_ extra: String = "") -> String {
        "{\"schema\":\"AC\",\"schemaVersion\":1,\"issuer\":\"user:\(user.userID)\",\"actions\":[{\"turnPower\":{\"power\":true}}]\(extra)}"
    }

    func create(_ predicate: String) throws -> String {
        let r = hub.app.createTrigger(
            user: user, thingID: thingID,
            body: try body("{\"predicate\":\(predicate),\"command\":\(command())}"))
        return try r.get().triggerID
    }

    /// Uploads a state (PATCH) as the MQTT handler does: the thing's record
    /// as authorisation reads it, then the hub's state handler, which
    /// stores it and evaluates the triggers.
    func upload(_ state: String) {
        guard let thing = hub.store.thing(id: thingID) else {
            Issue.record("the thing is gone")
            return
        }
        let r = hub.thingRequests.handlers.states.state(method: "PATCH", upload: state, thing: thing)
        // Kii's 201 for the thing's first upload, 204 after.
        #expect(r.status == (thing.state == nil ? 201 : 204), "the upload \(state) got \(r.status)")
    }

    var commands: [CommandRecord] { hub.store.commands(thingID: thingID, afterSeq: 0, limit: 1000) }

    func fired(by id: String) -> Int {
        commands.filter { (try? JSON.parse($0.payload).get())?["firedByTriggerID"]?.stringValue == id }.count
    }
}

@Suite("Hub server triggers", .offPool)
struct HubTriggerTests {
    /// Sequences of uploads and, after each, whether the condition matches.
    static let conditions: [(String, [(String, Bool)])] = [
        (
            "{\"type\":\"eq\",\"field\":\"power\",\"value\":true}",
            [
                ("{\"power\":false}", false), ("{\"power\":true}", true), ("{\"fan\":1}", true),
                ("{\"power\":\"true\"}", false)
            ]
        ),
        ("{\"type\":\"eq\",\"field\":\"t\",\"value\":25}", [("{\"t\":25.0}", true), ("{\"t\":26}", false)]),
        (
            "{\"type\":\"not\",\"clause\":{\"type\":\"eq\",\"field\":\"power\",\"value\":true}}",
            [("{\"power\":true}", false), ("{\"power\":false}", true)]
        ),
        (
            "{\"type\":\"range\",\"field\":\"t\",\"upperLimit\":30,\"lowerLimit\":20}",
            [
                ("{\"t\":19}", false), ("{\"t\":20}", true), ("{\"t\":30}", true), ("{\"t\":30.5}", false),
                ("{\"t\":\"25\"}", false)
            ]
        ),
        (
            "{\"type\":\"range\",\"field\":\"t\",\"upperLimit\":30,\"upperIncluded\":false,\"lowerLimit\":20,\"lowerIncluded\":false}",
            [("{\"t\":20}", false), ("{\"t\":20.5}", true), ("{\"t\":29}", true), ("{\"t\":30}", false)]
        ),
        ("{\"type\":\"range\",\"field\":\"t\",\"lowerLimit\":20}", [("{\"t\":1000}", true), ("{\"t\":-1}", false)]),
        (
            "{\"type\":\"range\",\"field\":\"t\",\"upperLimit\":20,\"lowerLimit\":20}",
            [("{\"t\":20}", true), ("{\"t\":20.5}", false), ("{\"t\":20.0}", true)]
        ),
        (
            "{\"type\":\"and\",\"clauses\":[{\"type\":\"eq\",\"field\":\"power\",\"value\":true},{\"type\":\"range\",\"field\":\"t\",\"upperLimit\":25}]}",
            [("{\"power\":true,\"t\":30}", false), ("{\"t\":20}", true), ("{\"power\":false}", false)]
        ),
        (
            "{\"type\":\"or\",\"clauses\":[{\"type\":\"eq\",\"field\":\"power\",\"value\":true},{\"type\":\"range\",\"field\":\"t\",\"upperLimit\":25}]}",
            [("{\"power\":false,\"t\":30}", false), ("{\"t\":20}", true), ("{\"power\":true,\"t\":30}", true)]
        )
    ]

    @Test("Each state predicate (eq, not, range with included/excluded bounds, and, or) under CONDITION_TRUE")
    func predicates() throws {
        for (condition, steps) in Self.conditions {
            let o = try Offline()
            let id = try o.create(
                "{\"eventSource\":\"STATES\",\"condition\":\(condition),\"triggersWhen\":\"CONDITION_TRUE\"}")
            var expected = 0
            for (state, matches) in steps {
                o.upload(state)
                if matches { expected += 1 }
                #expect(o.fired(by: id) == expected, "\(condition) after \(state)")
                #expect(o.hub.store.trigger(id: id)?.lastMatch == matches)
            }
        }
    }

    /// The stores the state-upload tests run on: the hub's state handler
    /// with MemoryStore, with SQLite's statements, and with PostgreSQL's
    /// one-statement upload (which also says whether the thing has an
    /// enabled trigger, so the engine skips its read when it has none).
    static let stores: [StoreFactory] =
        [.memory, .sqliteInMemory] + (PostgresServer.enabled ? [.postgres] : [])

    @Test(
        "triggersWhen: CONDITION_TRUE, CONDITION_FALSE_TO_TRUE, CONDITION_CHANGED on one sequence",
        arguments: stores)
    func triggersWhen(store: StoreFactory) throws {
        let (made, cleanup) = try store.make(.fastForTests, StateRetention())
        defer { cleanup() }
        let o = try Offline(store: made)
        let cond = "{\"type\":\"eq\",\"field\":\"power\",\"value\":true}"
        let ids = try ["CONDITION_TRUE", "CONDITION_FALSE_TO_TRUE", "CONDITION_CHANGED"].map {
            try o.create("{\"eventSource\":\"STATES\",\"condition\":\(cond),\"triggersWhen\":\"\($0)\"}")
        }
        // match:          T      T      F      F      T
        let states = ["{\"power\":true}", "{\"power\":true}", "{\"power\":false}", "{\"fan\":2}", "{\"power\":true}"]
        let want: [[Int]] = [[1, 1, 1], [2, 1, 1], [2, 1, 2], [2, 1, 2], [3, 2, 3]]
        for (s, w) in zip(states, want) {
            o.upload(s)
            #expect(ids.map { o.fired(by: $0) } == w, "after \(s)")
        }
        // The fired command: firedByTriggerID, the trigger's issuer, listed.
        let c = try #require(o.commands.last)
        let p = try JSON.parse(c.payload).get()
        #expect(p["firedByTriggerID"]?.stringValue != nil)
        #expect(c.issuer == "user:\(o.user.userID)")
        let listed = try o.hub.app.listCommands(
            user: o.user, thingID: o.thingID, paginationKey: nil, bestEffortLimit: 100
        )
        .get()
        #expect(listed.commands.count == 8)
        #expect(o.hub.app.commandJSON(c)["firedByTriggerID"]?.stringValue == p["firedByTriggerID"]?.stringValue)
    }

    @Test("Disabled triggers do not fire; enable, disable and delete", arguments: stores)
    func enableDisableDelete(store: StoreFactory) throws {
        let (made, cleanup) = try store.make(.fastForTests, StateRetention())
        defer { cleanup() }
        let o = try Offline(store: made)
        let id = try o.create(
            "{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"eq\",\"field\":\"p\",\"value\":1},\"triggersWhen\":\"CONDITION_TRUE\"}"
        )
        #expect(throws: Never.self) {
            try o.hub.app.setTriggerEnabled(user: o.user, thingID: o.thingID, triggerID: id, enabled: false).get()
        }
        o.upload("{\"p\":1}")
        #expect(o.fired(by: id) == 0)
        #expect(o.hub.app.triggerJSON(o.hub.store.trigger(id: id)!)["disabled"]?.boolValue == true)
        #expect(throws: Never.self) {
            try o.hub.app.setTriggerEnabled(user: o.user, thingID: o.thingID, triggerID: id, enabled: true).get()
        }
        o.upload("{\"p\":1}")
        #expect(o.fired(by: id) == 1)
        #expect(throws: Never.self) {
            try o.hub.app.deleteTrigger(user: o.user, thingID: o.thingID, triggerID: id).get()
        }
        o.upload("{\"p\":1}")
        #expect(o.fired(by: id) == 1)
        guard case .failure(let e) = o.hub.app.getTrigger(user: o.user, thingID: o.thingID, triggerID: id) else {
            Issue.record("deleted trigger found"); return
        }
        #expect(e.status == 404 && e.code == "TRIGGER_NOT_FOUND")
        // Another user's thing looks unknown.
        let other = try #require(o.hub.store.createUser(loginName: nil, passwordHash: nil))
        guard case .failure(let e2) = o.hub.app.listTriggers(user: other, thingID: o.thingID) else {
            Issue.record("listed"); return
        }
        #expect(e2.status == 404)
    }

    @Test("Cron parsing: fields, lists, ranges, steps; bad expressions are refused")
    func cronParsing() throws {
        let c = try #require(CronSchedule("*/15 8-10,22 * * 1-5"))
        #expect(c.minutes == [0, 15, 30, 45])
        #expect(c.hours == [8, 9, 10, 22])
        #expect(c.daysOfWeek == [1, 2, 3, 4, 5])
        #expect(CronSchedule("0 0 * * 7")?.daysOfWeek == [0])
        #expect(CronSchedule("5 4 1,15 2-3/1 *")?.daysOfMonth == [1, 15])
        for bad in [
            "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *",
            "* * * * 8", "*/0 * * * *", "a * * * *", "5-1 * * * *", "1,,2 * * * *", "*/x * * * *"
        ] {
            #expect(CronSchedule(bad) == nil, "\(bad)")
        }
    }

    @Test("Cron next-fire computation (UTC)")
    func cronNext() throws {
        // 2023-11-14 22:13:20 UTC is a Tuesday.
        let t: Int64 = 1_700_000_000_000
        let day: Int64 = 86_400_000
        let midnight = t - t % day
        #expect(CronSchedule("* * * * *")!.next(after: t) == t - t % 60_000 + 60_000)
        #expect(CronSchedule("30 8 * * *")!.next(after: t) == midnight + day + 8 * 3_600_000 + 30 * 60_000)
        // Next Saturday (4 days later) at 00:00.
        #expect(CronSchedule("0 0 * * 6")!.next(after: t) == midnight + 4 * day)
        // 1 December 00:00 UTC.
        #expect(CronSchedule("0 0 1 12 *")!.next(after: t) == 1_701_388_800_000)
        // 29 February: 2024.
        #expect(CronSchedule("0 12 29 2 *")!.next(after: t) == 1_709_208_000_000)
        // Both day fields restricted: either matches (the 20th or a Saturday).
        #expect(CronSchedule("0 0 20 * 6")!.next(after: t) == midnight + 4 * day)
        #expect(CronSchedule("0 0 31 2 *")!.next(after: t) == nil)
    }

    @Test("SCHEDULE fires on each matching minute while the clock ticks through a simulated day")
    func scheduleThroughADay() throws {
        let o = try Offline()
        let start: Int64 = 1_700_006_400_000  // 2023-11-15 00:00 UTC
        o.advance(to: start + 1)
        let every = try o.create("{\"eventSource\":\"SCHEDULE\",\"schedule\":\"0 */6 * * *\"}")
        let once = try o.create("{\"eventSource\":\"SCHEDULE\",\"schedule\":\"30 9 * * 3\"}")  // Wednesday
        #expect(o.hub.triggerEngine.nextFireTime(of: every) == start + 6 * 3_600_000)
        var t = start + 1
        while t <= start + 86_400_000 + 1 {
            o.advance(to: t)
            o.hub.triggerEngine.tick()
            t += 20_000
        }
        #expect(o.fired(by: every) == 4)  // 06:00, 12:00, 18:00, 00:00 next day
        #expect(o.fired(by: once) == 1)
        // Disabled: no firing; enabled again: counts from now.
        #expect(throws: Never.self) {
            try o.hub.app.setTriggerEnabled(user: o.user, thingID: o.thingID, triggerID: every, enabled: false).get()
        }
        o.advance(to: start + 86_400_000 + 6 * 3_600_000)
        o.hub.triggerEngine.tick()
        #expect(o.fired(by: every) == 4)
        #expect(throws: Never.self) {
            try o.hub.app.setTriggerEnabled(user: o.user, thingID: o.thingID, triggerID: every, enabled: true).get()
        }
        o.hub.triggerEngine.tick()
        #expect(o.fired(by: every) == 4)
        o.advance(to: start + 86_400_000 + 12 * 3_600_000)
        o.hub.triggerEngine.tick()
        #expect(o.fired(by: every) == 5)
    }

    @Test("SCHEDULE_ONCE fires once, then is disabled")
    func scheduleOnce() throws {
        let o = try Offline()
        let base = o.clock.withLock { $0 }
        let id = try o.create("{\"eventSource\":\"SCHEDULE_ONCE\",\"scheduleAt\":\(base + 60_000)}")
        o.advance(to: base + 59_999)
        #expect(o.hub.triggerEngine.tick().isEmpty)
        o.advance(to: base + 60_000)
        #expect(o.hub.triggerEngine.tick().count == 1)
        o.advance(to: base + 120_000)
        #expect(o.hub.triggerEngine.tick().isEmpty)
        #expect(o.fired(by: id) == 1)
        #expect(o.hub.store.trigger(id: id)?.enabled == false)
    }

    @Test("Bad trigger JSON gets a 4xx and stores nothing")
    func badTriggers() throws {
        let o = try Offline()
        let now = o.clock.withLock { $0 }
        let cmd = o.command()
        let cases: [(String, Int)] = [
            ("{\"command\":\(cmd)}", 400),
            ("{\"predicate\":null,\"command\":\(cmd)}", 400),
            ("{\"predicate\":\"STATES\",\"command\":\(cmd)}", 400),
            ("{\"predicate\":{\"eventSource\":\"WEATHER\"},\"command\":\(cmd)}", 400),
            ("{\"predicate\":{\"eventSource\":42},\"command\":\(cmd)}", 400),
            ("{\"predicate\":{\"eventSource\":\"SCHEDULE\",\"schedule\":\"61 * * * *\"},\"command\":\(cmd)}", 400),
            ("{\"predicate\":{\"eventSource\":\"SCHEDULE\",\"schedule\":5},\"command\":\(cmd)}", 400),
            ("{\"predicate\":{\"eventSource\":\"SCHEDULE_ONCE\",\"scheduleAt\":\(now - 1)},\"command\":\(cmd)}", 400),
            ("{\"predicate\":{\"eventSource\":\"SCHEDULE_ONCE\",\"scheduleAt\":\"soon\"},\"command\":\(cmd)}", 400),
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"triggersWhen\":\"CONDITION_TRUE\"},\"command\":\(cmd)}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"eq\",\"field\":\"a\",\"value\":1}},\"command\":\(cmd)}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"like\",\"field\":\"a\"},\"triggersWhen\":\"CONDITION_TRUE\"},\"command\":\(cmd)}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"range\",\"field\":\"a\",\"upperLimit\":\"9\"},\"triggersWhen\":\"CONDITION_TRUE\"},\"command\":\(cmd)}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"range\",\"field\":\"a\"},\"triggersWhen\":\"CONDITION_TRUE\"},\"command\":\(cmd)}",
                400
            ),
            // Ranges no number can pass.
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"range\",\"field\":\"a\",\"lowerLimit\":30,\"upperLimit\":20},\"triggersWhen\":\"CONDITION_TRUE\"},\"command\":\(cmd)}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"range\",\"field\":\"a\",\"lowerLimit\":20,\"upperLimit\":20,\"upperIncluded\":false},\"triggersWhen\":\"CONDITION_TRUE\"},\"command\":\(cmd)}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"STATES\",\"condition\":{\"type\":\"and\",\"clauses\":[]},\"triggersWhen\":\"CONDITION_TRUE\"},\"command\":\(cmd)}",
                400
            ),
            ("{\"predicate\":{\"eventSource\":\"SCHEDULE\",\"schedule\":\"* * * * *\"}}", 400),
            (
                "{\"predicate\":{\"eventSource\":\"SCHEDULE\",\"schedule\":\"* * * * *\"},\"command\":{\"schema\":\"AC\"}}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"SCHEDULE\",\"schedule\":\"* * * * *\"},\"command\":\(cmd),\"title\":7}",
                400
            ),
            (
                "{\"predicate\":{\"eventSource\":\"SCHEDULE\",\"schedule\":\"* * * * *\"},\"command\":{\"schema\":\"AC\",\"schemaVersion\":1,\"issuer\":\"user:someoneelse\",\"actions\":[{\"a\":1}]}}",
                403
            )
        ]
        for (text, status) in cases {
            let r = o.hub.app.createTrigger(user: o.user, thingID: o.thingID, body: try o.body(text))
            guard case .failure(let e) = r else { Issue.record("accepted: \(text)"); continue }
            #expect(e.status == status, "\(text): \(e.message)")
        }
        #expect(o.hub.store.triggers(thingID: o.thingID).isEmpty)
        #expect(o.hub.store.allTriggers().isEmpty)
    }
}

/// The REST API of triggers and of the thing's automation, end to end.
@Suite("Hub triggers and automation over REST and MQTT", .serialized, .offPool)
struct HubTriggerAPITests {
    @Test(
        "Triggers over REST: create, list, get, disable, enable, delete; bad JSON is a 400 with nothing stored; a firing is listed"
    )
    func triggersREST() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-TRG-1", owner: "user:\(uid)", token: token)
            let base = "\(e.target(tid))/triggers"
            let command: [String: Any] = [
                "schema": "AC", "schemaVersion": 1, "issuer": "user:\(uid)",
                "actions": [["turnPower": ["power": true]]]
            ]
            let bad = try await e.call(
                "POST", base, token: token,
                json: ["predicate": ["eventSource": "NOPE"], "command": command])
            #expect(bad.status == 400 && bad.isErrorBody)
            var badTTL = command
            badTTL["timeToLive"] = 0
            let refusedTTL = try await e.call(
                "POST", base, token: token,
                json: [
                    "predicate": ["eventSource": "SCHEDULE_ONCE", "scheduleAt": Platform.epochMs() + 60_000],
                    "command": badTTL
                ])
            #expect(refusedTTL.status == 400 && refusedTTL.text.contains("timeToLive"), "\(refusedTTL.text)")
            let empty = try await e.get(base, token: token)
            #expect((empty.json["triggers"] as? [Any])?.isEmpty == true)

            let at = Platform.epochMs() + 3_600_000
            let r = try await e.call(
                "POST", base, token: token,
                json: [
                    "predicate": ["eventSource": "SCHEDULE_ONCE", "scheduleAt": at],
                    "command": command.merging(["timeToLive": 120]) { $1 }, "title": "wake"
                ])
            #expect(r.status == 201)
            let id = try #require(r.string("triggerID"))
            let got = try await e.get("\(base)/\(id)", token: token)
            #expect(got.status == 200 && got.json["enabled"] as? Bool == true && got.json["title"] as? String == "wake")
            #expect(((got.json["predicate"] as? [String: Any])?["scheduleAt"] as? Int) == Int(at))
            #expect(try await e.call("PUT", "\(base)/\(id)/disable", token: token).status == 204)
            #expect(try await e.get("\(base)/\(id)", token: token).json["enabled"] as? Bool == false)
            #expect(try await e.call("PUT", "\(base)/\(id)/enable", token: token).status == 204)

            // Time passes (the injected clock): it fires once; the command is listed.
            e.hub.triggerEngine.now = { at + 1 }
            #expect(e.hub.triggerEngine.tick().count == 1)
            let list = try await e.get("\(e.target(tid))/commands", token: token)
            let commands = try #require(list.json["commands"] as? [[String: Any]])
            #expect(commands.count == 1 && commands.first?["firedByTriggerID"] as? String == id)
            #expect(commands.first?["issuer"] as? String == "user:\(uid)")
            // Its timeToLive counts from the firing, by the hub's clock.
            let fired = Platform.epochMs()
            let expiresAt = (commands.first?["expiresAt"] as? NSNumber)?.int64Value ?? 0
            #expect(expiresAt > fired + 60_000 && expiresAt <= fired + 120_000, "\(commands)")

            #expect(try await e.call("DELETE", "\(base)/\(id)", token: token).status == 204)
            let gone = try await e.get("\(base)/\(id)", token: token)
            #expect(gone.status == 404 && gone.errorCode == "TRIGGER_NOT_FOUND")
            // Another user sees no thing.
            let (_, other) = try await e.user()
            #expect(try await e.get(base, token: other).status == 404)
        }
    }

    @Test(
        "The thing reports what became of its configuration: applied, or refused with the reason, in GET …/automation")
    func automationReport() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-AUTO-REPORT", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            let status = "\(e.target(tid))/automation"
            let first = try await e.get(status, token: token)
            #expect(first.status == 200 && first.json["version"] as? Int == 0 && first.json["thingReport"] is NSNull)
            func report(until done: ([String: Any]) -> Bool) async throws -> [String: Any] {
                var last: [String: Any] = [:]
                for _ in 0..<200 {
                    last = try await e.get(status, token: token).json
                    if let r = last["thingReport"] as? [String: Any], done(r) { return last }
                    try await Task.sleep(nanoseconds: 50_000_000)
                }
                throw HarnessError("no such report: \(last)")
            }
            let action: [String: Any] = [
                "schema": Aircon.schema, "schemaVersion": 1, "action": "turnPower", "params": ["power": true]
            ]
            #expect(
                try await e.call(
                    "PUT", "\(e.target(tid))/action-sets/morning", token: token,
                    json: ["actions": [action]]
                ).status == 204)
            let applied = try await report { $0["applied"] as? Bool == true }
            #expect(applied["version"] as? Int == 1)
            #expect((applied["thingReport"] as? [String: Any])?["version"] as? Int == 1)

            // A configuration the thing refuses (published as a hub of another
            // version might): the refusal and its reason reach the owner.
            let topic = try #require(e.hub.delivery.commandTopic(of: tid))
            let bad = #"{"version":99,"actionSets":[{"name":"x","actions":"no"}]}"#
            #expect(e.hub.publishRetained(topic: Topics.config(clientID: topic), payload: Array(bad.utf8)))
            let refused = try await report { $0["applied"] as? Bool == false }
            let r = try #require(refused["thingReport"] as? [String: Any])
            #expect(r["version"] as? Int == 99)
            #expect((r["message"] as? String)?.contains("\"actions\" must be an array") == true, "\(r)")
            #expect(refused["version"] as? Int == 1, "the hub's own version is unchanged")
            // Another user cannot read it.
            let (_, other) = try await e.user()
            let foreign = try await e.get(status, token: other).status
            #expect(foreign == 403 || foreign == 404)
        }
    }

    @Test(
        "Thing automation over REST: CRUD, validation, 409 for a used action set, the retained config with increasing versions"
    )
    func automationREST() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-AUTO-1", owner: "user:\(uid)", token: token)
            let topic = "t" + Platform.randomHex(bytes: 11)
            #expect(
                e.hub.store.addInstallation(
                    thingID: tid, installationID: Platform.randomHex(bytes: 10), mqttTopic: topic))
            let sets = "\(e.target(tid))/action-sets"
            let timers = "\(e.target(tid))/timer-triggers"
            let action: [String: Any] = [
                "schema": "AC", "schemaVersion": 1, "action": "turnPower", "params": ["power": true]
            ]

            #expect(
                try await e.call("PUT", "\(sets)/morning", token: token, json: ["actions": [action, action]]).status
                    == 204)
            #expect(try await e.call("PUT", "\(sets)/night", token: token, json: ["actions": [action]]).status == 204)
            let listed = try await e.get(sets, token: token)
            let names = (listed.json["actionSets"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
            #expect(names == ["morning", "night"])
            #expect(try await e.call("PUT", "\(sets)/bad", token: token, json: ["actions": []]).status == 400)
            #expect(
                try await e.call("PUT", "\(sets)/bad", token: token, json: ["actions": [["schema": "AC"]]]).status
                    == 400)
            #expect(
                try await e.call(
                    "PUT", "\(sets)/\(String(repeating: "n", count: 65))", token: token,
                    json: ["actions": [action]]
                ).status == 400)

            let future = Platform.epochMs() + 86_400_000
            func timer(_ extra: [String: Any]) -> [String: Any] {
                var b: [String: Any] = ["fireDate": future, "timeZone": "Europe/Paris", "actionSets": ["morning"]]
                for (k, v) in extra { b[k] = v }
                return b
            }
            let refused: [[String: Any]] = [
                timer(["recurrence": ["unit": "minute", "count": 4]]),
                timer(["recurrence": ["unit": "week", "count": 6]]),
                timer(["recurrence": ["unit": "fortnight", "count": 1]]),
                timer(["fireDate": Platform.epochMs() - 1000]),
                timer(["timeZone": "Mars/Olympus_Mons"]),
                timer(["timeZone": "../../etc/passwd"]),
                timer(["timeZone": "/etc/passwd"]),
                // A regular file under zoneinfo that is not a zone: the thing
                // cannot parse it, so the hub refuses it too.
                timer(["timeZone": "zone.tab"]),
                timer(["recurrence": ["unit": "week", "count": 9_000_000_000_000_000]]),
                timer(["actionSets": ["nope"]]),
                timer(["actionSets": []]),
                timer(["actionSets": Array(repeating: "morning", count: 17)])
            ]
            for b in refused {
                let r = try await e.call("PUT", "\(timers)/wake", token: token, json: b)
                #expect(r.status == 400 && r.isErrorBody, "\(b): \(r.text)")
            }
            #expect((try await e.get(timers, token: token).json["timerTriggers"] as? [Any])?.isEmpty == true)
            #expect(
                try await e.call(
                    "PUT", "\(timers)/five", token: token,
                    json: timer(["recurrence": ["unit": "minute", "count": 5]])
                ).status == 204)
            #expect(
                try await e.call(
                    "PUT", "\(timers)/wake", token: token,
                    json: timer(["recurrence": ["unit": "week", "count": 5]])
                ).status == 204)
            var list = try #require(try await e.get(timers, token: token).json["timerTriggers"] as? [[String: Any]])
            #expect(list.map { $0["name"] as? String } == ["five", "wake"])
            #expect(list.allSatisfy { $0["enabled"] as? Bool == false })
            #expect(try await e.call("PUT", "\(timers)/wake/enable", token: token).status == 204)
            list = try #require(try await e.get(timers, token: token).json["timerTriggers"] as? [[String: Any]])
            #expect(list.last?["enabled"] as? Bool == true)
            #expect(try await e.call("PUT", "\(timers)/nope/enable", token: token).status == 404)

            let used = try await e.call("DELETE", "\(sets)/morning", token: token)
            #expect(used.status == 409 && used.errorCode == "ACTION_SET_IN_USE")
            #expect(try await e.call("DELETE", "\(timers)/five", token: token).status == 204)
            #expect(try await e.call("PUT", "\(timers)/wake/disable", token: token).status == 204)
            #expect(try await e.call("DELETE", "\(timers)/wake", token: token).status == 204)
            #expect(try await e.call("DELETE", "\(sets)/morning", token: token).status == 204)
            #expect(try await e.call("DELETE", "\(sets)/morning", token: token).status == 404)

            // 2 sets + 2 timers + enable + delete + disable + delete + delete = 9 changes.
            #expect(e.hub.store.automation(thingID: tid)?.version == 9)
            // A subscriber that comes later gets the retained config, the last version.
            let listener = try TopicListener(port: e.env.broker.port, topics: ["p/\(topic)/config"])
            defer { listener.stop() }
            #expect(poll(timeoutMs: 30_000) { !listener.payloads(on: "p/\(topic)/config").isEmpty })
            let msg = try JSON.parse(try #require(listener.payloads(on: "p/\(topic)/config").last)).get()
            #expect(msg["version"]?.intValue == 9)
            #expect(msg["actionSets"]?.elements.compactMap { $0["name"]?.stringValue } == ["night"])
            #expect(msg["timerTriggers"]?.count == 0)
            // One more change: version 10, live.
            #expect(try await e.call("PUT", "\(sets)/late", token: token, json: ["actions": [action]]).status == 204)
            #expect(
                poll(timeoutMs: 30_000) {
                    listener.payloads(on: "p/\(topic)/config").contains {
                        (try? JSON.parse($0).get())?["version"]?.intValue == 10
                    }
                })
            let versions = listener.payloads(on: "p/\(topic)/config").compactMap {
                try? JSON.parse($0).get()["version"]?.intValue
            }
            #expect(versions == versions.sorted())
        }
    }

    @Test(
        "Thing automation caps: beyond AutomationLimits' action sets and timer triggers a new name is refused 400, naming the cap; one at the cap is still replaced"
    )
    func automationCaps() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-AUTO-CAP", owner: "user:\(uid)", token: token)
            let action: [String: Any] = ["schema": "AC", "schemaVersion": 1, "action": "turnPower"]
            let sets = "\(e.target(tid))/action-sets"
            let timers = "\(e.target(tid))/timer-triggers"
            let timer: [String: Any] = [
                "fireDate": Platform.epochMs() + 86_400_000, "timeZone": "UTC", "actionSets": ["s0"]
            ]
            for i in 0..<AutomationLimits.maxActionSets {
                let r = try await e.call("PUT", "\(sets)/s\(i)", token: token, json: ["actions": [action]])
                try #require(r.status == 204, "set \(i): \(r.status) \(r.text)")
            }
            for i in 0..<AutomationLimits.maxTimerTriggers {
                let r = try await e.call("PUT", "\(timers)/t\(i)", token: token, json: timer)
                try #require(r.status == 204, "timer \(i): \(r.status) \(r.text)")
            }
            let set = try await e.call("PUT", "\(sets)/one-more", token: token, json: ["actions": [action]])
            #expect(set.status == 400 && set.isErrorBody, "\(set.text)")
            #expect(set.text.contains("at most \(AutomationLimits.maxActionSets) action sets"), "\(set.text)")
            let more = try await e.call("PUT", "\(timers)/one-more", token: token, json: timer)
            #expect(more.status == 400 && more.isErrorBody, "\(more.text)")
            #expect(more.text.contains("at most \(AutomationLimits.maxTimerTriggers) timer triggers"), "\(more.text)")
            // Replacing one at the cap is not adding one.
            #expect(
                try await e.call("PUT", "\(sets)/s7", token: token, json: ["actions": [action, action]]).status == 204)
            #expect(try await e.call("PUT", "\(timers)/t7", token: token, json: timer).status == 204)
            let listed = try await e.get(sets, token: token).json["actionSets"] as? [[String: Any]]
            #expect(listed?.count == AutomationLimits.maxActionSets)
            #expect(listed?.first { $0["name"] as? String == "s7" }.flatMap { ($0["actions"] as? [Any])?.count } == 2)
            let timersListed = try await e.get(timers, token: token).json["timerTriggers"] as? [Any]
            #expect(timersListed?.count == AutomationLimits.maxTimerTriggers)
        }
    }

    @Test("A command the thing ran by itself, reported over MQTT, is stored once and listed")
    func commandReport() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-REP-1", owner: "user:\(uid)", token: token)
            let topic = "t" + Platform.randomHex(bytes: 11)
            #expect(
                e.hub.store.addInstallation(
                    thingID: tid, installationID: Platform.randomHex(bytes: 10), mqttTopic: topic))
            let listener = try TopicListener(port: e.env.broker.port, topics: ["p/\(topic)/resp"])
            defer { listener.stop() }
            let cid = "cmd-local-1"
            let body =
                "{\"commandID\":\"\(cid)\",\"schema\":\"AC\",\"schemaVersion\":1,\"issuer\":\"thing:\(tid)\",\"actions\":[{\"turnPower\":{\"power\":true}}],\"firedByTriggerID\":\"wake\",\"title\":\"wake\"}"
            func report(_ b: String, as t: String = thingToken) {
                let req = KiiRequest(
                    method: "PUT", headers: [("Authorization", "Bearer \(t)"), ("Content-Type", "application/json")],
                    body: Array(b.utf8))
                _ = listener.client.publish(
                    topic: Topics.request(
                        clientID: topic, appID: e.appID,
                        path: "targets/thing:\(tid)/commands/\(cid)"),
                    payload: req.encode(), qos: 1)
            }
            report(body, as: "wrong-token")
            report(body)
            report(body)
            #expect(
                poll(timeoutMs: 30_000) { e.hub.requests.filter { $0.path.hasSuffix("/commands/\(cid)") }.count == 3 })
            #expect(e.hub.requests.filter { $0.path.hasSuffix("/commands/\(cid)") }.map(\.status) == [401, 204, 204])
            let c = try await e.get("\(e.target(tid))/commands/\(cid)", token: token)
            #expect(c.status == 200)
            #expect(c.json["firedByTriggerID"] as? String == "wake" && c.json["issuer"] as? String == "thing:\(tid)")
            let list = try #require(
                try await e.get("\(e.target(tid))/commands", token: token).json["commands"] as? [Any])
            #expect(list.count == 1)
        }
    }
}
