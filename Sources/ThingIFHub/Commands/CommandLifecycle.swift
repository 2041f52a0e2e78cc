// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// How long a command may live at the hub (docs/PROTOCOL.md §9.1).
/// Every command ends: with results (DONE, INCOMPLETE), or, when none came,
/// EXPIRED (its own expiry passed, or it stayed undelivered or unanswered
/// past a bound) or CANCELLED (by its issuer or an owner).
public struct CommandLifetimes: Sendable, Equatable {
    /// Seconds a command posted without `timeToLive` lives; 0: no expiry of
    /// its own (the default: Kii's clients see no change).
    public var defaultTimeToLive: Int64
    /// Seconds a command may stay SENDING (no installation took it) before
    /// it ends EXPIRED with reason "undelivered"; 0: never. The delivery
    /// worker retries silent installations this long (a day without it).
    public var undeliveredLimit: Int64
    /// Seconds a command may stay DELIVERED without results, counted from
    /// its last delivery, before it ends EXPIRED with reason "unanswered"; 0: never.
    public var unansweredLimit: Int64

    /// The largest `timeToLive` (and default TTL): a year.
    public static let maxTimeToLive: Int64 = 365 * 86_400
    /// Home Assistant's commands (a switch flipped now) live this long.
    public static let homeAssistantTimeToLive: Int64 = 60
    /// How often the hub looks for commands due to end, and how many it ends a time.
    static let sweepPeriodMs: Int64 = 1000
    /// How long a cancel waits for the thing's answer by default (ms).
    public static let defaultCancelWaitMs: Int64 = 5000
    static let sweepLimit = 200

    public init(defaultTimeToLive: Int64 = 0, undeliveredLimit: Int64 = 86_400, unansweredLimit: Int64 = 86_400) {
        self.defaultTimeToLive = defaultTimeToLive
        self.undeliveredLimit = undeliveredLimit
        self.unansweredLimit = unansweredLimit
    }

    /// The expiry (ms) of a command posted at `now` with the CommandForm
    /// `form`: its `timeToLive` (whole seconds, 1 … maxTimeToLive), else the
    /// default TTL, else none. The hub's clock decides; a client's absolute
    /// `expiresAt` is refused (its clock is not the hub's).
    public func expiry(form: JSON, now: Int64) -> Result<Int64?, HubError> {
        if form["expiresAt"] != nil {
            return .failure(
                .wrongCommand("\"expiresAt\" is set by the hub; give \"timeToLive\" (seconds) instead"))
        }
        guard let v = form["timeToLive"], !v.isNull else {
            return .success(defaultTimeToLive > 0 ? now + defaultTimeToLive * 1000 : nil)
        }
        guard let ttl = v.intValue, (1...Int(Self.maxTimeToLive)).contains(ttl) else {
            return .failure(
                .wrongCommand("\"timeToLive\" must be a whole number of seconds from 1 to \(Self.maxTimeToLive)"))
        }
        return .success(now + Int64(ttl) * 1000)
    }
}

/// Why the hub ended a command without results (CommandRecord.endReason).
public enum EndReason: String, Sendable, CaseIterable {
    /// Its expiresAt passed before results arrived.
    case expired
    /// It stayed SENDING past CommandLifetimes.undeliveredLimit.
    case undelivered
    /// It stayed DELIVERED without results past CommandLifetimes.unansweredLimit.
    case unanswered
    /// Its issuer or an owner cancelled it.
    case cancelled
}

extension CommandDelivery {
    /// Whether the hub may still publish the command at `now` (ms): open
    /// (SENDING or DELIVERED, no results) and not past its expiry. One that
    /// is past it is ended here, so it is never published.
    func mayPublish(_ c: CommandRecord, now: Int64) -> Bool {
        guard c.results == nil, c.state.isOpen else { return false }
        if let e = c.expiresAt, e <= now {
            end(c.commandID, state: .expired, reason: .expired, at: now)
            return false
        }
        return true
    }

    /// Ends an open command without results and notifies it like results;
    /// false when it was not open (results came first, or another hub or
    /// call ended it).
    @discardableResult
    func end(_ commandID: String, state: CommandState, reason: EndReason, at: Int64) -> Bool {
        // The command and whom to tell, read before the end (which changes
        // neither its issuer nor its installation): as for results, the
        // end is due for the sweep only with a target the sweep sends to.
        guard var record = store.command(id: commandID) else { return false }
        let targets = notifications.targets(for: record)
        guard
            store.endCommand(
                commandID: commandID, state: state, reason: reason.rawValue, at: at, swept: targets.anySwept)
        else { return false }
        metrics.commandEnded(state: state, reason: reason)
        events.event("command \(commandID) ended \(state.rawValue) (\(reason.rawValue))")
        // The stored row now: the one read above with what was just written.
        record.state = state
        record.endReason = reason.rawValue
        record.modifiedAt = at
        notifications.finished(record, targets: targets)
        if record.issuer == AppAPI.updateIssuer, let told = offerEnded.withLock({ $0 }) { told(record) }
        return true
    }

