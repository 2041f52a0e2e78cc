// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import Testing
import ThingIFRules
@testable import thingif_cli
#if canImport(Glibc)
    import Glibc
#endif

/// `thingif actionset`, `thingif timer` and `thingif trigger` without a hub:
/// condition expressions, times, recurrences and the request bodies.
@Suite("thingif CLI automation")
struct CLIAutomationTests {
    // MARK: conditions

    func condition(_ s: String) throws -> String { try Condition.parse(s).text }

    @Test("Conditions: eq, the four ranges, and, or, not, != and grouping map to Thing-IF's JSON")
    func conditionExpressions() throws {
        #expect(try condition("power=true") == #"{"type":"eq","field":"power","value":true}"#)
        #expect(try condition("mode==\"cool\"") == #"{"type":"eq","field":"mode","value":"cool"}"#)
        #expect(try condition("mode=cool") == #"{"type":"eq","field":"mode","value":"cool"}"#)
        #expect(try condition("temp>25") == #"{"type":"range","field":"temp","lowerLimit":25,"lowerIncluded":false}"#)
        #expect(try condition("temp>=25") == #"{"type":"range","field":"temp","lowerLimit":25,"lowerIncluded":true}"#)
        #expect(
            try condition("temp<25.5") == #"{"type":"range","field":"temp","upperLimit":25.5,"upperIncluded":false}"#)
        #expect(try condition("temp<=-3") == #"{"type":"range","field":"temp","upperLimit":-3,"upperIncluded":true}"#)
        #expect(
            try condition("temp>=16&&temp<=30")
                == #"{"type":"and","clauses":[{"type":"range","field":"temp","lowerLimit":16,"lowerIncluded":true},{"type":"range","field":"temp","upperLimit":30,"upperIncluded":true}]}"#
        )
        #expect(
            try condition("!(power=true)") == #"{"type":"not","clause":{"type":"eq","field":"power","value":true}}"#)
        #expect(try condition("power!=true") == #"{"type":"not","clause":{"type":"eq","field":"power","value":true}}"#)
        #expect(
            try condition("a=1||b=2")
                == #"{"type":"or","clauses":[{"type":"eq","field":"a","value":1},{"type":"eq","field":"b","value":2}]}"#
        )
        // && binds tighter than ||; three in a row are one and/or; spaces are fine.
        #expect(
            try condition(" a=1 || b=2 && c=3 ")
                == #"{"type":"or","clauses":[{"type":"eq","field":"a","value":1},{"type":"and","clauses":[{"type":"eq","field":"b","value":2},{"type":"eq","field":"c","value":3}]}]}"#
        )
        #expect(
            try condition("(a=1||b=2)&&c=3")
                == #"{"type":"and","clauses":[{"type":"or","clauses":[{"type":"eq","field":"a","value":1},{"type":"eq","field":"b","value":2}]},{"type":"eq","field":"c","value":3}]}"#
        )
        #expect(try Condition.parse("a=1&&b=2&&c=3")["clauses"]?.arrayValue?.count == 3)
        #expect(
            try condition(#"name="living room"&&!(x=1)"#)
                == #"{"type":"and","clauses":[{"type":"eq","field":"name","value":"living room"},{"type":"not","clause":{"type":"eq","field":"x","value":1}}]}"#
        )
    }

    @Test("Condition errors: empty, no operator, no value, a non-number range, unbalanced parentheses, trailing words")
    func conditionErrors() {
        for bad in [
            "", "  ", "power", "power=", "temp>warm", "(a=1", "a=1)", "a=1 b=2", "a=1&&", "||a=1", "!", "=1", "a=\"x"
        ] {
            #expect(throws: ActionParseError.self, "\(bad)") { try Condition.parse(bad) }
        }
    }

    @Test("Conditions read back as expressions for the tables")
    func conditionText() throws {
        for s in [
            "power=true", "temp>25", "temp>=16&&temp<=30", "!(a=1||b=2)", "power!=true", "a=1||b=2&&c=3",
            "(a=1||b=2)&&c=3", "mode=cool"
        ] {
            #expect(Condition.text(try Condition.parse(s)) == s)
        }
        let both = try JSONValue.parse(
            #"{"type":"range","field":"t","lowerLimit":1,"lowerIncluded":true,"upperLimit":5,"upperIncluded":false}"#)
        #expect(Condition.text(both) == "t>=1&&t<5")
    }

    @Test("--condition-json: checked recursively, kept as given")
    func conditionJSON() throws {
        let raw =
            #"{"type":"and","clauses":[{"type":"eq","field":"power","value":true},{"type":"range","field":"t","upperLimit":3}]}"#
        #expect(try Condition.parse(json: raw).text == raw)
        for bad in [
            "", "[]", #"{"field":"a"}"#, #"{"type":"eq","field":"a"}"#, #"{"type":"not"}"#,
            #"{"type":"and","clauses":[]}"#, #"{"type":"or","clauses":[{"type":"xor"}]}"#,
            #"{"type":"range","field":"t"}"#, #"{"type":"like","field":"a","value":1}"#
        ] {
            #expect(throws: ActionParseError.self, "\(bad)") { try Condition.parse(json: bad) }
        }
    }

    @Test("Conditions are held to the hub's own limits: depth and clause count, in both syntaxes")
    func conditionLimits() throws {
        // StateCondition.maxDepth (16) levels are refused, one fewer is fine.
        let deep = String(repeating: "!", count: StateCondition.maxDepth) + "a=1"
        #expect(throws: ActionParseError.self) { try Condition.parse(deep) }
        let fine = String(repeating: "!", count: StateCondition.maxDepth - 1) + "a=1"
        #expect(try Condition.parse(fine)["type"]?.stringValue == "not")
        // maxClauses (64) clauses are fine, one more is refused.
        let clauses = (0...StateCondition.maxClauses).map { "f\($0)=1" }
        #expect(try Condition.parse(clauses.dropLast().joined(separator: "||"))["clauses"]?.arrayValue?.count == 64)
        #expect(throws: ActionParseError.self) { try Condition.parse(clauses.joined(separator: "&&")) }
        let tooMany = (0...StateCondition.maxClauses).map { #"{"type":"eq","field":"f\#($0)","value":1}"# }
        #expect(throws: ActionParseError.self) {
            try Condition.parse(json: #"{"type":"or","clauses":["# + tooMany.joined(separator: ",") + "]}")
        }
        // A value the hub refuses (an object in an eq) is refused here too.
        #expect(throws: ActionParseError.self) { try Condition.parse(json: #"{"type":"eq","field":"a","value":{}}"#) }
    }

    // MARK: times and recurrences

    @Test("TIME: epoch ms, ISO-8601 with Z, an offset or fractions, local time in a zone, and +N{s,m,h,d,w}")
    func times() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000.5)
        #expect(try Schedule.time("1798790400000", now: now) == 1_798_790_400_000)
        #expect(try Schedule.time("2026-12-01T08:00:00Z", now: now) == 1_796_112_000_000)
        #expect(try Schedule.time("2026-12-01T09:00:00+01:00", now: now) == 1_796_112_000_000)
        #expect(try Schedule.time("2026-12-01T08:00:00.250Z", now: now) == 1_796_112_000_250)
        let berlin = try Schedule.timeZone("Europe/Berlin")
        #expect(try Schedule.time("2026-12-01T09:00", now: now, zone: berlin) == 1_796_112_000_000)  // CET, +1
        #expect(try Schedule.time("2026-07-01T10:00:00", now: now, zone: berlin) == 1_782_892_800_000)  // CEST, +2
        #expect(try Schedule.time("+10m", now: now) == 1_700_000_000_500 + 600_000)
        #expect(try Schedule.time("+30s", now: now) == 1_700_000_000_500 + 30_000)
        #expect(try Schedule.time("+2h", now: now) == 1_700_000_000_500 + 7_200_000)
        #expect(try Schedule.time("+1d", now: now) == 1_700_000_000_500 + 86_400_000)
        #expect(try Schedule.time("+1w", now: now) == 1_700_000_000_500 + 604_800_000)
        for bad in [
            "", "soon", "+10", "+m", "+10y", "+-5m", "2026-12-01T08:00", "2026-13-01T08:00:00Z", "99999999999999999999",
            "1.5"
        ] {
            #expect(throws: ActionParseError.self, "\(bad)") { try Schedule.time(bad, now: now) }
        }
        #expect(throws: ActionParseError.self) { try Schedule.timeZone("Mars/Olympus") }
        #expect(throws: ActionParseError.self) { try Schedule.timeZone("") }
        #expect(throws: Never.self) { try Schedule.timeZone("UTC") }
    }

    @Test("--every: N with m, h, d or w; from 5 minutes to 5 weeks")
    func recurrences() throws {
        #expect(try Schedule.recurrence("5m").text == #"{"unit":"minute","count":5}"#)
        #expect(try Schedule.recurrence("1h").text == #"{"unit":"hour","count":1}"#)
        #expect(try Schedule.recurrence("1d").text == #"{"unit":"day","count":1}"#)
        #expect(try Schedule.recurrence("5w").text == #"{"unit":"week","count":5}"#)
        #expect(try Schedule.recurrence("35d").text == #"{"unit":"day","count":35}"#)
        for bad in ["4m", "6w", "36d", "841h", "0h", "", "m", "5", "5y", "-5m", "1.5h", "99999999999999999999w"] {
            #expect(throws: ActionParseError.self, "\(bad)") { try Schedule.recurrence(bad) }
        }
        #expect(Schedule.recurrenceText(try Schedule.recurrence("30m")) == "30m")
        #expect(Schedule.recurrenceText(nil) == "-")
    }

    @Test("--cron: five fields, normalised spacing")
    func cron() throws {
        #expect(try Schedule.cron(" 0  8 * * 1-5 ") == "0 8 * * 1-5")
        #expect(try Schedule.cron("*/15 8-10,22 * 2-3/1 0") == "*/15 8-10,22 * 2-3/1 0")
        // What the hub's CronSchedule refuses: names, out-of-range numbers, empty lists.
        for bad in ["", "0 8 * *", "0 8 * * * *", "0 8 * * ;", "*/15 * * jan mon", "60 * * * *", "0 8 * * 1,"] {
            #expect(throws: ActionParseError.self, "\(bad)") { try Schedule.cron(bad) }
        }
    }

    // MARK: bodies

    @Test("actionset put: words become the action set's list with the schema on each action")
    func actionSetBody() throws {
        let actions = try Actions.parse(words: ["turnPower", "power=true", "setFanSpeed", "fanSpeed=5", "reset"])
        let body = Automation.actionSetBody(
            actions: Automation.actionSetActions(actions, schema: "AirConditioner-Demo", schemaVersion: 1))
        #expect(
            body.text
                == #"{"actions":[{"schema":"AirConditioner-Demo","schemaVersion":1,"action":"turnPower","params":{"power":true}},{"schema":"AirConditioner-Demo","schemaVersion":1,"action":"setFanSpeed","params":{"fanSpeed":5}},{"schema":"AirConditioner-Demo","schemaVersion":1,"action":"reset","params":{}}]}"#
        )
        #expect(Automation.actionSetSummary(body["actions"]) == "turnPower power=true, setFanSpeed fanSpeed=5, reset")

        // --raw in either form.
        let thingIF = try Automation.actionSetActions(
            raw: #"[{"turnPower":{"power":false}}]"#, schema: "S", schemaVersion: 2)
        #expect(thingIF.text == #"[{"schema":"S","schemaVersion":2,"action":"turnPower","params":{"power":false}}]"#)
        let own = try Automation.actionSetActions(
            raw: #"[{"action":"turnPower","params":{"power":true}},{"schema":"X","schemaVersion":3,"action":"reset"}]"#,
            schema: "S", schemaVersion: 2)
        #expect(
            own.text
                == #"[{"schema":"S","schemaVersion":2,"action":"turnPower","params":{"power":true}},{"schema":"X","schemaVersion":3,"action":"reset","params":{}}]"#
        )
        for bad in ["", "[]", "{}", "[1]", #"[{"a":{},"b":{}}]"#] {
            #expect(throws: ActionParseError.self, "\(bad)") {
                try Automation.actionSetActions(raw: bad, schema: "S", schemaVersion: 1)
            }
        }
    }

    @Test("timer put: the body from the options; usage errors for a bad zone, time, recurrence or no action set")
    func timerBody() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let put = try TimerGroup.Put.parse([
            "th.1", "wake", "--at", "2026-12-01T08:00:00Z", "--time-zone", "Europe/Berlin",
            "--action-set", "morning", "--action-set", "coffee", "--every", "1d"
        ])
        #expect(
            try put.body(now: now).text
                == #"{"fireDate":1796112000000,"recurrence":{"unit":"day","count":1},"timeZone":"Europe/Berlin","actionSets":["morning","coffee"]}"#
        )
        let once = try TimerGroup.Put.parse(["th.1", "t", "--at", "+10m", "--time-zone", "UTC", "--action-set", "a"])
        #expect(try once.body(now: now).text == #"{"fireDate":1700000600000,"timeZone":"UTC","actionSets":["a"]}"#)
        for bad in [
            ["th.1", "t", "--at", "+10m", "--time-zone", "Nowhere/City", "--action-set", "a"],
            ["th.1", "t", "--at", "later", "--time-zone", "UTC", "--action-set", "a"],
            ["th.1", "t", "--at", "+10m", "--time-zone", "UTC", "--action-set", "a", "--every", "4m"],
            ["th.1", "t", "--at", "+10m", "--time-zone", "UTC", "--action-set", "a", "--every", "6w"],
            ["th.1", "t", "--at", "+10m", "--time-zone", "UTC"],
            ["th.1", "t", "--time-zone", "UTC", "--action-set", "a"]
        ] {
            #expect(throws: (any Error).self, "\(bad)") { _ = try TimerGroup.Put.parse(bad) }
        }
    }

    @Test("trigger create: STATES, SCHEDULE and SCHEDULE_ONCE bodies with the command and its issuer")
    func triggerBodies() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        func body(_ args: [String]) throws -> String {
            let c = try TriggerGroup.Create.parse(args)
            return Automation.triggerBody(
                predicate: try c.predicate(now: now), schema: c.schema, schemaVersion: c.schemaVersion,
                actions: try actionWords(c.words, raw: c.raw), userID: "u-1"
            ).text
        }
        let command =
            #""command":{"schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true}}],"issuer":"user:u-1"}"#
        #expect(
            try body(["th.1", "--when-state", "temp>25", "turnPower", "power=true"])
                == #"{"predicate":{"eventSource":"STATES","condition":{"type":"range","field":"temp","lowerLimit":25,"lowerIncluded":false},"triggersWhen":"CONDITION_FALSE_TO_TRUE"},"#
                + command + "}")
        #expect(
            try body([
                "th.1", "--when-state", "power=true", "--triggers-when", "CONDITION_CHANGED", "turnPower", "power=true"
            ])
                == #"{"predicate":{"eventSource":"STATES","condition":{"type":"eq","field":"power","value":true},"triggersWhen":"CONDITION_CHANGED"},"#
                + command + "}")
        #expect(
            try body([
                "th.1", "--condition-json", #"{"type":"eq","field":"power","value":true}"#, "--triggers-when",
                "CONDITION_TRUE",
                "--raw", #"[{"turnPower":{"power":true}}]"#
            ])
                == #"{"predicate":{"eventSource":"STATES","condition":{"type":"eq","field":"power","value":true},"triggersWhen":"CONDITION_TRUE"},"#
                + command + "}")
        #expect(
            try body(["th.1", "--cron", "0 8 * * 1-5", "turnPower", "power=true"])
                == #"{"predicate":{"eventSource":"SCHEDULE","schedule":"0 8 * * 1-5"},"# + command + "}")
        #expect(
            try body(["th.1", "--once", "+10m", "turnPower", "power=true"])
                == #"{"predicate":{"eventSource":"SCHEDULE_ONCE","scheduleAt":1700000600000},"# + command + "}")
        #expect(
            try body(["th.1", "--once", "2026-12-01T08:00:00Z", "--schema", "S", "--schema-version", "2", "reset"])
                == #"{"predicate":{"eventSource":"SCHEDULE_ONCE","scheduleAt":1796112000000},"command":{"schema":"S","schemaVersion":2,"actions":[{"reset":{}}],"issuer":"user:u-1"}}"#
        )

        for bad in [
            ["th.1", "turnPower"],  // no predicate
            ["th.1", "--when-state", "a=1", "--cron", "* * * * *", "turnPower"],  // two predicates
            ["th.1", "--when-state", "a=", "turnPower"],  // bad condition
            ["th.1", "--when-state", "a=1", "--triggers-when", "ALWAYS", "turnPower"],  // bad mode
            ["th.1", "--condition-json", #"{"type":"eq"}"#, "turnPower"],
            ["th.1", "--cron", "0 8 *", "turnPower"],
            ["th.1", "--once", "tomorrow", "turnPower"],
            ["th.1", "--when-state", "a=1"],  // no command
            ["th.1", "--when-state", "a=1", "power=true"],
            ["th.1", "--when-state", "a=1", "turnPower", "--raw", #"[{"turnPower":{}}]"#]  // both
        ] {
            #expect(throws: (any Error).self, "\(bad)") { _ = try TriggerGroup.Create.parse(bad) }
        }
    }

    // MARK: tables

    @Test("Tables: action sets, timers and triggers (enabled or disabled fields)")
    func tables() throws {
        let sets = try JSONValue.parse(
            #"{"actionSets":[{"name":"morning","actions":[{"schema":"S","schemaVersion":1,"action":"turnPower","params":{"power":true}},{"schema":"S","schemaVersion":1,"action":"setFanSpeed","params":{"fanSpeed":5}}]}]}"#
        )
        #expect(
            Automation.actionSetList(sets["actionSets"]!.arrayValue!) == """
                NAME     ACTIONS
                morning  turnPower power=true, setFanSpeed fanSpeed=5
                """)
        let timers = try JSONValue.parse(
            #"{"timerTriggers":[{"name":"wake","fireDate":1796112000000,"recurrence":{"unit":"day","count":1},"timeZone":"Europe/Berlin","actionSets":["morning","coffee"],"enabled":false},{"name":"t","fireDate":1796112000000,"timeZone":"UTC","actionSets":["a"],"enabled":true}]}"#
        )
        #expect(
            Automation.timerList(timers["timerTriggers"]!.arrayValue!) == """
                NAME  ENABLED  FIRE DATE             EVERY  TIME ZONE      ACTION SETS
                wake  no       2026-12-01 08:00:00Z  1d     Europe/Berlin  morning, coffee
                t     yes      2026-12-01 08:00:00Z  -      UTC            a
                """)
        let triggers = try JSONValue.parse(
            #"""
            {"triggers":[
             {"triggerID":"tr-1","predicate":{"eventSource":"STATES","condition":{"type":"range","field":"temp","lowerLimit":25,"lowerIncluded":false},"triggersWhen":"CONDITION_TRUE"},"command":{"actions":[{"turnPower":{"power":true}}]},"disabled":false},
             {"triggerID":"tr-2","predicate":{"eventSource":"SCHEDULE","schedule":"0 8 * * *"},"command":{"actions":[{"reset":{}}]},"enabled":false},
             {"triggerID":"tr-3","predicate":{"eventSource":"SCHEDULE_ONCE","scheduleAt":1796112000000},"command":{"actions":[{"reset":{}}]}}
            ]}
            """#)
        #expect(
            Automation.triggerList(triggers["triggers"]!.arrayValue!) == """
                TRIGGER ID  ENABLED  PREDICATE                           COMMAND
                tr-1        yes      STATES temp>25 (CONDITION_TRUE)     turnPower power=true
                tr-2        no       SCHEDULE "0 8 * * *"                reset
                tr-3        -        SCHEDULE_ONCE 2026-12-01 08:00:00Z  reset
                """)
    }
}

// MARK: - end to end: action sets, timers and triggers through the binary

enum CLIAutomationEndToEnd {
    /// The CLI end-to-end set-up works and the hub binary serves the
    /// automation endpoints (its code names the timer-triggers path).
    static let available: Bool = {
        guard CLIEndToEnd.available, let hub = CLIEndToEnd.hub,
            let data = try? Data(contentsOf: URL(fileURLWithPath: hub), options: .alwaysMapped)
        else { return false }
        return data.range(of: Data("timer-triggers".utf8)) != nil && data.range(of: Data("action-sets".utf8)) != nil
    }()
}

@Suite("thingif CLI automation end to end", .serialized, .offPool)
struct CLIAutomationEndToEndTests {
    @Test(
        "actionset put/list/delete, timer put/list/enable/disable/delete, trigger create (STATES)/list/disable/enable/delete",
        .enabled(
            if: CLIAutomationEndToEnd.available,
            "needs thingif-hub with the action-set, timer-trigger and trigger endpoints, and thingif, next to the test bundle"
        ),
        .timeLimit(.minutes(3)))
    func automationFlow() throws {
        let cli = try #require(CLIEndToEnd.cli), hubExe = try #require(CLIEndToEnd.hub)
        let scene = try ProcessScene(prefix: "thingif-cli-auto")
        defer { scene.end() }
        let broker = scene.broker, root = scene.root

        let (hubPID, url) = try startHubProcess(hubExe, broker: broker, logPath: root + "/hub.log")
        scene.children.append(hubPID)
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": root + "/cli/cli.json"]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }
        func json(_ args: String...) throws -> JSONValue {
            let r = try runProgram(cli, args + ["--json"], environment: env)
            #expect(r.status == 0, "\(args): \(r.output)")
            return try JSONValue.parse(r.output)
        }

        var r = try thingif("user", "create")
        #expect(r.status == 0, "\(r.output)")
        let onboarded = try json("onboard", "AC-0001", "demo-pass", "--thing-type", "AirConditioner")
        let thingID = try #require(onboarded["thingID"]?.stringValue)
        let thingToken = try #require(onboarded["accessToken"]?.stringValue)
        let aircon = try ApplianceProcess(
            args: [
                "--port", "\(broker.port)", "--storage", root + "/aircon",
                "--thing-id", thingID, "--token", thingToken
            ],
            logPath: root + "/aircon.log")
        try aircon.start()
        defer { aircon.stop() }

        // An action set from words, another from --raw; listed as a table and as JSON.
        r = try thingif(
            "actionset", "put", thingID, "morning", "turnPower", "power=true", "setPresetTemperature",
            "presetTemperature=22")
        #expect(r.status == 0 && r.output.contains("action set morning saved"), "\(r.output)")
        r = try thingif("actionset", "put", thingID, "off", "--raw", #"[{"turnPower":{"power":false}}]"#)
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("actionset", "list", thingID)
        #expect(
            r.status == 0 && r.output.contains("turnPower power=true, setPresetTemperature presetTemperature=22"),
            "\(r.output)")
        var sets = try json("actionset", "list", thingID)["actionSets"]?.arrayValue ?? []
        #expect(Set(sets.compactMap { $0["name"]?.stringValue }) == ["morning", "off"])
        let morning = sets.first { $0["name"]?.stringValue == "morning" }
        #expect(morning?["actions"]?.arrayValue?.first?["action"]?.stringValue == "turnPower")
        #expect(morning?["actions"]?.arrayValue?.first?["params"]?["power"] == .bool(true))

        // A timer: created disabled, then enabled and disabled.
        r = try thingif(
            "timer", "put", thingID, "wake", "--at", "+1d", "--time-zone", "Europe/Berlin",
            "--action-set", "morning", "--every", "1d")
        #expect(r.status == 0 && r.output.contains("timer wake saved"), "\(r.output)")
        var timers = try json("timer", "list", thingID)["timerTriggers"]?.arrayValue ?? []
        #expect(timers.count == 1)
        #expect(timers.first?["name"] == .string("wake") && timers.first?["timeZone"] == .string("Europe/Berlin"))
        #expect(
            timers.first?["recurrence"]?["unit"] == .string("day")
                && timers.first?["actionSets"] == .array([.string("morning")]))
        #expect(timers.first.flatMap(Automation.enabled) == false, "\(timers)")
        r = try thingif("timer", "enable", thingID, "wake")
        #expect(r.status == 0, "\(r.output)")
        timers = try json("timer", "list", thingID)["timerTriggers"]?.arrayValue ?? []
        #expect(timers.first.flatMap(Automation.enabled) == true, "\(timers)")
        r = try thingif("timer", "list", thingID)
        #expect(
            r.status == 0 && r.output.contains("wake") && r.output.contains("1d") && r.output.contains("yes"),
            "\(r.output)")

        // The action set is in use: 409, exit 1. Bad timers are refused before any request (exit 2).
        r = try thingif("actionset", "delete", thingID, "morning")
        #expect(r.status == 1 && r.output.contains("HTTP 409"), "\(r.output)")
        r = try thingif(
            "timer", "put", thingID, "bad", "--at", "+1d", "--time-zone", "UTC", "--action-set", "morning", "--every",
            "4m")
        #expect(r.status == 2, "\(r.output)")

        // A STATES trigger.
        let created = try json(
            "trigger", "create", thingID, "--when-state", "presetTemperature>=16&&presetTemperature<=30",
            "--triggers-when", "CONDITION_CHANGED", "setFanSpeed", "fanSpeed=3")
        let triggerID = try #require(created["triggerID"]?.stringValue, "\(created)")
        var triggers = try json("trigger", "list", thingID)["triggers"]?.arrayValue ?? []
        #expect(triggers.count == 1 && triggers.first?["triggerID"] == .string(triggerID))
        #expect(triggers.first?["predicate"]?["eventSource"] == .string("STATES"))
        #expect(triggers.first?["predicate"]?["condition"]?["type"] == .string("and"))
        #expect(
            triggers.first?["command"]?["actions"]
                == .array([.object([("setFanSpeed", .object([("fanSpeed", .number("3"))]))])]))
        #expect(triggers.first.flatMap(Automation.enabled) == true, "\(triggers)")
        r = try thingif("trigger", "list", thingID)
        #expect(
            r.status == 0
                && r.output.contains("STATES presetTemperature>=16&&presetTemperature<=30 (CONDITION_CHANGED)"),
            "\(r.output)")
        r = try thingif("trigger", "disable", thingID, triggerID)
        #expect(r.status == 0, "\(r.output)")
        triggers = try json("trigger", "list", thingID)["triggers"]?.arrayValue ?? []
        #expect(triggers.first.flatMap(Automation.enabled) == false, "\(triggers)")
        r = try thingif("trigger", "enable", thingID, triggerID)
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("trigger", "delete", thingID, triggerID)
        #expect(r.status == 0, "\(r.output)")
        #expect(try json("trigger", "list", thingID)["triggers"]?.arrayValue?.isEmpty == true)
        r = try thingif("trigger", "delete", thingID, triggerID)
        #expect(r.status == 1 && r.output.contains("HTTP 404"), "\(r.output)")

        // Clean up in order: the timer, then its action set.
        r = try thingif("timer", "disable", thingID, "wake")
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("timer", "delete", thingID, "wake")
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("actionset", "delete", thingID, "morning")
        #expect(r.status == 0, "\(r.output)")
        sets = try json("actionset", "list", thingID)["actionSets"]?.arrayValue ?? []
        #expect(sets.compactMap { $0["name"]?.stringValue } == ["off"])
    }
}
