// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

/// End nodes' presence (docs/GATEWAYS.md §4.2, §5, §7): the statuses a
/// gateway publishes retained on p/{G}/end-nodes/{E}/status, read by every
/// hub, taken only for the gateway's own end nodes, and the end node online
/// only while its gateway is. Real broker, real hubs, the gateway's own
/// MQTT identity.
@Suite("Gateway presence", .offPool)
struct GatewayPresenceTests {
    typealias Link = GatewayRequestsTests.Link

    static func status(_ link: Link, _ endNode: String) -> String {
        Topics.endNodeStatus(clientID: link.gateway.topic, endNode: endNode)
    }

    static func refusedCount(_ hub: FrameworkSide) -> Int {
        let text = String(decoding: hub.metrics.exposition(), as: UTF8.self)
        let prefix = #"thingif_hub_refused_total{defence="end_node_status"} "#
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return 0 }
        return Int(line.dropFirst(prefix.count)) ?? -1
    }

    @Test(
        "An end node is online while its own status and its gateway's say so; the gateway's Will takes every end node offline; a second hub agrees"
    )
    func presenceFollowsGateway() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-P-A", uid: uid, token: token)
            let link = try Link(e, a, will: true)
            defer { link.stop() }
            let nodes = try link.onboardAll("LAMP-P", count: 3)
            let hub = e.hub
            #expect(nodes.allSatisfy { !hub.presence.isOnline($0) })

            // A second hub on the same store and broker.
            let hubB = try #require(
                FrameworkSide(
                    Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: e.env.broker), store: hub.store))
            try #require(hubB.start(timeoutMs: 30_000), "\(hubB.startProblem ?? "?")")
            defer { hubB.stop() }

            // The gateway comes online, then says two of its end nodes are reachable.
            #expect(link.probe.publish(Topics.status(clientID: a.topic), Array("online".utf8), retain: true))
            for n in nodes[0...1] {
                #expect(link.probe.publish(Self.status(link, n), Array("online".utf8), retain: true))
            }
            for h in [hub, hubB] {
                #expect(poll { h.presence.isOnline(nodes[0]) && h.presence.isOnline(nodes[1]) })
                #expect(!h.presence.isOnline(nodes[2]))
            }
            // The owner's list says the same.
            let listed = try await e.get("\(e.thingIF)/things/\(a.id)/end-nodes", token: token)
            let online = (listed.json["results"] as? [[String: Any]])?.map { $0["online"] as? Bool }
            #expect(online == [true, true, false], "\(listed.text)")

            // One goes offline.
            #expect(link.probe.publish(Self.status(link, nodes[1]), Array("offline".utf8), retain: true))
            for h in [hub, hubB] {
                #expect(poll { !h.presence.isOnline(nodes[1]) })
                #expect(h.presence.isOnline(nodes[0]))
            }

            // The gateway's connection dies: its Will ("offline") takes node 0 offline on both hubs.
            link.probe.client.disconnectWithWill()
            for h in [hub, hubB] {
                #expect(poll { !h.presence.isOnline(nodes[0]) }, "the Will took no end node offline")
            }

            // The gateway back: node 0's retained status holds, so it is online again.
            let back = try Link(e, a, will: true)
            defer { back.stop() }
            #expect(back.probe.publish(Topics.status(clientID: a.topic), Array("online".utf8), retain: true))
            for h in [hub, hubB] {
                #expect(poll { h.presence.isOnline(nodes[0]) })
                #expect(!h.presence.isOnline(nodes[1]) && !h.presence.isOnline(nodes[2]))
            }
            #expect(Self.refusedCount(hub) == 0)
        }
    }

    @Test(
        "Kii's …/connection is published as the retained status: over MQTT on the caller's topic, over HTTP on every installation; another hub reads it"
    )
    func connectionPublishesStatus() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-C-A", uid: uid, token: token)
            let link = try Link(e, a)
            defer { link.stop() }
            let nodes = try link.onboardAll("LAMP-C", count: 2)
            let watcher = try GatewaySecurityTests.watcher(e)
            defer { watcher.stop() }

            let up = link.ask("PUT", "things/\(a.id)/end-nodes/\(nodes[0])/connection", body: #"{"online":true}"#)
            #expect(up?.status == 204, "\(GatewayRequestsTests.describe(up))")
            let m = watcher.waitForMessage(on: Self.status(link, nodes[0]))
            #expect(m.map { String(decoding: $0.payload, as: UTF8.self) } == "online")

            let down = try await e.call(
                "PUT", "\(e.thingIF)/things/\(a.id)/end-nodes/\(nodes[1])/connection", token: a.token,
                json: ["online": false])
            #expect(down.status == 204, "\(down.text)")
            let n = watcher.waitForMessage(on: Self.status(link, nodes[1]))
            #expect(n.map { String(decoding: $0.payload, as: UTF8.self) } == "offline")

            // A hub started later reads the retained statuses: node 0 online
            // (its gateway announces no status of its own, as Kii's agent).
            let hubB = try #require(
                FrameworkSide(
                    Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: e.env.broker), store: e.hub.store))
            try #require(hubB.start(timeoutMs: 30_000), "\(hubB.startProblem ?? "?")")
            defer { hubB.stop() }
            #expect(poll { hubB.presence.isOnline(nodes[0]) })
            #expect(!hubB.presence.isOnline(nodes[1]))
        }
    }

    @Test(
        "Live statuses spend the gateway's budget and beyond it are cleared; the retained ones a hub gets at its subscription spend none, so a hub started later knows every end node taken"
    )
    func statusBudget() async throws {
        let burst = 4
        let small: @Sendable (inout FrameworkSide.Options) -> Void = {
            $0.requestBurst = burst
            $0.requestRatePerSecond = 0.001
        }
        try await withHubAPI(options: small) { e in
            let (uid, token) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-B-A", uid: uid, token: token)
            let link = try Link(e, a)
            defer { link.stop() }
            // Onboarded by the owner over REST: the gateway's MQTT budget is whole.
            var nodes: [String] = []
            for i in 0..<8 {
                nodes.append(
                    try await EndNodeOwnerTests.endNode(e, gateway: a.id, "LAMP-B-\(i)", uid: uid, token: token).id)
            }
            for n in nodes { #expect(link.probe.publish(Self.status(link, n), Array("online".utf8), retain: true)) }
            let counted = #"thingif_hub_refused_total{defence="end_node_status_budget"} 4"#
            #expect(poll { String(decoding: e.hub.metrics.exposition(), as: UTF8.self).contains(counted) })
            #expect(nodes.filter { e.hub.presence.isOnline($0) } == Array(nodes.prefix(4)))
            // What the hub could not afford to read stays nowhere: only the four it took are retained.
            let taken = Set(nodes.prefix(4).map { Self.status(link, $0) })
            var left: [String] = []
            #expect(
                poll {
                    left = ((try? MqttProbe.retained(e.env.broker, Self.status(link, "+"))) ?? []).map(\.topic)
                    return Set(left) == taken && left.count == 4
                }, "\(left)")

            // A hub with a burst of 2 started now takes all four at its subscription.
            var options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: e.env.broker)
            small(&options)
            options.requestBurst = 2
            let hubB = try #require(FrameworkSide(options, store: e.hub.store))
            try #require(hubB.start(timeoutMs: 30_000), "\(hubB.startProblem ?? "?")")
            defer { hubB.stop() }
            #expect(
                poll { nodes.prefix(4).allSatisfy { hubB.presence.isOnline($0) } },
                "\(nodes.map { hubB.presence.isOnline($0) })")
            #expect(!nodes.suffix(4).contains { hubB.presence.isOnline($0) })
        }
    }

    @Test("A retired installation of the gateway no longer carries its end nodes' presence")
    func retiredInstallationForgotten() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-R-A", uid: uid, token: token)
            let link = try Link(e, a)
            let node = try #require(link.onboardAll("LAMP-R", count: 1).first)
            // Kii's agent: no status of its own, the end node online by …/connection.
            let up = link.ask("PUT", "things/\(a.id)/end-nodes/\(node)/connection", body: #"{"online":true}"#)
            #expect(up?.status == 204, "\(GatewayRequestsTests.describe(up))")
            #expect(e.hub.presence.isOnline(node))
            link.stop()
            // New installations past the bound retire the oldest, the one E was online through.
            for _ in 0..<ThingInstallations.limit {
                let r = try await e.call("POST", "\(e.api)/installations", token: a.token, json: ["deviceType": "MQTT"])
                #expect(r.status == 201, "\(r.status) \(r.text)")
            }
            #expect(!e.hub.store.installationsOldestFirst(thingID: a.id).map(\.mqttTopic).contains(a.topic))
            #expect(!e.hub.presence.isOnline(node))
        }
    }

    @Test(
        "Statuses for another gateway's end node, a guessed ID, a removed end node or the gateway itself are dropped, counted and cleared"
    )
    func foreignStatusesCleared() async throws {
        try await withHubAPI { e in
            let (ua, ta) = try await e.user()
            let (ub, tb) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-F-A", uid: ua, token: ta)
            let b = try await GatewayRequestsTests.gateway(e, "GW-F-B", uid: ub, token: tb)
            let linkA = try Link(e, a)
            defer { linkA.stop() }
            let linkB = try Link(e, b)
            defer { linkB.stop() }
            let own = try linkA.onboardAll("LAMP-F-A", count: 2)
            let foreign = try #require(linkB.onboardAll("LAMP-F-B", count: 1).first)
            let removed = link(linkA, removing: own[1])
            #expect(removed)
            let watcher = try GatewaySecurityTests.watcher(e)
            defer { watcher.stop() }

            let bad = [foreign, "th.guessed0000000", own[1], a.id]
            for id in bad {
                #expect(linkA.probe.publishAcked(Self.status(linkA, id), Array("online".utf8)) == 0)
                _ = linkA.probe.publish(Self.status(linkA, id), Array("online".utf8), retain: true)
            }
            // Each is cleared: the hub publishes an empty retained message there.
            for id in bad {
                #expect(
                    poll { watcher.sawCleared(Self.status(linkA, id)) },
                    "\(id) was not cleared")
            }
            #expect(poll { Self.refusedCount(e.hub) == bad.count * 2 }, "\(Self.refusedCount(e.hub))")
            #expect(!e.hub.presence.isOnline(foreign) && !e.hub.presence.isOnline(own[1]))
            #expect(!e.hub.presence.isOnline("th.guessed0000000"))

            // The gateway's own end node is taken, and never cleared.
            #expect(linkA.probe.publish(Self.status(linkA, own[0]), Array("online".utf8), retain: true))
            #expect(poll { e.hub.presence.isOnline(own[0]) })
            #expect(!watcher.sawCleared(Self.status(linkA, own[0])))
        }
    }

    @Test(
        "A flood of retained statuses with made-up end nodes, of any length and beyond the gateway's budget, leaves nothing retained but the true statuses"
    )
    func retainedFloodCleared() async throws {
        // A small budget that does not refill, so that most of the flood is beyond it.
        try await withHubAPI(options: { o in
            o.requestBurst = 40
            o.requestRatePerSecond = 0.001
        }) { e in
            let (uid, token) = try await e.user()
            let a = try await GatewayRequestsTests.gateway(e, "GW-FLOOD", uid: uid, token: token)
            let link = try Link(e, a)
            defer { link.stop() }
            let own = try #require(link.onboardAll("LAMP-FLOOD", count: 1).first)
            let filter = Topics.endNodeStatus(clientID: a.topic, endNode: "+")
            // The gateway's one true status; garbage on its topic, within
            // the budget, is read as offline and cleared.
            let watcher0 = try GatewaySecurityTests.watcher(e)
            defer { watcher0.stop() }
            #expect(link.probe.publish(Self.status(link, own), Array("online".utf8), retain: true))
            #expect(poll { e.hub.presence.isOnline(own) })
            #expect(link.probe.publish(Self.status(link, own), Array("on".utf8), retain: true))
            #expect(poll { watcher0.sawCleared(Self.status(link, own)) })
            #expect(!e.hub.presence.isOnline(own))
            #expect(link.probe.publish(Self.status(link, own), Array("online".utf8), retain: true))
            #expect(poll { e.hub.presence.isOnline(own) })

            // Made-up end nodes: short IDs, IDs over the 256 bytes of a
            // topic-safe level, IDs near MQTT's 65,535-byte topic limit,
            // and 32 KB payloads; 600 in all, far beyond a burst of 40.
            let big = [UInt8](repeating: 0x6F, count: 32 * 1024)
            var topics: [String] = []
            for i in 0..<500 { topics.append(Self.status(link, "th.madeup\(i)")) }
            for i in 0..<80 { topics.append(Self.status(link, String(repeating: "x", count: 300) + "\(i)")) }
            for i in 0..<20 {
                topics.append(Self.status(link, String(repeating: "y", count: 65_000 - a.topic.utf8.count) + "\(i)"))
            }
            for (i, topic) in topics.enumerated() {
                #expect(link.probe.publish(topic, i % 5 == 0 ? big : Array("online".utf8), retain: true))
            }
            // Beyond the budget, the true end node's "online" again, which
            // the hub holds, is not cleared: a made-up status after it, on
            // the same lane, is, and shows the hub has handled both.
            let watcher = try GatewaySecurityTests.watcher(e)
            defer { watcher.stop() }
            #expect(link.probe.publish(Self.status(link, own), Array("online".utf8), retain: true))
            let after = Self.status(link, "th.madeup-after")
            #expect(link.probe.publish(after, Array("online".utf8), retain: true))
            #expect(poll { watcher.sawCleared(after) })
            #expect(!watcher.sawCleared(Self.status(link, own)))
            #expect(e.hub.presence.isOnline(own))

            // Within moments the broker holds the true status alone.
            var left: [MqttClient.Message] = []
            let clean = poll {
                left = (try? MqttProbe.retained(e.env.broker, filter)) ?? []
                return left.map(\.topic) == [Self.status(link, own)]
            }
            #expect(clean, "\(left.count) retained, e.g. \(left.prefix(3).map { $0.topic.prefix(80) })")
            #expect(left.first?.payload == Array("online".utf8))
            #expect(!e.hub.presence.isOnline("th.madeup0"))
        }
    }

    /// The gateway removes one of its end nodes over MQTT: whether it was 204.
    private func link(_ l: Link, removing id: String) -> Bool {
        l.ask("DELETE", "things/\(l.gateway.id)/end-nodes/\(id)")?.status == 204
    }
}
