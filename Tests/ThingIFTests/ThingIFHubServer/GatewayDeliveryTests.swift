// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

/// An end node's commands through its gateway (docs/GATEWAYS.md §5): on
/// p/{G}/end-nodes/{E}/commands while the end node and its gateway are
/// online, DELIVERED only when a subscription took them, held otherwise and
/// published again on either's `online`, cancelled through the gateway.
/// The end-node twins of CommandLifecycleTests and CommandCancelTests. Real
/// broker and hub; an MQTT probe on the gateway's own identity plays the
/// gateway.
@Suite("Gateway delivery", .offPool)
struct GatewayDeliveryTests {
    typealias Link = GatewayRequestsTests.Link

    /// A gateway online by its status, subscribed to its end nodes'
    /// commands as the library is (unless `subscribed` is false), with
    /// `count` end nodes it onboarded itself.
    static func online(
        _ e: HubAPIEnv, _ vendor: String, uid: String, token: String, count: Int, subscribed: Bool = true
    ) async throws -> (Link, [String]) {
        let a = try await GatewayRequestsTests.gateway(e, vendor, uid: uid, token: token)
        let link = try Link(e, a, will: true)
        let nodes = try link.onboardAll("\(vendor)-LAMP", count: count)
        try attach(link, subscribed: subscribed)
        return (link, nodes)
    }

