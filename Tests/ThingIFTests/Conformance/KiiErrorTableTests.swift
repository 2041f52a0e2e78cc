// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// docs/PROTOCOL.md §12.3 lists every Kii error answer of the app API, one
/// row a case: this test reads that table, makes each row's request against
/// a real hub and checks the status, errorCode and message the row gives.
/// A row without a request here, or a request without a row, fails it: the
/// table and the hub cannot drift apart.
@Suite("Kii error table", .offPool)
struct KiiErrorTableTests {
    struct Row {
        let key: String
        let status: Int
        let code: String
        let message: String
    }

    /// The rows of §12.3: `| `key` | request | status | `CODE` | `message` | source |`.
    static func rows() throws -> [Row] {
        let text = try String(contentsOfFile: BrokerSecrets.repoRoot + "/docs/PROTOCOL.md", encoding: .utf8)
        let start = try #require(text.range(of: "### 12.3 "), "PROTOCOL.md has no §12.3")
        let section = text[start.upperBound...].prefix { _ in true }
        let body = section.range(of: "\n#").map { section[..<$0.lowerBound] } ?? section
        var rows: [Row] = []
        for line in body.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            try #require(cells.count >= 7, "a row of §12.3 has too few cells: \(line)")
            func unquoted(_ s: String) -> String { s.trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
            rows.append(
                Row(
                    key: unquoted(cells[1]), status: try #require(Int(cells[3]), "status of \(line)"),
                    code: unquoted(cells[4]), message: unquoted(cells[5])))
        }
        return rows
    }

    struct Call {
        var method = "GET"
        var path: String
        var token: String?
        var body: String?
        var contentType = "application/json"
    }

