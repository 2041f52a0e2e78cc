// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Commands and their lifecycle: stored, delivered, answered or ended by
/// the hub, and the marks of their notifications (what a sweep may still
/// send). One part of HubStore.
public protocol CommandStore: AnyObject, Sendable {
    // MARK: commands

    /// Stores a new command (its state and expiry as given); returns it
    /// with `seq` assigned, nil when the commandID exists already or the
    /// store cannot write.
    func insertCommand(_ command: CommandRecord) -> CommandRecord?
    func command(id: String) -> CommandRecord?
    /// Sets the state (delivered) and modifiedAt of those of `commandIDs`
    /// that are open and have no results yet, in as few statements as the
    /// store can (one per `StoreRules.batchMax`); returns them.
    func markDelivered(commandIDs: [String], at: Int64) -> Set<String>
    /// Puts a DELIVERED command without results back to SENDING (its
    /// publish could not be queued after it was stored DELIVERED); false
    /// when it is not DELIVERED or has results.
    func markUndelivered(commandID: String, at: Int64) -> Bool
    /// Stores the first results of a command and its final state. Returns
    /// false, changing nothing, when the command already has results (results
    /// are idempotent by commandID) or is unknown. With `swept`, the
    /// command's notification (MQTT, webhooks) is then due: a sweep may
    /// claim it from `at + StoreRules.notificationGraceMs` on, unless
    /// `markNotified` came first. Without, it is never due (the command
    /// has no target a sweep sends to).
    func recordResults(commandID: String, results: String, state: CommandState, at: Int64, swept: Bool) -> Bool
    /// The hub that sent these commands' notifications says so: no sweep
    /// claims them afterwards. Returns how many were due (the others are
    /// unknown, have no results, or were marked).
    func markNotified(commandIDs: [String]) -> Int
    /// Claims at most `limit` commands whose notification is due at `now`
    /// (results recorded, not marked notified, grace or earlier claim over),
    /// oldest first, and makes each due again only at `now + leaseMs`: the
    /// caller sends them and marks them notified; if it dies first, another
    /// sweep takes them after the lease. Of sweeps running at once (hubs on
    /// one PostgreSQL) each command goes to one.
    func claimUnnotified(now: Int64, leaseMs: Int64, limit: Int) -> [CommandRecord]
    /// A thing's commands with seq > afterSeq, ascending, at most `limit`.
    func commands(thingID: String, afterSeq: Int64, limit: Int) -> [CommandRecord]
    /// A thing's commands without results, ascending (EXPIRED and CANCELLED
    /// ones too: they may still get results; callers that publish filter
    /// on `state.isOpen`).
    func unansweredCommands(thingID: String) -> [CommandRecord]

    // MARK: command lifecycle (CommandLifecycle.swift)

    /// Sets when a command expires (ms); false when it is unknown.
    func setCommandExpiry(commandID: String, expiresAt: Int64) -> Bool
    /// Ends an open command (SENDING or DELIVERED, no results) in `state`
    /// (EXPIRED or CANCELLED) with `reason`, and makes its notification due
    /// (with `swept`) as `recordResults` does. False, changing nothing, when
    /// the command is unknown, has results or is not open (of two hubs
    /// ending it, one wins).
    func endCommand(commandID: String, state: CommandState, reason: String, at: Int64, swept: Bool) -> Bool
    /// At most `limit` open commands, oldest first, that are due to end at
    /// `now`: past their `expiresAt`, or SENDING and created at or before
    /// `sentBefore`, or DELIVERED and last delivered at or before
    /// `deliveredBefore` (nil: no such bound).
    func commandsDueToEnd(now: Int64, sentBefore: Int64?, deliveredBefore: Int64?, limit: Int) -> [CommandRecord]
}

extension CommandStore {
    /// One command's `markDelivered(commandIDs:at:)`.
    public func markDelivered(commandID: String, at: Int64) -> Bool {
        markDelivered(commandIDs: [commandID], at: at).contains(commandID)
    }

    /// One command's `markNotified(commandIDs:)`: false when it was not due.
    public func markNotified(commandID: String) -> Bool { markNotified(commandIDs: [commandID]) == 1 }

    /// Results whose notification a sweep may send (`swept`).
    public func recordResults(commandID: String, results: String, state: CommandState, at: Int64) -> Bool {
        recordResults(commandID: commandID, results: results, state: state, at: at, swept: true)
    }

    /// An end whose notification a sweep may send (`swept`).
    public func endCommand(commandID: String, state: CommandState, reason: String, at: Int64) -> Bool {
        endCommand(commandID: commandID, state: state, reason: reason, at: at, swept: true)
    }
}

/// Kii's command states.
public enum CommandState: String, Sendable, CaseIterable {
    /// Stored and published; the thing has not been seen to take it.
    case sending = "SENDING"
    /// Published while the thing was online and acknowledged by the broker.
    case delivered = "DELIVERED"
    /// Results arrived and every action succeeded.
    case done = "DONE"
    /// Results arrived and at least one action failed.
    case incomplete = "INCOMPLETE"
    /// The hub gave up on it before results arrived: its expiry passed, or
    /// it stayed undelivered or unanswered too long (`endReason` says
    /// which; CommandLifecycle.swift). It is never published again.
    case expired = "EXPIRED"
    /// Its issuer or an owner cancelled it before results arrived. It is
    /// never published again.
    case cancelled = "CANCELLED"

    /// SENDING or DELIVERED: the hub still publishes it and waits for results.
    public var isOpen: Bool { self == .sending || self == .delivered }
}

/// A command as the framework keeps it.
public struct CommandRecord: Sendable {
    public var commandID: String
    public var thingID: String
    /// Assigned by the store on insert: increasing per store, the listing order.
    public var seq: Int64
    /// "user:{userID}" (or any typed ID) of whoever issued it.
    public var issuer: String?
    /// The app installation the command was posted from (for notifications
    /// of pseudo users), if any.
    public var issuingInstallationID: String?
    /// The command exactly as published to the thing (wire JSON text).
    public var payload: String
    /// The action results body the thing reported (JSON text), once it did.
    public var results: String?
    public var state: CommandState
    public var createdAt: Int64
    public var modifiedAt: Int64
    /// When the command expires (ms), nil for no expiry of its own
    /// (`setCommandExpiry`; the bounds of CommandLifetimes apply to all).
    public var expiresAt: Int64?
    /// Why the hub ended it (EXPIRED or CANCELLED): "expired", "undelivered",
    /// "unanswered" or "cancelled" (`endCommand`). Kept when results arrive later.
    public var endReason: String?

    public init(
        commandID: String, thingID: String, seq: Int64 = 0, issuer: String?, issuingInstallationID: String?,
        payload: String, results: String? = nil, state: CommandState = .sending, createdAt: Int64,
        modifiedAt: Int64, expiresAt: Int64? = nil, endReason: String? = nil
    ) {
        self.expiresAt = expiresAt
        self.endReason = endReason
        self.commandID = commandID
        self.thingID = thingID
        self.seq = seq
        self.issuer = issuer
        self.issuingInstallationID = issuingInstallationID
        self.payload = payload
        self.results = results
        self.state = state
        self.createdAt = createdAt
        self.modifiedAt = modifiedAt
    }
}
