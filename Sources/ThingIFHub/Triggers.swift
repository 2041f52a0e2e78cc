import CThingIF
import ThingIF

// Server triggers (Thing-IF's trigger API): a predicate on a thing (its
// state, a cron schedule, or one point in time) and the command it issues.

/// A field of the thing's state: a top-level key, or with a trait alias
/// (Kii's "alias" in a condition) a key of the state nested under it.
struct StateField {
    var alias: String?
    var name: String

    func value(in state: JSON) -> JSON? {
        guard let alias else { return state[name] }
        return state[alias]?[name]
    }
}

/// A condition on the thing's state.
indirect enum StateCondition {
    case eq(field: StateField, value: JSON)
    case not(StateCondition)
    case range(field: StateField, upper: Double?, upperIncluded: Bool, lower: Double?, lowerIncluded: Bool)
    case and([StateCondition])
    case or([StateCondition])

    static let maxDepth = 16
    static let maxClauses = 64

    /// Parses {"type":"eq"|"not"|"range"|"and"|"or", …}.
    static func parse(_ j: JSON, depth: Int = 0) -> Result<StateCondition, HubError> {
        guard depth < maxDepth else { return .failure(.invalid("the condition is nested deeper than \(maxDepth)")) }
        guard j.isObject else { return .failure(.invalid("a condition must be an object, not \(j.typeName)")) }
        guard let type = j["type"]?.stringValue else {
            return .failure(.invalid("a condition needs \"type\": a string"))
        }
        func field() -> Result<StateField, HubError> {
            guard let f = j["field"]?.stringValue, !f.isEmpty else {
                return .failure(.invalid("a \(type) condition needs \"field\": a non-empty string"))
            }
            if let a = j["alias"], !a.isNull {
                guard let alias = a.stringValue, !alias.isEmpty else {
                    return .failure(.invalid("\"alias\" must be a non-empty string (a trait alias)"))
                }
                return .success(StateField(alias: alias, name: f))
            }
            return .success(StateField(alias: nil, name: f))
        }
        func clauses() -> Result<[StateCondition], HubError> {
            guard let list = j["clauses"], list.isArray, (1...maxClauses).contains(list.count) else {
                return .failure(
                    .invalid("an \(type) condition needs \"clauses\": an array of 1 to \(maxClauses) conditions"))
            }
            var out: [StateCondition] = []
            for c in list.elements {
                switch parse(c, depth: depth + 1) {
                case .failure(let e): return .failure(e)
                case .success(let x): out.append(x)
                }
            }
            return .success(out)
        }
        switch type {
        case "eq":
            guard let v = j["value"], !v.isObject, !v.isArray, let copy = v.deepCopy() else {
                return .failure(.invalid("an eq condition needs \"value\": a string, number, boolean or null"))
            }
            return field().map { .eq(field: $0, value: copy) }
        case "not":
            guard let c = j["clause"] else { return .failure(.invalid("a not condition needs \"clause\"")) }
            return parse(c, depth: depth + 1).map { .not($0) }
        case "range":
            func limit(_ key: String) -> Result<Double?, HubError> {
                guard let v = j[key], !v.isNull else { return .success(nil) }
                guard let d = number(v) else {
                    return .failure(.invalid("\"\(key)\" must be a number, not \(v.typeName)"))
                }
                return .success(d)
            }
            func flag(_ key: String) -> Result<Bool, HubError> {
                guard let v = j[key], !v.isNull else { return .success(true) }
                guard let b = v.boolValue else {
                    return .failure(.invalid("\"\(key)\" must be a boolean, not \(v.typeName)"))
                }
                return .success(b)
            }
            let f: StateField, upper: Double?, lower: Double?, ui: Bool, li: Bool
            do {
                f = try field().get()
                upper = try limit("upperLimit").get()
                lower = try limit("lowerLimit").get()
                ui = try flag("upperIncluded").get()
                li = try flag("lowerIncluded").get()
            } catch let e as HubError {
                return .failure(e)
            } catch {
                return .failure(.invalid("bad range condition"))
            }
            guard upper != nil || lower != nil else {
                return .failure(.invalid("a range condition needs upperLimit, lowerLimit or both"))
            }
            return .success(.range(field: f, upper: upper, upperIncluded: ui, lower: lower, lowerIncluded: li))
        case "and":
            return clauses().map { .and($0) }
        case "or":
            return clauses().map { .or($0) }
        default:
            return .failure(.invalid("unknown condition type \(type): eq, not, range, and or or"))
        }
    }

    static func number(_ v: JSON) -> Double? {
        v.type == JSON_INTEGER || v.type == JSON_REAL ? json_number_value(v.raw) : nil
    }

    /// Whether the state (an object) matches; a missing field matches no eq
    /// or range.
    func matches(_ state: JSON) -> Bool {
        switch self {
        case .eq(let f, let value):
            guard let v = f.value(in: state) else { return false }
            if let a = Self.number(v), let b = Self.number(value) { return a == b }
            return json_equal(v.raw, value.raw) == 1
        case .not(let c):
            return !c.matches(state)
        case .range(let f, let upper, let ui, let lower, let li):
            guard let v = f.value(in: state), let x = Self.number(v) else { return false }
            if let upper, ui ? x > upper : x >= upper { return false }
            if let lower, li ? x < lower : x <= lower { return false }
            return true
        case .and(let cs):
            return cs.allSatisfy { $0.matches(state) }
        case .or(let cs):
            return cs.contains { $0.matches(state) }
        }
    }
}

