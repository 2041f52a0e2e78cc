// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import ThingIF

// `thingif actionset`, `thingif timer` and `thingif trigger`: a thing's
// action sets and timer triggers (run on the device) and the hub's server
// triggers.

/// Turns a parse error into a usage error.
func usage<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch let e as ActionParseError { throw ValidationError(e.message) }
}

/// The `actions` members of an answer, or a clear error.
func list(_ answer: JSONValue, _ key: String) throws -> [JSONValue] {
    guard let items = answer[key]?.arrayValue else {
        throw HubClientError(description: "the hub's answer lacks \(key): \(answer.text.prefix(200))")
    }
    return items
}

/// Actions from words or --raw, exactly one of them.
func actionWords(_ words: [String], raw: String?) throws -> JSONValue {
    switch (raw, words.isEmpty) {
    case (nil, true): throw ValidationError("give the actions (e.g. turnPower power=true) or --raw JSON")
    case (.some, false): throw ValidationError("give the actions either as words or with --raw, not both")
    case (.some(let raw), true): return try usage { try Actions.parse(raw: raw) }
    case (nil, false): return try usage { try Actions.parse(words: words) }
    }
}

// MARK: - actionset

struct ActionSetGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "actionset",
        abstract: "A thing's action sets: named lists of actions the thing runs (e.g. from its timers).",
        subcommands: [Put.self, List.self, Delete.self])

    static func path(_ client: HubClient, _ thingID: String, _ name: String? = nil) -> String {
        client.target(thingID) + "/action-sets" + (name.map { "/" + HubClient.pathComponent($0) } ?? "")
    }

    struct Put: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or replace an action set: NAME ACTION [key=value …] [ACTION …], or --raw JSON.",
            discussion: """
                The actions are written as in `thingif command send`. For example: \
                thingif actionset put th.1234 morning turnPower power=true setPresetTemperature presetTemperature=22

                --raw takes either Thing-IF's actions ('[{"turnPower":{"power":true}}]') or the action set's own \
                list ('[{"schema":"AirConditioner-Demo","schemaVersion":1,"action":"turnPower","params":{"power":true}}]').
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The action set's name (unique per thing).") var name: String
        @Argument(help: ArgumentHelp("Actions and their parameters.", valueName: "action-or-key=value"))
        var words: [String] = []
        @Option(help: ArgumentHelp("The actions as a JSON array.", valueName: "json")) var raw: String?
        @Option(help: "The schema name.") var schema = "AirConditioner-Demo"
        @Option(name: .customLong("schema-version"), help: "The schema version.") var schemaVersion = 1

        func actions() throws -> JSONValue {
            if let raw, words.isEmpty {
                return try usage {
                    try Automation.actionSetActions(raw: raw, schema: schema, schemaVersion: schemaVersion)
                }
            }
            return Automation.actionSetActions(
                try actionWords(words, raw: raw), schema: schema, schemaVersion: schemaVersion)
        }

        func validate() throws {
            if let p = AutomationCodec.checkName(name, "the action set's") { throw ValidationError(p) }
            let list = try actions()
            try usage { try Automation.checkActionSet(name: name, actions: list) }
        }

        func run() throws {
            try global.asUser { ctx, client in
                let answer = try client.call(
                    "PUT", ActionSetGroup.path(client, thingID, name),
                    body: Automation.actionSetBody(actions: try actions()))
                if ctx.json {
                    print(answer == .null ? "{}" : answer.pretty)
                } else {
                    print("action set \(name) saved for \(thingID)")
                }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a thing's action sets.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String

        func run() throws {
            try global.asUser { ctx, client in
                let answer = try client.call("GET", ActionSetGroup.path(client, thingID))
                let sets = try list(answer, "actionSets")
                if ctx.json { print(answer.pretty); return }
                print(sets.isEmpty ? "no action sets for \(thingID)" : Automation.actionSetList(sets))
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete an action set (refused with 409 while a timer trigger uses it).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The action set's name.") var name: String

        func run() throws {
            try global.asUser { ctx, client in
                try client.call("DELETE", ActionSetGroup.path(client, thingID, name))
                if ctx.json { print("{}") } else { print("action set \(name) deleted from \(thingID)") }
            }
        }
    }
}

// MARK: - timer

struct TimerGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timer", abstract: "A thing's timer triggers: they run action sets on the device, offline too.",
        subcommands: [Put.self, List.self, Enable.self, Disable.self, Delete.self])

    static func path(_ client: HubClient, _ thingID: String, _ name: String? = nil) -> String {
        client.target(thingID) + "/timer-triggers" + (name.map { "/" + HubClient.pathComponent($0) } ?? "")
    }

    struct Put: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or replace a timer trigger (created disabled: `thingif timer enable` it).",
            discussion: """
                --at is epoch milliseconds, ISO-8601 (2026-12-01T08:00:00Z, or 2026-12-01T08:00 in --time-zone) \
                or a time from now (+10m, +2h, +1d). --every N followed by m, h, d or w repeats it (5 minutes to \
                5 weeks). For example: \
                thingif timer put th.1234 wake --at 2026-12-01T07:30 --time-zone Europe/Berlin --action-set morning --every 1d
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The timer's name (unique per thing).") var name: String
        @Option(help: ArgumentHelp("When it first fires (in the future).", valueName: "time")) var at: String
        @Option(
            name: .customLong("time-zone"),
            help: ArgumentHelp("Its time zone, e.g. Europe/Berlin.", valueName: "Area/City"))
        var timeZone: String
        @Option(
            name: .customLong("action-set"),
            help: ArgumentHelp("An action set to run (repeat for several, run in order).", valueName: "name"))
        var actionSets: [String] = []
        @Option(
            help: ArgumentHelp(
                "Repeat every N minutes, hours, days or weeks (e.g. 30m, 1d, 2w).", valueName: "N{m,h,d,w}"))
        var every: String?

        func body(now: Date = Date()) throws -> JSONValue {
            try usage {
                let zone = try Schedule.timeZone(timeZone)
                guard !actionSets.isEmpty else {
                    throw ActionParseError(message: "give at least one --action-set NAME")
                }
                return Automation.timerBody(
                    fireDate: try Schedule.time(at, now: now, zone: zone),
                    recurrence: try every.map(Schedule.recurrence),
                    timeZone: timeZone, actionSets: actionSets)
            }
        }

        func validate() throws {
            if let p = AutomationCodec.checkName(name, "the timer's") { throw ValidationError(p) }
            let b = try body()
            try usage { try Automation.checkTimer(name: name, body: b) }
        }

        func run() throws {
            try global.asUser { ctx, client in
                let body = try body()
                let answer = try client.call("PUT", TimerGroup.path(client, thingID, name), body: body)
                if ctx.json { print(answer == .null ? "{}" : answer.pretty); return }
                print(
                    "timer \(name) saved for \(thingID): first at \(Format.time(body["fireDate"]?.intValue))"
                        + (body["recurrence"].map { ", every \(Schedule.recurrenceText($0))" } ?? "")
                        + "; disabled until `thingif timer enable \(thingID) \(name)`")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a thing's timer triggers.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String

        func run() throws {
            try global.asUser { ctx, client in
                let answer = try client.call("GET", TimerGroup.path(client, thingID))
                let timers = try list(answer, "timerTriggers")
                if ctx.json { print(answer.pretty); return }
                print(timers.isEmpty ? "no timer triggers for \(thingID)" : Automation.timerList(timers))
            }
        }
    }

    static func change(_ global: GlobalOptions, _ thingID: String, _ name: String, _ verb: String) throws {
        try changeResource(global, thingID, name, verb, noun: "timer", path: path)
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a timer trigger.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The timer's name.") var name: String
        func run() throws { try TimerGroup.change(global, thingID, name, "enable") }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable a timer trigger.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The timer's name.") var name: String
        func run() throws { try TimerGroup.change(global, thingID, name, "disable") }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a timer trigger.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The timer's name.") var name: String
        func run() throws { try TimerGroup.change(global, thingID, name, "delete") }
    }
}

