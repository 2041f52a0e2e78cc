// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Deleting a thing (DELETE …/targets/thing:{thingID}; README "Deleting a
/// thing"): the store's rows, the hub's own memory of it, its broker
/// identities and the retained messages it leaves on the broker. Given
/// what it clears, never the hub; the app's rules (AppAPI.deleteThing)
/// check ownership first.
final class ThingRemoval: @unchecked Sendable {
    let store: any AutomationStore & EndNodeStore & ThingStore
    let client: MqttClient
    let admin: BrokerAdmin?
    let authority: ThingAuthority
    let delivery: CommandDelivery
    let triggerEngine: TriggerEngine
    let homeAssistant: HomeAssistant
    let endNodes: EndNodes
    let metrics: HubMetrics
    let events: HubEvents

    init(
        store: any AutomationStore & EndNodeStore & ThingStore, client: MqttClient, admin: BrokerAdmin?,
        authority: ThingAuthority,
        delivery: CommandDelivery, triggerEngine: TriggerEngine, homeAssistant: HomeAssistant,
        endNodes: EndNodes, metrics: HubMetrics, events: HubEvents
    ) {
        self.store = store
        self.client = client
        self.admin = admin
        self.authority = authority
        self.delivery = delivery
        self.triggerEngine = triggerEngine
        self.homeAssistant = homeAssistant
        self.endNodes = endNodes
        self.metrics = metrics
        self.events = events
    }

    /// In this order:
    /// 1. the broker deletes the dynamic-security client and role of each
    ///    of its MQTT installations (the plugin disconnects a connected one).
    ///    A broker that does not confirm stops the deletion here with 503:
    ///    the thing is still there, and the call can be repeated;
    /// 2. the store deletes the thing and what belongs to it
    ///    (ThingStore.deleteThing): its tokens stop working, its requests
    ///    find no thing, and its certificates move to the revoked list;
    ///    the hub writes the things' CRL and tells the broker (publishCRL);
    /// 3. the hub forgets its online status (things_online) and schedules;
    /// 4. empty retained messages clear its automation config and status
    ///    topics (after 1: the will of a disconnected thing comes first);
    /// 5. Home Assistant's discovery config, state and availability are
    ///    cleared the same way, which makes Home Assistant remove the entity
    ///    (a gateway's end nodes' entities too);
    /// 6. an end node's retained statuses under its gateway are cleared and
    ///    the gateway is told (`endNodeRemoved`); a gateway's end nodes,
    ///    which the store deleted with it, have their statuses cleared.
    func remove(_ t: ThingRecord) -> Result<Void, HubError> {
        let topics = t.installations.values.sorted()
        if let admin {
            for topic in topics where !admin.remove(username: topic, role: BrokerAdmin.thingRole(topic: topic)) {
                return .failure(
                    HubError(
                        503, "BROKER_UNAVAILABLE",
                        "the broker did not confirm removing the client \(topic); \(t.thingID) is not deleted, try again"
                    ))
            }
        }
        let triggers = store.triggers(thingID: t.thingID)
        // Read before the deletion: an end node's gateway, a gateway's end nodes.
        let gateway = t.layoutPosition == .endNode ? t.gatewayThingID.flatMap { store.thing(id: $0) } : nil
        let carried = t.layoutPosition == .gateway ? endNodeIDs(of: t.thingID) : []
        guard store.deleteThing(id: t.thingID) else { return .failure(.storage) }
        authority.publishCRL()
        if t.layoutPosition == .gateway { authority.publishGatewayRules() }
        let online = delivery.forget(thingID: t.thingID, topics: topics)
        metrics.setOnline(online)
        for trigger in triggers { triggerEngine.reschedule(trigger.triggerID) }
        for topic in topics {
            _ = client.publishRetained(topic: Topics.config(clientID: topic), payload: [])
            _ = client.publishRetained(topic: Topics.status(clientID: topic), payload: [])
        }
        homeAssistant.removed(thingID: t.thingID)
        for e in carried { homeAssistant.removed(thingID: e) }
        if let gateway { endNodes.removed([t.thingID], of: gateway, tell: true) }
        if !carried.isEmpty { endNodes.removed(carried, of: t, tell: false) }
        events.event("\(t.thingID) deleted (\(topics.count) MQTT installation(s), \(carried.count) end node(s))")
        return .success(())
    }

    /// Every end node of the gateway `gatewayThingID`, page by page.
    private func endNodeIDs(of gatewayThingID: String) -> [String] {
        var ids: [String] = []
        var after: EndNodeCursor?
        repeat {
            guard let page = store.endNodes(gatewayThingID: gatewayThingID, after: after, limit: 1000) else { break }
            ids += page.endNodes.map(\.thingID)
            after = page.next
        } while after != nil
        return ids
    }
}