/// A five-field cron schedule (minute hour day-of-month month day-of-week),
/// in UTC. Each field: *, a number, a range a-b, a list a,b,c, or a step
/// (*/n, a-b/n). Day of week 0-7 (0 and 7 are Sunday). As in cron, when both
/// day fields are restricted a day matches either.
public struct CronSchedule: Sendable, Equatable {
    public let minutes: Set<Int>
    public let hours: Set<Int>
    public let daysOfMonth: Set<Int>
    public let months: Set<Int>
    public let daysOfWeek: Set<Int>
    let domStar: Bool
    let dowStar: Bool

    public init?(_ text: String) {
        let f = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard f.count == 5,
            let mi = Self.field(f[0], 0, 59), let h = Self.field(f[1], 0, 23), let dom = Self.field(f[2], 1, 31),
            let mo = Self.field(f[3], 1, 12), let dow = Self.field(f[4], 0, 7)
        else { return nil }
        minutes = mi
        hours = h
        daysOfMonth = dom
        months = mo
        daysOfWeek = Set(dow.map { $0 % 7 })
        domStar = f[2].hasPrefix("*")
        dowStar = f[4].hasPrefix("*")
    }

    private static func field(_ s: String, _ lo: Int, _ hi: Int) -> Set<Int>? {
        var out = Set<Int>()
        for part in s.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: "/", omittingEmptySubsequences: false)
            guard pieces.count <= 2 else { return nil }
            var step = 1
            if pieces.count == 2 {
                guard let n = Int(pieces[1]), n >= 1, n <= hi - lo + 1 || n <= hi else { return nil }
                step = n
            }
            let range = pieces[0]
            var a: Int, b: Int
            if range == "*" {
                (a, b) = (lo, hi)
            } else if let dash = range.firstIndex(of: "-") {
                guard let x = Int(range[..<dash]), let y = Int(range[range.index(after: dash)...]) else { return nil }
                (a, b) = (x, y)
            } else {
                guard let x = Int(range) else { return nil }
                (a, b) = (x, pieces.count == 2 ? hi : x)
            }
            guard a >= lo, b <= hi, a <= b else { return nil }
            out.formUnion(stride(from: a, through: b, by: step))
        }
        return out.isEmpty ? nil : out
    }

    func dayMatches(day: Int, month: Int, weekday: Int) -> Bool {
        guard months.contains(month) else { return false }
        let d = daysOfMonth.contains(day), w = daysOfWeek.contains(weekday)
        if domStar || dowStar { return (domStar || d) && (dowStar || w) }
        return d || w
    }

    /// The first minute strictly after `ms` (epoch milliseconds, UTC) that
    /// the schedule matches; nil when none within 5 years (31 February).
    public func next(after ms: Int64) -> Int64? {
        var minute = ms / 60_000 + 1  // minutes since the epoch; the next whole minute
        if ms < 0 { minute = (ms - 59_999) / 60_000 + 1 }
        var day = minute / 1440
        var minuteOfDay = Int(minute - day * 1440)
        for _ in 0..<(366 * 5) {
            let (_, m, d) = Civil.date(days: Int(day))
            let weekday = Civil.weekday(days: Int(day))
            if dayMatches(day: d, month: m, weekday: weekday) {
                for h in minuteOfDay / 60..<24 where hours.contains(h) {
                    let from = h == minuteOfDay / 60 ? minuteOfDay % 60 : 0
                    if let mm = minutes.filter({ $0 >= from }).min() {
                        return (day * 1440 + Int64(h * 60 + mm)) * 60_000
                    }
                }
            }
            day += 1
            minuteOfDay = 0
        }
        return nil
    }
}

