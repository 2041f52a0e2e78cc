// SPDX-License-Identifier: Apache-2.0

/// Device automation's types, JSON codec and checks: one copy for the thing
/// (its C API, its automation.json and the framework's remote configuration
/// on p/{mqttTopic}/config), the hub (which builds that configuration from
/// its REST API and refuses, with the thing's own words, anything the thing
/// would refuse) and the CLI (which checks before it sends). The limits are
/// AutomationLimits.

/// One action of an action set: what a schema command would carry.
public struct AutomationAction {
    public var schema: String
    public var schemaVersion: Int
    public var action: String
    public var params: JSON

    public init(schema: String, schemaVersion: Int, action: String, params: JSON) {
        self.schema = schema
        self.schemaVersion = schemaVersion
        self.action = action
        self.params = params
    }
}

/// A named list of actions kept on the thing. `remote` ones came from the
/// framework's configuration message and are replaced by the next one.
public struct ActionSet {
    public var name: String
    public var actions: [AutomationAction]
    public var remote: Bool

    public init(name: String, actions: [AutomationAction], remote: Bool) {
        self.name = name
        self.actions = actions
        self.remote = remote
    }
}

public enum RecurrenceUnit: String, CaseIterable {
    case minute, hour, day, week

    public var minutes: Int64 {
        switch self {
        case .minute: return 1
        case .hour: return 60
        case .day: return 1440
        case .week: return 10080
        }
    }
}

public struct Recurrence {
    public var unit: RecurrenceUnit
    /// 1 ... AutomationLimits.maxRecurrenceCount (decode checks it, so the
    /// period never overflows).
    public var count: Int
    public var periodMs: Int64 { unit.minutes * Int64(count) * 60_000 }
    /// Day and week recurrences keep the local wall-clock time.
    public var isCalendar: Bool { unit == .day || unit == .week }

    public init(unit: RecurrenceUnit, count: Int) {
        self.unit = unit
        self.count = count
    }
}

/// A timer trigger: runs its action sets at fireDate, then every recurrence.
public struct TimerTrigger {
    public var name: String
    /// The first fire date as created: every occurrence is counted from it.
    public var startDate: Int64
    /// The next fire date (epoch ms).
    public var fireDate: Int64
    public var recurrence: Recurrence?
    public var timeZone: String
    public var actionSets: [String]
    public var enabled: Bool
    public var remote: Bool

    public init(
        name: String, startDate: Int64, fireDate: Int64, recurrence: Recurrence?, timeZone: String,
        actionSets: [String], enabled: Bool, remote: Bool
    ) {
        self.name = name
        self.startDate = startDate
        self.fireDate = fireDate
        self.recurrence = recurrence
        self.timeZone = timeZone
        self.actionSets = actionSets
        self.enabled = enabled
        self.remote = remote
    }

    /// The first occurrence after `now` (epoch ms); nil without recurrence.
    func nextOccurrence(after now: Int64, zone: TimeZoneRules?) -> Int64? {
        guard let r = recurrence else { return nil }
        let period = r.periodMs
        var k = max(Int64(1), (now - startDate) / period - 1)
        guard r.isCalendar, let zone else {
            while startDate + k * period <= now { k += 1 }
            return startDate + k * period
        }
        // Add whole days to the local wall-clock time of the start, then map
        // back to UTC with the zone's offset on that day.
        let sec = Civil.floorDiv(startDate, 1000), ms = startDate - sec * 1000
        let startLocal = zone.local(ofUTC: sec)
        func at(_ k: Int64) -> Int64 { zone.utc(ofLocal: startLocal + k * period / 1000) * 1000 + ms }
        while k > 1 && at(k - 1) > now { k -= 1 }
        while at(k) <= now { k += 1 }
        return at(k)
    }
}

/// A reason, as an Error, and the field of the entry it is about when it
/// is about one (the hub names it in Kii's `invalidFields`).
public struct StatusMessage: Error, ExpressibleByStringLiteral, CustomStringConvertible {
    public let description: String
    public let field: String?
    public init(_ s: String, field: String? = nil) {
        description = s
        self.field = field
    }
    public init(stringLiteral s: String) {
        description = s
        field = nil
    }
}

extension JSON {
    /// An integer as Int64 (epoch milliseconds).
    var epochMsValue: Int64? { int64Value }
}

public enum AutomationCodec {
    typealias L = AutomationLimits

    // MARK: checks

