// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// Delivery of commands, decided from the broker's view (docs/PROTOCOL.md §5.2).
///
/// A stored command goes to every MQTT installation topic of its thing, at
/// QoS 1. Only the client whose ID is the topic may read a topic, and a
/// client reads only its own (thingif's library and Kii's ebisu both
/// subscribe to `mqttTopic` alone), so each process gets one copy. The
/// broker's PUBACK says whether the topic had a subscription (MQTT 5 reason
/// 0x10: no matching subscribers). Installations that announce themselves
/// (thingif's library: `online` on p/{topic}/status, persistent session) get
/// a command when online, and again on their next `online`. For the
/// others (Kii's SDKs: clean session, QoS 0 subscription, no status), a
/// command is delivered when a PUBACK found a subscription; until then it is
/// published again, never while an attempt is in flight, so a subscribed
/// process gets it once. The hub never publishes a delivered command to such
/// a topic again: that device keeps no ledger, and a second copy would run
/// the actions twice.
extension CommandDelivery {
    /// An attempt to deliver one command: the PUBACKs it waits for.
    struct DeliveryRound {
        var thingID: String
        var outstanding: Int
        var reached = false
        var reachedTopic = ""
        var startedMs: Int64
        /// An end node's command, published through its gateway
        /// (CommandDelivery+EndNodes.swift): the end of its round is
        /// `endNodeRoundFinished`'s, never a retry or `reachable`.
        var endNode = false
    }

    /// What the delivery worker does next for a thing.
    struct DeliveryRetry {
        var dueMs: Int64
        var backoffMs: Int64
    }

    /// Retries start at 1 s and double up to 30 s; an attempt without a
    /// PUBACK after 30 s counts as unreached; commands older than
    /// `deliveryRetryHorizonMs` (the undelivered limit of
    /// CommandLifetimes, when set; else `retryHorizonMs`) are no longer
    /// retried: the lifecycle sweep ends them EXPIRED ("undelivered").
    static let retryFirstMs: Int64 = 1000
    static let retryMaxMs: Int64 = 30_000
    static let roundTimeoutMs: Int64 = 30_000
    static let retryHorizonMs: Int64 = 86_400_000

    /// The topics of a thing's installations that never sent a status.
    func silentTopics(of thingID: String) -> [String] {
        guard let topics = store.thing(id: thingID)?.installations.values else { return [] }
        let announced = presence.announcing(topics)
        return topics.filter { !announced.contains($0) }.sorted()
    }