    /// The gateway's subscription (optional) and its `online`.
    static func attach(_ link: Link, subscribed: Bool = true) throws {
        if subscribed {
            try #require(link.probe.subscribe(Topics.endNodeCommands(clientID: link.gateway.topic, endNode: "+")) == 1)
        }
        try #require(
            link.probe.publish(Topics.status(clientID: link.gateway.topic), Array("online".utf8), retain: true))
    }

    static func status(_ link: Link, _ endNode: String, _ up: Bool) -> Bool {
        link.probe.publish(
            Topics.endNodeStatus(clientID: link.gateway.topic, endNode: endNode),
            Array((up ? "online" : "offline").utf8),
            retain: true)
    }

    /// The commands (by commandID, in arrival order) the gateway got for `endNode`.
    static func received(_ link: Link, _ endNode: String) -> [String] {
        link.probe.messages(on: Topics.endNodeCommands(clientID: link.gateway.topic, endNode: endNode)).compactMap {
            guard case .success(let j) = JSON.parse($0.payload), j["actions"] != nil else { return nil }
            return j["commandID"]?.stringValue
        }
    }

    static func state(_ e: HubAPIEnv, _ cid: String) -> CommandState? { e.hub.store.command(id: cid)?.state }

    static func answer(_ link: Link, _ endNode: String, _ cid: String, _ body: String = GatewayRequestsTests.results)
        -> Int?
    {
        link.ask("PUT", "targets/thing:\(endNode)/commands/\(cid)/action-results", body: body)?.status
    }

    @Test(
        "Held while the end node is offline; on its online published through the gateway and DELIVERED; a new one goes at once; results end it; another end node gets none"
    )
    func deliveredThroughGateway() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (link, nodes) = try await Self.online(e, "GW-D-A", uid: uid, token: token, count: 2)
            defer { link.stop() }
            let held = try await GatewayRequestsTests.command(e, nodes[0], uid: uid, token: token)
            #expect(Self.state(e, held) == .sending)

            #expect(Self.status(link, nodes[0], true))
            #expect(poll { Self.received(link, nodes[0]).contains(held) }, "the held command was not published")
            #expect(poll { Self.state(e, held) == .delivered })

            let live = try await GatewayRequestsTests.command(e, nodes[0], uid: uid, token: token)
            #expect(poll { Self.received(link, nodes[0]).contains(live) })
            #expect(Self.answer(link, nodes[0], live) == 204)
            #expect(Self.answer(link, nodes[0], held) == 204)
            #expect(Self.state(e, live) == .done && Self.state(e, held) == .done)

            // The other end node, offline, gets nothing; its command is held.
            let other = try await GatewayRequestsTests.command(e, nodes[1], uid: uid, token: token)
            #expect(Self.state(e, other) == .sending)
            #expect(Self.received(link, nodes[1]).isEmpty)
            #expect(Self.received(link, nodes[0]).allSatisfy { $0 == held || $0 == live })
        }
    }

    @Test(
        "No subscription takes it (a gateway library that knows no end nodes, Kii's agent): back to SENDING and held; published again when the end node is online again"
    )
    func noSubscriptionHeld() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (link, nodes) = try await Self.online(
                e, "GW-D-N", uid: uid, token: token, count: 1, subscribed: false)
            defer { link.stop() }
            let events = Locked<[String]>([])
            e.hub.onEvent = { line in events.withLock { $0.append(line) } }
            #expect(Self.status(link, nodes[0], true))
            #expect(poll { e.hub.presence.isOnline(nodes[0]) })
            let cid = try await GatewayRequestsTests.command(e, nodes[0], uid: uid, token: token)
            #expect(
                poll { events.withLock { $0.contains { $0.hasPrefix("command \(cid) for end node") } } },
                "\(events.withLock { $0 })")
            #expect(Self.state(e, cid) == .sending)

            // Kii's agent says so over …/connection; now with a subscription.
            try #require(
                link.probe.subscribe(Topics.endNodeCommands(clientID: link.gateway.topic, endNode: "+")) == 1)
            let up = link.ask(
                "PUT", "things/\(link.gateway.id)/end-nodes/\(nodes[0])/connection", body: #"{"online":true}"#)
            #expect(up?.status == 204, "\(GatewayRequestsTests.describe(up))")
            #expect(poll { Self.received(link, nodes[0]).contains(cid) })
            #expect(
                poll {
                    events.withLock {
                        $0.contains(
                            "command \(cid) reached \(Topics.endNodeCommands(clientID: link.gateway.topic, endNode: nodes[0]))"
                        )
                    }
                })
            #expect(Self.state(e, cid) == .delivered)
        }
    }

    @Test(
        "The gateway's Will holds new commands; its online publishes every open one again, and the end node's online too; answered ones never again"
    )
    func resentOnEitherOnline() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (link, nodes) = try await Self.online(e, "GW-D-W", uid: uid, token: token, count: 1)
            let node = nodes[0]
            let events = Locked<[String]>([])
            e.hub.onEvent = { line in events.withLock { $0.append(line) } }
            #expect(Self.status(link, node, true))
            #expect(poll { e.hub.presence.isOnline(node) })
            let first = try await GatewayRequestsTests.command(e, node, uid: uid, token: token)
            #expect(poll { Self.received(link, node).contains(first) })

            // The gateway's connection dies: the end node is offline, a new command held.
            link.probe.client.disconnectWithWill()
            #expect(poll { !e.hub.presence.isOnline(node) }, "a delivered command kept the end node online")
            link.stop()
            let second = try await GatewayRequestsTests.command(e, node, uid: uid, token: token)
            #expect(Self.state(e, second) == .sending)
            #expect(Self.state(e, first) == .delivered)

            // The gateway back (a clean session: it lost what was queued):
            // its online publishes both, in order.
            let back = try Link(e, link.gateway, will: true)
            defer { back.stop() }
            try Self.attach(back)
            #expect(
                poll { Self.received(back, node) == [first, second] },
                "\(Self.received(back, node)); \(first): \(e.hub.delivery.deliveryState(first)) \(events.withLock { $0 })"
            )
            #expect(poll { Self.state(e, second) == .delivered })

            // The first answered; the end node's own offline and online: only the second again.
            #expect(Self.answer(back, node, first) == 204)
            #expect(Self.status(back, node, false))
            #expect(poll { !e.hub.presence.isOnline(node) })
            #expect(Self.status(back, node, true))
            #expect(poll { Self.received(back, node).count == 3 }, "\(Self.received(back, node))")
            #expect(Self.received(back, node) == [first, second, second])
        }
    }

    @Test("A held command that expires is never published; the undelivered limit ends one nothing subscribed took")
    func heldCommandsEnd() async throws {
        try await withHubAPI(options: { $0.lifetimes.undeliveredLimit = 2 }) { e in
            let (uid, token) = try await e.user()
            let (link, nodes) = try await Self.online(e, "GW-D-E", uid: uid, token: token, count: 1)
            defer { link.stop() }
            let r = try await e.call(
                "POST", "\(e.target(nodes[0]))/commands", token: token,
                json: [
                    "schema": "Lamp", "schemaVersion": 1, "actions": [["turnPower": ["power": true]]],
                    "issuer": "user:\(uid)", "timeToLive": 1
                ])
            let short = try #require(r.string("commandID"), "\(r.status) \(r.text)")
            #expect(poll { Self.state(e, short) == .expired })
            #expect(e.hub.store.command(id: short)?.endReason == "expired")
            #expect(Self.status(link, nodes[0], true))
            let later = try await GatewayRequestsTests.command(e, nodes[0], uid: uid, token: token)
            #expect(poll { Self.received(link, nodes[0]).contains(later) })
            #expect(!Self.received(link, nodes[0]).contains(short), "an expired command was published")

            // A gateway with nothing subscribed: undelivered.
            let (bare, bareNodes) = try await Self.online(
                e, "GW-D-U", uid: uid, token: token, count: 1, subscribed: false)
            defer { bare.stop() }
            #expect(Self.status(bare, bareNodes[0], true))
            #expect(poll { e.hub.presence.isOnline(bareNodes[0]) })
            let lost = try await GatewayRequestsTests.command(e, bareNodes[0], uid: uid, token: token)
            #expect(poll(timeoutMs: 60_000) { Self.state(e, lost) == .expired })
            #expect(e.hub.store.command(id: lost)?.endReason == "undelivered")
        }
    }

    @Test(
        "Cancel: a held command ends CANCELLED at the hub and is never published; a delivered one goes to the gateway, whose refusal answers CANCELLED"
    )
    func cancelThroughGateway() async throws {
        try await withHubAPI(options: { $0.cancelWaitMs = 60_000 }) { e in
            let (uid, token) = try await e.user()
            let (link, nodes) = try await Self.online(e, "GW-D-C", uid: uid, token: token, count: 1)
            defer { link.stop() }
            let node = nodes[0]
            let held = try await GatewayRequestsTests.command(e, node, uid: uid, token: token)
            let r = try await e.call("POST", "\(e.target(node))/commands/\(held)/cancel", token: token)
            #expect(r.status == 200 && r.json["commandState"] as? String == "CANCELLED", "\(r.status) \(r.text)")

            #expect(Self.status(link, node, true))
            let delivered = try await GatewayRequestsTests.command(e, node, uid: uid, token: token)
            #expect(poll { Self.received(link, node).contains(delivered) })
            #expect(!Self.received(link, node).contains(held), "a cancelled command was published")

            let topic = Topics.endNodeCommands(clientID: link.gateway.topic, endNode: node)
            async let cancel = e.call("POST", "\(e.target(node))/commands/\(delivered)/cancel", token: token)
            let told = await offPool {
                poll(timeoutMs: 60_000) {
                    link.probe.messages(on: topic).contains {
                        CommandCancel.commandID(of: $0.payload) == delivered
                    }
                }
            }
            #expect(told, "the cancel did not reach the gateway")
            let refusal =
                #"{"actionResults":[{"turnPower":{"succeeded":false,"errorMessage":"cancelled","data":{"reason":"CANCELLED"}}}]}"#
            #expect(Self.answer(link, node, delivered, refusal) == 204)
            let c = try await cancel
            #expect(c.status == 200 && c.json["commandState"] as? String == "CANCELLED", "\(c.status) \(c.text)")
        }
    }
}
