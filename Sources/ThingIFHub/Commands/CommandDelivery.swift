// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// Command delivery: stores each command and publishes it to its thing,
/// follows the broker's PUBACKs (CommandDelivery+Rounds.swift), publishes
/// again what a thing has not answered when it comes online, and ends the
/// commands that expire or are cancelled (CommandLifecycle.swift), telling
/// their issuers through Notifications. It owns what it knows of the
/// things' presence: which are online, on which topic, and which topics
/// announce a status.
///
/// Threads: every method may be called from any thread; the scheduler runs
/// `deliveryTick` and `lifecycleTick`, libmosquitto's thread `published`.
public final class CommandDelivery: @unchecked Sendable {
    /// What only this process knows of delivery.
    struct State {
        var online: [String: Bool] = [:]  // thingID -> last status seen
        var commandTopic: [String: String] = [:]  // thingID -> the installation whose "online" came last
        var statusTopics: Set<String> = []  // client IDs that sent a status (thingif's library)
        var reachable: [String: Bool] = [:]  // thingID -> a silent installation had a subscription at the last attempt
        var rounds: [String: DeliveryRound] = [:]  // commandID -> the attempt in flight
        var pendingMids: [Int32: (commandID: String, topic: String)] = [:]
        var finishedRounds: [(String, DeliveryRound)] = []
        var reachedCommands: Set<String> = []  // reached a subscription; not yet marked in the store
        var retries: [String: DeliveryRetry] = [:]  // thingID -> next attempt
        var endNodeUp: [String: Set<String>] = [:]  // end node -> installations whose last status was "online"
        var gatewayOf: [String: String] = [:]  // end node in endNodeUp -> its gateway's thingID
    }

    let store: HubStore
    let client: MqttClient
    let metrics: HubMetrics
    let events: HubEvents
    let notifications: Notifications
    let lifetimes: CommandLifetimes
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

    init(
        store: HubStore, client: MqttClient, metrics: HubMetrics, events: HubEvents, notifications: Notifications,
        lifetimes: CommandLifetimes
    ) {
        self.store = store
        self.client = client
        self.metrics = metrics
        self.events = events
        self.notifications = notifications
        self.lifetimes = lifetimes
    }

    func commandGate(_ thingID: String) -> Locked<Int> {
        commandGates[Int(FNV1a.hash(thingID) % UInt64(commandGates.count))]
    }

    // MARK: presence

    /// A status message (`online` or `offline`) of one of the thing's
    /// installations. Changed under the thing's gate, which a command being
    /// stored holds from its read of this flag to its insert (`stored`): it
    /// read "offline" and is in the store before the resend that follows an
    /// `online` reads what is unanswered, or it reads "online" and goes out
    /// at once (OnlineRaceTests). Returns how many things are online.
    func statusChanged(thingID: String, clientID: String, up: Bool) -> Int {
        commandGate(thingID).withLock { _ in
            known.withLock {
                $0.online[thingID] = up
                $0.statusTopics.insert(clientID)
                if up { $0.commandTopic[thingID] = clientID }
                return $0.online.values.filter { $0 }.count
            }
        }
    }

    /// An end node's status under one of its gateway's installations
    /// (p/{clientID}/end-nodes/{endNode}/status, docs/GATEWAYS.md §5), under
    /// the end node's gate as a thing's status is under its own.
    func endNodeStatusChanged(endNode: String, gateway: String, clientID: String, up: Bool) {
        commandGate(endNode).withLock { _ in
            known.withLock { d in
                if up {
                    d.endNodeUp[endNode, default: []].insert(clientID)
                    d.gatewayOf[endNode] = gateway
                } else if d.endNodeUp[endNode]?.remove(clientID) != nil, d.endNodeUp[endNode]?.isEmpty == true {
                    d.endNodeUp[endNode] = nil
                    d.gatewayOf[endNode] = nil
                }
            }
        }
    }

    /// Whether the last status this hub took for the end node through the
    /// installation `clientID` was "online" (the gateway's own status aside).
    func endNodeSaidUp(_ endNode: String, through clientID: String) -> Bool {
        known.withLock { $0.endNodeUp[endNode]?.contains(clientID) == true }
    }

    /// A removed end node: its presence goes.
    func forgetEndNode(_ endNode: String) {
        known.withLock { d in
            d.endNodeUp[endNode] = nil
            d.gatewayOf[endNode] = nil
        }
    }

    /// An end node is online through an installation whose last status for
    /// it was "online", while that installation is its gateway's live one
    /// by the gateway's own status; an installation that announces no
    /// status (Kii's gateway agent, which reports end nodes by
    /// …/connection only) counts by the end node's word alone. So a
    /// gateway's Will takes all its end nodes offline at once.
    private static func endNodeOnline(_ d: State, _ endNode: String) -> Bool {
        !endNodeLive(d, endNode).isEmpty
    }

