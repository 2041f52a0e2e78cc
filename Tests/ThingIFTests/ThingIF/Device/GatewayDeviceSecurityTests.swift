// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
@testable import ThingIF
@testable import ThingIFHub

/// The end-node twins of the device side's attack tests (docs/GATEWAYS.md
/// §6.2): THINGIF_OPT_MAX_PAYLOAD and the bounded inbox on end nodes'
/// topics, bad UTF-8 from an end node's handler, end-node commands over the
/// gateway's TLS connection, and the gateway's password rotation with its
/// end nodes kept. A real broker and hub, the gateway driven through the C
/// API as GatewayDeviceTests drives it; each makes the attack and checks
/// that the legitimate path still works.
@Suite("Gateway device security", .offPool)
struct GatewayDeviceSecurityTests {
    typealias G = GatewayDeviceTests
    static let schema = GatewayDeviceTests.schema

    /// Adds every vendor through the gateway at once, then waits for each
    /// one's ADDED; their thingIDs, in order.
    static func addAll(_ env: Env, _ t: TestThing, _ vendors: [String]) throws -> [String] {
        for v in vendors { #expect(ct_end_node_add(t.ct, v, "pw-\(v)", "Lamp", "0.9", nil) == RC.ok) }
        return try vendors.map { v in
            let added = try #require(G.waitFor(t, THINGIF_END_NODE_ADDED, v), "no ADDED for \(v):\n\(t.logs)")
            return try #require(added.thingID)
        }
    }

    @Test(
        "endNodeMaxPayload: a message over THINGIF_OPT_MAX_PAYLOAD on an end node's topic is dropped before parsing; a command is reported dropped for that end node"
    )
    func endNodeMaxPayload() throws {
        try withEnv { env in
            let (t, gw) = try G.gateway(env) { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_MAX_PAYLOAD.rawValue), 512) == RC.ok)
            }
            let e1 = try G.add(env, t, "LAMP-1")
            let gwTopic = try DeviceSecurityTests.mqttTopic(env, gw)
            let topic = Topics.endNodeCommands(clientID: gwTopic, endNode: e1)
            let eventsTopic = Topics.endNodeEvents(clientID: gwTopic, endNode: e1)
            let pad = String(repeating: "x", count: 600)
            // A removal event on E's events topic, valid but too large: not parsed, so E stays.
            let removal = #"{"event":"endNodeRemoved","thingID":"\#(e1)","pad":"\#(pad)"}"#
            try #require(env.hub.publishRaw(topic: eventsTopic, payload: Array(removal.utf8)))
            // A command, too large; the hub knows it as E's.
            let big =
                #"{"commandID":"cmd-big-e","schema":"\#(Self.schema)","schemaVersion":1,"actions":[{"turnPower":{"power":true,"pad":"\#(pad)"}}]}"#
            env.hub.recordCommand("cmd-big-e", for: e1)
            try #require(env.hub.publishRaw(topic: topic, payload: Array(big.utf8)))
            let line = "bytes on \(topic): over the limit of 512 bytes"
            let eventLine = "bytes on \(eventsTopic): over the limit of 512 bytes"
            // Each dropped once, on its own topic.
            #expect(
                poll {
                    t.logs.components(separatedBy: line).count - 1 == 1
                        && t.logs.components(separatedBy: eventLine).count - 1 == 1
                }, "logs:\n\(t.logs)")
            #expect(!t.logContains("endNodeRemoved"), "the oversized event was parsed")
            #expect(G.events(t).filter { $0.event == Int32(THINGIF_END_NODE_REMOVED.rawValue) }.isEmpty)
            #expect(G.list(t).map(\.thingID) == [e1])
            // Not run, but reported for E (results for another target are refused by the hub).
            let reported = try #require(env.hub.waitForResults(of: "cmd-big-e", timeoutMs: 30_000), "logs:\n\(t.logs)")
            #expect(
                reported.contains("\"succeeded\":false") && reported.contains("over the limit of 512 bytes"),
                "\(reported)")
            #expect(env.hub.store.command(id: "cmd-big-e")?.thingID == e1)
            #expect(t.records.isEmpty)
            // E still gets its commands.
            let (_, results) = try G.command(env, e1, #"[{"turnPower":{"power":true}}]"#)
            #expect(results.map(\.succeeded) == [true])
            #expect(t.records.map(\.endNode) == ["LAMP-1"])
        }
    }

    @Test(
        "endNodeBoundedInbox: a command flood across 10 end nodes while the handler is slow runs each command once, for its end node; the inbox never passes THINGIF_OPT_INBOX_MAX"
    )
    func endNodeBoundedInbox() throws {
        try withEnv { env in
            let bound = 4
            let (t, _) = try G.gateway(env) { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_INBOX_MAX.rawValue), bound) == RC.ok)
                // The first command's handler waits until every command is out (a
                // device busy meanwhile); then the rest stand in the socket at once.
                #expect(ct_behave_hold(t.ct, "turnPower", 60_000) == 0)
            }
            let vendors = (1...10).map { "LAMP-\($0)" }
            let nodes = try Self.addAll(env, t, vendors)
            for e in nodes { #expect(env.hub.waitForOnline(e, timeoutMs: 30_000), "\(e) not online:\n\(t.logs)") }
            var target: [String: (thingID: String, vendor: String)] = [:]
            for i in 0..<80 {
                let k = i % nodes.count
                let id = try #require(
                    env.hub.sendCommand(
                        to: nodes[k], schema: Self.schema, schemaVersion: 1, actions: #"[{"turnPower":{"power":true}}]"#
                    ))
                target[id] = (nodes[k], vendors[k])
            }
            #expect(
                poll { target.keys.allSatisfy { env.hub.store.command(id: $0)?.state == .delivered } },
                "the hub did not publish every command; logs:\n\(t.logs)")
            #expect(poll { ct_holding(t.ct) == 1 }, "the first handler is not held; logs:\n\(t.logs)")
            t.release()
            #expect(
                poll(timeoutMs: 30_000) { target.keys.allSatisfy { env.hub.results(of: $0) != nil } },
                "not every command got results; logs:\n\(t.logs)")
            let ran = t.records
            #expect(ran.count == target.count)
            #expect(Set(ran.compactMap(\.commandID)) == Set(target.keys))
            for r in ran {
                let want = target[r.commandID ?? ""]
                #expect(r.targetThingID == want?.thingID && r.endNode == want?.vendor, "\(r)")
            }
            let high = inboxHighWater(t)
            #expect(high <= bound, "the inbox held \(high) messages, over the bound \(bound)")
            #expect(high == bound, "the flood never filled the inbox (high water \(high)): the test proves nothing")
            #expect(G.list(t).count == nodes.count)
        }
    }

    @Test(
        "endNodeBadUTF8: an end node's action failed or completed with a message that is not UTF-8: the action fails with the bytes replaced, the handle stays usable, the results go to the end node"
    )
    func endNodeBadUTF8() throws {
        try withEnv { env in
            let (t, _) = try G.gateway(env) { t in
                #expect(ct_behave_fail(t.ct, "setBrightness", DeviceSecurityTests.latin1) == 0)
            }
            let e1 = try G.add(env, t, "LAMP-1")
            let both = #"[{"turnPower":{"power":true}},{"setBrightness":{"b":5}}]"#
            let (_, results) = try G.command(env, e1, both)
            #expect(results.map(\.succeeded) == [true, false])
            #expect(results.last?.errorMessage == "\u{FFFD}t\u{FFFD}\u{FFFD} bad")
            #expect(t.records.last?.failRc == Int(RC.ok) && t.records.last?.endNode == "LAMP-1")

            // Deferred: the invalid completion leaves the handle, which completes the action later.
            #expect(ct_behave_fail(t.ct, "setBrightness", nil) == 0)
            #expect(ct_behave_defer(t.ct, "setBrightness", 1) == 0)
            let id = try #require(
                env.hub.sendCommand(to: e1, schema: Self.schema, schemaVersion: 1, actions: both))
            #expect(poll { t.records.filter { $0.commandID == id }.count == 2 }, "logs:\n\(t.logs)")
            #expect(ct_deferred_count(t.ct) == 1)
            #expect(ct_complete_deferred(t.ct, "setBrightness", DeviceSecurityTests.latin1, #"{"a":1}"#) == RC.invalid)
            #expect(ct_deferred_count(t.ct) == 1)
            #expect(ct_complete_deferred(t.ct, "setBrightness", "the dimmer is stuck", nil) == RC.ok)
            // The results are sent once: they carry the valid completion, so the invalid one completed nothing.
            let deferred = try env.results(of: id)
            #expect(deferred.map(\.succeeded) == [true, false])
            #expect(deferred.last?.errorMessage == "the dimmer is stuck")
            #expect(env.hub.store.command(id: id)?.thingID == e1)
            #expect(t.records.filter { $0.commandID == id }.allSatisfy { $0.targetThingID == e1 })
        }
    }

    @Test(
        "endNodeCommandsOverTLS: end nodes are onboarded and commanded over the gateway's TLS connection; no plain-text session of the gateway, and none of an end node"
    )
    func endNodeCommandsOverTLS() throws {
        try withEnv { env in
            let (t, gw) = try G.gateway(env) { t in
                DeviceSecurityTests.useTLS(t, port: env.broker.mtlsPort, ca: env.broker.caFile, clientCert: true)
            }
            let nodes = try Self.addAll(env, t, ["LAMP-1", "LAMP-2"])
            for (e, v) in zip(nodes, ["LAMP-1", "LAMP-2"]) {
                let (_, results) = try G.command(env, e, #"[{"turnPower":{"power":true}}]"#)
                #expect(results.map(\.succeeded) == [true])
                #expect(t.records.last?.endNode == v && t.records.last?.targetThingID == e)
            }
            #expect(ct_end_node_state_update(t.ct, "LAMP-2", #"{"power":true}"#) == RC.ok)
            #expect(env.hub.waitForStateUploads(of: nodes[1], count: 1, timeoutMs: 30_000).count == 1)
            let topic = try DeviceSecurityTests.mqttTopic(env, gw)
            t.destroy()
            env.broker.stop()  // flushes its log
            let log = env.broker.log
            let sessions = DeviceSecurityTests.sessions(log)
            // One bootstrap session, the gateway's own onboarding: the end
            // nodes' onboardings went over the gateway's connection.
            #expect(
                DeviceSecurityTests.sessionPorts(log, clientPrefix: "thingif-bootstrap-") == [env.broker.mtlsPort],
                "broker:\n\(log)")
            let ports = DeviceSecurityTests.sessionPorts(log, clientPrefix: topic)
            #expect(!ports.isEmpty && ports.allSatisfy { $0 == env.broker.tlsPort }, "\(ports); broker:\n\(log)")
            #expect(!sessions.contains { s in nodes.contains { s.client.hasPrefix($0) } }, "broker:\n\(log)")
            // Plain text carries the hub's sessions only.
            let plain = sessions.filter { $0.port == env.broker.port }.map(\.client)
            #expect(plain.allSatisfy { $0.hasPrefix("thingif-hub-") }, "\(plain); broker:\n\(log)")
        }
    }

    @Test(
        "endNodesSurviveRotation: end nodes have no broker login; the gateway's re-onboarding rotates its password, the old one is refused, its end nodes keep their thingIDs and get their commands on the new connection"
    )
    func endNodesSurviveRotation() throws {
        try withEnv { env in
            let (t1, gw) = try G.gateway(env, storage: "first")
            let nodes = try Self.addAll(env, t1, ["LAMP-1", "LAMP-2"])
            let first = try StoredIdentity(storage: env.storage("first"))
            // No broker login for an end node, no password kept for one.
            for e in nodes { #expect(env.hub.thing(e)?.installations.isEmpty == true) }
            let registry = try String(
                contentsOfFile: env.storage("first") + "/" + EndNodeRegistry.fileName, encoding: .utf8)
            #expect(registry.contains("LAMP-1") && !registry.contains("pw-"))
            #expect(t1.destroy() == RC.ok)
            #expect(poll { !env.hub.presence.isOnline(nodes[0]) })
            // A command while the gateway is away waits for the new connection.
            let held = try #require(
                env.hub.sendCommand(
                    to: nodes[0], schema: Self.schema, schemaVersion: 1, actions: #"[{"setBrightness":{"b":3}}]"#))

            // Re-onboarded from a fresh storage (a replaced or reset gateway).
            let (t2, again) = try G.gateway(env, storage: "second")
            let second = try StoredIdentity(storage: env.storage("second"))
            #expect(again == gw && second.topic == first.topic)
            #expect(first.password != second.password)
            let old = try MqttProbe(
                port: env.broker.port, clientID: first.topic, username: first.username, password: first.password)
            defer { old.stop() }
            #expect(!old.isConnected)
            // The hub's list gives the new handle its end nodes, same thingIDs.
            for (e, v) in zip(nodes, ["LAMP-1", "LAMP-2"]) {
                #expect(G.waitFor(t2, THINGIF_END_NODE_ADDED, v)?.thingID == e, "logs:\n\(t2.logs)")
                #expect(ct_end_node_set_online(t2.ct, v, 1) == RC.ok)
            }
            let heldResults = env.hub.waitForResults(of: held, timeoutMs: 30_000)
            #expect(heldResults?.contains("\"succeeded\":true") == true, "\(heldResults ?? "none"); logs:\n\(t2.logs)")
            #expect(t2.records.first?.commandID == held && t2.records.first?.endNode == "LAMP-1")
            let (_, results) = try G.command(env, nodes[1], #"[{"turnPower":{"power":true}}]"#)
            #expect(results.map(\.succeeded) == [true])
            #expect(t2.records.last?.endNode == "LAMP-2" && t2.records.last?.targetThingID == nodes[1])
            #expect(t2.isConnected && env.hub.presence.isOnline(gw))
        }
    }
}
