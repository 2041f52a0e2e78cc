// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's server triggers and thing automation (the statements SQLite and PostgreSQL share).
extension SQLStore {
    // MARK: server triggers

    public func insertTrigger(_ t: ServerTriggerRecord) -> Bool {
        use(false) {
            let seq = Self.dialect.sequence("triggers")
            return try $0.run(
                "INSERT INTO triggers (trigger_id, " + seq.column
                    + "thing_id, definition, enabled, last_match, created_at) VALUES (?, " + seq.value
                    + "?, ?, ?, ?, ?) ON CONFLICT (trigger_id) DO NOTHING",
                [
                    .text(t.triggerID), .text(t.thingID), .text(t.definition), .int(t.enabled ? 1 : 0),
                    .int(t.lastMatch.map { $0 ? 1 : 0 }), .int(t.createdAt)
                ]) == 1
        }
    }

    public func trigger(id: String) -> ServerTriggerRecord? {
        use(nil) { try $0.first(StoreRows.triggerColumns + " WHERE trigger_id = ?", [.text(id)], StoreRows.trigger) }
    }

    public func triggers(thingID: String) -> [ServerTriggerRecord] {
        use([]) {
            try $0.rows(
                StoreRows.triggerColumns + " WHERE thing_id = ? ORDER BY seq", [.text(thingID)], StoreRows.trigger)
        }
    }

    public func allTriggers() -> [ServerTriggerRecord] {
        use([]) { try $0.rows(StoreRows.triggerColumns + " ORDER BY seq", [], StoreRows.trigger) }
    }

    public func updateTrigger(id: String, definition: String) -> Bool {
        use(false) {
            try $0.run(
                "UPDATE triggers SET definition = ?, last_match = NULL WHERE trigger_id = ?",
                [.text(definition), .text(id)]) == 1
        }
    }

    public func setTriggerEnabled(id: String, enabled: Bool) -> Bool {
        use(false) {
            try $0.run("UPDATE triggers SET enabled = ? WHERE trigger_id = ?", [.int(enabled ? 1 : 0), .text(id)]) == 1
        }
    }

    public func claimTrigger(id: String) -> Bool {
        use(false) {
            try $0.run("UPDATE triggers SET enabled = 0 WHERE trigger_id = ? AND enabled = 1", [.text(id)]) == 1
        }
    }

    public func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool {
        use(false) {
            try $0.run(
                "UPDATE triggers SET last_match = ? WHERE trigger_id = ?",
                [.int(lastMatch.map { $0 ? 1 : 0 }), .text(id)]) == 1
        }
    }

    public func deleteTrigger(id: String) -> Bool {
        use(false) { try $0.run("DELETE FROM triggers WHERE trigger_id = ?", [.text(id)]) == 1 }
    }

    // MARK: thing automation

    public func automation(thingID: String) -> ThingAutomation? {
        use(nil) {
            try $0.first(StoreRows.automationColumns + " WHERE thing_id = ?", [.text(thingID)], StoreRows.automation)
        }
    }

    public func saveAutomation(thingID: String, config: String) -> ThingAutomation? {
        use(nil) { c in
            try c.transaction { () throws -> ThingAutomation? in
                guard try Self.exists(c, thing: thingID) else { return nil }
                return try c.first(
                    """
                    INSERT INTO thing_automation (thing_id, config, version) VALUES (?, ?, 1)
                    ON CONFLICT (thing_id) DO UPDATE
                        SET config = excluded.config, version = thing_automation.version + 1, report = NULL
                    RETURNING version
                    """, [.text(thingID), .text(config)]
                ) {
                    ThingAutomation(thingID: thingID, config: config, version: $0.int(0))
                }
            }
        }
    }

    public func saveAutomationReport(thingID: String, report: String) -> Bool {
        use(false) {
            try $0.run("UPDATE thing_automation SET report = ? WHERE thing_id = ?", [.text(report), .text(thingID)]) > 0
        }
    }
}
