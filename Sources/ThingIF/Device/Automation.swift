import CThingIF

/// One action of an action set: what a schema command would carry.
struct AutomationAction {
    var schema: String
    var schemaVersion: Int
    var action: String
    var params: JSON
}

/// A named list of actions kept on the thing. `remote` ones came from the
/// framework's configuration message and are replaced by the next one.
struct ActionSet {
    var name: String
    var actions: [AutomationAction]
    var remote: Bool
}

enum RecurrenceUnit: String {
    case minute, hour, day, week

    var minutes: Int64 {
        switch self {
        case .minute: return 1
        case .hour: return 60
        case .day: return 1440
        case .week: return 10080
        }
    }
}

struct Recurrence {
    var unit: RecurrenceUnit
    var count: Int
    var periodMs: Int64 { unit.minutes * Int64(count) * 60_000 }
    /// Day and week recurrences keep the local wall-clock time.
    var isCalendar: Bool { unit == .day || unit == .week }
}

/// A timer trigger: runs its action sets at fireDate, then every recurrence.
struct TimerTrigger {
    var name: String
    /// The first fire date as created: every occurrence is counted from it.
    var startDate: Int64
    /// The next fire date (epoch ms).
    var fireDate: Int64
    var recurrence: Recurrence?
    var timeZone: String
    var actionSets: [String]
    var enabled: Bool
    var remote: Bool

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

/// Action sets and timer triggers, persisted as one JSON file written
/// atomically (Storage.write) after every change. Not thread-safe: the
/// engine keeps it in `Thing.Shared`.
final class Automation {
    static let fileName = "automation.json"
    // The limits are AutomationLimits (Wire/), shared with the hub.
    static let maxNameBytes = AutomationLimits.maxName
    static let maxActionSetsPerTrigger = AutomationLimits.maxActionSetsPerTrigger
    static let minRecurrenceMinutes: Int64 = AutomationLimits.minRecurrenceMs / 60_000
    static let maxRecurrenceMinutes: Int64 = AutomationLimits.maxRecurrenceMs / 60_000

    private let storage: Storage
    var sets: [ActionSet] = []
    var triggers: [TimerTrigger] = []
    /// The version of the last remote configuration applied.
    var remoteVersion: Int?
    private(set) var loadProblem: String?

    init(storage: Storage) {
        self.storage = storage
        guard let bytes = storage.read(Automation.fileName, limit: 16 << 20) else { return }
        guard case .success(let j) = JSON.parse(bytes), j.isObject else {
            loadProblem = "\(storage.path(Automation.fileName)) is not valid JSON; starting without action sets and timers"
            return
        }
        remoteVersion = j["remoteVersion"]?.intValue
        for s in j["actionSets"]?.elements ?? [] {
            guard case .success(var set) = Automation.decodeSet(s) else { continue }
            set.remote = s["remote"]?.boolValue ?? false
            sets.append(set)
        }
        for t in j["timerTriggers"]?.elements ?? [] {
            guard case .success(var trig) = Automation.decodeTrigger(t) else { continue }
            trig.remote = t["remote"]?.boolValue ?? false
            trig.startDate = t["startDate"]?.epochMsValue ?? trig.fireDate
            triggers.append(trig)
        }
    }

    func set(named name: String) -> Int? { sets.firstIndex { $0.name == name } }
    func trigger(named name: String) -> Int? { triggers.firstIndex { $0.name == name } }

    func save() -> Bool {
        let o = JSON.object()
        if let remoteVersion { o.set("remoteVersion", .int(remoteVersion)) }
        let a = JSON.array()
        for s in sets {
            let e = Automation.encode(s)
            e.set("remote", .bool(s.remote))
            a.append(e)
        }
        o.set("actionSets", a)
        let t = JSON.array()
        for tr in triggers {
            let e = Automation.encode(tr)
            e.set("startDate", .int(Int(tr.startDate)))
            e.set("remote", .bool(tr.remote))
            t.append(e)
        }
        o.set("timerTriggers", t)
        return storage.write(Automation.fileName, o.dumpBytes())
    }

    // MARK: validation

    static func checkName(_ name: String, _ what: String) -> String? {
        let n = name.utf8.count
        return (1...maxNameBytes).contains(n) ? nil : "\(what) name must be 1 to \(maxNameBytes) bytes, it is \(n)"
    }

