// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF
import ThingIFRules

// Server triggers (Thing-IF's trigger API): a predicate on a thing (its
// state, a cron schedule, or one point in time) and the command it issues.

/// Evaluates the server triggers: STATES ones on every state upload,
/// SCHEDULE and SCHEDULE_ONCE ones on `tick()`. The clock is injectable
/// (`now`), so that tests drive time; thingif-hub ticks every second.
///
/// It is given the store (the triggers), the delivery that stores and
/// publishes the commands they issue, the commands' lifetimes and the event
/// sink; a trigger's command is checked by the CommandForm rule, as a
/// command posted to the REST API is.
public final class TriggerEngine: @unchecked Sendable {
    let store: any AutomationStore & ThingStore
    let delivery: CommandDelivery
    let lifetimes: CommandLifetimes
    let events: HubEvents
    private let clock = Locked<@Sendable () -> Int64>({ Platform.epochMs() })
    /// SCHEDULE triggers: the next time each fires (computed when first seen).
    private let nextFire = Locked<[String: Int64]>([:])
    /// One tick at a time.
    private let ticking = Locked(())

    init(
        store: any AutomationStore & ThingStore, delivery: CommandDelivery, lifetimes: CommandLifetimes,
        events: HubEvents
    ) {
        self.store = store
        self.delivery = delivery
        self.lifetimes = lifetimes
        self.events = events
    }

    /// The clock, epoch milliseconds (default: the system's).
    public var now: @Sendable () -> Int64 {
        get { clock.withLock { $0 } }
        set { clock.withLock { $0 = newValue } }
    }

