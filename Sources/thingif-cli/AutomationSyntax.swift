// SPDX-License-Identifier: Apache-2.0

import Foundation
import ThingIF
import ThingIFRules

// The parts of `thingif actionset`, `thingif timer` and `thingif trigger`
// that need no hub: condition expressions, times, recurrences and the
// request bodies.

/// A bad word in an automation command (a usage error, exit status 2).
typealias AutomationParseError = ActionParseError

// MARK: - conditions

/// A small expression for a STATES trigger's condition:
///
///   power=true   temp>25   temp>=16&&temp<=30   !(power=true)   a=1||b=2
///
/// `field=value` (or `==`) is Thing-IF's eq; `<`, `<=`, `>`, `>=` a range;
/// `field!=value` is not(eq); `&&` and; `||` or (looser than `&&`); `!` not;
/// parentheses group. A value is JSON when it reads as JSON (true, 25, "a b"),
/// else the bare word as a string.
enum Condition {
    static func parse(_ text: String) throws -> JSONValue {
        var p = Parser(chars: Array(text))
        p.skipSpace()
        guard !p.atEnd else { throw err("the condition is empty (e.g. power=true)") }
        let v = try p.or()
        p.skipSpace()
        guard p.atEnd else { throw err("unexpected '\(String(p.chars[p.i...]))' in the condition '\(text)'") }
        try check(v)
        return v
    }

    /// Checks a `--condition-json` object: its type and members, recursively.
    static func parse(json: String) throws -> JSONValue {
        let v: JSONValue
        do { v = try JSONValue.parse(json) } catch { throw err("--condition-json is not valid JSON: \(error)") }
        try check(v)
        return v
    }

    /// Checks a condition with the hub's own rules (ThingIFRules): its
    /// shape, its depth and its clause count, so that the CLI refuses what
    /// the hub would refuse before it sends anything.
    static func check(_ v: JSONValue) throws {
        let j: JSON
        switch JSON.parse(v.text) {
        case .success(let parsed): j = parsed
        case .failure: throw err("the condition is not valid JSON: \(v.text)")
        }
        if case .failure(let e) = StateCondition.parse(j) { throw err("\(e.message): \(v.text)") }
    }

    /// A condition back in the expression syntax (for the tables).
    static func text(_ v: JSONValue) -> String {
        text(v, inside: nil)
    }

    private static func text(_ v: JSONValue, inside: String?) -> String {
        let field = v["field"]?.stringValue ?? "?"
        switch v["type"]?.stringValue {
        case "eq":
            return "\(field)=\(v["value"].map(Actions.paramText) ?? "?")"
        case "not":
            guard let c = v["clause"] else { return v.text }
            if c["type"]?.stringValue == "eq", let f = c["field"]?.stringValue {
                return "\(f)!=\(c["value"].map(Actions.paramText) ?? "?")"
            }
            return "!(\(text(c, inside: nil)))"
        case "range":
            var parts: [String] = []
            if let l = v["lowerLimit"] {
                parts.append("\(field)\(v["lowerIncluded"]?.boolValue == true ? ">=" : ">")\(l.text)")
            }
            if let u = v["upperLimit"] {
                parts.append("\(field)\(v["upperIncluded"]?.boolValue == true ? "<=" : "<")\(u.text)")
            }
            let s = parts.joined(separator: "&&")
            return parts.count > 1 && inside == "or" ? "(\(s))" : s
        case "and", "or":
            let type = v["type"]!.stringValue!
            let s = (v["clauses"]?.arrayValue ?? []).map { text($0, inside: type) }
                .joined(separator: type == "and" ? "&&" : "||")
            return type == "or" && inside == "and" ? "(\(s))" : s
        default:
            return v.text
        }
    }

    static func err(_ m: String) -> AutomationParseError { AutomationParseError(message: m) }

    static func eq(_ field: String, _ value: JSONValue) -> JSONValue {
        .object([("type", .string("eq")), ("field", .string(field)), ("value", value)])
    }

    private struct Parser {
        let chars: [Character]
        var i = 0