/// A trigger's predicate, parsed.
enum TriggerPredicate {
    enum When: String {
        case conditionTrue = "CONDITION_TRUE", falseToTrue = "CONDITION_FALSE_TO_TRUE", changed = "CONDITION_CHANGED"
    }
    case states(StateCondition, When)
    case schedule(CronSchedule)
    case scheduleOnce(Int64)

    /// `now` is only for SCHEDULE_ONCE (scheduleAt must be later).
    static func parse(_ p: JSON?, now: Int64?) -> Result<TriggerPredicate, HubError> {
        guard let p, p.isObject else { return .failure(.invalid("\"predicate\" is required: an object")) }
        guard let source = p["eventSource"]?.stringValue else {
            return .failure(.invalid("the predicate needs \"eventSource\": STATES, SCHEDULE or SCHEDULE_ONCE"))
        }
        switch source {
        case "STATES":
            guard let w = p["triggersWhen"]?.stringValue, let when = When(rawValue: w) else {
                return .failure(
                    .invalid("\"triggersWhen\" must be CONDITION_TRUE, CONDITION_FALSE_TO_TRUE or CONDITION_CHANGED"))
            }
            guard let c = p["condition"] else { return .failure(.invalid("a STATES predicate needs \"condition\"")) }
            return StateCondition.parse(c).map { .states($0, when) }
        case "SCHEDULE":
            guard let s = p["schedule"]?.stringValue else {
                return .failure(.invalid("a SCHEDULE predicate needs \"schedule\": a cron string"))
            }
            guard let cron = CronSchedule(s) else {
                return .failure(.invalid("\"schedule\" is not a five-field cron expression: \(s)"))
            }
            return .success(.schedule(cron))
        case "SCHEDULE_ONCE":
            guard let at = p["scheduleAt"]?.intValue else {
                return .failure(.invalid("a SCHEDULE_ONCE predicate needs \"scheduleAt\": milliseconds"))
            }
            if let now, Int64(at) <= now { return .failure(.invalid("\"scheduleAt\" must be in the future")) }
            return .success(.scheduleOnce(Int64(at)))
        default:
            return .failure(.invalid("unknown eventSource \(source): STATES, SCHEDULE or SCHEDULE_ONCE"))
        }
    }
}

/// Evaluates the server triggers: STATES ones on every state upload,
/// SCHEDULE and SCHEDULE_ONCE ones on `tick()`. The clock is injectable
/// (`now`), so that tests drive time; thingif-hub ticks every second.
public final class TriggerEngine: @unchecked Sendable {
    weak var hub: FrameworkSide?
    private let clock = Locked<@Sendable () -> Int64>({ Platform.epochMs() })
    /// SCHEDULE triggers: the next time each fires (computed when first seen).
    private let nextFire = Locked<[String: Int64]>([:])
    /// One tick at a time.
    private let ticking = Locked(())

