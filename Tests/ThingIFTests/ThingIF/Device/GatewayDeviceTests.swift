// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// libthingif as a gateway (docs/GATEWAYS.md §2, §8) through the C API, as
/// firmware drives it, against a real broker and hub: end nodes onboarded
/// on behalf and by an owner, their commands run by the one handle and
/// reported for each, their state, online status and removal.
@Suite("Gateway device", .offPool)
struct GatewayDeviceTests {
    static let schema = "Lamp-Demo"

    struct Event: Decodable, Equatable {
        var event: Int32
        var vendorThingID: String?
        var thingID: String?
        var detail: String?
        var lookedUp: String?
    }

    struct Listed: Decodable, Equatable {
        var vendorThingID: String
        var thingID: String?
        var online: Bool
    }

    static func events(_ t: TestThing) -> [Event] {
        guard let p = ct_end_node_events_json(t.ct) else { return [] }
        defer { free(p) }
        return (try? JSONDecoder().decode([Event].self, from: Data(String(cString: p).utf8))) ?? []
    }

    static func list(_ t: TestThing) -> [Listed] {
        guard let p = ct_end_node_list_json(t.ct) else { return [] }
        defer { free(p) }
        return (try? JSONDecoder().decode([Listed].self, from: Data(String(cString: p).utf8))) ?? []
    }

    /// Waits for an end-node event `kind` about `vendor`.
    static func waitFor(_ t: TestThing, _ kind: thingif_end_node_event, _ vendor: String) -> Event? {
        var found: Event?
        _ = poll { () -> Bool in
            found = events(t).last { $0.event == Int32(kind.rawValue) && $0.vendorThingID == vendor }
            return found != nil
        }
        return found
    }

    /// A gateway that onboarded itself with the gateway layout, a recorder
    /// for the lamp schema's actions, its loop running and online.
    /// `configure` runs before the onboarding (options, TLS, behaviours).
    static func gateway(
        _ env: Env, vendor: String = "GW-0001", storage: String = "gw", configure: (TestThing) -> Void = { _ in }
    ) throws -> (TestThing, String) {
        let t = try env.newThing(storage: storage)
        #expect(ct_gateway(t.ct) == RC.ok)
        #expect(ct_register_recorder(t.ct, schema, 1, "turnPower", "lamp") == RC.ok)
        #expect(ct_register_recorder(t.ct, schema, 1, "setBrightness", "lamp") == RC.ok)
        configure(t)
        let rc = ct_onboard(t.ct, vendor, "password-1", "Gateway", "1.0.0", nil)
        guard rc == RC.ok else { throw HarnessError("gateway onboarding failed: \(rc); logs:\n\(t.logs)") }
        let gw = try #require(t.thingID)
        #expect(env.hub.thing(gw)?.layoutPosition == .gateway)
        #expect(ct_start(t.ct) == RC.ok)
        guard env.hub.waitForOnline(gw, timeoutMs: 30_000) else { throw HarnessError("\(gw) not online:\n\(t.logs)") }
        return (t, gw)
    }

    /// Adds `vendor` through the gateway and waits for its ADDED.
    static func add(_ env: Env, _ t: TestThing, _ vendor: String) throws -> String {
        #expect(ct_end_node_add(t.ct, vendor, "pw-\(vendor)", "Lamp", "0.9", #"{"room":"hall"}"#) == RC.ok)
        let added = try #require(waitFor(t, THINGIF_END_NODE_ADDED, vendor), "no ADDED for \(vendor):\n\(t.logs)")
        let id = try #require(added.thingID)
        #expect(added.lookedUp == id)
        return id
    }

    /// A user who owns `gw` (made with `login`).
    static func owner(_ env: Env, of gw: String, login: String) throws -> UserRecord {
        let user = try #require(try? env.hub.app.createUser(loginName: login, password: "pass-word-1").get())
        #expect(env.hub.store.addOwner(thingID: gw, owner: "user:\(user.userID)"))
        return user
    }

