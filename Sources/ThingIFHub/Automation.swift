import CThingIF
import ThingIF
#if canImport(Glibc)
import Glibc
#endif

// Remote management of the automation a thing runs by itself: its action
// sets and timer triggers. The hub keeps one config per thing and, after
// every change, publishes it retained on p/{mqttTopic}/config of each of the
// thing's MQTT installations:
// {"version":N,"actionSets":[…],"timerTriggers":[…]}, N increasing.

// Limits: ThingIF.AutomationLimits, shared with the thing, which refuses a
// configuration over them.

extension FrameworkSide {
    // MARK: reading

    private func config(of thingID: String) -> (actionSets: [JSON], timerTriggers: [JSON], version: Int64) {
        guard let a = store.automation(thingID: thingID), case .success(let j) = JSON.parse(a.config) else {
            return ([], [], 0)
        }
        return (j["actionSets"]?.elements ?? [], j["timerTriggers"]?.elements ?? [], a.version)
    }

    public func listActionSets(user: UserRecord, thingID: String) -> Result<[JSON], HubError> {
        appAPI.ownedThing(user: user, thingID: thingID).map { _ in config(of: thingID).actionSets }
    }

    public func listTimerTriggers(user: UserRecord, thingID: String) -> Result<[JSON], HubError> {
        appAPI.ownedThing(user: user, thingID: thingID).map { _ in config(of: thingID).timerTriggers }
    }

    /// The thing's automation config as published (with its version); nil
    /// before the first change.
    public func automationMessage(thingID: String) -> JSON? {
        guard let a = store.automation(thingID: thingID), case .success(let j) = JSON.parse(a.config) else { return nil }
        let o = JSON.object()
        o.set("version", .int(Int(a.version)))
        o.set("actionSets", j["actionSets"] ?? JSON.array())
        o.set("timerTriggers", j["timerTriggers"] ?? JSON.array())
        return o
    }

    // MARK: changes

    /// Reads, changes (the closure throws a HubError to refuse), saves and
    /// publishes the config, under one lock.
    private func changeAutomation(user: UserRecord, thingID: String,
                                  _ change: (inout [JSON], inout [JSON]) -> HubError?) -> Result<Void, HubError> {
        if case .failure(let e) = appAPI.ownedThing(user: user, thingID: thingID) { return .failure(e) }
        return automationLock.withLock { _ in
            var (sets, timers, _) = config(of: thingID)
            if let e = change(&sets, &timers) { return .failure(e) }
            let c = JSON.object()
            let a = JSON.array(), t = JSON.array()
            for s in sets { a.append(s) }
            for x in timers { t.append(x) }
            c.set("actionSets", a)
            c.set("timerTriggers", t)
            // The thing refuses a configuration over maxConfigBytes; the
            // published one adds "version":N (at most 30 bytes).
            let size = c.dump().utf8.count + 30
            guard size <= AutomationLimits.maxConfigBytes else {
                return .failure(.invalid("the thing's automation would take \(size) bytes, over AutomationLimits.maxConfigBytes (\(AutomationLimits.maxConfigBytes))"))
            }
            guard store.saveAutomation(thingID: thingID, config: c.dump()) != nil else { return .failure(.storage) }
            publishAutomation(thingID: thingID)
            return .success(())
        }
    }

    /// Publishes the config retained to each MQTT installation of the thing.
    @discardableResult
    public func publishAutomation(thingID: String) -> Bool {
        guard let msg = automationMessage(thingID: thingID), let t = store.thing(id: thingID) else { return false }
        var ok = true
        for topic in t.installations.values.sorted() {
            ok = publishRetained(topic: Topics.config(clientID: topic), payload: msg.dumpBytes()) && ok
        }
        return ok
    }

    private static func validName(_ name: String) -> HubError? {
        (1...AutomationLimits.maxName).contains(name.count) && !name.unicodeScalars.contains { $0.value < 0x20 }
            ? nil : .invalid("a name must be 1 to \(AutomationLimits.maxName) characters")
    }

    private static func named(_ list: [JSON], _ name: String) -> Int? {
        list.firstIndex { $0["name"]?.stringValue == name }
    }

    /// PUT …/action-sets/{name}: {"actions":[{"schema","schemaVersion","action","params"?}…]}.
    public func putActionSet(user: UserRecord, thingID: String, name: String, body: JSON) -> Result<Void, HubError> {
        if let e = Self.validName(name) { return .failure(e) }
        guard body.isObject, let actions = body["actions"], actions.isArray,
              (1...AutomationLimits.maxActionsPerSet).contains(actions.count) else {
            return .failure(.invalid("\"actions\" is required: an array of 1 to \(AutomationLimits.maxActionsPerSet) actions"))
        }
        let list = JSON.array()
        for (i, a) in actions.elements.enumerated() {
            guard a.isObject, let schema = a["schema"]?.stringValue, (1...200).contains(schema.count),
                  let version = a["schemaVersion"]?.intValue, version >= 0, version <= Int(Int32.max),
                  let action = a["action"]?.stringValue, (1...200).contains(action.count) else {
                return .failure(.invalid("action \(i) must be {\"schema\",\"schemaVersion\",\"action\",\"params\"}"))
            }
            guard a.dump().utf8.count <= AppLimits.maxActionBytes else {
                return .failure(.invalid("action \(i) is larger than \(AppLimits.maxActionBytes) bytes"))
            }
            let o = JSON.object()
            o.set("schema", string: schema)
            o.set("schemaVersion", .int(version))
            o.set("action", string: action)
            o.set("params", a["params"]?.deepCopy() ?? JSON.null())
            list.append(o)
        }
        let set = JSON.object()
        set.set("name", string: name)
        set.set("actions", list)
        return changeAutomation(user: user, thingID: thingID) { sets, _ in
            if let i = Self.named(sets, name) {
                sets[i] = set
            } else {
                guard sets.count < AutomationLimits.maxActionSets else {
                    return .invalid("a thing has at most \(AutomationLimits.maxActionSets) action sets")
                }
                sets.append(set)
            }
            return nil
        }
    }