        var atEnd: Bool { i >= chars.count }
        mutating func skipSpace() { while i < chars.count, chars[i].isWhitespace { i += 1 } }
        mutating func take(_ s: String) -> Bool {
            skipSpace()
            let t = Array(s)
            guard i + t.count <= chars.count, Array(chars[i..<i + t.count]) == t else { return false }
            i += t.count
            return true
        }

        mutating func or() throws -> JSONValue {
            var clauses = [try and()]
            while take("||") { clauses.append(try and()) }
            return clauses.count == 1 ? clauses[0] : .object([("type", .string("or")), ("clauses", .array(clauses))])
        }

        mutating func and() throws -> JSONValue {
            var clauses = [try unary()]
            while take("&&") { clauses.append(try unary()) }
            return clauses.count == 1 ? clauses[0] : .object([("type", .string("and")), ("clauses", .array(clauses))])
        }

        mutating func unary() throws -> JSONValue {
            if take("!") {
                return .object([("type", .string("not")), ("clause", try unary())])
            }
            if take("(") {
                let v = try or()
                guard take(")") else { throw err("a '(' in the condition has no ')'") }
                return v
            }
            return try comparison()
        }

        mutating func comparison() throws -> JSONValue {
            skipSpace()
            let start = i
            while i < chars.count, chars[i].isLetter || chars[i].isNumber || "_.-$:@".contains(chars[i]) { i += 1 }
            let field = String(chars[start..<i])
            guard !field.isEmpty else {
                throw err(
                    atEnd
                        ? "the condition ends where a field was expected (e.g. power=true)"
                        : "a field name was expected at '\(String(chars[i...]))'")
            }
            skipSpace()
            var op = ""
            for candidate in ["==", "!=", "<=", ">=", "=", "<", ">"] where take(candidate) { op = candidate; break }
            guard !op.isEmpty else {
                throw err("'\(field)' needs a comparison: \(field)=VALUE, \(field)>N, \(field)<=N …")
            }
            let raw = try valueText()
            let value = Actions.value(raw)
            switch op {
            case "=", "==": return Condition.eq(field, value)
            case "!=": return .object([("type", .string("not")), ("clause", Condition.eq(field, value))])
            default:
                guard case .number = value else { throw err("'\(field)\(op)\(raw)': a range needs a number") }
                let upper = op.hasPrefix("<")
                return .object([
                    ("type", .string("range")), ("field", .string(field)),
                    (upper ? "upperLimit" : "lowerLimit", value),
                    (upper ? "upperIncluded" : "lowerIncluded", .bool(op.hasSuffix("=")))
                ])
            }
        }

        /// A value: a JSON string in quotes, or the text up to a space,
        /// `&&`, `||` or `)`.
        mutating func valueText() throws -> String {
            skipSpace()
            let start = i
            if i < chars.count, chars[i] == "\"" {
                i += 1
                while i < chars.count, chars[i] != "\"" { if chars[i] == "\\" { i += 1 }; i += 1 }
                guard i < chars.count else { throw err("a quoted value in the condition has no closing '\"'") }
                i += 1
                return String(chars[start..<i])
            }
            while i < chars.count, !chars[i].isWhitespace, chars[i] != ")" {
                if i + 1 < chars.count,
                    (chars[i] == "&" && chars[i + 1] == "&") || (chars[i] == "|" && chars[i + 1] == "|")
                {
                    break
                }
                i += 1
            }
            guard i > start else { throw err("a value is missing after the comparison") }
            return String(chars[start..<i])
        }
    }
}

// MARK: - times and recurrences