    /// Why `name` cannot name an action set or timer trigger, or nil: 1 to
    /// AutomationLimits.maxName bytes of UTF-8, no control characters.
    public static func checkName(_ name: String, _ what: String) -> String? {
        let n = name.utf8.count
        guard (1...L.maxName).contains(n) else {
            return str("\(what) name must be 1 to \(L.maxName) bytes, it is \(n)")
        }
        if name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
            return str("\(what) name must not hold control characters")
        }
        return nil
    }

    /// Why `zone` cannot be a timer trigger's time zone, or nil: it must be a
    /// zone the library can read and parse (TimeZoneRules), not just a file.
    public static func checkTimeZone(_ zone: String) -> String? {
        TimeZoneRules.load(zone) == nil
            ? str("unknown time zone \"\(zone)\" (not a zone in \(TimeZoneRules.directory))") : nil
    }

    /// Why a trigger cannot be stored, or nil. `knownSets` says whether an
    /// action set name exists.
    public static func check(_ t: TimerTrigger, knownSets: (String) -> Bool) -> StatusMessage? {
        if let p = checkName(t.name, "a timer trigger") { return StatusMessage(p) }
        if let r = t.recurrence {
            let ms = r.count >= 1 && r.count <= L.maxRecurrenceCount ? r.periodMs : 0
            if ms < L.minRecurrenceMs || ms > L.maxRecurrenceMs {
                return StatusMessage(
                    str(
                        "timer trigger \(t.name): a recurrence of \(r.count) \(r.unit.rawValue)(s) is outside 5 minutes .. 5 weeks (AutomationLimits.minRecurrenceMs, maxRecurrenceMs)"
                    ), field: "recurrence")
            }
        }
        if let p = checkTimeZone(t.timeZone) {
            return StatusMessage(str("timer trigger \(t.name): \(p)"), field: "timeZone")
        }
        if t.actionSets.isEmpty || t.actionSets.count > L.maxActionSetsPerTrigger {
            return StatusMessage(
                str(
                    "timer trigger \(t.name): it needs 1 to \(L.maxActionSetsPerTrigger) action sets (AutomationLimits.maxActionSetsPerTrigger), it has \(t.actionSets.count)"
                ), field: "actionSets")
        }
        for s in t.actionSets where !knownSets(s) {
            return StatusMessage(str("timer trigger \(t.name): no action set named \"\(s)\""), field: "actionSets")
        }
        return nil
    }

    // MARK: JSON (the remote configuration's shapes, also used on disk)

    public static func encode(_ s: ActionSet) -> JSON {
        let o = JSON.object()
        o.set("name", string: s.name)
        let list = JSON.array()
        for a in s.actions {
            let e = JSON.object()
            e.set("schema", string: a.schema)
            e.set("schemaVersion", .int(a.schemaVersion))
            e.set("action", string: a.action)
            e.set("params", a.params)
            list.append(e)
        }
        o.set("actions", list)
        return o
    }

    public static func encode(_ t: TimerTrigger) -> JSON {
        let o = JSON.object()
        o.set("name", string: t.name)
        o.set("fireDate", .int64(t.fireDate))
        if let r = t.recurrence {
            let rj = JSON.object()
            rj.set("unit", string: r.unit.rawValue)
            rj.set("count", .int(r.count))
            o.set("recurrence", rj)
        }
        o.set("timeZone", string: t.timeZone)
        let names = JSON.array()
        for n in t.actionSets { if let j = JSON.string(n) { names.append(j) } }
        o.set("actionSets", names)
        o.set("enabled", .bool(t.enabled))
        return o
    }

    public static func decodeSet(_ j: JSON) -> Result<ActionSet, StatusMessage> {
        guard j.isObject, let name = j["name"]?.stringValue else {
            return .failure("an action set needs a string \"name\"")
        }
        if let p = checkName(name, "an action set") { return .failure(StatusMessage(p)) }
        guard let list = j["actions"], list.isArray else {
            return .failure(StatusMessage(str("action set \(name): \"actions\" must be an array"), field: "actions"))
        }
        guard list.elements.count <= L.maxActionsPerSet else {
            return .failure(
                StatusMessage(
                    str(
                        "action set \(name): \(list.elements.count) actions, over AutomationLimits.maxActionsPerSet (\(L.maxActionsPerSet))"
                    ), field: "actions"
                ))
        }
        var actions: [AutomationAction] = []
        for (i, a) in list.elements.enumerated() {
            let schema = a["schema"]?.stringValue, action = a["action"]?.stringValue
            let schemaFits = schema.map { (1...L.maxIdentifier).contains($0.utf8.count) } ?? false
            guard a.isObject, schemaFits, let schema, let action, (1...L.maxIdentifier).contains(action.utf8.count)
            else {
                return .failure(
                    StatusMessage(
                        str(
                            "action set \(name): action \(i) needs string \"schema\" and \"action\" of 1 to \(L.maxIdentifier) bytes"
                        ), field: !a.isObject ? "actions" : schemaFits ? "action" : "schema"
                    ))
            }
            let version = a["schemaVersion"]?.intValue ?? 0
            guard version >= 0, version <= Int(Int32.max) else {
                return .failure(
                    StatusMessage(str("action set \(name): action \(i): bad \"schemaVersion\""), field: "schemaVersion")
                )
            }
            if let p = a["params"], !p.isNull, !p.isObject {
                return .failure(
                    StatusMessage(str("action set \(name): action \(i): \"params\" must be an object"), field: "params")
                )
            }
            let params = a["params"].flatMap { $0.isNull ? nil : $0.deepCopy() } ?? JSON.object()
            actions.append(AutomationAction(schema: schema, schemaVersion: version, action: action, params: params))
        }
        return .success(ActionSet(name: name, actions: actions, remote: true))
    }

    public static func decodeTrigger(_ j: JSON) -> Result<TimerTrigger, StatusMessage> {
        guard j.isObject, let name = j["name"]?.stringValue else {
            return .failure("a timer trigger needs a string \"name\"")
        }
        guard let fire = j["fireDate"]?.epochMsValue else {
            return .failure(
                StatusMessage(
                    str("timer trigger \(name): \"fireDate\" must be an integer (epoch ms)"), field: "fireDate"))
        }
        var recurrence: Recurrence?
        if let r = j["recurrence"], !r.isNull {
            guard let u = r["unit"]?.stringValue, let unit = RecurrenceUnit(named: u), let c = r["count"]?.intValue,
                c >= 1, c <= L.maxRecurrenceCount
            else {
                return .failure(
                    StatusMessage(
                        str(
                            "timer trigger \(name): \"recurrence\" must be {\"unit\":\"minute|hour|day|week\",\"count\":N}"
                        ), field: "recurrence")
                )
            }
            recurrence = Recurrence(unit: unit, count: c)
        }
        guard let tz = j["timeZone"]?.stringValue else {
            return .failure(
                StatusMessage(str("timer trigger \(name): \"timeZone\" must be a string"), field: "timeZone"))
        }
        guard let list = j["actionSets"], list.isArray else {
            return .failure(
                StatusMessage(
                    str("timer trigger \(name): \"actionSets\" must be an array of names"), field: "actionSets"))
        }
        var names: [String] = []
        for n in list.elements {
            guard let s = n.stringValue else {
                return .failure(
                    StatusMessage(str("timer trigger \(name): \"actionSets\" holds a non-string"), field: "actionSets"))
            }
            names.append(s)
        }
        let enabled = j["enabled"]?.boolValue ?? false
        return .success(
            TimerTrigger(
                name: name, startDate: fire, fireDate: fire, recurrence: recurrence, timeZone: tz,
                actionSets: names, enabled: enabled, remote: true))
    }

    /// A whole remote configuration's action sets and timer triggers, checked
    /// as the thing checks it: counts first (nothing over a limit is decoded),
    /// then every entry, names unique, every trigger valid and naming a set of
    /// the configuration or one of `localSets` (the thing's own). The hub runs
    /// this on what it is about to publish, with no local sets.
    public static func decodeConfig(_ j: JSON, localSets: [String] = [])
        -> Result<(sets: [ActionSet], triggers: [TimerTrigger]), StatusMessage>
    {
        guard j.isObject else { return .failure("not a JSON object") }
        if let v = j["actionSets"], !v.isArray { return .failure("\"actionSets\" must be an array") }
        if let v = j["timerTriggers"], !v.isArray { return .failure("\"timerTriggers\" must be an array") }
        let setList = j["actionSets"]?.elements ?? [], triggerList = j["timerTriggers"]?.elements ?? []
        guard setList.count <= L.maxActionSets else {
            return .failure(
                StatusMessage(
                    str("\(setList.count) action sets, over AutomationLimits.maxActionSets (\(L.maxActionSets))")))
        }
        guard triggerList.count <= L.maxTimerTriggers else {
            return .failure(
                StatusMessage(
                    str(
                        "\(triggerList.count) timer triggers, over AutomationLimits.maxTimerTriggers (\(L.maxTimerTriggers))"
                    )
                ))
        }
        var sets: [ActionSet] = []
        for e in setList {
            switch decodeSet(e) {
            case .failure(let m): return .failure(m)
            case .success(let s):
                if sets.contains(where: { $0.name.equals(s.name) }) {
                    return .failure(StatusMessage(str("action set \(s.name) appears twice")))
                }
                sets.append(s)
            }
        }
        var triggers: [TimerTrigger] = []
        for e in triggerList {
            switch decodeTrigger(e) {
            case .failure(let m): return .failure(m)
            case .success(let t):
                if triggers.contains(where: { $0.name.equals(t.name) }) {
                    return .failure(StatusMessage(str("timer trigger \(t.name) appears twice")))
                }
                if let p = check(
                    t, knownSets: { n in sets.contains { $0.name.equals(n) } || localSets.containsBytes(n) })
                {
                    return .failure(p)
                }
                triggers.append(t)
            }
        }
        return .success((sets, triggers))
    }
}