    /// `user` onboards `vendor` onto `gw` through the hub (Kii's end-node
    /// onboarding by the owner); returns its thingID.
    static func ownerOnboards(_ env: Env, _ user: UserRecord, _ gw: String, _ vendor: String) throws -> String {
        let body = try #require(
            try? JSON.parse(
                #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"\#(vendor)","endNodePassword":"pw","owner":"user:\#(user.userID)"}"#
            ).get())
        let form = try #require(try? EndNodeOnboardingForm.parse(body, byGatewayVendorThingID: false).get())
        return try #require(try? env.hub.app.onboardEndNode(user: user, form: form).get()).thingID
    }

    static func command(_ env: Env, _ to: String, _ action: String) throws -> (id: String, results: [ResultEntry]) {
        try env.command(action, to: to, schema: schema)
    }

    @Test(
        "An end node onboarded on behalf runs its commands through the gateway's handle, reports results and state for itself, and is held while offline"
    )
    func endNodeCommands() throws {
        try withEnv { env in
            let (t, gw) = try Self.gateway(env)
            let e1 = try Self.add(env, t, "LAMP-1")
            let record = try #require(env.hub.thing(e1))
            #expect(record.layoutPosition == .endNode && record.gatewayThingID == gw)
            #expect(record.thingType == "Lamp" && record.firmwareVersion == "0.9")
            // Added online: its commands are delivered at once.
            #expect(env.hub.waitForOnline(e1, timeoutMs: 30_000))
            let (_, results) = try Self.command(env, e1, #"[{"turnPower":{"power":true}}]"#)
            #expect(results.map(\.succeeded) == [true])
            let r = try #require(t.records.last)
            #expect(r.endNode == "LAMP-1" && r.targetThingID == e1 && r.thingMatches)
            // The gateway's own command: no end node.
            _ = try Self.command(env, gw, #"[{"turnPower":{"power":false}}]"#)
            #expect(t.records.last?.endNode == nil && t.records.last?.targetThingID == gw)

            #expect(ct_end_node_state_update(t.ct, "LAMP-1", #"{"power":true,"brightness":80}"#) == RC.ok)
            #expect(ct_end_node_state_patch(t.ct, "LAMP-1", #"{"brightness":40}"#) == RC.ok)
            #expect(env.hub.waitForStateUploads(of: e1, count: 2, timeoutMs: 30_000).map(\.method) == ["PUT", "PATCH"])
            #expect(parseObject(env.hub.thing(e1)?.state)?["brightness"] as? Int == 40)
            #expect(env.hub.stateUploads(of: gw).isEmpty)
            #expect(ct_end_node_firmware_version_update(t.ct, "LAMP-1", "1.1") == RC.ok)
            #expect(poll { env.hub.thing(e1)?.firmwareVersion == "1.1" })

            // Offline: the hub holds its command until the gateway says online.
            #expect(ct_end_node_set_online(t.ct, "LAMP-1", 0) == RC.ok)
            #expect(poll { !env.hub.presence.isOnline(e1) })
            let held = try #require(
                env.hub.sendCommand(
                    to: e1, schema: Self.schema, schemaVersion: 1, actions: #"[{"setBrightness":{"b":1}}]"#))
            #expect(env.hub.store.command(id: held)?.state == .sending)
            #expect(Self.list(t) == [.init(vendorThingID: "LAMP-1", thingID: e1, online: false)])
            #expect(ct_end_node_set_online(t.ct, "LAMP-1", 1) == RC.ok)
            #expect(env.hub.waitForResults(of: held, timeoutMs: 30_000) != nil)
            #expect(t.records.last?.commandID == held && t.records.last?.endNode == "LAMP-1")
            #expect(ct_end_node_add(t.ct, "LAMP-1", "x", nil, nil, nil) == Int32(THINGIF_ERR_EXISTS.rawValue))
        }
    }

    @Test(
        "An owner's onboarding and removal reach the gateway as ADDED and REMOVED; the gateway's own removal deletes the end node at the hub"
    )
    func membership() throws {
        try withEnv { env in
            let (t, gw) = try Self.gateway(env)
            let user = try Self.owner(env, of: gw, login: "owner-m")
            let e7 = try Self.ownerOnboards(env, user, gw, "LAMP-7")
            let added = try #require(Self.waitFor(t, THINGIF_END_NODE_ADDED, "LAMP-7"), "\(t.logs)")
            #expect(added.thingID == e7)
            // Added by an owner: offline until the firmware says otherwise.
            #expect(Self.list(t) == [.init(vendorThingID: "LAMP-7", thingID: e7, online: false)])
            #expect((try? env.hub.app.removeEndNode(user: user, gatewayThingID: gw, endNodeThingID: e7).get()) != nil)
            #expect(Self.waitFor(t, THINGIF_END_NODE_REMOVED, "LAMP-7")?.thingID == e7)
            #expect(Self.list(t).isEmpty)

            let e1 = try Self.add(env, t, "LAMP-1")
            #expect(ct_end_node_remove(t.ct, "LAMP-1") == RC.ok)
            let removed = try #require(Self.waitFor(t, THINGIF_END_NODE_REMOVED, "LAMP-1"), "\(t.logs)")
            #expect(removed.thingID == e1 && removed.lookedUp == nil)
            #expect(env.hub.thing(e1) == nil)
            #expect(ct_end_node_remove(t.ct, "LAMP-1") == Int32(THINGIF_ERR_NOT_FOUND.rawValue))
            let looked = ct_end_node_thing_id(t.ct, "LAMP-1")
            #expect(looked == nil)
            free(looked)
        }
    }

    @Test(
        "Refused onboardings come back REFUSED with the hub's errorCode and are forgotten; a standalone thing has no end nodes"
    )
    func refused() throws {
        try withEnv { env in
            #expect(env.hub.onboardByApp(vendorThingID: "AC-STANDALONE", password: "p") != nil)
            let (t, _) = try Self.gateway(env)
            #expect(ct_end_node_add(t.ct, "AC-STANDALONE", "p", nil, nil, nil) == RC.ok)
            let refused = try #require(Self.waitFor(t, THINGIF_END_NODE_REFUSED, "AC-STANDALONE"), "\(t.logs)")
            #expect(refused.thingID == nil)
            #expect(refused.detail?.contains("LAYOUT_POSITION_MISMATCH") == true)
            #expect(Self.list(t).isEmpty)

            let (plain, _) = try env.onlineAircon(storage: "plain")
            #expect(ct_end_node_add(plain.ct, "LAMP-1", "p", nil, nil, nil) == RC.state)
        }
    }

    @Test(
        "A restart keeps the registry; what the hub changed meanwhile (an owner's removal and onboarding) is learned at the next connect"
    )
    func restart() throws {
        try withEnv { env in
            var (t, gw) = try Self.gateway(env)
            let e1 = try Self.add(env, t, "LAMP-1")
            let e2 = try Self.add(env, t, "LAMP-2")
            #expect(t.destroy() == RC.ok)
            #expect(poll { !env.hub.presence.isOnline(gw) })

            let user = try Self.owner(env, of: gw, login: "owner-r")
            #expect((try? env.hub.app.removeEndNode(user: user, gatewayThingID: gw, endNodeThingID: e2).get()) != nil)
            let e3 = try Self.ownerOnboards(env, user, gw, "LAMP-3")

            (t, gw) = try Self.gateway(env)
            #expect(Self.waitFor(t, THINGIF_END_NODE_REMOVED, "LAMP-2")?.thingID == e2)
            #expect(Self.waitFor(t, THINGIF_END_NODE_ADDED, "LAMP-3")?.thingID == e3)
            #expect(
                Self.list(t) == [
                    .init(vendorThingID: "LAMP-1", thingID: e1, online: false),
                    .init(vendorThingID: "LAMP-3", thingID: e3, online: false)
                ])
            // Every end node is offline at a new handle: LAMP-1's commands wait.
            #expect(poll { !env.hub.presence.isOnline(e1) })
            #expect(ct_end_node_set_online(t.ct, "LAMP-1", 1) == RC.ok)
            let (_, results) = try Self.command(env, e1, #"[{"turnPower":{"power":true}}]"#)
            #expect(results.map(\.succeeded) == [true])
        }
    }
    @Test(
        "Reliability twins: an end node's command cut off by a crash is reported interrupted for the end node; a deferred one survives a broker restart"
    )
    func reliabilityTwins() throws {
        try withEnv { env in
            var (t, gw) = try Self.gateway(env)
            let e1 = try Self.add(env, t, "LAMP-1")
            #expect(t.destroy() == RC.ok)
            // What the ledger holds when the process died between "started" and "done".
            let cut = "cmd-en-cut-1"
            env.hub.recordCommand(cut, for: e1)
            let line = #"{"c":"\#(cut)","a":[{"names":["turnPower"]}],"e":"\#(e1)"}"# + "\n"
            let ledger = env.storage("gw") + "/ledger.jsonl"
            let old = (try? String(contentsOfFile: ledger, encoding: .utf8)) ?? ""
            try (old + line).write(toFile: ledger, atomically: true, encoding: .utf8)
            (t, gw) = try Self.gateway(env)
            let results = try env.results(of: cut)
            #expect(results.map(\.succeeded) == [false])
            #expect(results.first?.errorMessage?.hasPrefix("interrupted") == true)
            #expect(env.hub.store.command(id: cut)?.thingID == e1)

            #expect(ct_behave_defer(t.ct, "setBrightness", 1) == 0)
            #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 500) == RC.ok)
            #expect(ct_end_node_set_online(t.ct, "LAMP-1", 1) == RC.ok)
            #expect(env.hub.waitForOnline(e1, timeoutMs: 30_000))
            let id = try #require(
                env.hub.sendCommand(
                    to: e1, schema: Self.schema, schemaVersion: 1, actions: #"[{"setBrightness":{"b":7}}]"#))
            #expect(poll { t.records.contains { $0.commandID == id } })
            env.broker.stop()
            #expect(poll { !t.isConnected })
            let broker2 = try env.broker.restarted()
            defer {
                broker2.stop()
                broker2.removeFiles()
            }
            #expect(poll(timeoutMs: 30_000) { t.isConnected }, "no reconnect; logs:\n\(t.logs)")
            #expect(env.hub.results(of: id) == nil)
            #expect(ct_complete_deferred(t.ct, "setBrightness", nil, #"{"after":"reconnect"}"#) == RC.ok)
            let done = try env.results(of: id, timeoutMs: 30_000)
            #expect(done.first?.data?["after"] as? String == "reconnect")
            #expect(t.records.filter { $0.commandID == id }.count == 1)
            _ = gw
        }
    }
}
