// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's server triggers and thing automation.
extension MemoryStore {
    // MARK: server triggers

    public func insertTrigger(_ trigger: ServerTriggerRecord) -> Bool {
        data.withLock { d in
            guard d.triggers[trigger.triggerID] == nil else { return false }
            d.triggers[trigger.triggerID] = trigger
            d.triggerOrder.append(trigger.triggerID)
            return true
        }
    }

    public func trigger(id: String) -> ServerTriggerRecord? { data.withLock { $0.triggers[id] } }

    public func triggers(thingID: String) -> [ServerTriggerRecord] {
        data.withLock { d in d.triggerOrder.compactMap { d.triggers[$0] }.filter { $0.thingID == thingID } }
    }

    public func allTriggers() -> [ServerTriggerRecord] {
        data.withLock { d in d.triggerOrder.compactMap { d.triggers[$0] } }
    }

    public func updateTrigger(id: String, definition: String) -> Bool {
        data.withLock { d in
            guard d.triggers[id] != nil else { return false }
            d.triggers[id]!.definition = definition
            d.triggers[id]!.lastMatch = nil
            return true
        }
    }

    public func setTriggerEnabled(id: String, enabled: Bool) -> Bool {
        data.withLock { d in
            guard d.triggers[id] != nil else { return false }
            d.triggers[id]!.enabled = enabled
            return true
        }
    }

    public func claimTrigger(id: String) -> Bool {
        data.withLock { d in
            guard d.triggers[id]?.enabled == true else { return false }
            d.triggers[id]!.enabled = false
            return true
        }
    }

    /// One hub uses a memory store.
    public func holdsScheduleLease() -> Bool { true }

    public func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool {
        data.withLock { d in
            guard d.triggers[id] != nil else { return false }
            d.triggers[id]!.lastMatch = lastMatch
            return true
        }
    }

    public func deleteTrigger(id: String) -> Bool {
        data.withLock { d in
            guard d.triggers.removeValue(forKey: id) != nil else { return false }
            d.triggerOrder.removeAll { $0 == id }
            return true
        }
    }

    // MARK: thing automation

    public func automation(thingID: String) -> ThingAutomation? { data.withLock { $0.automations[thingID] } }

    public func saveAutomation(thingID: String, config: String) -> ThingAutomation? {
        data.withLock { d in
            guard d.things[thingID] != nil else { return nil }
            let a = ThingAutomation(
                thingID: thingID, config: config,
                version: (d.automations[thingID]?.version ?? 0) + 1)
            d.automations[thingID] = a
            return a
        }
    }

    public func saveAutomationReport(thingID: String, report: String) -> Bool {
        data.withLock { d in
            guard d.automations[thingID] != nil else { return false }
            d.automations[thingID]?.report = report
            return true
        }
    }
}
