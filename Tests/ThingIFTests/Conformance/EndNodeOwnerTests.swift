// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// A gateway's end nodes by the gateway's owner over REST (docs/GATEWAYS.md
/// §3.2, §3.3): Kii's onboarding bodies as its clients send them
/// (thing-if-AndroidSDK's onboardEndNodeWithGateway, kii-gateway-agent's
/// `USER:` owner, kii_go's string properties), the list with its pages,
/// the read, the removal, the cap, strangers and bad input. The refusals
/// with a fixed message are rows of docs/PROTOCOL.md §12.3 (KiiErrorTableTests).
@Suite("End nodes by their gateway's owner", .offPool)
struct EndNodeOwnerTests {
    static let byThingID = "application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json"
    static let byVendorThingID = "application/vnd.kii.OnboardingEndNodeWithGatewayVendorThingID+json"

    /// A gateway onboarded by `owner` with the owner's form: its thingID.
    static func gateway(_ e: HubAPIEnv, _ vendor: String, owner: String, token: String) async throws -> String {
        let body =
            #"{"vendorThingID":"\#(vendor)","thingPassword":"pw","owner":"\#(owner)","layoutPosition":"GATEWAY"}"#
        let r = try await e.call(
            "POST", "\(e.thingIF)/onboardings", token: token, body: Data(body.utf8),
            contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
        try #require(r.status == 200, "gateway: \(r.status) \(r.text)")
        return try #require(r.string("thingID"))
    }

    /// POST …/onboardings with an end-node body.
    static func onboard(_ e: HubAPIEnv, _ body: String, token: String?, contentType: String = byThingID) async throws
        -> HTTPReply
    {
        try await e.call(
            "POST", "\(e.thingIF)/onboardings", token: token, body: Data(body.utf8), contentType: contentType)
    }

    /// An end node onboarded by the owner with `uid`'s token: its thingID and token.
    static func endNode(
        _ e: HubAPIEnv, gateway gw: String, _ vendor: String, uid: String, token: String, password: String = "pw"
    ) async throws -> (id: String, token: String) {
        let body =
            #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"\#(vendor)","endNodePassword":"\#(password)","owner":"user:\#(uid)","endNodeThingType":"Lamp"}"#
        let r = try await onboard(e, body, token: token)
        try #require(r.status == 200, "end node \(vendor): \(r.status) \(r.text)")
        return (try #require(r.string("endNodeThingID")), try #require(r.string("accessToken")))
    }

    /// The gateway `gw` says over HTTP (Kii's `…/connection`, with its token)
    /// whether its end node is reachable.
    static func connection(_ e: HubAPIEnv, gateway gw: String, token: String, _ endNode: String, online: Bool)
        async throws
    {
        let r = try await e.call(
            "PUT", "\(e.thingIF)/things/\(gw)/end-nodes/\(endNode)/connection", token: token, json: ["online": online])
        try #require(r.status == 204, "\(r.status) \(r.text)")
    }

    @Test("Kii's bodies: Android's, kii-gateway-agent's USER: owner, kii_go's string properties; again is idempotent")
    func kiiBodies() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let gw = try await Self.gateway(e, "GW-EN-1", owner: "user:\(uid)", token: token)

            // thing-if-AndroidSDK ThingIFAPI.onboardEndNodeWithGateway (test
            // OnboardEndnodeWithGateway.java): its headers and every field.
            let android =
                #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-A","endNodePassword":"lamp-pw","owner":"user:\#(uid)","endNodeThingType":"Lamp","endNodeFirmwareVersion":"1.0","endNodeThingProperties":{"room":"hall"}}"#
            let a = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token, body: Data(android.utf8),
                contentType: Self.byThingID, headers: ["X-Kii-AppID": e.appID, "X-Kii-AppKey": "demoKey"])
            try #require(a.status == 200, "\(a.status) \(a.text)")
            #expect(a.contentType?.hasPrefix("application/json") == true)
            #expect(Set(a.json.keys) == ["endNodeThingID", "accessToken"], "\(a.text)")
            let lampA = try #require(a.string("endNodeThingID"))
            let tokenA = try #require(a.string("accessToken"))
            let stored = try #require(e.hub.store.thing(id: lampA))
            #expect(stored.layoutPosition == .endNode && stored.gatewayThingID == gw)
            #expect(stored.vendorThingID == "LAMP-A" && stored.thingType == "Lamp" && stored.firmwareVersion == "1.0")
            #expect(stored.owners == ["user:\(uid)"] && stored.installations.isEmpty)
            #expect(stored.passwordHash != nil && stored.passwordHash != "lamp-pw", "the password is kept hashed")

            // kii-gateway-agent (KiiHelper.ts): owner "USER:{id}", no firmware, the media type as it writes it.
            let agent =
                #"{"endNodeVendorThingID":"LAMP-B","endNodePassword":"pw-b","gatewayThingID":"\#(gw)","endNodeThingType":"Lamp","owner":"USER:\#(uid)"}"#
            let b = try await Self.onboard(e, agent, token: token)
            #expect(b.status == 200, "\(b.status) \(b.text)")
            let lampB = try #require(b.string("endNodeThingID"))
            #expect(e.hub.store.thing(id: lampB)?.owners == ["user:\(uid)"], "the owner's type is read in lower case")

            // kii_go: the gateway by vendorThingID, the media type in lower case, properties a string.
            let kiiGo =
                #"{"gatewayVendorThingID":"GW-EN-1","endNodeVendorThingID":"LAMP-C","endNodePassword":"pw-c","owner":"user:\#(uid)","endNodeThingProperties":"{\"room\":\"attic\"}"}"#
            let c = try await Self.onboard(
                e, kiiGo, token: token,
                contentType: "application/vnd.kii.onboardingEndNodeWithGatewayVendorThingID+json; charset=utf-8")
            #expect(c.status == 200, "\(c.status) \(c.text)")
            let lampC = try #require(c.string("endNodeThingID"))
            #expect(e.hub.store.thing(id: lampC)?.gatewayThingID == gw)

            // The same end node again with its password: the same thing, a new token, nothing counted twice.
            let again = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token, body: Data(android.utf8), contentType: Self.byThingID)
            #expect(again.status == 200 && again.string("endNodeThingID") == lampA, "\(again.status) \(again.text)")
            #expect(again.string("accessToken") != nil && again.string("accessToken") != tokenA)
            #expect(e.hub.store.endNodeCount(gatewayThingID: gw) == 3)
            // Both tokens are the end node's: its own upload over HTTP is taken with either.
            let tokenB = try #require(again.string("accessToken"))
            for t in [tokenA, tokenB] {
                let up = try await e.call("PUT", "\(e.target(lampA))/states", token: t, json: ["power": true])
                #expect(up.status == (t == tokenA ? 201 : 204), "Kii's 201 for the first: \(up.status) \(up.text)")
            }
            // An end node is no gateway: nothing is onboarded onto it.
            let onto = try await Self.onboard(
                e,
                #"{"gatewayThingID":"\#(lampA)","endNodeVendorThingID":"LAMP-D","endNodePassword":"pw","owner":"user:\#(uid)"}"#,
                token: token)
            #expect(onto.status == 409 && onto.errorCode == "NOT_A_GATEWAY", "\(onto.status) \(onto.text)")
            #expect(e.hub.store.thing(vendorThingID: "LAMP-D") == nil)
        }
    }

    @Test(
        "List in pages (bestEffortLimit capped at maxHistoryPage, nextPaginationKey), read one; bad limits and keys 400"
    )
    func listAndRead() async throws {
        try await withHubAPI(security: .init(limits: HubLimits(maxHistoryPage: 3))) { e in
            let (uid, token) = try await e.user()
            let gw = try await Self.gateway(e, "GW-EN-2", owner: "user:\(uid)", token: token)
            var made: [String] = []
            for i in 0..<7 {
                made.append(try await Self.endNode(e, gateway: gw, "LAMP-P\(i)", uid: uid, token: token).id)
            }
            // Onboarding order: by creation time, then thingID within one millisecond.
            made.sort {
                let (a, b) = (e.hub.store.thing(id: $0)!, e.hub.store.thing(id: $1)!)
                return (a.createdAt, a.thingID) < (b.createdAt, b.thingID)
            }
            let list = "\(e.thingIF)/things/\(gw)/end-nodes"

            /// Every page with `limit` (nil: none given): the page sizes and the thingIDs in order.
            func pages(_ limit: Int?) async throws -> (sizes: [Int], ids: [String]) {
                var sizes: [Int] = []
                var ids: [String] = []
                var key: String?
                repeat {
                    var query: [String] = []
                    if let limit { query.append("bestEffortLimit=\(limit)") }
                    if let k = key {
                        query.append("paginationKey=\(k.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")
                    }
                    let r = try await e.get(
                        query.isEmpty ? list : "\(list)?\(query.joined(separator: "&"))", token: token)
                    try #require(r.status == 200, "\(r.status) \(r.text)")
                    let results = try #require(r.json["results"] as? [[String: Any]])
                    for o in results {
                        #expect(o["vendorThingID"] is String && o["thingType"] as? String == "Lamp")
                        #expect(o["online"] as? Bool == false, "an end node nobody reported online: \(o)")
                        #expect(o["gatewayThingID"] == nil && o["createdAt"] == nil, "the list's fields only")
                    }
                    ids += results.compactMap { $0["thingID"] as? String }
                    sizes.append(results.count)
                    key = r.string("nextPaginationKey")
                    try #require(sizes.count < 20, "the pages do not end")
                } while key != nil
                return (sizes, ids)
            }
            let two = try await pages(2)
            #expect(two.sizes == [2, 2, 2, 1] && two.ids == made, "\(two)")
            let capped = try await pages(1000)
            #expect(capped.sizes == [3, 3, 1] && capped.ids == made, "bestEffortLimit is capped: \(capped.sizes)")
            let byDefault = try await pages(nil)
            #expect(byDefault.sizes == [3, 3, 1] && byDefault.ids == made, "\(byDefault.sizes)")

            for bad in ["0", "-1", "x", "1.5"] {
                let r = try await e.get("\(list)?bestEffortLimit=\(bad)", token: token)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(bad): \(r.status) \(r.text)")
            }
            for bad in ["x", "12", "_th.x", "-1_th.x", "1_", "abc_th.x"] {
                let r = try await e.get("\(list)?paginationKey=\(bad)", token: token)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(bad): \(r.status) \(r.text)")
            }

            // A read: the list's fields and the gateway, firmware, creation time.
            let one = try await e.get("\(list)/\(made[0])", token: token)
            try #require(one.status == 200, "\(one.status) \(one.text)")
            let t = try #require(e.hub.store.thing(id: made[0]))
            #expect(one.string("thingID") == made[0] && one.string("vendorThingID") == t.vendorThingID)
            #expect(one.string("thingType") == "Lamp" && one.json["firmwareVersion"] == nil)
            #expect(one.string("gatewayThingID") == gw && one.json["online"] as? Bool == false)
            #expect((one.json["createdAt"] as? Int).map(Int64.init) == t.createdAt, "\(one.text)")

            // A standalone thing of the caller's carries no end node; a gateway's
            // thingID is no end node of itself; an end node is read under its gateway only.
            let (plain, _) = try await e.onboard("AC-EN-PLAIN", owner: "user:\(uid)", token: token)
            let none = try await e.get("\(e.thingIF)/things/\(plain)/end-nodes", token: token)
            #expect(none.status == 200 && (none.json["results"] as? [Any])?.isEmpty == true, "\(none.text)")
            #expect(none.json["nextPaginationKey"] == nil)
            for path in ["\(list)/\(gw)", "\(list)/\(plain)", "\(e.thingIF)/things/\(plain)/end-nodes/\(made[0])"] {
                let r = try await e.get(path, token: token)
                #expect(r.status == 404 && r.errorCode == "END_NODE_NOT_FOUND", "\(path): \(r.status) \(r.text)")
            }
        }
    }

    @Test("A stranger gets 404 on every end-node call, a group member is an owner, owner must be the caller's")
    func strangersAndGroups() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (uid2, token2) = try await e.user()
            let (_, stranger) = try await e.user()
            let g = try await e.call("POST", "\(e.api)/groups", token: token, json: ["name": "home", "members": [uid2]])
            try #require(g.status == 201, "\(g.status) \(g.text)")
            let group = try #require(g.string("groupID"))
            let gw = try await Self.gateway(e, "GW-EN-3", owner: "group:\(group)", token: token)
            let (lamp, _) = try await Self.endNode(e, gateway: gw, "LAMP-G1", uid: uid, token: token)
            let list = "\(e.thingIF)/things/\(gw)/end-nodes"

            // The stranger: 404 THING_NOT_FOUND for the list, a read, a removal and an onboarding.
            let onto =
                #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-S","endNodePassword":"pw","owner":"user:\#(uid)"}"#
            let calls: [(String, String, Data?)] = [
                ("GET", list, nil), ("GET", "\(list)/\(lamp)", nil), ("DELETE", "\(list)/\(lamp)", nil),
                ("POST", "\(e.thingIF)/onboardings", Data(onto.utf8))
            ]
            for (method, path, body) in calls {
                let r = try await e.call(method, path, token: stranger, body: body, contentType: Self.byThingID)
                #expect(r.status == 404 && r.errorCode == "THING_NOT_FOUND", "\(method) \(path): \(r.status) \(r.text)")
                #expect(r.string("message") == "Thing with thingID \(gw) was not found", "\(r.text)")
            }
            let byVendor =
                #"{"gatewayVendorThingID":"GW-EN-3","endNodeVendorThingID":"LAMP-S","endNodePassword":"pw","owner":"user:\#(uid)"}"#
            let v = try await Self.onboard(e, byVendor, token: stranger, contentType: Self.byVendorThingID)
            #expect(v.status == 404 && v.errorCode == "THING_NOT_FOUND", "\(v.status) \(v.text)")
            #expect(e.hub.store.thing(vendorThingID: "LAMP-S") == nil && e.hub.store.thing(id: lamp) != nil)

            // The group's member owns the gateway through the group: it lists,
            // and onboards for itself or for the group (the type in any case).
            let seen = try await e.get(list, token: token2)
            #expect(seen.status == 200 && seen.text.contains(lamp), "\(seen.status) \(seen.text)")
            for (vendor, owner, expected) in [
                ("LAMP-G2", "user:\(uid2)", "user:\(uid2)"), ("LAMP-G3", "Group:\(group)", "group:\(group)")
            ] {
                let body =
                    #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"\#(vendor)","endNodePassword":"pw","owner":"\#(owner)"}"#
                let r = try await Self.onboard(e, body, token: token2)
                #expect(r.status == 200, "\(vendor): \(r.status) \(r.text)")
                #expect(e.hub.store.thing(vendorThingID: vendor)?.owners == [expected])
            }
            // An owner that is neither the caller nor one of its groups: 403, nothing made.
            for owner in ["user:\(uid)", "group:g.none", "user:\(uid2.uppercased())"] {
                let body =
                    #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-G4","endNodePassword":"pw","owner":"\#(owner)"}"#
                let r = try await Self.onboard(e, body, token: token2)
                #expect(r.status == 403 && r.errorCode == "FORBIDDEN", "\(owner): \(r.status) \(r.text)")
            }
            #expect(e.hub.store.thing(vendorThingID: "LAMP-G4") == nil)
            #expect(e.hub.store.endNodeCount(gatewayThingID: gw) == 3)
        }
    }

    @Test("The cap: maxEndNodesPerGateway end nodes, then 409 TOO_MANY_END_NODES; again and after a removal 200")
    func cap() async throws {
        try await withHubAPI(options: { $0.limits.maxEndNodesPerGateway = 3 }) { e in
            let (uid, token) = try await e.user()
            let gw = try await Self.gateway(e, "GW-EN-4", owner: "user:\(uid)", token: token)
            let other = try await Self.gateway(e, "GW-EN-5", owner: "user:\(uid)", token: token)
            var made: [String] = []
            for i in 0..<3 {
                made.append(try await Self.endNode(e, gateway: gw, "LAMP-C\(i)", uid: uid, token: token).id)
            }
            let past =
                #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-C3","endNodePassword":"pw","owner":"user:\#(uid)"}"#
            let r = try await Self.onboard(e, past, token: token)
            #expect(r.status == 409 && r.errorCode == "TOO_MANY_END_NODES", "\(r.status) \(r.text)")
            #expect(e.hub.store.thing(vendorThingID: "LAMP-C3") == nil)
            // An end node it has already, onboarded again, is not a new one.
            #expect(try await Self.endNode(e, gateway: gw, "LAMP-C0", uid: uid, token: token).id == made[0])
            // The cap is per gateway.
            _ = try await Self.endNode(e, gateway: other, "LAMP-C4", uid: uid, token: token)
            // A removal makes room.
            let d = try await e.call("DELETE", "\(e.thingIF)/things/\(gw)/end-nodes/\(made[1])", token: token)
            #expect(d.status == 204, "\(d.status) \(d.text)")
            let after = try await Self.onboard(e, past, token: token)
            #expect(after.status == 200, "\(after.status) \(after.text)")
            #expect(e.hub.store.endNodeCount(gatewayThingID: gw) == 3)
        }
    }

    @Test("Removal: 204, then 404 END_NODE_NOT_FOUND, gone from the list, its token refused; the gateway stays")
    func removal() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let gw = try await Self.gateway(e, "GW-EN-6", owner: "user:\(uid)", token: token)
            let (lamp, lampToken) = try await Self.endNode(e, gateway: gw, "LAMP-R1", uid: uid, token: token)
            let (kept, _) = try await Self.endNode(e, gateway: gw, "LAMP-R2", uid: uid, token: token)
            let before = try await e.call("PUT", "\(e.target(lamp))/states", token: lampToken, json: ["power": true])
            #expect(before.status == 201, "the first upload: \(before.status) \(before.text)")

            let path = "\(e.thingIF)/things/\(gw)/end-nodes/\(lamp)"
            let d = try await e.call("DELETE", path, token: token)
            #expect(d.status == 204 && d.data.isEmpty, "\(d.status) \(d.text)")
            for method in ["GET", "DELETE"] {
                let r = try await e.call(method, path, token: token)
                #expect(r.status == 404 && r.errorCode == "END_NODE_NOT_FOUND", "\(method): \(r.status) \(r.text)")
            }
            let list = try await e.get("\(e.thingIF)/things/\(gw)/end-nodes", token: token)
            let ids = (list.json["results"] as? [[String: Any]])?.compactMap { $0["thingID"] as? String }
            #expect(ids == [kept], "\(list.text)")
            #expect(e.hub.store.thing(id: lamp) == nil && e.hub.store.thing(vendorThingID: "LAMP-R1") == nil)
            let after = try await e.call("PUT", "\(e.target(lamp))/states", token: lampToken, json: ["power": true])
            #expect(after.status == 403 && after.errorCode == "WRONG_TOKEN", "\(after.status) \(after.text)")
            let commands = try await e.get("\(e.target(lamp))/commands", token: token)
            #expect(commands.status == 404 && commands.errorCode == "TARGET_NOT_FOUND", "\(commands.text)")
            #expect(e.hub.store.thing(id: gw)?.layoutPosition == .gateway && e.hub.store.thing(id: kept) != nil)
            // Its vendorThingID is free: onboarded again, it is a new end node.
            let again = try await Self.endNode(e, gateway: gw, "LAMP-R1", uid: uid, token: token, password: "new-pw")
            #expect(again.id != lamp)
        }
    }

    @Test("The setting maxEndNodesPerGateway: 100 by default, 1 to 100000 from a flag, the environment or the file")
    func setting() throws {
        #expect(try HubConfig.forTest([]).limits.maxEndNodesPerGateway == 100)
        #expect(HubLimits().maxEndNodesPerGateway == 100)
        #expect(try HubConfig.forTest(["--max-end-nodes-per-gateway", "7"]).limits.maxEndNodesPerGateway == 7)
        let env = try HubConfig.forTest([], env: ["THINGIF_HUB_MAX_END_NODES_PER_GATEWAY": "100000"])
        #expect(env.limits.maxEndNodesPerGateway == 100_000)
        #expect(try HubConfig.forTest([], file: #"{"maxEndNodesPerGateway": 1}"#).maxEndNodesPerGateway == 1)
        for bad in ["0", "100001", "-1", "x"] {
            #expect(throws: HubConfig.ConfigError.self, "\(bad)") {
                try HubConfig.forTest(["--max-end-nodes-per-gateway=\(bad)"])
            }
        }
    }

    @Test("Bad input for each field: 400 INVALID_INPUT_DATA naming it, nothing stored; no token 401, a thing's 403")
    func badInput() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let gw = try await Self.gateway(e, "GW-EN-7", owner: "user:\(uid)", token: token)
            let (_, lampToken) = try await Self.endNode(e, gateway: gw, "LAMP-X0", uid: uid, token: token)
            let good: [String: Any] = [
                "gatewayThingID": gw, "endNodeVendorThingID": "LAMP-X1", "endNodePassword": "pw",
                "owner": "user:\(uid)"
            ]
            let long = String(repeating: "x", count: 201)
            let wideLong = String(repeating: "é", count: 101)  // 101 characters, 202 bytes
            let cases: [(field: String, change: (inout [String: Any]) -> Void)] = [
                ("gatewayThingID", { $0["gatewayThingID"] = nil }),
                ("gatewayThingID", { $0["gatewayThingID"] = 7 }),
                ("gatewayThingID", { $0["gatewayThingID"] = "" }),
                ("gatewayThingID", { $0["gatewayThingID"] = long }),
                ("endNodeVendorThingID", { $0["endNodeVendorThingID"] = nil }),
                ("endNodeVendorThingID", { $0["endNodeVendorThingID"] = 7 }),
                ("endNodeVendorThingID", { $0["endNodeVendorThingID"] = "" }),
                ("endNodeVendorThingID", { $0["endNodeVendorThingID"] = long }),
                ("endNodePassword", { $0["endNodePassword"] = nil }),
                ("endNodePassword", { $0["endNodePassword"] = true }),
                ("endNodePassword", { $0["endNodePassword"] = "" }),
                ("endNodePassword", { $0["endNodePassword"] = long }),
                ("owner", { $0["owner"] = nil }),
                ("owner", { $0["owner"] = 5 }),
                ("owner", { $0["owner"] = uid }),
                ("owner", { $0["owner"] = "thing:\(gw)" }),
                ("owner", { $0["owner"] = "user:" }),
                ("endNodeThingType", { $0["endNodeThingType"] = 5 }),
                ("endNodeThingType", { $0["endNodeThingType"] = long }),
                ("endNodeFirmwareVersion", { $0["endNodeFirmwareVersion"] = ["1.0"] }),
                ("endNodeFirmwareVersion", { $0["endNodeFirmwareVersion"] = wideLong }),
                ("endNodeThingProperties", { $0["endNodeThingProperties"] = [1] }),
                ("endNodeThingProperties", { $0["endNodeThingProperties"] = 5 }),
                ("endNodeThingProperties", { $0["endNodeThingProperties"] = "not json" }),
                ("endNodeThingProperties", { $0["endNodeThingProperties"] = "[1]" })
            ]
            for (i, c) in cases.enumerated() {
                var body = good
                c.change(&body)
                let r = try await e.call(
                    "POST", "\(e.thingIF)/onboardings", token: token, json: body, contentType: Self.byThingID)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "case \(i): \(r.status) \(r.text)")
                #expect(r.string("message")?.contains(c.field) == true, "case \(i) names \(c.field): \(r.text)")
            }
            // The vendorThingID form reads gatewayVendorThingID, not gatewayThingID.
            let wrongForm = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token, json: good, contentType: Self.byVendorThingID)
            #expect(wrongForm.status == 400 && wrongForm.string("message")?.contains("gatewayVendorThingID") == true)
            for raw in [#"{"gatewayThingID":"#, "[1]", "\"text\"", ""] {
                let r = try await Self.onboard(e, raw, token: token)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(raw): \(r.status) \(r.text)")
            }
            let goodText = String(decoding: try JSONSerialization.data(withJSONObject: good), as: UTF8.self)
            let anonymous = try await Self.onboard(e, goodText, token: nil)
            #expect(anonymous.status == 401, "\(anonymous.status) \(anonymous.text)")
            // A thing's token is the gateway's own onboarding (GatewayRequestsTests):
            // an end node's names a gateway that is not itself.
            let thingToken = try await Self.onboard(e, goodText, token: lampToken)
            #expect(thingToken.status == 403 && thingToken.errorCode == "FORBIDDEN", "\(thingToken.text)")
            #expect(e.hub.store.thing(vendorThingID: "LAMP-X1") == nil)
            #expect(e.hub.store.endNodeCount(gatewayThingID: gw) == 1)

            // null is absent; the good body then onboards.
            var nulls = good
            for k in ["endNodeThingType", "endNodeFirmwareVersion", "endNodeThingProperties"] { nulls[k] = NSNull() }
            let ok = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token, json: nulls, contentType: Self.byThingID)
            #expect(ok.status == 200, "\(ok.status) \(ok.text)")
        }
    }
}
