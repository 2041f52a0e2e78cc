// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Action sets and timer triggers on the thing: the C API's operations, the
/// loop's firing of timers, and the framework's remote configuration.
extension Thing {
    // MARK: clock

    func setClock(_ cb: thingif_clock_cb?, userdata: UnsafeMutableRawPointer?) {
        shared.withLock { $0.clock = cb.map { ($0, userdata) } }
    }

    /// Wall-clock epoch ms: the injected clock, else the system's. The
    /// callback runs without the lock held.
    func epochNow() -> Int64 {
        if let c = shared.withLock({ $0.clock }) { return Int64(c.callback(c.userdata)) }
        return Platform.epochMs()
    }

    /// Runs `body` on the automation state and saves it when it returns OK.
    private func mutate(_ body: (Automation) -> Int32) -> Int32 {
        shared.withLock { s in
            let rc = body(s.automation)
            guard rc == OK else { return rc }
            return s.automation.save() ? OK : THINGIF_ERR_STORAGE.code
        }
    }

    // MARK: action sets

    func createActionSet(_ name: String) -> Int32 {
        if let p = AutomationCodec.checkName(name, "an action set") {
            logger.error(Text(p))
            return THINGIF_ERR_INVALID.code
        }
        return mutate { a in
            guard a.set(named: name) == nil else { return THINGIF_ERR_EXISTS.code }
            a.sets.append(ActionSet(name: name, actions: [], remote: false))
            return OK
        }
    }

    func addAction(set: String, _ action: AutomationAction) -> Int32 {
        mutate { a in
            guard let i = a.set(named: set) else { return THINGIF_ERR_NOT_FOUND.code }
            a.sets[i].actions.append(action)
            return OK
        }
    }

    func removeAction(set: String, index: Int) -> Int32 {
        mutate { a in
            guard let i = a.set(named: set) else { return THINGIF_ERR_NOT_FOUND.code }
            guard index >= 0, index < a.sets[i].actions.count else { return THINGIF_ERR_INVALID.code }
            a.sets[i].actions.remove(at: index)
            return OK
        }
    }

    func deleteActionSet(_ name: String) -> Int32 {
        var usedBy: String?
        let rc = mutate { a in
            guard let i = a.set(named: name) else { return THINGIF_ERR_NOT_FOUND.code }
            if let t = a.triggers.first(where: { $0.actionSets.containsBytes(name) }) {
                usedBy = t.name
                return THINGIF_ERR_STATE.code
            }
            a.sets.remove(at: i)
            return OK
        }
        if let usedBy {
            logger.error("action set \(name) is used by timer trigger \(usedBy); delete the trigger first")
        }
        return rc
    }

    func executeActionSet(_ name: String) -> Int32 {
        shared.withLock { s in
            guard s.identity != nil else { return THINGIF_ERR_NOT_ONBOARDED.code }
            guard s.automation.set(named: name) != nil else { return THINGIF_ERR_NOT_FOUND.code }
            s.pendingSets.append(name)
            return OK
        }
    }

    // MARK: timer triggers

    func createTimer(_ trigger: TimerTrigger) -> Int32 {
        let now = epochNow()
        var problem: String?
        let rc = mutate { a in
            if let p = AutomationCodec.check(trigger, knownSets: { a.set(named: $0) != nil }) {
                problem = p.description
                return THINGIF_ERR_INVALID.code
            }
            guard trigger.fireDate > now else {
                problem =
                    str("timer trigger \(trigger.name): fireDate \(trigger.fireDate) is not in the future (now \(now))")
                return THINGIF_ERR_INVALID.code
            }
            guard a.trigger(named: trigger.name) == nil else { return THINGIF_ERR_EXISTS.code }
            var t = trigger
            t.enabled = false
            t.remote = false
            a.triggers.append(t)
            return OK
        }
        if let problem { logger.error(Text(problem)) }
        return rc
    }

    func enableTimer(_ name: String, enabled: Bool) -> Int32 {
        let now = epochNow()
        var problem: String?
        let rc = mutate { a in
            guard let i = a.trigger(named: name) else { return THINGIF_ERR_NOT_FOUND.code }
            var t = a.triggers[i]
            if enabled && !t.enabled && t.fireDate <= now {
                // A disabled period does not count as missed firings.
                guard let next = t.nextOccurrence(after: now, zone: TimeZoneRules.load(t.timeZone)) else {
                    problem = str(
                        "timer trigger \(name): its fireDate has passed and it does not recur; create it again")
                    return THINGIF_ERR_INVALID.code
                }
                t.fireDate = next
            }
            t.enabled = enabled
            a.triggers[i] = t
            return OK
        }
        if let problem { logger.error(Text(problem)) }
        return rc
    }