    public func deleteActionSet(user: UserRecord, thingID: String, name: String) -> Result<Void, HubError> {
        changeAutomation(user: user, thingID: thingID) { sets, timers in
            guard let i = Self.named(sets, name) else {
                return .notFound("ACTION_SET_NOT_FOUND", "no action set \(name) on \(thingID)")
            }
            if let user = timers.first(where: { t in t["actionSets"]?.elements.contains { $0.stringValue == name } ?? false }) {
                return HubError(409, "ACTION_SET_IN_USE",
                                "timer trigger \(user["name"]?.stringValue ?? "") uses action set \(name)")
            }
            sets.remove(at: i)
            return nil
        }
    }

    /// True when `zone` names a file under /usr/share/zoneinfo.
    public static func timeZoneExists(_ zone: String) -> Bool {
        guard !zone.isEmpty, zone.count <= 64, !zone.hasPrefix("/"), !zone.contains(".."),
              zone.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else { return false }
        var st = stat()
        return stat(AutomationLimits.zoneinfo + "/" + zone, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    /// PUT …/timer-triggers/{name}: {"fireDate","recurrence"?,"timeZone","actionSets"}.
    /// A new or replaced trigger is disabled.
    public func putTimerTrigger(user: UserRecord, thingID: String, name: String, body: JSON) -> Result<Void, HubError> {
        if let e = Self.validName(name) { return .failure(e) }
        guard body.isObject else { return .failure(.invalid("the body must be a JSON object")) }
        guard let fire = body["fireDate"]?.intValue else {
            return .failure(.invalid("\"fireDate\" is required: milliseconds since the epoch"))
        }
        guard Int64(fire) > triggerEngine.now() else { return .failure(.invalid("\"fireDate\" must be in the future")) }
        var recurrence: JSON?
        if let r = body["recurrence"], !r.isNull {
            guard r.isObject, let unit = r["unit"]?.stringValue, let ms = AutomationLimits.unitMs[unit],
                  let count = r["count"]?.intValue, count >= 1, count <= 1_000_000 else {
                return .failure(.invalid("\"recurrence\" must be {\"unit\":\"minute|hour|day|week\",\"count\":N}"))
            }
            let total = ms * Int64(count)
            guard total >= AutomationLimits.minRecurrenceMs, total <= AutomationLimits.maxRecurrenceMs else {
                return .failure(.invalid("the recurrence must be between 5 minutes and 5 weeks"))
            }
            let o = JSON.object()
            o.set("unit", string: unit)
            o.set("count", .int(count))
            recurrence = o
        }
        guard let zone = body["timeZone"]?.stringValue else {
            return .failure(.invalid("\"timeZone\" is required: an IANA time zone such as Europe/Paris"))
        }
        guard Self.timeZoneExists(zone) else { return .failure(.invalid("unknown time zone \(zone)")) }
        guard let names = body["actionSets"], names.isArray,
              (1...AutomationLimits.maxActionSetsPerTrigger).contains(names.count),
              names.elements.allSatisfy({ $0.stringValue != nil }) else {
            return .failure(.invalid("\"actionSets\" must be an array of 1 to \(AutomationLimits.maxActionSetsPerTrigger) names"))
        }
        let setNames = names.elements.compactMap(\.stringValue)
        let t = JSON.object()
        t.set("name", string: name)
        t.set("fireDate", .int(fire))
        if let recurrence { t.set("recurrence", recurrence) }
        t.set("timeZone", string: zone)
        let list = JSON.array()
        for n in setNames { list.append(JSON.string(n) ?? JSON.null()) }
        t.set("actionSets", list)
        t.set("enabled", .bool(false))
        return changeAutomation(user: user, thingID: thingID) { sets, timers in
            for n in setNames where Self.named(sets, n) == nil {
                return .invalid("unknown action set \(n)")
            }
            if let i = Self.named(timers, name) {
                timers[i] = t
            } else {
                guard timers.count < AutomationLimits.maxTimerTriggers else {
                    return .invalid("a thing has at most \(AutomationLimits.maxTimerTriggers) timer triggers")
                }
                timers.append(t)
            }
            return nil
        }
    }

    public func setTimerTriggerEnabled(user: UserRecord, thingID: String, name: String, enabled: Bool) -> Result<Void, HubError> {
        changeAutomation(user: user, thingID: thingID) { _, timers in
            guard let i = Self.named(timers, name) else {
                return .notFound("TIMER_TRIGGER_NOT_FOUND", "no timer trigger \(name) on \(thingID)")
            }
            timers[i].set("enabled", .bool(enabled))
            return nil
        }
    }

    public func deleteTimerTrigger(user: UserRecord, thingID: String, name: String) -> Result<Void, HubError> {
        changeAutomation(user: user, thingID: thingID) { _, timers in
            guard let i = Self.named(timers, name) else {
                return .notFound("TIMER_TRIGGER_NOT_FOUND", "no timer trigger \(name) on \(thingID)")
            }
            timers.remove(at: i)
            return nil
        }
    }
}
