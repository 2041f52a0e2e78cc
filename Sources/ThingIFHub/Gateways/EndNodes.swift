// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A gateway's end nodes as the broker carries them (docs/GATEWAYS.md §4,
/// §5, §7): their statuses on p/{G}/end-nodes/{E}/status, checked here and
/// kept as presence by CommandDelivery (under each end node's command
/// gate); the statuses no installation may give, dropped, counted and
/// cleared; Kii's …/connection turned into the status it stands for; the
/// membership events the gateway is told; and what a removal leaves on
/// the broker. Given the store, the MQTT client
/// and delivery, never the hub.
///
/// Threads: any. Statuses come on the request lanes, in their gateway's
/// order with its requests.
final class EndNodes: @unchecked Sendable {
    let store: any EndNodeStore & ThingStore
    let client: MqttClient
    let delivery: CommandDelivery
    let presence: Presence
    let metrics: HubMetrics
    let events: HubEvents
    /// Home Assistant's availability of an end node follows its presence.
    let homeAssistant: HomeAssistant
    init(
        store: any EndNodeStore & ThingStore, client: MqttClient, delivery: CommandDelivery, presence: Presence,
        metrics: HubMetrics,
        events: HubEvents, homeAssistant: HomeAssistant
    ) {
        self.store = store
        self.client = client
        self.delivery = delivery
        self.presence = presence
        self.metrics = metrics
        self.events = events
        self.homeAssistant = homeAssistant
    }

    /// The payload that says online; anything else (`offline`, a cleared
    /// retained message, garbage) is offline.
    static let online: [UInt8] = Array("online".utf8)
    static let offline: [UInt8] = Array("offline".utf8)

    /// A status on p/{clientID}/end-nodes/{endNode}/status. Taken only when
    /// `clientID` is an installation of a gateway and `endNode` is one of
    /// that gateway's end nodes; otherwise (a standalone thing's own topic, a
    /// claim certificate's CN, another gateway's end node, a guessed or
    /// removed one) it is refused as "end_node_status". A taken status is
    /// `online` or offline; a payload that is neither `online` nor
    /// `offline` is offline and cleared too, so that nothing but the two
    /// words stays retained. An empty payload (a cleared retained message,
    /// the hub's own clearing among them) is offline for a taken topic and
    /// nothing at all for another.
    func statusReceived(clientID: String, endNode: String, payload: [UInt8]) {
        guard let (gateway, node) = owned(clientID: clientID, endNode: endNode) else {
            refused(
                topic: Topics.endNodeStatus(clientID: clientID, endNode: endNode), payload: payload,
                defence: "end_node_status")
            return
        }
        let up = payload == Self.online
        if !up && !payload.isEmpty && payload != Self.offline {
            clear(Topics.endNodeStatus(clientID: clientID, endNode: endNode))
        }
        delivery.endNodeStatusChanged(endNode: node, gateway: gateway, clientID: clientID, up: up)
        homeAssistant.availabilityChanged(thingID: node, online: presence.isOnline(node))
        events.event("end node \(node) of \(gateway) is \(up ? "online" : "offline") through \(clientID)")
        if up { resend(node) }
    }

    /// A status beyond its gateway's budget: not read, and cleared unless
    /// it is the `online` this hub already holds for that end node through
    /// that installation (what Kii's …/connection, published by a hub,
    /// says again when it comes back). Nothing else of it is kept, here or
    /// retained for a hub that starts later: a status the hub cannot
    /// afford to check may be made up. An `offline` cleared says what it
    /// said (an empty status is offline).
    func beyondBudget(clientID: String, endNode: String, payload: [UInt8]) {
        guard !payload.isEmpty else { return }
        metrics.refused("end_node_status_budget")
        if payload == Self.online && presence.endNodeSaidUp(endNode, through: clientID) { return }
        clear(Topics.endNodeStatus(clientID: clientID, endNode: endNode))
    }

    /// A message on the status subscription the hub does not take: counted
    /// as refused_total{defence=`defence`} and, unless it is empty (a
    /// clearing, which needs none), cleared at once. No store read and no
    /// memory of topics: whatever its topic's shape, its sender or how
    /// many came, nothing refused stays retained. One empty publish per
    /// refused message, which the sender paid a publish for.
    func refused(topic: String, payload: [UInt8], defence: String) {
        guard !payload.isEmpty else { return }
        metrics.refused(defence)
        clear(topic)
    }

