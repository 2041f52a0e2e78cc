// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// Command delivery: stores each command and publishes it to its thing,
/// follows the broker's PUBACKs (CommandDelivery+Rounds.swift), publishes
/// again what a thing has not answered when it comes online, and ends the
/// commands that expire or are cancelled (CommandLifecycle.swift), telling
/// their issuers through Notifications. It asks `Presence` where a command
/// goes and whether it waits, and changes presence under a thing's command
/// gate (`statusChanged`).
///
/// Threads: every method may be called from any thread; the scheduler runs
/// `deliveryTick` and `lifecycleTick`, libmosquitto's thread `published`.
public final class CommandDelivery: @unchecked Sendable {
    /// What only this process knows of delivery.
    struct State {
        var rounds: [String: DeliveryRound] = [:]  // commandID -> the attempt in flight
        var pendingMids: [Int32: (commandID: String, topic: String)] = [:]
        var finishedRounds: [(String, DeliveryRound)] = []
        var reachedCommands: Set<String> = []  // reached a subscription; not yet marked in the store
        var retries: [String: DeliveryRetry] = [:]  // thingID -> next attempt
    }

    let store: any CommandStore & ThingStore
    let client: MqttClient
    let metrics: HubMetrics
    let events: HubEvents
    let notifications: Notifications
    let lifetimes: CommandLifetimes
    let presence: Presence
    let known = Locked(State())
    /// Held while a tracked command is published and its mid recorded, and
    /// by the PUBACK callback before it looks the mid up. The value counts
    /// the tracked publishes; it is an Int, not Void, because
    /// ThreadSanitizer takes the zero-sized value's accesses for accesses to
    /// the lock's own pointer beside it and reports a race that is none.
    let publishing = Locked(0)
    /// Per thing (striped): held while a command is found open, published
    /// and marked DELIVERED, while a cancel finds it SENDING and ends it,
    /// and while a status changes the thing's presence, so that none of
    /// these overlaps another (CommandLifecycle.swift, `statusChanged`).
    /// Int, not Void: see `publishing`.
    let commandGates: [Locked<Int>] = (0..<64).map { _ in Locked(0) }
    /// Told of every update offer (issuer AppAPI.updateIssuer) the hub
    /// ended without results, once (`end`): its job's end (UpdateJobEnds.offerEnded).
    let offerEnded = Locked<(@Sendable (CommandRecord) -> Void)?>(nil)

    init(
        store: any CommandStore & ThingStore, client: MqttClient, metrics: HubMetrics, events: HubEvents,
        notifications: Notifications,
        lifetimes: CommandLifetimes, presence: Presence
    ) {
        self.store = store
        self.client = client
        self.metrics = metrics
        self.events = events
        self.notifications = notifications
        self.lifetimes = lifetimes
        self.presence = presence
    }

    func commandGate(_ thingID: String) -> Locked<Int> {
        commandGates[Int(FNV1a.hash(thingID) % UInt64(commandGates.count))]
    }

    // MARK: presence, under the gates

    /// A status message (`online` or `offline`) of one of the thing's
    /// installations, told to `presence` under the thing's gate, which a
    /// command being stored holds from its read of the thing's presence to
    /// its insert (`stored`): it read "offline" and is in the store before
    /// the resend that follows an `online` reads what is unanswered, or it
    /// reads "online" and goes out at once (OnlineRaceTests). Returns how
    /// many things are online.
    func statusChanged(thingID: String, clientID: String, up: Bool) -> Int {
        commandGate(thingID).withLock { _ in presence.statusChanged(thingID: thingID, clientID: clientID, up: up) }
    }

    /// An end node's status under one of its gateway's installations
    /// (p/{clientID}/end-nodes/{endNode}/status, docs/GATEWAYS.md §5), under
    /// the end node's gate as a thing's status is under its own.
    func endNodeStatusChanged(endNode: String, gateway: String, clientID: String, up: Bool) {
        commandGate(endNode).withLock { _ in
            presence.endNodeStatusChanged(endNode: endNode, gateway: gateway, clientID: clientID, up: up)
        }
    }

