// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub

/// Action sets and timer triggers on the device, driven through the C API
/// with the injectable clock (no sleeping for minutes).
@Suite("Device automation", .serialized, .offPool)
struct DeviceAutomationTests {
    static let exists = Int32(THINGIF_ERR_EXISTS.rawValue)
    static let notFound = Int32(THINGIF_ERR_NOT_FOUND.rawValue)
    static let none = Int32(THINGIF_RECUR_NONE.rawValue)
    static let minute = Int32(THINGIF_RECUR_MINUTE.rawValue)
    static let day = Int32(THINGIF_RECUR_DAY.rawValue)
    static let week = Int32(THINGIF_RECUR_WEEK.rawValue)

    /// Epoch ms of a UTC date and time.
    static func utc(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int = 0) -> Int64 {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        let date = c.date(from: DateComponents(year: y, month: mo, day: d, hour: h, minute: mi))!
        return Int64(date.timeIntervalSince1970 * 1000)
    }

    static let minuteMs: Int64 = 60_000

    func addMorning(_ t: TestThing, name: String = "morning") {
        #expect(ct_action_set_create(t.ct, name) == RC.ok)
        #expect(
            ct_action_set_add_action(t.ct, name, Aircon.schema, Aircon.version, "turnPower", #"{"power":true}"#)
                == RC.ok)
        #expect(
            ct_action_set_add_action(
                t.ct, name, Aircon.schema, Aircon.version, "setPresetTemperature",
                #"{"presetTemperature":23}"#) == RC.ok)
        #expect(
            ct_action_set_add_action(t.ct, name, Aircon.schema, Aircon.version, "setFanSpeed", #"{"fanSpeed":2}"#)
                == RC.ok)
    }

    /// One loop turn at clock `ms`; returns the records added.
    func step(_ t: TestThing, to ms: Int64) -> Int {
        let before = ct_record_count(t.ct)
        ct_clock_set(t.ct, ms)
        _ = ct_loop_once(t.ct, 0)
        return Int(ct_record_count(t.ct) - before)
    }

    @Test(
        "Action set CRUD, duplicate name, execute runs the handlers in order; the hub gets the command and its results")
    func actionSetExecute() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            addMorning(t)
            #expect(ct_action_set_create(t.ct, "morning") == Self.exists)
            #expect(ct_action_set_add_action(t.ct, "nope", Aircon.schema, 1, "turnPower", nil) == Self.notFound)
            #expect(ct_action_set_add_action(t.ct, "morning", Aircon.schema, 1, "extra", nil) == RC.ok)
            #expect(ct_action_set_remove_action(t.ct, "morning", 4) == RC.invalid)
            #expect(ct_action_set_remove_action(t.ct, "morning", 3) == RC.ok)
            #expect(ct_action_set_execute(t.ct, "nope") == Self.notFound)
            #expect(ct_action_set_execute(t.ct, "morning") == RC.ok)

            let records = t.waitForRecords(3)
            #expect(records.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            let cid = try #require(records.first?.commandID)
            #expect(cid.hasPrefix("local-"))
            #expect(records.allSatisfy { $0.commandID == cid && $0.title == "morning" && $0.issuer == "thing:\(tid)" })
            let results = try env.results(of: cid)
            #expect(results.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            #expect(results.allSatisfy { $0.succeeded })
            // (A): the command first, then its results. The hub logs a
            // request after handling it, so the results may be stored a
            // moment before their request is in the log.
            let resultsPath = "targets/thing:\(tid)/commands/\(cid)/action-results"
            #expect(poll { env.hub.requests.contains { $0.path == resultsPath } }, "\(env.hub.requests.map(\.path))")
            let paths = env.hub.requests.map(\.path)
            let put = try #require(paths.firstIndex(of: "targets/thing:\(tid)/commands/\(cid)"), "\(paths)")
            let res = try #require(paths.firstIndex(of: resultsPath))
            #expect(put < res)
            let body = try #require(parseObject(env.hub.requests[put].body))
            #expect(body["title"] as? String == "morning")
            #expect(body["firedByTriggerID"] == nil)
            #expect((body["actions"] as? [Any])?.count == 3)

            #expect(ct_action_set_delete(t.ct, "morning") == RC.ok)
            #expect(ct_action_set_delete(t.ct, "morning") == Self.notFound)
        }
    }

    @Test("Invalid timers are refused: 4 minutes, 6 weeks, a past fire date, an unknown zone or action set")
    func invalidTimers() throws {
        try withEnv { env in
            let (t, _) = try env.onlineAircon(start: false)
            let now = Self.utc(2025, 6, 1, 12)
            #expect(ct_use_fake_clock(t.ct, now) == RC.ok)
            addMorning(t)
            let future = now + 60 * Self.minuteMs
            #expect(ct_timer_create(t.ct, "x", future, Self.minute, 4, "UTC", "morning") == RC.invalid)
            #expect(ct_timer_create(t.ct, "x", future, Self.week, 6, "UTC", "morning") == RC.invalid)
            #expect(t.logContains("outside 5 minutes .. 5 weeks"))
            #expect(ct_timer_create(t.ct, "x", now - 1, Self.none, 0, "UTC", "morning") == RC.invalid)
            #expect(ct_timer_create(t.ct, "x", now, Self.none, 0, "UTC", "morning") == RC.invalid)
            #expect(t.logContains("is not in the future"))
            #expect(ct_timer_create(t.ct, "x", future, Self.none, 0, "Mars/Olympus", "morning") == RC.invalid)
            #expect(ct_timer_create(t.ct, "x", future, Self.none, 0, "UTC", "morning,nope") == RC.invalid)
            #expect(ct_timer_create(t.ct, "x", future, Self.minute, 5, "UTC", "morning") == RC.ok)
            #expect(ct_timer_create(t.ct, "y", future, Self.week, 5, "UTC", "morning") == RC.ok)
            #expect(ct_timer_create(t.ct, "x", future, Self.minute, 5, "UTC", "morning") == Self.exists)
            #expect(ct_action_set_delete(t.ct, "morning") == RC.state)
        }
    }

    @Test("Every 5 minutes over a simulated hour: 12 firings; a missed stretch fires once, then continues on the grid")
    func recurrenceEveryFiveMinutes() throws {
        try withEnv { env in
            let (t, _) = try env.onlineAircon(start: false)
            let t0 = Self.utc(2025, 6, 1, 12)
            #expect(ct_use_fake_clock(t.ct, t0) == RC.ok)
            #expect(ct_action_set_create(t.ct, "power") == RC.ok)
            #expect(ct_action_set_add_action(t.ct, "power", Aircon.schema, 1, "turnPower", #"{"power":true}"#) == RC.ok)
            #expect(ct_timer_create(t.ct, "every5", t0 + 5 * Self.minuteMs, Self.minute, 5, "UTC", "power") == RC.ok)
            // Disabled until enabled.
            #expect(step(t, to: t0 + 5 * Self.minuteMs) == 0)
            ct_clock_set(t.ct, t0)
            #expect(ct_timer_enable(t.ct, "every5", 1) == RC.ok)
            var fired: [Int] = []
            for m in 1...60 {
                if step(t, to: t0 + Int64(m) * Self.minuteMs - 1) > 0 { fired.append(-m) }
                if step(t, to: t0 + Int64(m) * Self.minuteMs) > 0 { fired.append(m) }
            }
            #expect(fired == Array(stride(from: 5, through: 60, by: 5)))
            // Off for 32 minutes: one firing, then the next on the grid (95).
            #expect(step(t, to: t0 + 92 * Self.minuteMs) == 1)
            #expect(step(t, to: t0 + 94 * Self.minuteMs) == 0)
            #expect(step(t, to: t0 + 95 * Self.minuteMs) == 1)
            #expect(t.records.allSatisfy { $0.title == "power" })
        }
    }

    @Test("Daily at 08:00 Europe/Paris stays at 08:00 local across the March and October DST changes")
    func dailyAcrossDST() throws {
        try withEnv { env in
            let (t, _) = try env.onlineAircon(start: false)
            #expect(ct_use_fake_clock(t.ct, Self.utc(2025, 3, 27, 12)) == RC.ok)
            #expect(ct_action_set_create(t.ct, "wake") == RC.ok)
            #expect(ct_action_set_add_action(t.ct, "wake", Aircon.schema, 1, "turnPower", #"{"power":true}"#) == RC.ok)
            func expectFirings(_ utcTimes: [Int64]) {
                for at in utcTimes {
                    #expect(step(t, to: at - 1) == 0, "fired early before \(at)")
                    #expect(step(t, to: at) == 1, "did not fire at \(at)")
                }
            }
            // 08:00 CET = 07:00Z; from March 30 (CEST) 08:00 = 06:00Z.
            #expect(
                ct_timer_create(t.ct, "wake", Self.utc(2025, 3, 28, 7), Self.day, 1, "Europe/Paris", "wake") == RC.ok)
            #expect(ct_timer_enable(t.ct, "wake", 1) == RC.ok)
            expectFirings([
                Self.utc(2025, 3, 28, 7), Self.utc(2025, 3, 29, 7), Self.utc(2025, 3, 30, 6),
                Self.utc(2025, 3, 31, 6)
            ])
            #expect(ct_timer_delete(t.ct, "wake") == RC.ok)
            // 08:00 CEST = 06:00Z; from October 26 (CET) 08:00 = 07:00Z.
            ct_clock_set(t.ct, Self.utc(2025, 10, 23, 12))
            #expect(
                ct_timer_create(t.ct, "wake", Self.utc(2025, 10, 24, 6), Self.day, 1, "Europe/Paris", "wake") == RC.ok)
            #expect(ct_timer_enable(t.ct, "wake", 1) == RC.ok)
            expectFirings([
                Self.utc(2025, 10, 24, 6), Self.utc(2025, 10, 25, 6), Self.utc(2025, 10, 26, 7),
                Self.utc(2025, 10, 27, 7)
            ])
            // Weekly keeps local time too: 2 weeks after Oct 20 08:00 CEST is Nov 3 08:00 CET.
            #expect(ct_timer_delete(t.ct, "wake") == RC.ok)
            ct_clock_set(t.ct, Self.utc(2025, 10, 19, 12))
            #expect(
                ct_timer_create(t.ct, "wake", Self.utc(2025, 10, 20, 6), Self.week, 2, "Europe/Paris", "wake") == RC.ok)
            #expect(ct_timer_enable(t.ct, "wake", 1) == RC.ok)
            expectFirings([Self.utc(2025, 10, 20, 6), Self.utc(2025, 11, 3, 7)])
        }
    }

    @Test("A timer fires while offline; its command and results reach the hub after reconnecting")
    func firesOffline() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 100) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 500) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 500) == RC.ok)
            }
            let t0 = Self.utc(2025, 6, 1, 12)
            #expect(ct_use_fake_clock(t.ct, t0) == RC.ok)
            addMorning(t)
            #expect(ct_timer_create(t.ct, "offline", t0 + 10 * Self.minuteMs, Self.none, 0, "UTC", "morning") == RC.ok)
            #expect(ct_timer_enable(t.ct, "offline", 1) == RC.ok)
            env.broker.stop()
            #expect(poll { !t.isConnected })
            ct_clock_set(t.ct, t0 + 10 * Self.minuteMs)
            let records = t.waitForRecords(3)
            #expect(records.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            let cid = try #require(records.first?.commandID)
            #expect(env.hub.results(of: cid) == nil)
            let broker2 = try env.broker.restarted()
            defer {
                broker2.stop()
                broker2.removeFiles()
            }
            let results = try env.results(of: cid, timeoutMs: 30_000)
            #expect(results.count == 3 && results.allSatisfy { $0.succeeded })
            let put = try #require(env.hub.requests.first { $0.path == "targets/thing:\(tid)/commands/\(cid)" })
            #expect(parseObject(put.body)?["firedByTriggerID"] as? String == "offline")
            // One-time: disabled after firing.
            #expect(ct_timer_enable(t.ct, "offline", 1) == RC.invalid)
        }
    }

    @Test("Action sets and timers survive destroy and a new handle on the same storage")
    func persistence() throws {
        try withEnv { env in
            let t0 = Self.utc(2025, 6, 1, 12)
            let (t1, _) = try env.onlineAircon(storage: "persist", start: false)
            #expect(ct_use_fake_clock(t1.ct, t0) == RC.ok)
            addMorning(t1)
            #expect(
                ct_timer_create(
                    t1.ct, "hourly", t0 + 60 * Self.minuteMs, Int32(THINGIF_RECUR_HOUR.rawValue), 1,
                    "UTC", "morning") == RC.ok)
            #expect(ct_timer_enable(t1.ct, "hourly", 1) == RC.ok)
            #expect(step(t1, to: t0 + 60 * Self.minuteMs) == 3)
            #expect(t1.destroy() == RC.ok)

            let (t2, _) = try env.onlineAircon(storage: "persist", start: false)
            #expect(ct_use_fake_clock(t2.ct, t0 + 61 * Self.minuteMs) == RC.ok)
            #expect(ct_action_set_create(t2.ct, "morning") == Self.exists)
            #expect(
                ct_timer_create(t2.ct, "hourly", t0 + 500 * Self.minuteMs, Self.none, 0, "UTC", "morning")
                    == Self.exists)
            // The next fire date (t0 + 2 h) and the enabled flag were kept.
            #expect(step(t2, to: t0 + 120 * Self.minuteMs - 1) == 0)
            #expect(step(t2, to: t0 + 120 * Self.minuteMs) == 3)
            #expect(t2.records.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
        }
    }

    /// Publishes a retained message with a client of its own.
    func publishRetained(port: Int, topic: String, payload: String) throws {
        let c = try #require(MqttClient(clientID: "cfg-" + Platform.randomHex(bytes: 4), cleanStart: true))
        _ = c.setCredentials(username: BrokerSecrets.adminUsername, password: BrokerSecrets.adminPassword)
        #expect(c.connect(host: "127.0.0.1", port: port, keepalive: 30) == 0)
        for _ in 0..<5 { _ = c.loop(timeoutMs: 20) }
        #expect(c.publish(topic: topic, payload: Array(payload.utf8), qos: 1, retain: true) == 0)
        for _ in 0..<10 { _ = c.loop(timeoutMs: 20) }
        c.disconnect()
        _ = c.loop(timeoutMs: 20)
    }

    @Test(
        "Remote configuration from a retained message replaces remote sets and timers; remote wins a name; bad config applies nothing"
    )
    func remoteConfig() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon(start: false)
            let topic = try #require(env.hub.thing(tid)?.installations.values.sorted().first)
            let t0 = Self.utc(2025, 6, 1, 12)
            #expect(ct_use_fake_clock(t.ct, t0) == RC.ok)
            #expect(ct_action_set_create(t.ct, "evening") == RC.ok)
            #expect(
                ct_action_set_add_action(t.ct, "evening", Aircon.schema, 1, "setFanSpeed", #"{"fanSpeed":1}"#) == RC.ok)
            #expect(ct_action_set_create(t.ct, "local") == RC.ok)
            let config = """
                {"version":1,"actionSets":[{"name":"evening","actions":[{"schema":"\(Aircon.schema)","schemaVersion":1,\
                "action":"turnPower","params":{"power":false}}]}],"timerTriggers":[{"name":"remoteTimer","fireDate":\(t0 + 30 * Self.minuteMs),\
                "recurrence":{"unit":"day","count":1},"timeZone":"Europe/Paris","actionSets":["evening"],"enabled":true}]}
                """
            try publishRetained(port: env.broker.port, topic: "p/\(topic)/config", payload: config)
            #expect(ct_start(t.ct) == RC.ok)
            #expect(t.waitForLog("applied remote configuration version 1"), "logs:\n\(t.logs)")
            // Remote replaced the local "evening"; the other local set stays.
            #expect(ct_action_set_create(t.ct, "evening") == Self.exists)
            #expect(ct_action_set_create(t.ct, "local") == Self.exists)
            ct_clock_set(t.ct, t0 + 30 * Self.minuteMs)
            let records = t.waitForRecords(1)
            #expect(records.map(\.name) == ["turnPower"])
            let cid = try #require(records.first?.commandID)
            _ = try env.results(of: cid)
            let put = try #require(env.hub.requests.first { $0.path == "targets/thing:\(tid)/commands/\(cid)" })
            #expect(parseObject(put.body)?["firedByTriggerID"] as? String == "remoteTimer")

            // A bad configuration (4-minute recurrence) is refused whole.
            let bad = """
                {"version":2,"actionSets":[],"timerTriggers":[{"name":"bad","fireDate":\(t0 + 90 * Self.minuteMs),\
                "recurrence":{"unit":"minute","count":4},"timeZone":"UTC","actionSets":["local"],"enabled":true}]}
                """
            try publishRetained(port: env.broker.port, topic: "p/\(topic)/config", payload: bad)
            #expect(t.waitForLog("remote configuration refused"), "logs:\n\(t.logs)")
            #expect(ct_action_set_execute(t.ct, "evening") == RC.ok)
            #expect(t.waitForRecords(2).count == 2)
        }
    }
}
