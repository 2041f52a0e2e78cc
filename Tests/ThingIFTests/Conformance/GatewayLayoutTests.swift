// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

/// A thing's layoutPosition at onboarding (docs/GATEWAYS.md §3.1), replayed
/// as Kii's gateway clients send it: kii-gateway-agent onboards a gateway by
/// its owner with a lower-case media type, kii_go's OnboardGatewayRequest
/// onboards one by itself, gwm-cli's add-owner onboards it again by thingID
/// with no layout. The layout is kept from the first onboarding; an end
/// node's credentials onboard nothing else.
@Suite("Gateway layout at onboarding", .offPool)
struct GatewayLayoutTests {
    static let byOwner = "application/vnd.kii.onboardingWithVendorThingIDByOwner+json"
    static let byThing = "application/vnd.kii.onboardingWithVendorThingIDByThing+json"

    /// The caller's things as GET …/users/me/things lists them: thingID → layoutPosition.
    static func layouts(_ e: HubAPIEnv, token: String) async throws -> [String: String] {
        let r = try await e.call("GET", "\(e.api)/users/me/things", token: token)
        try #require(r.status == 200, "\(r.status) \(r.text)")
        let things = try #require(r.json["things"] as? [[String: Any]])
        var out: [String: String] = [:]
        for t in things { out[t["thingID"] as? String ?? ""] = t["layoutPosition"] as? String }
        return out
    }

    @Test("By its owner: GATEWAY kept, also through an onboarding that names no layout; another one is 409")
    func byOwner() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let onboardings = "\(e.thingIF)/onboardings"
            // kii-gateway-agent (KiiHelper.ts): the owner's form, its media type in lower case.
            let gateway =
                #"{"vendorThingID":"GW-KII-1","thingPassword":"pw","owner":"user:\#(uid)","thingType":"Gateway","layoutPosition":"GATEWAY"}"#
            let r = try await e.call(
                "POST", onboardings, token: token, body: Data(gateway.utf8), contentType: Self.byOwner)
            try #require(r.status == 200, "\(r.status) \(r.text)")
            let gw = try #require(r.string("thingID"))
            #expect(e.hub.store.thing(id: gw)?.layoutPosition == .gateway)
            let plain = try await e.onboard("AC-KII-PLAIN", owner: "user:\(uid)", token: token).id
            #expect(try await Self.layouts(e, token: token) == [gw: "GATEWAY", plain: "STANDALONE"])

            // gwm-cli's add-owner: OnboardingWithThingIDByOwner, another owner, no layoutPosition.
            let (uid2, token2) = try await e.user()
            let again = #"{"thingID":"\#(gw)","thingPassword":"pw","owner":"user:\#(uid2)"}"#
            let a = try await e.call(
                "POST", onboardings, token: token2, body: Data(again.utf8),
                contentType: "application/vnd.kii.onboardingWithThingIDByOwner+json")
            #expect(a.status == 200 && a.string("thingID") == gw, "\(a.status) \(a.text)")
            #expect(try await Self.layouts(e, token: token2) == [gw: "GATEWAY"])