    /// The lifecycle sweep, every CommandLifetimes.sweepPeriodMs: ends the
    /// commands past their expiry or a bound of `lifetimes`. Several
    /// hubs on one database may sweep at once; `endCommand` lets one of them end each.
    func lifecycleTick() {
        let l = lifetimes
        let now = Platform.epochMs()
        let ending = store.commandsDueToEnd(
            now: now, sentBefore: l.undeliveredLimit > 0 ? now - l.undeliveredLimit * 1000 : nil,
            deliveredBefore: l.unansweredLimit > 0 ? now - l.unansweredLimit * 1000 : nil,
            limit: CommandLifetimes.sweepLimit)
        for c in ending {
            let reason: EndReason =
                (c.expiresAt.map { $0 <= now } ?? false) ? .expired : c.state == .sending ? .undelivered : .unanswered
            end(c.commandID, state: .expired, reason: reason, at: now)
        }
    }

    /// How long the delivery worker retries a SENDING command (ms).
    var deliveryRetryHorizonMs: Int64 {
        lifetimes.undeliveredLimit > 0 ? lifetimes.undeliveredLimit * 1000 : Self.retryHorizonMs
    }

    /// Cancels a command `c` as read by someone allowed to read it (the app
    /// rules checked that: FrameworkSide.startCancel); docs/PROTOCOL.md
    /// §9.1. The hub answers CANCELLED only when the thing will not run it:
    ///
    /// - SENDING (held or retried by the hub, not published to a thing that
    ///   keeps a ledger): ended CANCELLED here, under the thing's gate, so no
    ///   publish overlaps it; never published again.
    /// - DELIVERED to thingif's library (its topic announces a status): the
    ///   cancel goes to the thing (CommandCancel) and `.waiting` comes back;
    ///   the caller waits for the answer up to `options.cancelWaitMs`. The
    ///   thing refuses a command it has not started (results with reason
    ///   CANCELLED: stored as CANCELLED) or, if it ran it, sends its results.
    ///   An end node's goes on its command topic under its gateway's
    ///   installation, and the gateway's library decides (`cancelTopic`).
    /// - DELIVERED to a device that cannot be told (Kii's SDKs, no status):
    ///   409 COMMAND_NOT_CANCELLABLE with DELIVERED.
    /// - CANCELLED already: the same 200; results or EXPIRED: 409 with the state.
    func startCancel(_ c: CommandRecord) -> CancelStep {
        let commandID = c.commandID
        guard c.results == nil && c.state.isOpen else {
            return .answered(cancelAnswer(commandID) ?? .failure(.storage))
        }
        let step = commandGate(c.thingID).withLock { gated -> CancelStep? in
            gated &+= 1
            guard let now = store.command(id: commandID) else { return .answered(.failure(.storage)) }
            guard now.results == nil && now.state.isOpen else { return nil }
            if now.state == .sending {
                _ = end(commandID, state: .cancelled, reason: .cancelled, at: Platform.epochMs())
                return nil
            }
            // DELIVERED: the thing decides (an end node's gateway, for it).
            guard let thing = store.thing(id: c.thingID), let topic = cancelTopic(of: thing) else {
                var e = HubError(
                    409, "COMMAND_NOT_CANCELLABLE",
                    "command \(commandID) is DELIVERED to a device that cannot be told of a cancel")
                e.commandState = now.state.rawValue
                return .answered(.failure(e))
            }
            guard
                client.publish(topic: topic, payload: CommandCancel.encode(commandID: commandID), qos: 1)
                    == MOSQ_ERR_SUCCESS.rawValue
            else {
                return .answered(.failure(.storage))
            }
            events.event("cancel of \(commandID) sent to \(c.thingID)")
            return .waiting
        }
        return step ?? .answered(cancelAnswer(commandID) ?? .failure(.storage))
    }

    /// The answer to a cancel from what is stored now; nil while the command
    /// is still open without results (the thing has not answered yet).
    public func cancelAnswer(_ commandID: String) -> Result<CommandRecord, HubError>? {
        guard let now = store.command(id: commandID) else { return .failure(.storage) }
        if now.state == .cancelled { return .success(now) }
        if now.results == nil && now.state.isOpen { return nil }
        var e = HubError(
            409, "COMMAND_NOT_CANCELLABLE",
            "command \(commandID) is \(now.state.rawValue)"
                + (now.results != nil ? ": its results arrived" : ": the hub ended it (\(now.endReason ?? "?"))"))
        e.commandState = now.state.rawValue
        return .failure(e)
    }
}

/// What a cancel did first (CommandDelivery.startCancel).
public enum CancelStep {
    /// The answer is known.
    case answered(Result<CommandRecord, HubError>)
    /// The cancel went to the thing: wait for `cancelAnswer` (AppAPI) until it is not nil
    /// or the wait (`Options.cancelWaitMs`) is over (then 202: pending).
    case waiting
}