    /// Why a trigger cannot be stored, or nil. `knownSets` says whether an
    /// action set name exists.
    static func check(_ t: TimerTrigger, knownSets: (String) -> Bool) -> String? {
        if let p = checkName(t.name, "a timer trigger") { return p }
        if let r = t.recurrence {
            let minutes = r.unit.minutes * Int64(r.count)
            if r.count < 1 || minutes < minRecurrenceMinutes || minutes > maxRecurrenceMinutes {
                return "timer trigger \(t.name): a recurrence of \(r.count) \(r.unit.rawValue)(s) is outside 5 minutes .. 5 weeks (AutomationLimits.minRecurrenceMs, maxRecurrenceMs)"
            }
        }
        if TimeZoneRules.load(t.timeZone) == nil {
            return "timer trigger \(t.name): unknown time zone \"\(t.timeZone)\" (not in \(TimeZoneRules.directory))"
        }
        if t.actionSets.isEmpty || t.actionSets.count > maxActionSetsPerTrigger {
            return "timer trigger \(t.name): it needs 1 to \(maxActionSetsPerTrigger) action sets (AutomationLimits.maxActionSetsPerTrigger), it has \(t.actionSets.count)"
        }
        for s in t.actionSets where !knownSets(s) {
            return "timer trigger \(t.name): no action set named \"\(s)\""
        }
        return nil
    }

    // MARK: JSON (the remote configuration's shapes, also used on disk)

    static func encode(_ s: ActionSet) -> JSON {
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

    static func encode(_ t: TimerTrigger) -> JSON {
        let o = JSON.object()
        o.set("name", string: t.name)
        o.set("fireDate", .int(Int(t.fireDate)))
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

    static func decodeSet(_ j: JSON) -> Result<ActionSet, StatusMessage> {
        guard j.isObject, let name = j["name"]?.stringValue else { return .failure("an action set needs a string \"name\"") }
        if let p = checkName(name, "an action set") { return .failure(StatusMessage(p)) }
        guard let list = j["actions"], list.isArray else { return .failure(StatusMessage("action set \(name): \"actions\" must be an array")) }
        var actions: [AutomationAction] = []
        for (i, a) in list.elements.enumerated() {
            guard a.isObject, let schema = a["schema"]?.stringValue, !schema.isEmpty,
                  let action = a["action"]?.stringValue, !action.isEmpty else {
                return .failure(StatusMessage("action set \(name): action \(i) needs string \"schema\" and \"action\""))
            }
            let version = a["schemaVersion"]?.intValue ?? 0
            guard version >= 0, version <= Int(Int32.max) else {
                return .failure(StatusMessage("action set \(name): action \(i): bad \"schemaVersion\""))
            }
            let params = a["params"]?.deepCopy() ?? JSON.object()
            actions.append(AutomationAction(schema: schema, schemaVersion: version, action: action, params: params))
        }
        return .success(ActionSet(name: name, actions: actions, remote: true))
    }

    static func decodeTrigger(_ j: JSON) -> Result<TimerTrigger, StatusMessage> {
        guard j.isObject, let name = j["name"]?.stringValue else { return .failure("a timer trigger needs a string \"name\"") }
        guard let fire = j["fireDate"]?.epochMsValue else {
            return .failure(StatusMessage("timer trigger \(name): \"fireDate\" must be an integer (epoch ms)"))
        }
        var recurrence: Recurrence?
        if let r = j["recurrence"], !r.isNull {
            guard let u = r["unit"]?.stringValue, let unit = RecurrenceUnit(rawValue: u), let c = r["count"]?.intValue else {
                return .failure(StatusMessage("timer trigger \(name): \"recurrence\" must be {\"unit\":\"minute|hour|day|week\",\"count\":N}"))
            }
            recurrence = Recurrence(unit: unit, count: c)
        }
        guard let tz = j["timeZone"]?.stringValue else {
            return .failure(StatusMessage("timer trigger \(name): \"timeZone\" must be a string"))
        }
        guard let list = j["actionSets"], list.isArray else {
            return .failure(StatusMessage("timer trigger \(name): \"actionSets\" must be an array of names"))
        }
        var names: [String] = []
        for n in list.elements {
            guard let s = n.stringValue else { return .failure(StatusMessage("timer trigger \(name): \"actionSets\" holds a non-string")) }
            names.append(s)
        }
        let enabled = j["enabled"]?.boolValue ?? false
        return .success(TimerTrigger(name: name, startDate: fire, fireDate: fire, recurrence: recurrence, timeZone: tz,
                                     actionSets: names, enabled: enabled, remote: true))
    }
}

/// A reason, as an Error.
struct StatusMessage: Error, ExpressibleByStringLiteral, CustomStringConvertible {
    let description: String
    init(_ s: String) { description = s }
    init(stringLiteral s: String) { description = s }
}

extension JSON {
    /// An integer as Int64 (epoch milliseconds).
    var epochMsValue: Int64? { intValue.map { Int64($0) } }
}