    /// The installations through which the end node is online (see
    /// `endNodeOnline`), sorted: where its commands go.
    static func endNodeLive(_ d: State, _ endNode: String) -> [String] {
        guard let ups = d.endNodeUp[endNode], let gateway = d.gatewayOf[endNode] else { return [] }
        return ups.filter { clientID in
            !d.statusTopics.contains(clientID) || (d.online[gateway] == true && d.commandTopic[gateway] == clientID)
        }.sorted()
    }

    /// The topic the thing last announced itself online with, while it is online.
    func liveTopic(of thingID: String) -> String? {
        known.withLock { $0.online[thingID] == true ? $0.commandTopic[thingID] : nil }
    }

    /// Whether `topic` is an installation that announces its status (thingif's library).
    func announcesStatus(_ topic: String) -> Bool { known.withLock { $0.statusTopics.contains(topic) } }

    /// An installation removed: its status, and its end nodes' statuses
    /// (a retired installation of a gateway), no longer count. Their
    /// retained messages, met again at a hub's next start, are refused and
    /// cleared (EndNodes), since no thing has that topic any more.
    func forgetTopic(_ topic: String) {
        known.withLock { d in
            d.statusTopics.remove(topic)
            for (endNode, ups) in d.endNodeUp where ups.contains(topic) {
                d.endNodeUp[endNode]?.remove(topic)
                if d.endNodeUp[endNode]?.isEmpty == true {
                    d.endNodeUp[endNode] = nil
                    d.gatewayOf[endNode] = nil
                }
            }
        }
    }

    /// A deleted thing: everything known of it goes. Returns how many things are online.
    func forget(thingID: String, topics: [String]) -> Int {
        known.withLock { d -> Int in
            d.online[thingID] = nil
            d.commandTopic[thingID] = nil
            d.reachable[thingID] = nil
            d.retries[thingID] = nil
            d.statusTopics.subtract(topics)
            return d.online.values.filter { $0 }.count
        }
    }

    /// A status message of a client ID that no thing has: when this hub
    /// still counts a thing that went online with it, another hub sharing
    /// the store deleted that thing (and cleared its status topic), so this
    /// hub forgets it too and `things_online` stays right on every hub.
    func forgetDeleted(clientID: String) {
        let candidates = known.withLock { d in d.commandTopic.filter { $0.value == clientID }.map(\.key) }
        let gone = candidates.filter { store.thing(id: $0) == nil }
        guard !gone.isEmpty else { return }
        let online = known.withLock { d -> Int in
            for tid in gone {
                d.online[tid] = nil
                d.commandTopic[tid] = nil
            }
            return d.online.values.filter { $0 }.count
        }
        metrics.setOnline(online)
        for tid in gone { events.event("\(tid) was deleted by another hub") }
    }

    /// Every thing this hub has seen a status of.
    var thingsSeen: Set<String> { known.withLock { Set($0.online.keys) } }

    /// Online: the thing announced `online` (thingif's library), or, for a
    /// thing whose installations send no status (Kii's SDKs), the broker
    /// had a subscription on one of them at the last delivery attempt; an
    /// end node, by its gateway's word (`endNodeOnline`).
    public func isOnline(_ thingID: String) -> Bool {
        known.withLock {
            ($0.online[thingID] ?? false) || ($0.reachable[thingID] ?? false) || Self.endNodeOnline($0, thingID)
        }
    }

    /// How many end nodes are online now (as `isOnline` counts them): the
    /// end_nodes_online gauge, read at each scrape, so that a gateway's
    /// Will, which takes all its end nodes offline at once, needs no count kept.
    public func endNodesOnline() -> Int {
        known.withLock { d in d.endNodeUp.keys.reduce(0) { $0 + (Self.endNodeOnline(d, $1) ? 1 : 0) } }
    }

    /// Online by its own status message only.
    func announcedOnline(_ thingID: String) -> Bool { known.withLock { $0.online[thingID] ?? false } }

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
                let (online, held) = known.withLock { d in
                    let online = d.online[thingID] ?? false
                    // Looked up under the lock: no copy of every status topic per command.
                    return (
                        online, online ? [] : Set(thing.installations.values.filter { d.statusTopics.contains($0) })
                    )
                }
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
        let live = known.withLock { $0.commandTopic[thing.thingID] }
        return live.flatMap { topics.contains($0) ? $0 : nil } ?? topics.sorted().first
    }

    /// Commands sent to a thing that have no results yet, oldest first.
    public func unanswered(of thingID: String) -> [String] {
        store.unansweredCommands(thingID: thingID).map(\.commandID)
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