    @Test("Every row of PROTOCOL §12.3 is answered with its status, errorCode and message; nothing is stored")
    func table() async throws {
        let rows = try Self.rows()
        // One end node per gateway, so that a second one is past the cap.
        var security = HubServer.Security()
        security.adminToken = "operator-secret"
        try await withHubAPI(security: security, options: { $0.limits.maxEndNodesPerGateway = 1 }) { e in
            let (uid, token) = try await e.user()
            // The trait registry: MyAirConditioner v1 binds AirConditionerAlias to AirConditioner 1.
            let registry = "\(e.thingIF)/configuration/thing-types/MyAirConditioner/firmware-versions/v1/aliases"
            let definition = #"{"actions":[{"turnPower":{"payloadSchema":{"type":"boolean"}}}]}"#
            for (method, path, body) in [
                ("PUT", "\(e.api)/configuration/thing-types/MyAirConditioner", nil),
                ("PUT", "\(e.api)/configuration/thing-types/MyAirConditioner/firmware-versions/v1", nil),
                ("POST", "\(e.thingIF)/traits/AirConditioner/versions", definition),
                (
                    "POST", "\(e.thingIF)/traits/AirConditioner/versions",
                    definition.replacingOccurrences(of: "boolean", with: "integer")
                ),
                ("PUT", "\(registry)/AirConditionerAlias", #"{"trait":"AirConditioner","traitVersion":1}"#)
            ] as [(String, String, String?)] {
                let r = try await e.call(
                    method, path, token: "operator-secret", body: body.map { Data($0.utf8) })
                try #require(r.status == 201, "\(path): \(r.status) \(r.text)")
            }
            let typed = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token,
                body: Data(
                    #"{"vendorThingID":"AC-ERR-TRAIT","thingPassword":"pw","owner":"user:\#(uid)","thingType":"MyAirConditioner","firmwareVersion":"v1"}"#
                        .utf8),
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            let typedID = try #require(typed.string("thingID"), "\(typed.text)")
            let (tid, _) = try await e.onboard("AC-ERR-TABLE", owner: "user:\(uid)", token: token)
            let bare = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token,
                body: Data(#"{"vendorThingID":"AC-ERR-BARE","thingPassword":"pw","owner":"user:\#(uid)"}"#.utf8),
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            let bareID = try #require(bare.string("thingID"), "\(bare.text)")
            let (_, stranger) = try await e.user()
            let (reported, _) = try await e.onboard("AC-ERR-STATE", owner: "user:\(uid)", token: token)
            #expect(
                e.hub.store.applyState(
                    thingID: reported, method: "PUT", upload: #"{"AirConditionerAlias":{"power":true}}"#, at: 1) != nil)
            // Two gateways of the user's, the first carrying the end node LAMP-ERR.
            var gateways: [String] = []
            var gatewayTokens: [String] = []
            for vendor in ["GW-ERR-1", "GW-ERR-2"] {
                let g = try await e.call(
                    "POST", "\(e.thingIF)/onboardings", token: token,
                    body: Data(
                        #"{"vendorThingID":"\#(vendor)","thingPassword":"pw","owner":"user:\#(uid)","layoutPosition":"GATEWAY"}"#
                            .utf8),
                    contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
                gateways.append(try #require(g.string("thingID"), "\(g.text)"))
                gatewayTokens.append(try #require(g.string("accessToken"), "\(g.text)"))
            }
            let gw = gateways[0]
            let endNodeForm = "application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json"
            func endNode(_ gateway: String, _ vendor: String, password: String = "lamp-pw", type: String = "Lamp")
                -> String
            {
                #"{"gatewayThingID":"\#(gateway)","endNodeVendorThingID":"\#(vendor)","endNodePassword":"\#(password)","owner":"user:\#(uid)","endNodeThingType":"\#(type)"}"#
            }
            let lamp = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token, body: Data(endNode(gw, "LAMP-ERR").utf8),
                contentType: endNodeForm)
            let lampID = try #require(lamp.string("endNodeThingID"), "\(lamp.text)")
            let lampToken = try #require(lamp.string("accessToken"), "\(lamp.text)")
            let target = e.target(tid)
            let command =
                #"{"schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true}}],"issuer":"user:\#(uid)"}"#
            // The placeholders of the rows' messages.
            let values = [
                "{commandID}": "cmd-none", "{triggerID}": "trg-none", "{thingID}": "th.none", "{userID}": "usr-none",
                "{vendorThingID}": "AC-ERR-BARE", "{installationID}": "inst-none", "{ownedThingID}": tid,
                "{gatewayThingID}": gw, "{gatewayVendorThingID}": "GW-ERR-NONE",
                "{endNodeVendorThingID}": "LAMP-ERR", "{endNodeThingID}": lampID
            ]
            func onboardEndNode(_ body: String, form: String? = nil) -> Call {
                Call(
                    method: "POST", path: "\(e.thingIF)/onboardings", token: token, body: body,
                    contentType: form ?? endNodeForm)
            }
            let endNodes = "\(e.thingIF)/things/\(gw)/end-nodes"
            let calls: [String: Call] = [
                "command-unknown": Call(path: "\(target)/commands/cmd-none", token: token),
                "command-cancel-unknown": Call(
                    method: "POST", path: "\(target)/commands/cmd-none/cancel", token: token, body: "{}"),
                "trigger-unknown": Call(path: "\(target)/triggers/trg-none", token: token),
                "trigger-delete-unknown": Call(method: "DELETE", path: "\(target)/triggers/trg-none", token: token),
                "trigger-patch-unknown": Call(
                    method: "PATCH", path: "\(target)/triggers/trg-none", token: token, body: #"{"title":"t"}"#),
                "trigger-bad-schedule": Call(
                    method: "POST", path: "\(target)/triggers", token: token,
                    body: #"{"predicate":{"eventSource":"SCHEDULE","schedule":"wrong format"},"command":\#(command)}"#),
                "trigger-server-code": Call(
                    method: "POST", path: "\(target)/triggers", token: token,
                    body:
                        #"{"predicate":{"eventSource":"SCHEDULE","schedule":"0 8 * * *"},"serverCode":{"endpoint":"fn"}}"#
                ),
                "target-unknown": Call(path: "\(e.target("th.none"))/commands", token: token),
                "target-not-owned": Call(path: "\(target)/commands", token: stranger),
                "state-alias-none": Call(path: "\(target)/states/aliases/AirConditionerAlias", token: token),
                "alias-unknown-query": Call(
                    method: "POST", path: "\(e.target(reported))/states/aliases/NoSuchAlias/query", token: token,
                    body: #"{"query":{"clause":{"type":"all"}}}"#,
                    contentType: "application/vnd.kii.TraitStateQueryRequest+json"),
                "wrong-token": Call(path: "\(target)/commands", token: "no-such-token"),
                "user-unknown": Call(method: "DELETE", path: "\(e.api)/users/usr-none", token: token),
                "thing-unknown-field": Call(path: "\(e.thingIF)/things/th.none/thing-type", token: token),
                "thing-unknown-vendor-thing-id": Call(path: "\(e.api)/things/th.none/vendor-thing-id", token: token),
                "thing-type-none": Call(path: "\(e.thingIF)/things/\(bareID)/thing-type", token: token),
                "firmware-version-none": Call(path: "\(e.thingIF)/things/\(bareID)/firmware-version", token: token),
                "vendor-thing-id-taken": Call(
                    method: "PUT", path: "\(e.api)/things/\(tid)/vendor-thing-id", token: token,
                    body: #"{"_vendorThingID":"AC-ERR-BARE","_password":"pw2"}"#,
                    contentType: "application/vnd.kii.VendorThingIDUpdateRequest+json"),
                "onboarding-thing-unknown": Call(
                    method: "POST", path: "\(e.thingIF)/onboardings", token: token,
                    body: #"{"thingID":"th.none","thingPassword":"pw","owner":"user:\#(uid)"}"#,
                    contentType: "application/vnd.kii.OnboardingWithThingIDByOwner+json"),
                "onboarding-layout-mismatch": Call(
                    method: "POST", path: "\(e.thingIF)/onboardings", token: token,
                    body:
                        #"{"vendorThingID":"AC-ERR-BARE","thingPassword":"pw","owner":"user:\#(uid)","layoutPosition":"GATEWAY"}"#,
                    contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json"),
                "onboarding-layout-end-node": Call(
                    method: "POST", path: "\(e.thingIF)/onboardings", token: token,
                    body:
                        #"{"vendorThingID":"AC-ERR-EN","thingPassword":"pw","owner":"user:\#(uid)","layoutPosition":"ENDNODE"}"#,
                    contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json"),
                "installation-unknown": Call(method: "DELETE", path: "\(e.api)/installations/inst-none", token: token),
                "end-node-gateway-unknown": onboardEndNode(endNode("th.none", "LAMP-ERR-NEW")),
                "end-node-gateway-vendor-unknown": onboardEndNode(
                    #"{"gatewayVendorThingID":"GW-ERR-NONE","endNodeVendorThingID":"LAMP-ERR-NEW","endNodePassword":"pw","owner":"user:\#(uid)"}"#,
                    form: "application/vnd.kii.OnboardingEndNodeWithGatewayVendorThingID+json"),
                "end-node-gateway-not-owned": Call(
                    method: "POST", path: "\(e.thingIF)/onboardings", token: stranger,
                    body: endNode(gw, "LAMP-ERR-NEW").replacingOccurrences(of: "user:\(uid)", with: "user:usr-none"),
                    contentType: endNodeForm),
                "end-node-not-a-gateway": onboardEndNode(endNode(tid, "LAMP-ERR-NEW")),
                "end-node-owner-forbidden": onboardEndNode(
                    endNode(gw, "LAMP-ERR-NEW").replacingOccurrences(of: "user:\(uid)", with: "USER:usr-none")),
                "end-node-wrong-password": onboardEndNode(endNode(gw, "LAMP-ERR", password: "wrong")),
                "end-node-layout-mismatch": onboardEndNode(endNode(gw, "AC-ERR-BARE", password: "pw")),
                "end-node-other-gateway": onboardEndNode(endNode(gateways[1], "LAMP-ERR")),
                "end-node-type-mismatch": onboardEndNode(endNode(gw, "LAMP-ERR", type: "Fan")),
                "end-node-too-many": onboardEndNode(endNode(gw, "LAMP-ERR-NEW")),
                "end-node-list-not-owned": Call(path: endNodes, token: stranger),
                "end-node-unknown": Call(path: "\(endNodes)/th.none", token: token),
                "end-node-remove-unknown": Call(method: "DELETE", path: "\(endNodes)/th.none", token: token),
                "end-node-of-another-gateway": Call(
                    path: "\(e.thingIF)/things/\(gateways[1])/end-nodes/\(lampID)", token: token),
                "end-node-gateway-token-other": Call(
                    method: "POST", path: "\(e.thingIF)/onboardings", token: gatewayTokens[1],
                    body: endNode(gw, "LAMP-ERR-NEW"), contentType: endNodeForm),
                "end-node-gateway-token-owner": Call(
                    method: "POST", path: "\(e.thingIF)/onboardings", token: gatewayTokens[0],
                    body: endNode(gw, "LAMP-ERR-NEW").replacingOccurrences(of: "user:\(uid)", with: "user:usr-none"),
                    contentType: endNodeForm),
                "end-node-list-other-gateway": Call(path: endNodes, token: gatewayTokens[1]),
                "end-node-connection-by-owner": Call(
                    method: "PUT", path: "\(endNodes)/\(lampID)/connection", token: token, body: #"{"online":true}"#),
                "end-node-connection-unknown": Call(
                    method: "PUT", path: "\(endNodes)/th.none/connection", token: gatewayTokens[0],
                    body: #"{"online":true}"#),
                "end-node-installation": Call(
                    method: "POST", path: "\(e.api)/installations", token: lampToken, body: #"{"deviceType":"MQTT"}"#),
                "end-node-automation": Call(path: "\(e.target(lampID))/automation", token: token),
                "alias-undefined-registry": Call(
                    method: "POST", path: "\(e.target(typedID))/states/aliases/HumidityAlias/query", token: token,
                    body: #"{"query":{"clause":{"type":"all"}}}"#,
                    contentType: "application/vnd.kii.TraitStateQueryRequest+json"),
                "trait-unknown": Call(path: "\(e.thingIF)/traits/NoSuchTrait/versions", token: token),
                "trait-version-unknown": Call(path: "\(e.thingIF)/traits/AirConditioner/versions/9", token: token),
                "trait-version-published": Call(
                    method: "PUT", path: "\(e.thingIF)/traits/AirConditioner/versions/1", token: "operator-secret",
                    body: #"{"actions":[{"turnPower":{"payloadSchema":{"type":"integer"}}}]}"#),
                "thing-type-unknown": Call(
                    path: "\(e.api)/configuration/thing-types/NoSuchType/firmware-versions", token: token),
                "firmware-version-unknown": Call(
                    path: "\(e.thingIF)/configuration/thing-types/MyAirConditioner/firmware-versions/v9/aliases",
                    token: token),
                "trait-alias-bound": Call(
                    method: "PUT", path: "\(registry)/AirConditionerAlias", token: "operator-secret",
                    body: #"{"trait":"AirConditioner","traitVersion":2}"#)
            ]
            #expect(
                Set(rows.map(\.key)) == Set(calls.keys),
                "§12.3's rows and this test's requests differ: \(Set(rows.map(\.key)).symmetricDifference(calls.keys))")
            #expect(rows.count == Set(rows.map(\.key)).count, "a case is listed twice in §12.3")

            let before = (
                e.hub.store.triggers(thingID: tid).count,
                e.hub.store.commands(thingID: tid, afterSeq: 0, limit: 100).count
            )
            for row in rows {
                let call = try #require(calls[row.key], "no request for §12.3's \(row.key)")
                let r = try await e.call(
                    call.method, call.path, token: call.token, body: call.body.map { Data($0.utf8) },
                    contentType: call.contentType)
                let message = values.reduce(row.message) { $0.replacingOccurrences(of: $1.key, with: $1.value) }
                #expect(r.status == row.status, "\(row.key): \(r.status) \(r.text)")
                #expect(r.errorCode == row.code, "\(row.key): \(r.text)")
                #expect(r.string("message") == message, "\(row.key): \(r.text)")
            }
            #expect(e.hub.store.thing(id: tid)?.vendorThingID == "AC-ERR-TABLE")
            #expect(e.hub.store.thing(id: bareID)?.thingType == nil && e.hub.store.thing(id: tid)?.state == nil)
            #expect(e.hub.store.thing(id: bareID)?.layoutPosition == .standalone)
            #expect(e.hub.store.thing(vendorThingID: "AC-ERR-EN") == nil)
            // The end-node refusals made and moved nothing.
            #expect(e.hub.store.thing(vendorThingID: "LAMP-ERR-NEW") == nil)
            let kept = try #require(e.hub.store.thing(id: lampID))
            #expect(kept.gatewayThingID == gw && kept.thingType == "Lamp" && kept.owners == ["user:\(uid)"])
            #expect(e.hub.store.endNodeCount(gatewayThingID: gw) == 1)
            #expect(e.hub.store.endNodeCount(gatewayThingID: gateways[1]) == 0)
            #expect(kept.installations.isEmpty, "an end node got an MQTT installation")
            #expect(
                (
                    e.hub.store.triggers(thingID: tid).count,
                    e.hub.store.commands(thingID: tid, afterSeq: 0, limit: 100).count
                )
                    == before)
        }
    }
}