    /// A deleted thing: its retries and its presence go. Returns how many things are online.
    func forget(thingID: String, topics: [String]) -> Int {
        known.withLock { d in d.retries[thingID] = nil }
        return presence.forget(thingID: thingID, topics: topics)
    }

    /// A status message of a client ID that no thing has: when this hub
    /// still counts a thing that went online with it, another hub sharing
    /// the store deleted that thing (and cleared its status topic), so this
    /// hub forgets it too and `things_online` stays right on every hub.
    func forgetDeleted(clientID: String) {
        let gone = presence.things(cameOnlineThrough: clientID).filter { store.thing(id: $0) == nil }
        guard !gone.isEmpty else { return }
        metrics.setOnline(presence.forgetStatuses(of: gone))
        for tid in gone { events.event("\(tid) was deleted by another hub") }
    }

    /// Stores a command and publishes it to the thing; false when the thing
    /// is unknown or the command ID exists. A command stored but not
    /// published (broker down) goes out with the thing's next birth message.
    public func send(
        _ command: Command, to thingID: String, issuer: String? = nil,
        installationID: String? = nil
    ) -> Bool {
        stored(command, to: thingID, issuer: issuer, installationID: installationID) != nil
    }

    /// As `send`, returning the stored record. `expiresAt` (ms): the
    /// command's expiry, which also travels in its payload (CommandLifecycle.swift).
    func stored(
        _ command: Command, to thingID: String, issuer: String?, installationID: String?, expiresAt: Int64? = nil
    ) -> CommandRecord? {
        guard let thing = store.thing(id: thingID) else { return nil }
        return stored(command, to: thing, issuer: issuer, installationID: installationID, expiresAt: expiresAt)
    }

    /// As `stored(_:to:…)` for a thing the caller has just read.
    func stored(
        _ command: Command, to thing: ThingRecord, issuer: String?, installationID: String?, expiresAt: Int64? = nil
    ) -> CommandRecord? {
        let thingID = thing.thingID
        var command = command
        command.expiresAt = expiresAt ?? command.expiresAt
        let expiresAt = command.expiresAt
        let payload = command.encode().dump()
        let now = Platform.epochMs()
        // One that expired already (a Command given with a past expiresAt)
        // is stored and ended, never published.
        if let expiresAt, expiresAt <= now {
            guard
                let record = insert(
                    command, thingID: thingID, issuer: issuer, installationID: installationID,
                    payload: payload, state: .sending, now: now)
            else { return nil }
            _ = mayPublish(record, now: now)
            return store.command(id: command.id) ?? record
        }
        // Every installation's topic (CommandDelivery+Rounds.swift); one that
        // announced itself online makes it delivered at once. An
        // installation that announces itself (persistent session) gets it only
        // while the thing is online by its status: else the hub holds it until
        // the thing's next `online`, so that a command that expires or is
        // cancelled meanwhile never waits in the broker's session queue.
        // Under the thing's gate from the insert on, so a cancel or a resend
        // finds it stored and published or neither.
        // An end node's commands go through its gateway (`endNodeTopics`).
        let endNode = thing.layoutPosition == .endNode
        return commandGate(thingID).withLock { gated -> CommandRecord? in
            gated &+= 1
            let (topics, direct): ([String], Bool)
            if endNode {
                topics = endNodeTopics(thingID)
                direct = !topics.isEmpty
            } else {
                let (online, announcing) = presence.announced(thingID, installations: thing.installations.values)
                let held = online ? [] : announcing
                topics = thing.installations.values.filter { !held.contains($0) }.sorted()
                direct = online && !topics.isEmpty
            }
            // Stored before it is published, so a result can never arrive
            // for a command the framework does not know; for a thing online
            // by its status (an end node online through its gateway), stored
            // DELIVERED (one write, not two), and put back to SENDING if the
            // publish cannot be queued (for an end node, also when no
            // subscription took it: `deliveryTick`).
            guard
                var record = insert(
                    command, thingID: thingID, issuer: issuer, installationID: installationID, payload: payload,
                    state: direct ? .delivered : .sending, now: now)
            else { return nil }
            let queued = startRound(
                commandID: command.id, thingID: thingID, payload: Array(payload.utf8), topics: topics,
                endNode: endNode)
            if direct && queued {
                metrics.commandDelivered()
            } else if direct {
                _ = store.markUndelivered(commandID: command.id, at: Platform.epochMs())
                record.state = .sending
            }
            return record
        }
    }