// MARK: - trigger

struct TriggerGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trigger",
        abstract: "The hub's server triggers: a command issued when the state matches, or on a schedule.",
        subcommands: [Create.self, List.self, Enable.self, Disable.self, Delete.self])

    static func path(_ client: HubClient, _ thingID: String, _ id: String? = nil) -> String {
        client.target(thingID) + "/triggers" + (id.map { "/" + HubClient.pathComponent($0) } ?? "")
    }

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Create a trigger: a predicate and the command it issues (ACTION [key=value …] …, or --raw JSON).",
            discussion: """
                Exactly one of --when-state CONDITION, --condition-json JSON, --cron "m h dom mon dow" or --once TIME. \
                A CONDITION is power=true, temp>25, temp>=16&&temp<=30, !(power=true), a=1||b=2 (&& binds tighter \
                than ||; parentheses group; field!=value is not(eq)). --triggers-when is CONDITION_TRUE, \
                CONDITION_FALSE_TO_TRUE (the default) or CONDITION_CHANGED. --once takes epoch milliseconds, \
                ISO-8601 with Z or an offset, or +10m. For example: \
                thingif trigger create th.1234 --when-state 'temp>28' turnPower power=true setPresetTemperature presetTemperature=24
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: ArgumentHelp("The command's actions and their parameters.", valueName: "action-or-key=value"))
        var words: [String] = []
        @Option(
            name: .customLong("when-state"), help: ArgumentHelp("Fire on the thing's state.", valueName: "condition"))
        var whenState: String?
        @Option(
            name: .customLong("condition-json"),
            help: ArgumentHelp("The state condition as Thing-IF JSON.", valueName: "json"))
        var conditionJSON: String?
        @Option(
            name: .customLong("triggers-when"), help: ArgumentHelp("When a state condition fires.", valueName: "mode"))
        var triggersWhen = "CONDITION_FALSE_TO_TRUE"
        @Option(help: ArgumentHelp("Fire on a cron schedule (five fields).", valueName: "m h dom mon dow")) var cron:
            String?
        @Option(help: ArgumentHelp("Fire once at this time.", valueName: "time")) var once: String?
        @Option(help: ArgumentHelp("The command's actions as a JSON array.", valueName: "json")) var raw: String?
        @Option(help: "The schema name.") var schema = "AirConditioner-Demo"
        @Option(name: .customLong("schema-version"), help: "The schema version.") var schemaVersion = 1

        func predicate(now: Date = Date()) throws -> Automation.Predicate {
            let given = [whenState, conditionJSON, cron, once].compactMap { $0 }
            guard given.count == 1 else {
                throw ValidationError(
                    given.isEmpty
                        ? "give the predicate: --when-state CONDITION, --condition-json JSON, --cron \"m h dom mon dow\" or --once TIME"
                        : "give only one of --when-state, --condition-json, --cron and --once")
            }
            return try usage {
                if whenState != nil || conditionJSON != nil {
                    guard Automation.triggersWhenModes.contains(triggersWhen) else {
                        throw ActionParseError(
                            message: "--triggers-when is one of \(Automation.triggersWhenModes.joined(separator: ", "))"
                        )
                    }
                    let c =
                        whenState != nil ? try Condition.parse(whenState!) : try Condition.parse(json: conditionJSON!)
                    return .states(condition: c, triggersWhen: triggersWhen)
                }
                if let cron { return .schedule(cron: try Schedule.cron(cron)) }
                return .scheduleOnce(at: try Schedule.time(once!, now: now))
            }
        }

        func validate() throws {
            _ = try predicate()
            _ = try actionWords(words, raw: raw)
        }

        func run() throws {
            try global.asUser { ctx, client in
                let body = Automation.triggerBody(
                    predicate: try predicate(), schema: schema, schemaVersion: schemaVersion,
                    actions: try actionWords(words, raw: raw), userID: try ctx.requireUserID())
                let answer = try client.call("POST", TriggerGroup.path(client, thingID), body: body)
                guard let id = answer["triggerID"]?.stringValue else {
                    throw HubClientError(description: "the hub's answer lacks triggerID: \(answer.text)")
                }
                if ctx.json {
                    print(answer.pretty)
                } else {
                    print("trigger \(id) created for \(thingID): \(Automation.predicateSummary(body["predicate"]))")
                }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a thing's triggers (all pages).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String

        func run() throws {
            try global.asUser { ctx, client in
                var triggers: [JSONValue] = []
                var key: String?
                repeat {
                    let page = try client.call(
                        "GET", TriggerGroup.path(client, thingID),
                        query: key.map { [("paginationKey", $0)] } ?? [])
                    let items = try list(page, "triggers")
                    triggers += items
                    key = page["nextPaginationKey"]?.stringValue
                    if items.isEmpty { break }
                } while key != nil
                if ctx.json { print(JSONValue.object([("triggers", .array(triggers))]).pretty); return }
                print(triggers.isEmpty ? "no triggers for \(thingID)" : Automation.triggerList(triggers))
            }
        }
    }

    static func change(_ global: GlobalOptions, _ thingID: String, _ id: String, _ verb: String) throws {
        try changeResource(global, thingID, id, verb, noun: "trigger", path: path)
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a trigger.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The trigger's ID.") var triggerID: String
        func run() throws { try TriggerGroup.change(global, thingID, triggerID, "enable") }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable a trigger.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The trigger's ID.") var triggerID: String
        func run() throws { try TriggerGroup.change(global, thingID, triggerID, "disable") }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a trigger.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The trigger's ID.") var triggerID: String
        func run() throws { try TriggerGroup.change(global, thingID, triggerID, "delete") }
    }
}

/// enable / disable (PUT …/{id}/{verb}) or delete (DELETE …/{id}) a timer or trigger.
private func changeResource(
    _ global: GlobalOptions, _ thingID: String, _ id: String, _ verb: String, noun: String,
    path: (HubClient, String, String?) -> String
) throws {
    try global.asUser { ctx, client in
        if verb == "delete" {
            try client.call("DELETE", path(client, thingID, id))
        } else {
            try client.call("PUT", path(client, thingID, id) + "/" + verb)
        }
        if ctx.json { print("{}") } else { print("\(noun) \(id) of \(thingID): \(verb)d") }
    }
}