enum Schedule {
    /// A time as epoch milliseconds: digits (epoch ms), ISO-8601
    /// (`2026-12-01T08:00:00Z`, with an offset, or without one in `zone`), or
    /// `+N{s,m,h,d,w}` from `now`.
    static func time(_ text: String, now: Date = Date(), zone: TimeZone? = nil) throws -> Int64 {
        let s = text.trimmingCharacters(in: .whitespaces)
        if !s.isEmpty, s.allSatisfy(\.isASCIIDigit) {
            guard let ms = Int64(s) else { throw err("'\(text)' is too large for epoch milliseconds") }
            return ms
        }
        if s.hasPrefix("+") {
            let seconds = try duration(
                String(s.dropFirst()), units: ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800],
                what: "'\(text)': a relative time is +N followed by s, m, h, d or w (e.g. +10m)")
            return Int64((now.timeIntervalSince1970 * 1000).rounded()) + seconds * 1000
        }
        if let d = iso(s, zone: zone) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        throw err("'\(text)' is not a time: give epoch milliseconds, ISO-8601 (2026-12-01T08:00:00Z) or +10m")
    }

    private static func iso(_ s: String, zone: TimeZone?) -> Date? {
        for options: ISO8601DateFormatter.Options in [
            [.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds]
        ] {
            let f = ISO8601DateFormatter()
            f.formatOptions = options
            if let d = f.date(from: s) { return d }
        }
        // A local date and time (no offset): in the given zone.
        guard let zone else { return nil }
        for format in ["yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm"] {
            let f = DateFormatter()
            f.locale = Locale(identifier: "en_US_POSIX")
            f.timeZone = zone
            f.dateFormat = format
            f.isLenient = false
            if let d = f.date(from: s) { return d }
        }
        return nil
    }

    static let recurrenceUnits: [Character: (name: String, seconds: Int64)] = [
        "m": ("minute", 60), "h": ("hour", 3600), "d": ("day", 86400), "w": ("week", 604_800)
    ]

    /// `--every N{m,h,d,w}` as {"unit","count"}; from 5 minutes to 5 weeks.
    static func recurrence(_ text: String) throws -> JSONValue {
        let s = text.trimmingCharacters(in: .whitespaces)
        let what = "'\(text)': --every is N followed by m, h, d or w (e.g. 30m, 1h, 1d, 2w)"
        guard let last = s.last, let unit = recurrenceUnits[last] else { throw err(what) }
        let digits = s.dropLast()
        guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit), let count = Int64(digits), count > 0 else {
            throw err(what)
        }
        let total = count.multipliedReportingOverflow(by: unit.seconds)
        guard !total.overflow, total.partialValue * 1000 >= AutomationLimits.minRecurrenceMs,
            total.partialValue * 1000 <= AutomationLimits.maxRecurrenceMs
        else {
            throw err("'\(text)': a recurrence must be at least 5 minutes and at most 5 weeks")
        }
        return .object([("unit", .string(unit.name)), ("count", .number(String(count)))])
    }

    /// A recurrence back as the --every text (`30m`), for the tables.
    static func recurrenceText(_ v: JSONValue?) -> String {
        guard let v, let unit = v["unit"]?.stringValue, let count = v["count"]?.intValue else { return "-" }
        guard let letter = recurrenceUnits.first(where: { $0.value.name == unit })?.key else {
            return "\(count) \(unit)"
        }
        return "\(count)\(letter)"
    }

    private static func duration(_ s: String, units: [Character: Int64], what: String) throws -> Int64 {
        guard let last = s.last, let unit = units[last] else { throw err(what) }
        let digits = s.dropLast()
        guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit), let n = Int64(digits) else { throw err(what) }
        let total = n.multipliedReportingOverflow(by: unit)
        guard !total.overflow, total.partialValue < 1 << 40 else { throw err(what) }
        return total.partialValue
    }

    /// A time zone name as the hub takes it (Area/City, or UTC).
    static func timeZone(_ name: String) throws -> TimeZone {
        guard AutomationCodec.checkTimeZone(name) == nil, let zone = TimeZone(identifier: name) else {
            throw err("'\(name)' is not a time zone: give an IANA name such as Europe/Berlin or UTC")
        }
        return zone
    }

    /// Five cron fields (minute hour day-of-month month day-of-week), read
    /// by the hub's own parser (ThingIFRules.CronSchedule): what it refuses
    /// is refused here.
    static func cron(_ text: String) throws -> String {
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard fields.count == 5 else {
            throw err(
                "'\(text)': --cron takes five fields, \"minute hour day-of-month month day-of-week\" (e.g. \"0 8 * * 1-5\")"
            )
        }
        let joined = fields.joined(separator: " ")
        guard CronSchedule(joined) != nil else {
            throw err(
                "'\(text)' is not a schedule: each field is *, a number, a range a-b, a list a,b or a step */n, "
                    + "within minute 0-59, hour 0-23, day 1-31, month 1-12, weekday 0-7")
        }
        return joined
    }

    static func err(_ m: String) -> AutomationParseError { AutomationParseError(message: m) }
}

private extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

// MARK: - bodies

enum Automation {
    static let triggersWhenModes = ["CONDITION_TRUE", "CONDITION_FALSE_TO_TRUE", "CONDITION_CHANGED"]

    /// Actions in Thing-IF's form (`[{"turnPower":{"power":true}}]`) as an
    /// action set's list: `[{"schema","schemaVersion","action","params"}]`.
    static func actionSetActions(_ actions: JSONValue, schema: String, schemaVersion: Int) -> JSONValue {
        .array(
            (actions.arrayValue ?? []).compactMap { item in
                guard let (name, params) = item.objectValue?.first else { return nil }
                return .object([
                    ("schema", .string(schema)), ("schemaVersion", .number(String(schemaVersion))),
                    ("action", .string(name)), ("params", params)
                ])
            })
    }

    /// `--raw` for an action set: the action set's own list
    /// (`[{"schema",…,"action","params"}]`, kept as given; a missing schema
    /// gets the defaults) or Thing-IF's actions (`[{"turnPower":{…}}]`).
    static func actionSetActions(raw: String, schema: String, schemaVersion: Int) throws -> JSONValue {
        let v: JSONValue
        do { v = try JSONValue.parse(raw) } catch { throw Condition.err("--raw is not valid JSON: \(error)") }
        guard let items = v.arrayValue, !items.isEmpty else {
            throw Condition.err(
                #"--raw must be a non-empty JSON array, e.g. '[{"turnPower":{"power":true}}]' or '[{"action":"turnPower","params":{"power":true}}]'"#
            )
        }
        if items.allSatisfy({ $0["action"]?.stringValue != nil }) {
            return .array(
                items.map { item in
                    var members = item.objectValue ?? []
                    if item["schema"] == nil { members.insert(("schema", .string(schema)), at: 0) }
                    if item["schemaVersion"] == nil {
                        members.insert(("schemaVersion", .number(String(schemaVersion))), at: 1)
                    }
                    if item["params"] == nil { members.append(("params", .object([]))) }
                    return .object(members)
                })
        }
        return actionSetActions(try Actions.parse(raw: raw), schema: schema, schemaVersion: schemaVersion)
    }

    static func actionSetBody(actions: JSONValue) -> JSONValue {
        .object([("actions", actions)])
    }

    /// An action set's actions as `turnPower power=true, setFanSpeed fanSpeed=5`.
    static func actionSetSummary(_ actions: JSONValue?) -> String {
        guard let items = actions?.arrayValue else { return "-" }
        if items.isEmpty { return "-" }
        return items.map { item -> String in
            guard let name = item["action"]?.stringValue else { return Actions.summary(action: item) }
            return Actions.summary(action: .object([(name, item["params"] ?? .object([]))]))
        }.joined(separator: ", ")
    }

    /// Checks an action set as the hub and the thing will (AutomationCodec).
    static func checkActionSet(name: String, actions: JSONValue) throws {
        guard case .success(let list) = JSON.parse(Array(actions.text.utf8)) else {
            throw AutomationParseError(message: "unreadable actions")
        }
        let j = JSON.object()
        j.set("name", string: name)
        j.set("actions", list)
        if case .failure(let m) = AutomationCodec.decodeSet(j) { throw AutomationParseError(message: m.description) }
    }

    /// Checks a timer's body as the hub and the thing will (AutomationCodec),
    /// but for the action set names, which only the hub knows.
    static func checkTimer(name: String, body: JSONValue) throws {
        guard case .success(let j) = JSON.parse(Array(body.text.utf8)) else {
            throw AutomationParseError(message: "unreadable body")
        }
        j.set("name", string: name)
        switch AutomationCodec.decodeTrigger(j) {
        case .failure(let m): throw AutomationParseError(message: m.description)
        case .success(let t):
            if let p = AutomationCodec.check(t, knownSets: { _ in true }) {
                throw AutomationParseError(message: p.description)
            }
        }
    }

