// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

/// What the gateway is told of its end nodes, and what a removal leaves on
/// the broker (docs/GATEWAYS.md §3.3, §4.2): the membership events on
/// p/{G}/end-nodes/{E}/events (never on its command topic) and the clearing
/// of E's retained statuses.
/// Real broker and hub; the gateway is an MQTT connection with its own
/// identity, subscribed as the library will be.
@Suite("Gateway membership", .offPool)
struct GatewayMembershipTests {
    typealias Link = GatewayRequestsTests.Link

    /// The gateway's connection, subscribed to its end nodes' command and
    /// events topics, as the library is.
    static func subscribed(_ e: HubAPIEnv, _ a: GatewayRequestsTests.Gateway) throws -> Link {
        let link = try Link(e, a)
        try #require(link.probe.subscribe(Topics.endNodeCommands(clientID: a.topic, endNode: "+")) == 1)
        try #require(link.probe.subscribe(Topics.endNodeEvents(clientID: a.topic, endNode: "+")) == 1)
        return link
    }

    /// The events the gateway received for `endNode`, in order.
    static func events(_ link: Link, _ endNode: String) -> [EndNodeEvent] {
        link.probe.messages(on: Topics.endNodeEvents(clientID: link.gateway.topic, endNode: endNode)).compactMap {
            EndNodeEvent.decode($0.payload, endNode: endNode)
        }
    }

    /// What reached the gateway on `endNode`'s command topic.
    static func onCommandTopic(_ link: Link, _ endNode: String) -> Int {
        link.probe.messages(on: Topics.endNodeCommands(clientID: link.gateway.topic, endNode: endNode)).count
    }

    @Test(
        "endNodeRemoval: the gateway is told of an owner's onboarding, a new vendorThingID and the removal; the removed end node's status is cleared and it is offline"
    )
    func endNodeRemoval() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-M-A", uid: uid, token: token)
            let link = try Self.subscribed(e, a)
            defer { link.stop() }
            let watcher = try GatewaySecurityTests.watcher(e)
            defer { watcher.stop() }

            // An owner onboards an end node: the gateway is told.
            let (en, _) = try await EndNodeOwnerTests.endNode(e, gateway: a.id, "LAMP-M-1", uid: uid, token: token)
            #expect(
                poll { Self.events(link, en) == [.added(thingID: en, vendorThingID: "LAMP-M-1", thingType: "Lamp")] },
                "\(Self.events(link, en))")

            // Its gateway says it is reachable.
            let status = Topics.endNodeStatus(clientID: a.topic, endNode: en)
            #expect(link.probe.publish(status, Array("online".utf8), retain: true))
            #expect(poll { e.hub.presence.isOnline(en) })

            // A new vendorThingID (Kii's "replace end node" without the LAN).
            let put = try await e.call(
                "PUT", "\(e.api)/things/\(en)/vendor-thing-id", token: token,
                body: Data(#"{"_vendorThingID":"LAMP-M-1b","_password":"pw2"}"#.utf8),
                contentType: "application/vnd.kii.VendorThingIDUpdateRequest+json")
            #expect(put.status == 204, "\(put.status) \(put.text)")
            #expect(
                poll { Self.events(link, en).last == .changed(thingID: en, vendorThingID: "LAMP-M-1b") },
                "\(Self.events(link, en))")

            // The owner removes it: the gateway is told, its retained status cleared.
            let removed = try await e.call("DELETE", "\(e.thingIF)/things/\(a.id)/end-nodes/\(en)", token: token)
            #expect(removed.status == 204, "\(removed.status) \(removed.text)")
            #expect(poll { Self.events(link, en).last == .removed(thingID: en) }, "\(Self.events(link, en))")
            // None of the three went on its command topic (both topics are
            // subscribed on one connection, and the removal came last).
            #expect(Self.onCommandTopic(link, en) == 0)
            #expect(
                poll { watcher.sawCleared(status) },
                "\(watcher.messages(on: status).map(\.payload))")
            #expect(!e.hub.presence.isOnline(en))
            // A hub's own clearing is not a refusal.
            #expect(GatewayPresenceTests.refusedCount(e.hub) == 0)
            // A status for it now is refused, counted and cleared.
            #expect(link.probe.publish(status, Array("online".utf8), retain: true))
            #expect(poll { GatewayPresenceTests.refusedCount(e.hub) == 1 })
            #expect(!e.hub.presence.isOnline(en))
        }
    }

    @Test(
        "gatewayDeletion: deleting a gateway deletes its end nodes and clears every end node's retained status; none stays online"
    )
    func gatewayDeletion() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-M-D", uid: uid, token: token)
            let link = try Self.subscribed(e, a)
            let nodes = try link.onboardAll("LAMP-M-D", count: 3)
            let watcher = try GatewaySecurityTests.watcher(e)
            defer { watcher.stop() }
            let statuses = nodes.map { Topics.endNodeStatus(clientID: a.topic, endNode: $0) }
            for s in statuses { #expect(link.probe.publish(s, Array("online".utf8), retain: true)) }
            #expect(poll { nodes.allSatisfy { e.hub.presence.isOnline($0) } })
            link.stop()

            let deleted = try await e.call("DELETE", "\(e.api)/targets/thing:\(a.id)", token: token)
            #expect(deleted.status == 204, "\(deleted.status) \(deleted.text)")
            for s in statuses {
                #expect(
                    poll { watcher.sawCleared(s) },
                    "\(s): \(watcher.messages(on: s).map(\.payload))")
            }
            #expect(nodes.allSatisfy { !e.hub.presence.isOnline($0) && e.hub.store.thing(id: $0) == nil })
            #expect(GatewayPresenceTests.refusedCount(e.hub) == 0)
        }
    }
}