    func deleteTimer(_ name: String) -> Int32 {
        mutate { a in
            guard let i = a.trigger(named: name) else { return THINGIF_ERR_NOT_FOUND.code }
            a.triggers.remove(at: i)
            return OK
        }
    }

    // MARK: the loop's part

    /// Runs queued action sets and due timers (loop thread).
    func runAutomation() {
        let now = epochNow()
        var notes: [String] = []
        let work = shared.withLock { s -> (String, [(sets: [ActionSet], firedBy: String?)])? in
            guard let tid = s.identity?.thingID else { return nil }
            let a = s.automation
            var runs: [(sets: [ActionSet], firedBy: String?)] = []
            for name in s.pendingSets {
                if let i = a.set(named: name) { runs.append(([a.sets[i]], nil)) }
            }
            s.pendingSets.removeAll()
            var changed = false
            for i in a.triggers.indices where a.triggers[i].enabled && a.triggers[i].fireDate <= now {
                var t = a.triggers[i]
                var sets: [ActionSet] = []
                for n in t.actionSets {
                    if let j = a.set(named: n) {
                        sets.append(a.sets[j])
                    } else {
                        notes.append(str("timer trigger \(t.name): action set \(n) no longer exists; skipped"))
                    }
                }
                runs.append((sets, t.name))
                // A missed firing fires once; the next one is the first
                // occurrence after now.
                if let next = t.nextOccurrence(after: now, zone: TimeZoneRules.load(t.timeZone)) {
                    t.fireDate = next
                } else {
                    t.enabled = false
                }
                a.triggers[i] = t
                changed = true
            }
            if changed && !a.save() {
                notes.append(str("cannot write \(storage.path(Automation.fileName)); a restart may fire a timer again"))
            }
            return runs.isEmpty ? nil : (tid, runs)
        }
        for n in notes { logger.warning(Text(n)) }
        guard let (thingID, runs) = work else { return }
        for run in runs {
            if let trigger = run.firedBy { logger.info("timer trigger \(trigger) fired") }
            for set in run.sets { execute(set, firedBy: run.firedBy, thingID: thingID) }
        }
    }

    /// Runs an action set as commands: one per run of actions with the same
    /// schema and version, each reported (PUT commands/{id}) before its
    /// actions run through the ledger and the outbox like a received command.
    private func execute(_ set: ActionSet, firedBy: String?, thingID: String) {
        guard !set.actions.isEmpty else {
            logger.warning("action set \(set.name) has no actions; nothing ran")
            return
        }
        var chunks: [[AutomationAction]] = []
        for a in set.actions {
            if let last = chunks.last?.last, last.schema.equals(a.schema), last.schemaVersion == a.schemaVersion {
                chunks[chunks.count - 1].append(a)
            } else {
                chunks.append([a])
            }
        }
        for chunk in chunks {
            let id = "local-" + Platform.randomHex(bytes: 8)
            let command = Command(
                id: id, shape: .schema, schema: chunk[0].schema, schemaVersion: chunk[0].schemaVersion,
                issuer: str("thing:\(thingID)"), title: set.name, firedByTriggerID: firedBy,
                groups: [
                    Command.Group(
                        alias: nil,
                        entries: chunk.map {
                            .action(name: $0.action, params: $0.params)
                        })
                ])
            let what =
                firedBy.map { str("command \(id) fired by timer trigger \($0)") }
                ?? str("command \(id) of action set \(set.name)")
            _ = sendRequest(
                method: "PUT", path: str("targets/thing:\(thingID)/commands/\(id)"), contentType: MediaType.json,
                body: command.encode().dumpBytes(), what: what, kind: .results, journaled: false)
            logger.debug("running \(what)")
            pipeline.runLocal(command, thingID: thingID)
        }
    }

    // MARK: remote configuration

