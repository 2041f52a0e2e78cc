// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Remote management of the automation a thing runs by itself, `hub.automation`:
/// its action sets and timer triggers. The hub keeps one config per thing
/// and, after every change, publishes it retained on p/{mqttTopic}/config of
/// each of the thing's MQTT installations:
/// {"version":N,"actionSets":[…],"timerTriggers":[…]}, N increasing.
///
/// The codec, the checks and the limits are the thing's own
/// (ThingIF.AutomationCodec, AutomationLimits): every change is checked as
/// the thing will check the configuration it produces, so the hub never
/// publishes one that the thing would refuse.
///
/// It is given the store, the MQTT client it publishes with and the clock a
/// timer trigger's fireDate is checked against (the trigger engine's, which
/// tests drive). Its calls on one thing take the `OwnedThing` the app's
/// door resolved: it checks no ownership itself.
///
/// Threads: every method may be called from any thread; changes are
/// serialized by `lock`.
public final class AutomationConfigs: @unchecked Sendable {
    let store: any AutomationStore & ThingStore
    let client: MqttClient
    let now: @Sendable () -> Int64
    /// Serializes changes of the things' automation configs: each reads,
    /// changes, saves and publishes one.
    private let lock = Locked(())

    init(
        store: any AutomationStore & ThingStore, client: MqttClient, now: @escaping @Sendable () -> Int64
    ) {
        self.store = store
        self.client = client
        self.now = now
    }

    // MARK: reading

    /// The owned thing's ID when it can have a configuration: not an end
    /// node's, which has no p/{mqttTopic}/config of its own
    /// (docs/GATEWAYS.md §3.4): 409 END_NODE_UNSUPPORTED.
    private func configurable(_ owned: OwnedThing) -> Result<String, HubError> {
        owned.thing.layoutPosition == .endNode
            ? .failure(.endNodeUnsupported(owned.thingID, "automation")) : .success(owned.thingID)
    }

    private func config(of thingID: String) -> (actionSets: [JSON], timerTriggers: [JSON], version: Int64) {
        guard let a = store.automation(thingID: thingID), case .success(let j) = JSON.parse(a.config) else {
            return ([], [], 0)
        }
        return (j["actionSets"]?.elements ?? [], j["timerTriggers"]?.elements ?? [], a.version)
    }

    public func listActionSets(on owned: OwnedThing) -> Result<[JSON], HubError> {
        configurable(owned).map { config(of: $0).actionSets }
    }

    public func listTimerTriggers(on owned: OwnedThing) -> Result<[JSON], HubError> {
        configurable(owned).map { config(of: $0).timerTriggers }
    }

    /// GET …/automation: the version last published (0 before the first
    /// change) and what the thing last said of it ("thingReport", null when
    /// it has said nothing since): whether it applied it, or why it refused it.
    public func status(on owned: OwnedThing) -> Result<JSON, HubError> {
        configurable(owned).map { thingID in
            let a = store.automation(thingID: thingID)
            let o = JSON.object()
            o.set("version", .int(Int(a?.version ?? 0)))
            if let r = a?.report, case .success(let j) = JSON.parse(r) {
                o.set("thingReport", j)
            } else {
                o.set("thingReport", JSON.null())
            }
            return o
        }
    }

    /// The thing's automation config as published (with its version); nil
    /// before the first change.
    public func message(thingID: String) -> JSON? {
        guard let a = store.automation(thingID: thingID), case .success(let j) = JSON.parse(a.config) else {
            return nil
        }
        let o = JSON.object()
        o.set("version", .int(Int(a.version)))
        o.set("actionSets", j["actionSets"] ?? JSON.array())
        o.set("timerTriggers", j["timerTriggers"] ?? JSON.array())
        return o
    }

    // MARK: changes

    /// Reads, changes (the closure throws a HubError to refuse), saves and
    /// publishes the config, under one lock.
    private func changeConfig(
        of owned: OwnedThing,
        _ change: (inout [JSON], inout [JSON]) -> HubError?
    ) -> Result<Void, HubError> {
        let thingID: String
        switch configurable(owned) {
        case .failure(let e): return .failure(e)
        case .success(let id): thingID = id
        }
        return lock.withLock { _ in
            var (sets, timers, _) = config(of: thingID)
            if let e = change(&sets, &timers) { return .failure(e) }
            let c = JSON.object()
            let a = JSON.array(), t = JSON.array()
            for s in sets { a.append(s) }
            for x in timers { t.append(x) }
            c.set("actionSets", a)
            c.set("timerTriggers", t)
            if case .failure(let m) = AutomationCodec.decodeConfig(c) { return .failure(.invalid(m)) }
            // The thing refuses a configuration over maxConfigBytes; the
            // published one adds "version":N (at most 30 bytes).
            let size = c.dump().utf8.count + 30
            guard size <= AutomationLimits.maxConfigBytes else {
                return .failure(
                    .invalid(
                        "the thing's automation would take \(size) bytes, over AutomationLimits.maxConfigBytes (\(AutomationLimits.maxConfigBytes))"
                    ))
            }
            guard store.saveAutomation(thingID: thingID, config: c.dump()) != nil else { return .failure(.storage) }
            publish(thingID: thingID)
            return .success(())
        }
    }

    /// Publishes the config retained to each MQTT installation of the thing.
    @discardableResult
    public func publish(thingID: String) -> Bool {
        guard let msg = message(thingID: thingID), let t = store.thing(id: thingID) else { return false }
        var ok = true
        for topic in t.installations.values.sorted() {
            ok = client.publishRetained(topic: Topics.config(clientID: topic), payload: msg.dumpBytes()) && ok
        }
        return ok
    }