            // Another layout for a known thing, either way round: 409, nothing changed.
            for (vendor, layout) in [("GW-KII-1", "STANDALONE"), ("AC-KII-PLAIN", "GATEWAY")] {
                let body =
                    #"{"vendorThingID":"\#(vendor)","thingPassword":"pw","owner":"user:\#(uid)","layoutPosition":"\#(layout)"}"#
                let m = try await e.call(
                    "POST", onboardings, token: token, body: Data(body.utf8), contentType: Self.byOwner)
                #expect(
                    m.status == 409 && m.errorCode == "LAYOUT_POSITION_MISMATCH", "\(vendor): \(m.status) \(m.text)")
            }
            #expect(try await Self.layouts(e, token: token) == [gw: "GATEWAY", plain: "STANDALONE"])
        }
    }

    @Test("By itself (kii_go's OnboardGatewayRequest) over HTTP and MQTT; another layout 409, a bad one 400")
    func byThing() async throws {
        try await withHubAPI { e in
            let onboardings = "\(e.thingIF)/onboardings"
            // kii_go api.go OnboardGatewayRequest: vendorThingID, thingPassword, thingType,
            // layoutPosition, thingProperties; author.go sends the media type in lower case.
            let body =
                #"{"vendorThingID":"GW-KII-2","thingPassword":"pw","thingType":"Gateway","layoutPosition":"GATEWAY","thingProperties":{"site":"hall"}}"#
            let r = try await e.call("POST", onboardings, body: Data(body.utf8), contentType: Self.byThing)
            try #require(r.status == 200, "\(r.status) \(r.text)")
            let gw = try #require(r.string("thingID"))
            #expect(e.hub.store.thing(id: gw)?.layoutPosition == .gateway)
            #expect(r.json["mqttEndpoint"] != nil)

            let standalone = #"{"vendorThingID":"GW-KII-2","thingPassword":"pw","layoutPosition":"STANDALONE"}"#
            let m = try await e.call("POST", onboardings, body: Data(standalone.utf8), contentType: Self.byThing)
            #expect(m.status == 409 && m.errorCode == "LAYOUT_POSITION_MISMATCH", "\(m.status) \(m.text)")
            let none = #"{"vendorThingID":"GW-KII-2","thingPassword":"pw"}"#
            let n = try await e.call("POST", onboardings, body: Data(none.utf8), contentType: Self.byThing)
            #expect(n.status == 200 && n.string("thingID") == gw, "no layout keeps GATEWAY: \(n.status) \(n.text)")
            for bad in [#""ROUTER""#, "7", #""ENDNODE""#] {
                let b = #"{"vendorThingID":"GW-KII-BAD","thingPassword":"pw","layoutPosition":\#(bad)}"#
                let x = try await e.call("POST", onboardings, body: Data(b.utf8), contentType: Self.byThing)
                #expect(x.status == 400 && x.errorCode == "INVALID_INPUT_DATA", "\(bad): \(x.status) \(x.text)")
                #expect(x.string("message")?.contains("layoutPosition") == true || bad == #""ENDNODE""#, "\(x.text)")
            }
            #expect(e.hub.store.thing(vendorThingID: "GW-KII-BAD") == nil)
            #expect(e.hub.store.thing(id: gw)?.layoutPosition == .gateway)

            // The same onboarding over MQTT, on a bootstrap connection with the app's credentials.
            let boot = try MqttProbe.bootstrap(port: e.env.broker.port)
            defer { boot.stop() }
            let bootID = boot.client.clientID
            #expect(boot.subscribe(Topics.response(clientID: bootID)) == 1)
            let overMQTT = #"{"vendorThingID":"GW-KII-3","thingPassword":"pw","layoutPosition":"gateway"}"#
            boot.publish(
                Topics.request(clientID: bootID, appID: Env.appID, path: "onboardings"),
                kiiRequest("POST", token: nil, contentType: Self.byThing, requestID: "gw3", body: overMQTT),
                correlation: "gw3")
            let replies = Topics.response(clientID: bootID)
            #expect(poll { !boot.messages(on: replies).isEmpty })
            let reply = try #require(boot.messages(on: replies).first.flatMap { KiiResponse.decode($0.payload) })
            #expect(reply.status == 200, "\(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            #expect(e.hub.store.thing(vendorThingID: "GW-KII-3")?.layoutPosition == .gateway)
        }
    }

    @Test("An end node's vendorThingID and password onboard no thing: by itself or by an owner, 409")
    func endNodeCredentials() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let store = e.hub.store
            guard
                case .success(let gw) = store.registerThing(
                    vendorThingID: "GW-KII-4", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: .gateway),
                case .onboarded(let en, created: true) = store.onboardEndNode(
                    gatewayThingID: gw.thingID, vendorThingID: "LAMP-KII-1", password: "lamp-pw", thingType: "Lamp",
                    firmwareVersion: nil, owners: ["user:\(uid)"], maxEndNodes: 10)
            else {
                Issue.record("the gateway and its end node were not made")
                return
            }
            let onboardings = "\(e.thingIF)/onboardings"
            let byThing = #"{"vendorThingID":"LAMP-KII-1","thingPassword":"lamp-pw"}"#
            let t = try await e.call("POST", onboardings, body: Data(byThing.utf8), contentType: Self.byThing)
            #expect(t.status == 409 && t.errorCode == "LAYOUT_POSITION_MISMATCH", "\(t.status) \(t.text)")
            let byOwner = #"{"vendorThingID":"LAMP-KII-1","thingPassword":"lamp-pw","owner":"user:\#(uid)"}"#
            let o = try await e.call(
                "POST", onboardings, token: token, body: Data(byOwner.utf8), contentType: Self.byOwner)
            #expect(o.status == 409 && o.errorCode == "LAYOUT_POSITION_MISMATCH", "\(o.status) \(o.text)")
            let after = try #require(store.thing(id: en.thingID))
            #expect(after.layoutPosition == .endNode && after.gatewayThingID == gw.thingID)
            #expect(after.installations.isEmpty, "an end node has no MQTT installation of its own")
        }
    }
}