    /// The framework's desired configuration (retained on p/{mqttTopic}/config).
    /// Applied only when its version is higher than the applied one (kept in
    /// automation.json across restarts) and it is within AutomationLimits;
    /// otherwise nothing changes and a log line says why.
    func applyRemoteConfig(_ payload: [UInt8]) {
        let now = epochNow()
        switch parseRemoteConfig(payload, now: now) {
        case .failure(let e):
            logger.error("remote configuration refused, nothing applied: \(e.description)")
            reportConfig(version: Self.configVersion(payload), applied: false, message: e.description)
        case .success(let config):
            guard let (version, sets, triggers) = config else { return }
            let saved = shared.withLock { s -> Bool in
                let a = s.automation
                let setNames = Set(sets.map { ByteKey($0.name) }), triggerNames = Set(triggers.map { ByteKey($0.name) })
                a.sets.removeAll { $0.remote || setNames.contains(ByteKey($0.name)) }
                a.sets += sets
                a.triggers.removeAll { $0.remote || triggerNames.contains(ByteKey($0.name)) }
                a.triggers += triggers
                a.remoteVersion = version
                return a.save()
            }
            if saved {
                logger.info(
                    "applied remote configuration version \(version): \(sets.count) action sets, \(triggers.count) timer triggers"
                )
            } else {
                logger.error(
                    "applied remote configuration version \(version) but cannot write \(storage.path(Automation.fileName))"
                )
            }
            reportConfig(
                version: version, applied: true,
                message: saved ? nil : "applied, but not saved: it is lost at a restart")
        }
    }

    /// Tells the framework what became of a configuration it sent
    /// (PUT …/automation-report), so that the owner can see a refusal.
    private func reportConfig(version: Int?, applied: Bool, message: String?) {
        guard let thingID = shared.withLock({ $0.identity?.thingID }) else { return }
        let body = JSON.object()
        if let version { body.set("version", .int(version)) }
        body.set("applied", .bool(applied))
        if let message { body.set("message", string: message) }
        _ = sendRequest(
            method: "PUT", path: str("targets/thing:\(thingID)/automation-report"), contentType: MediaType.json,
            body: body.dumpBytes(), what: "automation report", kind: .other)
    }

    /// The "version" of a configuration payload, when it has one (size first).
    private static func configVersion(_ payload: [UInt8]) -> Int? {
        guard payload.count <= AutomationLimits.maxConfigBytes, case .success(let j) = JSON.parse(payload) else {
            return nil
        }
        return j["version"]?.intValue
    }

    /// nil inside success: not newer than the applied version (logged).
    private func parseRemoteConfig(_ payload: [UInt8], now: Int64)
        -> Result<(Int, [ActionSet], [TimerTrigger])?, StatusMessage>
    {
        typealias L = AutomationLimits
        // Size first: nothing larger is parsed.
        guard payload.count <= L.maxConfigBytes else {
            return .failure(
                StatusMessage(str("\(payload.count) bytes, over AutomationLimits.maxConfigBytes (\(L.maxConfigBytes))"))
            )
        }
        guard case .success(let j) = JSON.parse(payload), j.isObject else { return .failure("not a JSON object") }
        guard let version = j["version"]?.intValue else { return .failure("\"version\" must be an integer") }
        if let applied = shared.withLock({ $0.automation.remoteVersion }), version <= applied {
            if version == applied {
                logger.debug("remote configuration version \(version) is applied already")
            } else {
                logger.warning(
                    "remote configuration version \(version) ignored: version \(applied) is applied, and only a higher version replaces it"
                )
            }
            return .success(nil)
        }
        let localSets = shared.withLock { s in s.automation.sets.filter { !$0.remote }.map { $0.name } }
        let sets: [ActionSet], decoded: [TimerTrigger]
        switch AutomationCodec.decodeConfig(j, localSets: localSets) {
        case .failure(let m): return .failure(m)
        case .success(let c): (sets, decoded) = (c.sets, c.triggers)
        }
        var triggers: [TimerTrigger] = []
        for var t in decoded {
            if t.fireDate <= now {
                // A configuration published earlier: a recurring trigger
                // continues from its next occurrence; a one-time trigger
                // whose date has passed counts as fired.
                if let next = t.nextOccurrence(after: now, zone: TimeZoneRules.load(t.timeZone)) {
                    t.fireDate = next
                } else {
                    t.enabled = false
                }
            }
            triggers.append(t)
        }
        return .success((version, sets, triggers))
    }
}