    init() {}

    /// The clock, epoch milliseconds (default: the system's).
    public var now: @Sendable () -> Int64 {
        get { clock.withLock { $0 } }
        set { clock.withLock { $0 = newValue } }
    }

    /// Fires every enabled schedule trigger that is due. Returns the IDs of
    /// the commands issued.
    @discardableResult
    public func tick() -> [String] {
        guard let hub else { return [] }
        return ticking.withLock { _ in
            // Of several hubs on one database, one runs the schedules.
            guard hub.store.holdsScheduleLease() else {
                nextFire.withLock { $0 = [:] }
                return []
            }
            let t = now()
            var issued: [String] = []
            var seen = Set<String>()
            for trig in hub.store.allTriggers() {
                guard case .success(let def) = JSON.parse(trig.definition),
                    case .success(let pred) = TriggerPredicate.parse(def["predicate"], now: nil)
                else { continue }
                switch pred {
                case .states:
                    continue
                case .schedule(let cron):
                    seen.insert(trig.triggerID)
                    guard trig.enabled else {
                        nextFire.withLock { $0[trig.triggerID] = nil }
                        continue
                    }
                    let due = nextFire.withLock { n -> Int64? in
                        if n[trig.triggerID] == nil { n[trig.triggerID] = cron.next(after: t) }
                        return n[trig.triggerID]
                    }
                    guard let due, due <= t else { continue }
                    nextFire.withLock { $0[trig.triggerID] = cron.next(after: t) }
                    if let c = fire(trig, def) { issued.append(c) }
                case .scheduleOnce(let at):
                    guard trig.enabled, at <= t else { continue }
                    // Once: disabled before the command goes out, by one hub.
                    guard hub.store.claimTrigger(id: trig.triggerID) else { continue }
                    if let c = fire(trig, def) { issued.append(c) }
                }
            }
            nextFire.withLock { n in n = n.filter { seen.contains($0.key) } }
            return issued
        }
    }

    /// The next time a SCHEDULE trigger fires, as the engine has it (nil
    /// before the first tick that saw it, or when disabled).
    public func nextFireTime(of triggerID: String) -> Int64? { nextFire.withLock { $0[triggerID] } }

    /// Starts a SCHEDULE trigger's next fire time from now (on create or enable).
    func reschedule(_ triggerID: String) {
        guard let hub, let trig = hub.store.trigger(id: triggerID), trig.enabled,
            case .success(let def) = JSON.parse(trig.definition),
            case .success(.schedule(let cron)) = TriggerPredicate.parse(def["predicate"], now: nil)
        else {
            nextFire.withLock { $0[triggerID] = nil }
            return
        }
        let t = now()
        nextFire.withLock { $0[triggerID] = cron.next(after: t) }
    }

    /// Evaluates the thing's STATES triggers on a state upload.
    func stateChanged(thingID: String, old: String?, new: String) {
        guard let hub else { return }
        let oldState = old.flatMap { try? JSON.parse($0).get() }
        guard case .success(let newState) = JSON.parse(new) else { return }
        for trig in hub.store.triggers(thingID: thingID) where trig.enabled {
            guard case .success(let def) = JSON.parse(trig.definition),
                case .success(.states(let cond, let when)) = TriggerPredicate.parse(def["predicate"], now: nil)
            else { continue }
            let before = oldState.map { $0.isObject && cond.matches($0) } ?? false
            let after = newState.isObject && cond.matches(newState)
            _ = hub.store.setTriggerLastMatch(id: trig.triggerID, lastMatch: after)
            let fires: Bool
            switch when {
            case .conditionTrue: fires = after
            case .falseToTrue: fires = after && !before
            case .changed: fires = after != before
            }
            if fires { _ = fire(trig, def) }
        }
    }

