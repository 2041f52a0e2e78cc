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
    static func gateway(_ env: Env, vendor: String = "GW-0001", storage: String = "gw") throws -> (TestThing, String) {
        let t = try env.newThing(storage: storage)
        #expect(ct_gateway(t.ct) == RC.ok)
        #expect(ct_register_recorder(t.ct, schema, 1, "turnPower", "lamp") == RC.ok)
        #expect(ct_register_recorder(t.ct, schema, 1, "setBrightness", "lamp") == RC.ok)
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
            #expect(poll { !env.hub.delivery.isOnline(e1) })
            let held = try #require(
                env.hub.sendCommand(to: e1, schema: Self.schema, schemaVersion: 1, actions: #"[{"setBrightness":{"b":1}}]"#))
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
            let user = try #require(try? env.hub.app.createUser(loginName: "owner-m", password: "pass-word-1").get())
            #expect(env.hub.store.addOwner(thingID: gw, owner: "user:\(user.userID)"))
            let body = try #require(
                try? JSON.parse(
                    #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-7","endNodePassword":"p7","owner":"user:\#(user.userID)"}"#
                ).get())
            let form = try #require(try? EndNodeOnboardingForm.parse(body, byGatewayVendorThingID: false).get())
            let e7 = try #require(try? env.hub.app.onboardEndNode(user: user, form: form).get()).thingID
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
            #expect(poll { !env.hub.delivery.isOnline(gw) })

            let user = try #require(try? env.hub.app.createUser(loginName: "owner-r", password: "pass-word-1").get())
            #expect(env.hub.store.addOwner(thingID: gw, owner: "user:\(user.userID)"))
            #expect((try? env.hub.app.removeEndNode(user: user, gatewayThingID: gw, endNodeThingID: e2).get()) != nil)
            let body = try #require(
                try? JSON.parse(
                    #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-3","endNodePassword":"p3","owner":"user:\#(user.userID)"}"#
                ).get())
            let form = try #require(try? EndNodeOnboardingForm.parse(body, byGatewayVendorThingID: false).get())
            let e3 = try #require(try? env.hub.app.onboardEndNode(user: user, form: form).get()).thingID

            (t, gw) = try Self.gateway(env)
            #expect(Self.waitFor(t, THINGIF_END_NODE_REMOVED, "LAMP-2")?.thingID == e2)
            #expect(Self.waitFor(t, THINGIF_END_NODE_ADDED, "LAMP-3")?.thingID == e3)
            #expect(
                Self.list(t) == [
                    .init(vendorThingID: "LAMP-1", thingID: e1, online: false),
                    .init(vendorThingID: "LAMP-3", thingID: e3, online: false)
                ])
            // Every end node is offline at a new handle: LAMP-1's commands wait.
            #expect(poll { !env.hub.delivery.isOnline(e1) })
            #expect(ct_end_node_set_online(t.ct, "LAMP-1", 1) == RC.ok)
            let (_, results) = try Self.command(env, e1, #"[{"turnPower":{"power":true}}]"#)
            #expect(results.map(\.succeeded) == [true])
        }
    }
}