    /// Fires every enabled schedule trigger that is due. Returns the IDs of
    /// the commands issued.
    @discardableResult
    public func tick() -> [String] {
        ticking.withLock { _ in
            // Of several hubs on one database, one runs the schedules.
            guard store.holdsScheduleLease() else {
                nextFire.withLock { $0 = [:] }
                return []
            }
            let t = now()
            var issued: [String] = []
            var seen = Set<String>()
            for trig in store.allTriggers() {
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
                    guard store.claimTrigger(id: trig.triggerID) else { continue }
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
        guard let trig = store.trigger(id: triggerID), trig.enabled,
            case .success(let def) = JSON.parse(trig.definition),
            case .success(.schedule(let cron)) = TriggerPredicate.parse(def["predicate"], now: nil)
        else {
            nextFire.withLock { $0[triggerID] = nil }
            return
        }
        let t = now()
        nextFire.withLock { $0[triggerID] = cron.next(after: t) }
    }

    /// The thing's enabled triggers (read in a state upload's transaction).
    func enabledTriggers(thingID: String) -> [ServerTriggerRecord] {
        store.triggers(thingID: thingID).filter(\.enabled)
    }

    /// Evaluates the thing's STATES triggers on a state upload: `triggers`
    /// are its enabled ones (enabledTriggers), read with the upload.
    func stateChanged(thingID: String, old: String?, new: String, triggers: [ServerTriggerRecord]) {
        // Most things have no trigger: then no state is parsed.
        guard !triggers.isEmpty else { return }
        let oldState = old.flatMap { try? JSON.parse($0).get() }
        guard case .success(let newState) = JSON.parse(new) else { return }
        for trig in triggers {
            guard case .success(let def) = JSON.parse(trig.definition),
                case .success(.states(let cond, let when)) = TriggerPredicate.parse(def["predicate"], now: nil)
            else { continue }
            let before = oldState.map { $0.isObject && cond.matches($0) } ?? false
            let after = newState.isObject && cond.matches(newState)
            _ = store.setTriggerLastMatch(id: trig.triggerID, lastMatch: after)
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
        guard let form = def["command"],
            case .success(var command) = CommandForm.command(form, issuerAllowed: { _ in true })
        else { return nil }
        command.firedByTriggerID = trig.triggerID
        // A timeToLive in the trigger's command counts from each firing; else the hub's default TTL.
        let expiresAt = (try? lifetimes.expiry(form: form, now: Platform.epochMs()).get()) ?? nil
        guard
            let record = delivery.stored(
                command, to: trig.thingID, issuer: command.issuer, installationID: nil, expiresAt: expiresAt)
        else {
            return nil
        }
        events.event("trigger \(trig.triggerID) of \(trig.thingID) issued \(record.commandID)")
        return record.commandID
    }
}

extension AppAPI {
    // MARK: server triggers

    /// Checks {"predicate","command","title"?,"description"?} and stores an
    /// enabled trigger.
    /// POST …/triggers: a new, enabled server trigger.
    public func createTrigger(on owned: OwnedThing, body: JSON) -> Result<ServerTriggerRecord, HubError> {
        // Kii's code for every refused trigger, whatever part was wrong.
        let def: JSON
        switch triggerDefinition(owned, body: body).mapError({ Self.asWrongTrigger($0) }) {
        case .failure(let e): return .failure(e)
        case .success(let d): def = d
        }
        let trig = ServerTriggerRecord(
            triggerID: "trg-" + Platform.randomHex(bytes: 8), thingID: owned.thingID,
            definition: def.dump(), enabled: true, createdAt: Platform.epochMs())
        guard store.insertTrigger(trig) else { return .failure(.storage) }
        triggerEngine.reschedule(trig.triggerID)
        return .success(trig)
    }

    /// PATCH …/triggers/{id}: the members given (predicate, command, title,
    /// description, metadata) replace the stored ones; the result is checked
    /// as a new trigger is.
    public func patchTrigger(on owned: OwnedThing, triggerID: String, body: JSON) -> Result<
        ServerTriggerRecord, HubError
    > {
        let old: ServerTriggerRecord
        switch trigger(of: owned, triggerID: triggerID) {
        case .failure(let e): return .failure(e)
        case .success(let t): old = t
        }
        guard body.isObject, body.count > 0 else {
            return .failure(.wrongTrigger("the body must be a non-empty JSON object"))
        }
        guard case .success(let merged) = JSON.parse(old.definition), merged.isObject else { return .failure(.storage) }
        for (k, v) in body.members { merged.set(k, v) }
        let def: JSON
        switch triggerDefinition(owned, body: merged).mapError({ Self.asWrongTrigger($0) }) {
        case .failure(let e): return .failure(e)
        case .success(let d): def = d
        }
        guard store.updateTrigger(id: triggerID, definition: def.dump()), let updated = store.trigger(id: triggerID)
        else {
            return .failure(.storage)
        }
        triggerEngine.reschedule(triggerID)
        return .success(updated)
    }

    /// A trigger's input errors are Kii's WRONG_TRIGGER, but for the ones
    /// Kii names more precisely (WRONG_PREDICATE for a bad schedule).
    private static func asWrongTrigger(_ e: HubError) -> HubError {
        e.status == 400 && e != .wrongSchedule ? .wrongTrigger(e.message) : e
    }

    /// The stored definition of a trigger body: predicate, command (a
    /// CommandForm), title, description and metadata, each checked.
    private func triggerDefinition(_ owned: OwnedThing, body: JSON) -> Result<JSON, HubError> {
        let ids = identities(of: owned.user)
        return TriggerForm.definition(
            body, now: triggerEngine.now(), issuerAllowed: ids.contains,
            // A timeToLive counts from each firing; refused here when bad, not at the firing.
            checkCommand: { form in
                if case .failure(let e) = options.lifetimes.expiry(form: form, now: 0) { return e }
                // Where the trait registry has the thing's entry, the command
                // must fit it (as a posted command must): refused now, not at a firing.
                if case .success(let c) = CommandForm.command(form, issuerAllowed: { _ in true }) {
                    return traits.check(c, for: owned.thing)
                }
                return nil
            })
    }

    func trigger(of owned: OwnedThing, triggerID: String) -> Result<ServerTriggerRecord, HubError> {
        guard let t = store.trigger(id: triggerID), t.thingID == owned.thingID else {
            return .failure(.triggerNotFound(triggerID))
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

extension AppAPI {
    public func listTriggers(on owned: OwnedThing) -> [ServerTriggerRecord] {
        store.triggers(thingID: owned.thingID)
    }

    public func getTrigger(on owned: OwnedThing, triggerID: String) -> Result<ServerTriggerRecord, HubError> {
        trigger(of: owned, triggerID: triggerID)
    }

    public func setTriggerEnabled(on owned: OwnedThing, triggerID: String, enabled: Bool) -> Result<Void, HubError> {
        trigger(of: owned, triggerID: triggerID).flatMap { t in
            guard store.setTriggerEnabled(id: t.triggerID, enabled: enabled) else { return .failure(.storage) }
            triggerEngine.reschedule(t.triggerID)
            return .success(())
        }
    }

    public func deleteTrigger(on owned: OwnedThing, triggerID: String) -> Result<Void, HubError> {
        trigger(of: owned, triggerID: triggerID).flatMap { t in
            guard store.deleteTrigger(id: t.triggerID) else { return .failure(.storage) }
            triggerEngine.reschedule(t.triggerID)
            return .success(())
        }
    }

    /// The trigger as the API shows it: the definition plus triggerID,
    /// target, enabled, disabled and createdAt.
    public func triggerJSON(_ t: ServerTriggerRecord) -> JSON { AppAPI.triggerJSON(t) }
}