    /// Issues the trigger's command; returns its commandID.
    private func fire(_ trig: ServerTriggerRecord, _ def: JSON) -> String? {
        guard let hub, let form = def["command"],
            case .success(var command) = hub.appAPI.commandForm(form, issuerAllowed: { _ in true })
        else { return nil }
        command.firedByTriggerID = trig.triggerID
        guard let record = hub.stored(command, to: trig.thingID, issuer: command.issuer, installationID: nil) else {
            return nil
        }
        hub.onEvent?("trigger \(trig.triggerID) of \(trig.thingID) issued \(record.commandID)")
        return record.commandID
    }
}

extension AppAPI {
    // MARK: server triggers

    /// Checks {"predicate","command","title"?,"description"?} and stores an
    /// enabled trigger.
    func createTrigger(user: UserRecord, thingID: String, body: JSON) -> Result<ServerTriggerRecord, HubError> {
        if case .failure(let e) = ownedThing(user: user, thingID: thingID) { return .failure(e) }
        // Kii's code for every refused trigger, whatever part was wrong.
        let def: JSON
        switch triggerDefinition(user: user, body: body).mapError({ Self.asWrongTrigger($0) }) {
        case .failure(let e): return .failure(e)
        case .success(let d): def = d
        }
        let trig = ServerTriggerRecord(
            triggerID: "trg-" + Platform.randomHex(bytes: 8), thingID: thingID,
            definition: def.dump(), enabled: true, createdAt: Platform.epochMs())
        guard store.insertTrigger(trig) else { return .failure(.storage) }
        hub.triggerEngine.reschedule(trig.triggerID)
        return .success(trig)
    }

    /// PATCH …/triggers/{id}: the members given (predicate, command, title,
    /// description, metadata) replace the stored ones; the result is checked
    /// as a new trigger is.
    func patchTrigger(user: UserRecord, thingID: String, triggerID: String, body: JSON) -> Result<
        ServerTriggerRecord, HubError
    > {
        let old: ServerTriggerRecord
        switch ownedTrigger(user: user, thingID: thingID, triggerID: triggerID) {
        case .failure(let e): return .failure(e)
        case .success(let t): old = t
        }
        guard body.isObject, body.count > 0 else {
            return .failure(.wrongTrigger("the body must be a non-empty JSON object"))
        }
        guard case .success(let merged) = JSON.parse(old.definition), merged.isObject else { return .failure(.storage) }
        for (k, v) in body.members { merged.set(k, v) }
        let def: JSON
        switch triggerDefinition(user: user, body: merged).mapError({ Self.asWrongTrigger($0) }) {
        case .failure(let e): return .failure(e)
        case .success(let d): def = d
        }
        guard store.updateTrigger(id: triggerID, definition: def.dump()), let updated = store.trigger(id: triggerID)
        else {
            return .failure(.storage)
        }
        hub.triggerEngine.reschedule(triggerID)
        return .success(updated)
    }

    private static func asWrongTrigger(_ e: HubError) -> HubError { e.status == 400 ? .wrongTrigger(e.message) : e }

    /// The stored definition of a trigger body: predicate, command (a
    /// CommandForm), title, description and metadata, each checked.
    private func triggerDefinition(user: UserRecord, body: JSON) -> Result<JSON, HubError> {
        guard body.isObject else { return .failure(.invalid("the body must be a JSON object")) }
        if body["serverCode"] != nil {
            return .failure(.invalid("server-code triggers are not run by this hub: give a \"command\" instead"))
        }
        if case .failure(let e) = TriggerPredicate.parse(body["predicate"], now: hub.triggerEngine.now()) {
            return .failure(e)
        }
        guard let form = body["command"], form.isObject else {
            return .failure(.invalid("\"command\" is required: an object (a CommandForm)"))
        }
        let ids = identities(of: user)
        if case .failure(let e) = commandForm(form, issuerAllowed: ids.contains) { return .failure(e) }
        let def = JSON.object()
        def.set("predicate", body["predicate"]!)
        let command = form.deepCopy() ?? JSON.object()
        json_object_del(command.raw, "commandID")
        json_object_del(command.raw, "firedByTriggerID")
        def.set("command", command)
        for (key, max) in [("title", AppLimits.maxTitle), ("description", AppLimits.maxDescription)] {
            guard let v = body[key], !v.isNull else { continue }
            guard let s = v.stringValue, s.count <= max else {
                return .failure(.invalid("\"\(key)\" must be a string of at most \(max) characters"))
            }
            def.set(key, string: s)
        }
        if let m = body["metadata"], !m.isNull {
            guard m.isObject, m.dump().utf8.count <= AppLimits.maxMetadataBytes else {
                return .failure(
                    .invalid("\"metadata\" must be an object of at most \(AppLimits.maxMetadataBytes) bytes"))
            }
            def.set("metadata", m)
        }
        return .success(def)
    }