    /// Stores a new command (`stored`): with its expiry, in `state`.
    private func insert(
        _ command: Command, thingID: String, issuer: String?, installationID: String?, payload: String,
        state: CommandState, now: Int64
    ) -> CommandRecord? {
        let record = metrics.timed("insertCommand") {
            store.insertCommand(
                CommandRecord(
                    commandID: command.id, thingID: thingID, issuer: issuer ?? command.issuer,
                    issuingInstallationID: installationID, payload: payload, state: state, createdAt: now,
                    modifiedAt: now, expiresAt: command.expiresAt))
        }
        if record != nil { metrics.commandIssued() }
        return record
    }

    /// Publishes any bytes on the thing's command topic: that of the
    /// installation the thing last came online with (its status is retained,
    /// so a restarted hub learns it again), else the first of its
    /// installations. A thing can have several (an owner's onboarding makes
    /// one to hand over); commands go where the thing listens.
    public func publish(_ payload: [UInt8], to thingID: String) -> Bool {
        guard let topic = commandTopic(of: thingID) else { return false }
        return client.publish(topic: topic, payload: payload, qos: 1) == MOSQ_ERR_SUCCESS.rawValue
    }

    /// The topic the thing's commands go to (see `publish(_:to:)`).
    public func commandTopic(of thingID: String) -> String? {
        store.thing(id: thingID).flatMap { commandTopic(of: $0) }
    }

    /// As `commandTopic(of:)` for a thing the caller has just read.
    func commandTopic(of thing: ThingRecord) -> String? {
        let topics = thing.installations.values
        let live = presence.lastOnlineTopic(of: thing.thingID)
        return live.flatMap { topics.contains($0) ? $0 : nil } ?? topics.sorted().first
    }

    /// Commands sent to a thing that have no results yet, oldest first.
    public func unanswered(of thingID: String) -> [String] {
        store.unansweredCommands(thingID: thingID).map(\.commandID)
    }

    /// The open commands again of every thing online whose installation
    /// `owns` (the partitions a hub took over, HubPartitions), and of a
    /// gateway's end nodes online through it. Returns how many were sent.
    func resendToOnline(_ owns: (_ clientID: String) -> Bool) -> Int {
        presence.onlineThings().filter { owns($0.clientID) }.sorted { $0.thingID < $1.thingID }.reduce(0) {
            $0 + resendUnanswered(to: $1.thingID) + resendToEndNodes(through: $1.clientID)
        }
    }

    /// Publishes again every open command of the thing that has no results
    /// (not an EXPIRED or CANCELLED one, nor one past its expiry): the thing
    /// runs each at most once, so this only fills gaps.
    @discardableResult
    public func resendUnanswered(to thingID: String) -> Int {
        var sent = 0
        let now = Platform.epochMs()
        for c in store.unansweredCommands(thingID: thingID) where mayPublish(c, now: now) {
            // Under the thing's gate, as read now: a cancel that ended it
            // at the hub meanwhile keeps it from being published.
            let published = commandGate(thingID).withLock { gated -> Bool in
                gated &+= 1
                guard let fresh = store.command(id: c.commandID), fresh.results == nil, fresh.state.isOpen,
                    publish(Array(c.payload.utf8), to: thingID)
                else { return false }
                _ = store.markDelivered(commandID: c.commandID, at: Platform.epochMs())
                return true
            }
            if published { sent += 1 }
        }
        metrics.commandDelivered(sent)
        return sent
    }
}