    /// The end node's open commands again, now that it is online.
    private func resend(_ endNode: String) {
        let n = delivery.resendToEndNode(endNode)
        if n > 0 { events.event("sent \(n) unanswered command(s) to end node \(endNode) again") }
    }

    /// Kii's PUT …/end-nodes/{E}/connection by the gateway: the status it
    /// stands for, kept at once and published retained on E's status topic
    /// of the installation it came from (over MQTT), or of every
    /// installation of the gateway (over HTTP, `clientID` nil), so that
    /// every hub learns it as from a thingif gateway.
    func reported(gateway: ThingRecord, endNode: ThingRecord, up: Bool, clientID: String?) {
        let topics = clientID.map { [$0] } ?? gateway.installations.values.sorted()
        for topic in topics {
            delivery.endNodeStatusChanged(endNode: endNode.thingID, gateway: gateway.thingID, clientID: topic, up: up)
            _ = client.publishRetained(
                topic: Topics.endNodeStatus(clientID: topic, endNode: endNode.thingID),
                payload: up ? Self.online : Self.offline)
        }
        // Home Assistant's availability follows when the retained status comes back (statusReceived).
        events.event("end node \(endNode.thingID) is \(up ? "online" : "offline") (its gateway says)")
        if up { resend(endNode.thingID) }
    }

    /// The gateway's own status changed (its birth or its Will): its end
    /// nodes' presence follows it (CommandDelivery.endNodeLive), and so
    /// does their availability in Home Assistant, when discovery is on.
    func gatewayStatusChanged(_ gateway: ThingRecord) {
        guard homeAssistant.isEnabled else { return }
        var cursor: EndNodeCursor?
        repeat {
            guard let page = store.endNodes(gatewayThingID: gateway.thingID, after: cursor, limit: 100) else { return }
            for e in page.endNodes {
                homeAssistant.availabilityChanged(thingID: e.thingID, online: presence.isOnline(e.thingID))
            }
            cursor = page.next
        } while cursor != nil
    }

    /// Tells the gateway of a membership change (GATEWAYS.md §4.2): the
    /// event on E's events topic (p/{G}/end-nodes/{E}/events, not its
    /// command topic) of each of its installations, QoS 1, so a gateway
    /// offline now finds it in its persistent session.
    func announce(_ event: EndNodeEvent, to gateway: ThingRecord) {
        let payload = event.encode()
        for topic in gateway.installations.values.sorted() {
            _ = client.publish(
                topic: Topics.endNodeEvents(clientID: topic, endNode: event.thingID), payload: payload, qos: 1)
        }
        events.event("told \(gateway.thingID): \(String(decoding: payload, as: UTF8.self))")
    }

    /// End nodes deleted from the store (removed, or with their gateway):
    /// their presence goes, their retained statuses on every installation
    /// of the gateway are cleared, and, when `tell`, the gateway is told of
    /// each removal. `gateway` is the record read before the deletion.
    func removed(_ endNodes: [String], of gateway: ThingRecord, tell: Bool) {
        for e in endNodes {
            presence.forgetEndNode(e)
            for topic in gateway.installations.values.sorted() {
                _ = client.publishRetained(topic: Topics.endNodeStatus(clientID: topic, endNode: e), payload: [])
            }
            if tell { announce(.removed(thingID: e), to: gateway) }
        }
    }

    /// The gateway's thingID and the end node's when `clientID` is an
    /// installation of a gateway that carries `endNode`.
    private func owned(clientID: String, endNode: String) -> (String, String)? {
        guard !clientID.hasPrefix(Topics.claimPrefix), let gateway = store.thing(mqttTopic: clientID),
            gateway.layoutPosition == .gateway, let node = store.thing(id: endNode), node.layoutPosition == .endNode,
            node.gatewayThingID == gateway.thingID
        else { return nil }
        return (gateway.thingID, node.thingID)
    }

    /// Publishes an empty retained message on `topic`: whatever was
    /// retained there goes.
    private func clear(_ topic: String) {
        _ = client.publishRetained(topic: topic, payload: [])
    }
}