    private static func validName(_ name: String) -> HubError? {
        AutomationCodec.checkName(name, "an action set's or timer trigger's").map { .invalid($0) }
    }

    private static func named(_ list: [JSON], _ name: String) -> Int? {
        list.firstIndex { $0["name"]?.stringValue == name }
    }

    /// Replaces the entry of that name, or adds it while the list is under
    /// `cap`; else the refusal that names the cap.
    private static func upsert(_ entry: JSON, named name: String, in list: inout [JSON], cap: Int, what: String)
        -> HubError?
    {
        if let i = named(list, name) {
            list[i] = entry
            return nil
        }
        guard list.count < cap else { return .invalid("a thing has at most \(cap) \(what)") }
        list.append(entry)
        return nil
    }

    /// PUT …/action-sets/{name}: {"actions":[{"schema","schemaVersion","action","params"?}…]}.
    public func putActionSet(on owned: OwnedThing, name: String, body: JSON) -> Result<Void, HubError> {
        if let e = Self.validName(name) { return .failure(e) }
        guard body.isObject, let actions = body["actions"], actions.isArray,
            (1...AutomationLimits.maxActionsPerSet).contains(actions.count)
        else {
            return .failure(
                .invalid(
                    "\"actions\" is required: an array of 1 to \(AutomationLimits.maxActionsPerSet) actions",
                    field: "actions"))
        }
        for (i, a) in actions.elements.enumerated() where a.dump().utf8.count > AppLimits.maxActionBytes {
            return .failure(.invalid("action \(i) is larger than \(AppLimits.maxActionBytes) bytes", field: "actions"))
        }
        let given = JSON.object()
        given.set("name", string: name)
        given.set("actions", actions)
        let set: JSON
        switch AutomationCodec.decodeSet(given) {
        case .failure(let m): return .failure(.invalid(m))
        case .success(let s): set = AutomationCodec.encode(s)
        }
        return changeConfig(of: owned) { sets, _ in
            Self.upsert(set, named: name, in: &sets, cap: AutomationLimits.maxActionSets, what: "action sets")
        }
    }

    public func deleteActionSet(on owned: OwnedThing, name: String) -> Result<Void, HubError> {
        let thingID = owned.thingID
        return changeConfig(of: owned) { sets, timers in
            guard let i = Self.named(sets, name) else {
                return .notFound("ACTION_SET_NOT_FOUND", "no action set \(name) on \(thingID)")
            }
            if let user = timers.first(where: { t in
                t["actionSets"]?.elements.contains { $0.stringValue == name } ?? false
            }) {
                return HubError(
                    409, "ACTION_SET_IN_USE",
                    "timer trigger \(user["name"]?.stringValue ?? "") uses action set \(name)")
            }
            sets.remove(at: i)
            return nil
        }
    }

    /// PUT …/timer-triggers/{name}: {"fireDate","recurrence"?,"timeZone","actionSets"}.
    /// A new or replaced trigger is disabled.
    public func putTimerTrigger(on owned: OwnedThing, name: String, body: JSON) -> Result<Void, HubError> {
        if let e = Self.validName(name) { return .failure(e) }
        guard body.isObject else { return .failure(.invalid("the body must be a JSON object")) }
        guard let fire = body["fireDate"]?.intValue else {
            return .failure(.invalid("\"fireDate\" is required: milliseconds since the epoch", field: "fireDate"))
        }
        guard Int64(fire) > now() else {
            return .failure(.invalid("\"fireDate\" must be in the future", field: "fireDate"))
        }
        let given = JSON.object()
        for key in ["recurrence", "timeZone", "actionSets"] { if let v = body[key] { given.set(key, v) } }
        given.set("name", string: name)
        given.set("fireDate", .int(fire))
        given.set("enabled", .bool(false))
        guard given["timeZone"]?.stringValue != nil else {
            return .failure(
                .invalid("\"timeZone\" is required: an IANA time zone such as Europe/Paris", field: "timeZone"))
        }
        let trigger: TimerTrigger
        switch AutomationCodec.decodeTrigger(given) {
        case .failure(let m): return .failure(.invalid(m))
        case .success(let d): trigger = d
        }
        // The set names are checked against the thing's sets below, inside the lock.
        if let p = AutomationCodec.check(trigger, knownSets: { _ in true }) { return .failure(.invalid(p)) }
        let setNames = trigger.actionSets
        let t = AutomationCodec.encode(trigger)
        return changeConfig(of: owned) { sets, timers in
            for n in setNames where Self.named(sets, n) == nil {
                return .invalid("unknown action set \(n)", field: "actionSets")
            }
            return Self.upsert(
                t, named: name, in: &timers, cap: AutomationLimits.maxTimerTriggers, what: "timer triggers")
        }
    }

    public func setTimerTriggerEnabled(on owned: OwnedThing, name: String, enabled: Bool) -> Result<Void, HubError> {
        changeTimer(of: owned, name) { timers, i in timers[i].set("enabled", .bool(enabled)) }
    }

    public func deleteTimerTrigger(on owned: OwnedThing, name: String) -> Result<Void, HubError> {
        changeTimer(of: owned, name) { timers, i in timers.remove(at: i) }
    }

    /// Changes the owned thing's timer trigger `name` (404
    /// TIMER_TRIGGER_NOT_FOUND when it has none), as `changeConfig`.
    private func changeTimer(
        of owned: OwnedThing, _ name: String, _ change: (inout [JSON], Int) -> Void
    ) -> Result<Void, HubError> {
        changeConfig(of: owned) { _, timers in
            guard let i = Self.named(timers, name) else {
                return .notFound("TIMER_TRIGGER_NOT_FOUND", "no timer trigger \(name) on \(owned.thingID)")
            }
            change(&timers, i)
            return nil
        }
    }
}