    func ownedTrigger(user: UserRecord, thingID: String, triggerID: String) -> Result<ServerTriggerRecord, HubError> {
        if case .failure(let e) = ownedThing(user: user, thingID: thingID) { return .failure(e) }
        guard let t = store.trigger(id: triggerID), t.thingID == thingID else {
            return .failure(.notFound("TRIGGER_NOT_FOUND", "no trigger \(triggerID) for \(thingID)"))
        }
        return .success(t)
    }

    static func triggerJSON(_ t: ServerTriggerRecord) -> JSON {
        let o: JSON
        if case .success(let d) = JSON.parse(t.definition), d.isObject { o = d } else { o = JSON.object() }
        o.set("triggerID", string: t.triggerID)
        o.set("target", string: "thing:\(t.thingID)")
        o.set("enabled", .bool(t.enabled))
        o.set("disabled", .bool(!t.enabled))
        o.set("createdAt", .int(Int(t.createdAt)))
        return o
    }
}

extension FrameworkSide {
    /// POST …/triggers: a new, enabled server trigger.
    public func createTrigger(user: UserRecord, thingID: String, body: JSON) -> Result<ServerTriggerRecord, HubError> {
        appAPI.createTrigger(user: user, thingID: thingID, body: body)
    }

    public func patchTrigger(user: UserRecord, thingID: String, triggerID: String, body: JSON) -> Result<
        ServerTriggerRecord, HubError
    > {
        appAPI.patchTrigger(user: user, thingID: thingID, triggerID: triggerID, body: body)
    }

    public func listTriggers(user: UserRecord, thingID: String) -> Result<[ServerTriggerRecord], HubError> {
        appAPI.ownedThing(user: user, thingID: thingID).map { _ in store.triggers(thingID: thingID) }
    }

    public func getTrigger(user: UserRecord, thingID: String, triggerID: String) -> Result<
        ServerTriggerRecord, HubError
    > {
        appAPI.ownedTrigger(user: user, thingID: thingID, triggerID: triggerID)
    }

    public func setTriggerEnabled(user: UserRecord, thingID: String, triggerID: String, enabled: Bool) -> Result<
        Void, HubError
    > {
        appAPI.ownedTrigger(user: user, thingID: thingID, triggerID: triggerID).flatMap { t in
            guard store.setTriggerEnabled(id: t.triggerID, enabled: enabled) else { return .failure(.storage) }
            triggerEngine.reschedule(t.triggerID)
            return .success(())
        }
    }

    public func deleteTrigger(user: UserRecord, thingID: String, triggerID: String) -> Result<Void, HubError> {
        appAPI.ownedTrigger(user: user, thingID: thingID, triggerID: triggerID).flatMap { t in
            guard store.deleteTrigger(id: t.triggerID) else { return .failure(.storage) }
            triggerEngine.reschedule(t.triggerID)
            return .success(())
        }
    }

    /// The trigger as the API shows it: the definition plus triggerID,
    /// target, enabled, disabled and createdAt.
    public func triggerJSON(_ t: ServerTriggerRecord) -> JSON { AppAPI.triggerJSON(t) }
}
