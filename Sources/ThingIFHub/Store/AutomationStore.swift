// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Server triggers, the lease of their schedules among the hubs that share
/// a store, and the automation a thing runs by itself. One part of
/// HubStore.
public protocol AutomationStore: AnyObject, Sendable {
    // MARK: server triggers

    /// Stores a new trigger; false when its ID exists or the store cannot write.
    func insertTrigger(_ trigger: ServerTriggerRecord) -> Bool
    func trigger(id: String) -> ServerTriggerRecord?
    /// A thing's triggers in the order they were created.
    func triggers(thingID: String) -> [ServerTriggerRecord]
    /// Every trigger of every thing, in the order they were created.
    func allTriggers() -> [ServerTriggerRecord]
    /// False when the trigger is unknown or the store cannot write.
    func setTriggerEnabled(id: String, enabled: Bool) -> Bool
    /// Disables an enabled trigger; true only for the call that disabled it,
    /// so a SCHEDULE_ONCE trigger fires once even where two hubs see it due.
    func claimTrigger(id: String) -> Bool
    /// Whether this hub runs the schedules (SCHEDULE and SCHEDULE_ONCE
    /// triggers) now. Of the hubs sharing a store one does: a store that one
    /// hub uses (memory, SQLite) always says yes; PostgreSQL says yes to the
    /// hub that holds its schedule lock, which passes to another hub when
    /// that hub's session ends. Called once a tick.
    func holdsScheduleLease() -> Bool
    /// Replaces a trigger's definition (PATCH) and forgets its last match.
    func updateTrigger(id: String, definition: String) -> Bool
    func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool
    func deleteTrigger(id: String) -> Bool

    // MARK: thing automation

    /// The thing's automation config; nil before the first save.
    func automation(thingID: String) -> ThingAutomation?
    /// Replaces the thing's automation config and increments its version
    /// (forgetting the thing's last report); returns the stored record, nil
    /// for an unknown thing or a storage error.
    func saveAutomation(thingID: String, config: String) -> ThingAutomation?
    /// Keeps the thing's report on the configuration; false when the thing
    /// has no configuration or the store fails.
    func saveAutomationReport(thingID: String, report: String) -> Bool
}

/// A server trigger (Thing-IF's trigger API) of a thing.
public struct ServerTriggerRecord: Sendable {
    public var triggerID: String
    public var thingID: String
    /// The trigger as created: {"predicate","command","title"?,"description"?} (JSON text).
    public var definition: String
    public var enabled: Bool
    /// STATES triggers: whether the condition matched the thing's state at
    /// the last evaluation; nil before the first.
    public var lastMatch: Bool?
    public var createdAt: Int64

    public init(
        triggerID: String, thingID: String, definition: String, enabled: Bool = true,
        lastMatch: Bool? = nil, createdAt: Int64
    ) {
        self.triggerID = triggerID
        self.thingID = thingID
        self.definition = definition
        self.enabled = enabled
        self.lastMatch = lastMatch
        self.createdAt = createdAt
    }
}

/// The automation a thing runs by itself (its action sets and timer
/// triggers), as the apps manage it remotely.
public struct ThingAutomation: Sendable {
    public var thingID: String
    /// {"actionSets":[…],"timerTriggers":[…]} (JSON text).
    public var config: String
    /// Increases with every change (1 for the first).
    public var version: Int64
    /// What the thing last said of a configuration it was sent (JSON text:
    /// {"version","applied","message"?,"reportedAt"}); nil when it has said
    /// nothing since the last change.
    public var report: String?

    public init(thingID: String, config: String, version: Int64, report: String? = nil) {
        self.thingID = thingID
        self.config = config
        self.version = version
        self.report = report
    }
}
