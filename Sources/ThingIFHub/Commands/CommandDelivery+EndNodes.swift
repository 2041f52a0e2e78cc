// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Delivery to end nodes (docs/GATEWAYS.md §5): an end node's commands go
/// on p/{G}/end-nodes/{E}/commands of each installation G of its gateway
/// through which it is online (`endNodeLive`), at QoS 1 and tracked like
/// any command (CommandDelivery+Rounds.swift). A command published to an
/// end node is stored DELIVERED, as one published to a thing online by its
/// status; when no PUBACK 0x00 comes back (0x10: nobody subscribed, a
/// library that knows no end nodes, or Kii's agent), it is put back to
/// SENDING, and held. While the end node or its gateway is offline its
/// commands are held; on either's `online` its open commands are published
/// again, and the gateway's ledger runs each once.
extension CommandDelivery {
    /// Where the end node's commands go now: its command topic under each
    /// installation through which it is online; empty while it is offline.
    func endNodeTopics(_ endNode: String) -> [String] {
        presence.endNodeLive(endNode).map {
            Topics.endNodeCommands(clientID: $0, endNode: endNode)
        }
    }

    /// Publishes again every open command of the end node that has no
    /// results, while it is online; how many. Under its gate from the read
    /// of its presence on, so a command stored meanwhile is either read
    /// here or was published when stored: also when the `online` that
    /// called this was its gateway's, which changes presence under the
    /// gateway's gate, not this one.
    @discardableResult
    func resendToEndNode(_ endNode: String) -> Int {
        commandGate(endNode).withLock { gated -> Int in
            gated &+= 1
            let topics = endNodeTopics(endNode)
            guard !topics.isEmpty else { return 0 }
            let now = Platform.epochMs()
            let open = store.unansweredCommands(thingID: endNode).filter { mayPublish($0, now: now) }
            guard !open.isEmpty else { return 0 }
            // DELIVERED before the publish, in one statement, as `stored`
            // does; for those DELIVERED already, the unanswered limit counts
            // from now.
            let marked = store.markDelivered(commandIDs: open.map(\.commandID), at: now)
            metrics.commandDelivered(open.filter { $0.state == .sending && marked.contains($0.commandID) }.count)
            var sent = 0
            for c in open where marked.contains(c.commandID) {
                if startRound(
                    commandID: c.commandID, thingID: endNode, payload: Array(c.payload.utf8), topics: topics,
                    endNode: true)
                {
                    sent += 1
                }
            }
            return sent
        }
    }

    /// The gateway's installation `clientID` announced itself online: its
    /// end nodes online through it get their open commands again. How many.
    @discardableResult
    func resendToEndNodes(through clientID: String) -> Int {
        let nodes = presence.endNodes(saidUpThrough: clientID)
        return nodes.sorted().reduce(0) { $0 + resendToEndNode($1) }
    }

    /// The delivery worker: a round of an end node's command has ended.
    /// Reached (a PUBACK 0x00): DELIVERED (the worker's one statement).
    /// Not reached (0x10, or no PUBACK within `roundTimeoutMs`): back to
    /// SENDING, held until the end node or its gateway is online again,
    /// unless a later round of the same command is in flight or reached
    /// (`reachedLater`: in the same batch of the worker; rounds of one
    /// command finish in the order they started).
    func endNodeRoundFinished(_ commandID: String, _ r: DeliveryRound, reachedLater: Bool) {
        if r.reached {
            events.event("command \(commandID) reached \(r.reachedTopic)")
            return
        }
        guard !reachedLater else { return }
        let held = commandGate(r.thingID).withLock { gated -> Bool in
            gated &+= 1
            let later = known.withLock { $0.rounds[commandID] != nil }
            return !later && store.markUndelivered(commandID: commandID, at: Platform.epochMs())
        }
        if held { events.event("command \(commandID) for end node \(r.thingID) reached no subscription; held") }
    }

    /// Where a cancel of a DELIVERED command of `thing` goes: the thing's
    /// command topic, or for an end node its command topic under its
    /// gateway's installation; nil when that installation announces no
    /// status (Kii's SDKs and agent: a device that cannot be told).
    func cancelTopic(of thing: ThingRecord) -> String? {
        if thing.layoutPosition == .endNode {
            guard let g = thing.gatewayThingID, let gateway = store.thing(id: g), let topic = commandTopic(of: gateway),
                presence.announcesStatus(topic)
            else { return nil }
            return Topics.endNodeCommands(clientID: topic, endNode: thing.thingID)
        }
        guard let topic = commandTopic(of: thing), presence.announcesStatus(topic) else { return nil }
        return topic
    }
}