    /// Publishes `payload` on each of `topics` and tracks the PUBACKs; false
    /// when an attempt for this command is still in flight or none of the
    /// publishes could be queued.
    @discardableResult
    func startRound(
        commandID: String, thingID: String, payload: [UInt8], topics: [String], endNode: Bool = false
    ) -> Bool {
        guard !topics.isEmpty else { return false }
        let begun = known.withLock { d -> Bool in
            // One attempt at a time, and none after one reached a subscription
            // (the store learns that on the worker thread, a moment later),
            // except through a gateway, whose ledger runs a command once.
            guard d.rounds[commandID] == nil, endNode || !d.reachedCommands.contains(commandID) else {
                return false
            }
            d.rounds[commandID] = DeliveryRound(
                thingID: thingID, outstanding: topics.count, startedMs: Platform.nowMs(), endNode: endNode)
            return true
        }
        guard begun else { return false }
        var queued = false
        for topic in topics {
            // The mid is known only once libmosquitto queued the message, and
            // its PUBACK may come at once: the callback takes the same lock,
            // so it finds the mid recorded (PUBACKs of other publishes find
            // nothing and are ignored).
            let rc = publishing.withLock { tracked -> Int32 in
                let (rc, mid) = client.publishTracked(topic: topic, payload: payload)
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    known.withLock { $0.pendingMids[mid] = (commandID, topic) }
                    tracked &+= 1
                }
                return rc
            }
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                queued = true
            } else {
                acknowledged(commandID: commandID, topic: topic, reasonCode: -1)
            }
        }
        return queued
    }

    /// libmosquitto's thread: a PUBACK with its reason code.
    func published(mid: Int32, reasonCode: Int32) {
        let entry = publishing.withLock { _ in
            known.withLock { d in d.pendingMids.removeValue(forKey: mid) }
        }
        if let e = entry { acknowledged(commandID: e.commandID, topic: e.topic, reasonCode: reasonCode) }
    }

    /// Where delivery of a command stands, for logs and tests.
    public func deliveryState(_ commandID: String) -> String {
        known.withLock { d in
            let r =
                d.rounds[commandID].map { "in flight, \($0.outstanding) PUBACK(s) awaited" } ?? "no attempt in flight"
            let retry = d.rounds[commandID].flatMap { d.retries[$0.thingID] }.map {
                "next try in \($0.dueMs - Platform.nowMs()) ms"
            }
            let reached = d.reachedCommands.contains(commandID) ? "reached, not yet recorded" : nil
            return [r, retry, reached].compactMap { $0 }.joined(separator: ", ")
        }
    }

    /// Counts one answer of a round; the worker thread finishes the round.
    func acknowledged(commandID: String, topic: String, reasonCode: Int32) {
        let silent = reasonCode == 0 && !presence.announcesStatus(topic)
        known.withLock { d in
            guard var r = d.rounds[commandID] else { return }
            r.outstanding -= 1
            if silent {
                r.reached = true
                r.reachedTopic = topic
            }
            if r.outstanding > 0 {
                d.rounds[commandID] = r
            } else {
                d.rounds[commandID] = nil
                if r.reached && !r.endNode { d.reachedCommands.insert(commandID) }
                d.finishedRounds.append((commandID, r))
            }
        }
    }

    /// Asks the worker to try the thing's undelivered commands after `ms`
    /// (a thing that just fetched its MQTT endpoint subscribes within a few seconds).
    func scheduleDelivery(thingID: String, inMs ms: Int64 = CommandDelivery.retryFirstMs) {
        known.withLock {
            $0.retries[thingID] = DeliveryRetry(dueMs: Platform.nowMs() + ms, backoffMs: ms)
        }
    }

    /// The delivery worker, every 250 ms: records the outcome of finished
    /// rounds in the store, and tries again what reached nobody.
    func deliveryTick() {
        let now = Platform.nowMs()
        let (finished, due) = known.withLock { d -> ([(String, DeliveryRound)], [(String, DeliveryRetry)]) in
            let expired = d.rounds.filter { now - $0.value.startedMs > Self.roundTimeoutMs }
            for (cid, r) in expired {
                d.rounds[cid] = nil
                d.finishedRounds.append((cid, r))
            }
            if !expired.isEmpty { d.pendingMids = d.pendingMids.filter { expired[$0.value.commandID] == nil } }
            let f = d.finishedRounds
            d.finishedRounds = []
            let due = d.retries.filter { $0.value.dueMs <= now }.map { ($0.key, $0.value) }
            return (f, due)
        }
        // One statement for every round that reached a subscription; an
        // end node's command was counted DELIVERED when it was published,
        // and is marked again in case an earlier round put it back.
        let reached = finished.filter { $0.1.reached }.map(\.0)
        let throughGateway = Set(finished.filter { $0.1.reached && $0.1.endNode }.map(\.0))
        let marked = reached.isEmpty ? [] : store.markDelivered(commandIDs: reached, at: Platform.epochMs())
        metrics.commandDelivered(marked.subtracting(throughGateway).count)
        for (cid, r) in finished {
            if r.endNode {
                endNodeRoundFinished(cid, r, reachedLater: throughGateway.contains(cid))
            } else if r.reached {
                presence.setReachable(r.thingID, true)
                known.withLock { d in _ = d.reachedCommands.remove(cid) }
                events.event("command \(cid) reached a subscription of \(r.thingID) on \(r.reachedTopic)")
            } else {
                presence.setReachable(r.thingID, false)
                // A thing online by its own status gets its commands
                // again when it announces itself; no retries for it.
                let announcedOnline = presence.announcedOnline(r.thingID)
                known.withLock { d in
                    if d.retries[r.thingID] == nil && !announcedOnline {
                        d.retries[r.thingID] = DeliveryRetry(
                            dueMs: now + Self.retryFirstMs, backoffMs: Self.retryFirstMs)
                    }
                }
            }
        }
        for (tid, retry) in due {
            let topics = silentTopics(of: tid)
            let epoch = Platform.epochMs()
            let horizon = deliveryRetryHorizonMs
            let pending = store.unansweredCommands(thingID: tid).filter {
                $0.state == .sending && epoch - $0.createdAt < horizon && mayPublish($0, now: epoch)
            }
            if topics.isEmpty || pending.isEmpty {
                known.withLock { _ = $0.retries.removeValue(forKey: tid) }
                continue
            }
            known.withLock {
                $0.retries[tid] = DeliveryRetry(
                    dueMs: now + retry.backoffMs, backoffMs: min(retry.backoffMs * 2, Self.retryMaxMs))
            }
            for c in pending {
                startRound(commandID: c.commandID, thingID: tid, payload: Array(c.payload.utf8), topics: topics)
            }
        }
    }
}