    static func timerBody(fireDate: Int64, recurrence: JSONValue?, timeZone: String, actionSets: [String]) -> JSONValue
    {
        var body: [(String, JSONValue)] = [("fireDate", .number(String(fireDate)))]
        if let recurrence { body.append(("recurrence", recurrence)) }
        body.append(("timeZone", .string(timeZone)))
        body.append(("actionSets", .array(actionSets.map(JSONValue.string))))
        return .object(body)
    }

    enum Predicate: Equatable {
        case states(condition: JSONValue, triggersWhen: String)
        case schedule(cron: String)
        case scheduleOnce(at: Int64)

        var json: JSONValue {
            switch self {
            case .states(let c, let w):
                return .object([("eventSource", .string("STATES")), ("condition", c), ("triggersWhen", .string(w))])
            case .schedule(let cron):
                return .object([("eventSource", .string("SCHEDULE")), ("schedule", .string(cron))])
            case .scheduleOnce(let at):
                return .object([("eventSource", .string("SCHEDULE_ONCE")), ("scheduleAt", .number(String(at)))])
            }
        }
    }

    static func triggerBody(
        predicate: Predicate, schema: String, schemaVersion: Int, actions: JSONValue,
        userID: String
    ) -> JSONValue {
        .object([
            ("predicate", predicate.json),
            (
                "command",
                .object([
                    ("schema", .string(schema)), ("schemaVersion", .number(String(schemaVersion))),
                    ("actions", actions), ("issuer", .string("user:" + userID))
                ])
            )
        ])
    }

    /// A predicate in one line: `STATES power=true (CONDITION_TRUE)`,
    /// `SCHEDULE "0 8 * * *"`, `SCHEDULE_ONCE 2026-12-01 08:00:00Z`.
    static func predicateSummary(_ p: JSONValue?) -> String {
        guard let p else { return "-" }
        switch p["eventSource"]?.stringValue {
        case "STATES":
            let c = p["condition"].map(Condition.text) ?? "?"
            return "STATES \(c)" + (p["triggersWhen"]?.stringValue.map { " (\($0))" } ?? "")
        case "SCHEDULE":
            return "SCHEDULE \"\(p["schedule"]?.stringValue ?? "?")\""
        case "SCHEDULE_ONCE":
            return "SCHEDULE_ONCE \(Format.time(p["scheduleAt"]?.intValue))"
        default:
            return p.text
        }
    }

    /// Whether a trigger or timer is enabled: its `enabled`, else not its `disabled`.
    static func enabled(_ v: JSONValue) -> Bool? {
        if let e = v["enabled"]?.boolValue { return e }
        if let d = v["disabled"]?.boolValue { return !d }
        return nil
    }

    static func yesNo(_ b: Bool?) -> String { b.map { $0 ? "yes" : "no" } ?? "-" }

    static func actionSetList(_ sets: [JSONValue]) -> String {
        var rows = [["NAME", "ACTIONS"]]
        for s in sets { rows.append([s["name"]?.stringValue ?? "-", actionSetSummary(s["actions"])]) }
        return Format.table(rows)
    }

    static func timerList(_ timers: [JSONValue]) -> String {
        var rows = [["NAME", "ENABLED", "FIRE DATE", "EVERY", "TIME ZONE", "ACTION SETS"]]
        for t in timers {
            let sets = (t["actionSets"]?.arrayValue ?? []).map { $0.stringValue ?? $0.text }
            rows.append([
                t["name"]?.stringValue ?? "-", yesNo(enabled(t)), Format.time(t["fireDate"]?.intValue),
                Schedule.recurrenceText(t["recurrence"]), t["timeZone"]?.stringValue ?? "-",
                sets.isEmpty ? "-" : sets.joined(separator: ", ")
            ])
        }
        return Format.table(rows)
    }

    static func triggerList(_ triggers: [JSONValue]) -> String {
        var rows = [["TRIGGER ID", "ENABLED", "PREDICATE", "COMMAND"]]
        for t in triggers {
            rows.append([
                t["triggerID"]?.stringValue ?? "-", yesNo(enabled(t)), predicateSummary(t["predicate"]),
                Actions.summary(t["command"]?["actions"])
            ])
        }
        return Format.table(rows)
    }
}
