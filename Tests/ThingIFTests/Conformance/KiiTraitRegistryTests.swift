// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
import ThingIFHubServer
import ThingIFRules

/// Kii's trait registry against the hub on every store: the registry made
/// with the calls Kii's own bootstrap makes (thing type, firmware versions,
/// a trait version, an alias, with the admin token), then Kii's app SDK's
/// requests (thing-if-iOSSDK ThingIFSDKLargeTests, run against Kii's
/// servers, so their assertions are Kii's answers) for a thing whose type
/// and firmware version have an entry. Issue 60.
@Suite("Kii trait registry", .offPool)
struct KiiTraitRegistryTests {
    static let admin = "operator-secret"
    static let stores = StateAggregationTests.stores
    static let queryType = StateAggregationTests.queryType
    static let alias = StateAggregationTests.alias
    static let thingType = "MyAirConditioner"

    static let airConditioner = #"""
        {"dataGroupingInterval":"1_MINUTE","actions":[
          {"turnPower":{"description":"on or off","payloadSchema":{"type":"boolean"}}},
          {"setPresetTemperature":{"payloadSchema":{"type":"integer","minimum":15,"maximum":30}}}],
         "states":[{"power":{"payloadSchema":{"type":"boolean"}}},{"currentTemperature":{"payloadSchema":{"type":"integer"}}}]}
        """#
    static let humidity =
        #"{"states":[{"currentHumidity":{"payloadSchema":{"type":"number","minimum":0,"maximum":100}}}]}"#

    struct Registry {
        let e: HubAPIEnv
        let uid: String
        let token: String

        var types: String { "\(e.api)/configuration/thing-types" }
        func aliases(_ fw: String) -> String {
            "\(e.thingIF)/configuration/thing-types/\(KiiTraitRegistryTests.thingType)/firmware-versions/\(fw)/aliases"
        }

        func admin(_ method: String, _ path: String, _ body: String?, type: String? = "application/json") async throws
            -> HTTPReply
        {
            try await e.call(
                method, path, token: KiiTraitRegistryTests.admin, body: body.map { Data($0.utf8) }, contentType: type)
        }

        /// A thing onboarded by its owner as OnboardedTestsBase does, with the firmware version `fw`.
        func onboard(_ fw: String = "v1", type: String = KiiTraitRegistryTests.thingType) async throws -> (
            thingID: String, thingToken: String
        ) {
            let onboard =
                #"{"vendorThingID":"vid-\#(randomHexString(4))","thingPassword":"password","owner":"user:\#(uid)","thingType":"\#(type)","firmwareVersion":"\#(fw)","layoutPosition":"STANDALONE"}"#
            let r = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token, body: Data(onboard.utf8),
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            try #require(r.status == 200, "\(r.status) \(r.text)")
            return (try #require(r.string("thingID")), try #require(r.string("accessToken")))
        }

        func query(
            _ tid: String, _ body: String = #"{"query":{"clause":{"type":"all"}}}"#,
            alias: String = KiiTraitRegistryTests.alias
        ) async throws -> HTTPReply {
            try await e.call(
                "POST", "\(e.target(tid))/states/aliases/\(alias)/query", token: token, body: Data(body.utf8),
                contentType: KiiTraitRegistryTests.queryType)
        }

        func setFirmware(_ tid: String, _ fw: String) async throws {
            let r = try await e.call(
                "PUT", "\(e.thingIF)/things/\(tid)/firmware-version", token: token,
                body: Data(#"{"firmwareVersion":"\#(fw)"}"#.utf8),
                contentType: "application/vnd.kii.ThingFirmwareVersionUpdateRequest+json")
            try #require(r.status == 204, "\(r.status) \(r.text)")
        }
    }

    /// A hub with an adminToken, a user, and the registry Kii's large tests'
    /// app has: MyAirConditioner v1 with AirConditionerAlias, v3 without it
    /// (HumidityAlias only), made as Kii's bootstrap script makes it.
    func withRegistry(_ factory: StoreFactory, _ body: (Registry) async throws -> Void) async throws {
        var security = HubServer.Security()
        security.adminToken = Self.admin
        let (store, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try await withHubAPI(security: security, store: store) { e in
            let (uid, token) = try await e.user()
            let r = Registry(e: e, uid: uid, token: token)
            let steps: [(String, String, String?, String?, Int)] = [
                (
                    "PUT", "\(r.types)/\(Self.thingType)",
                    #"{"verificationCodeFlowStartedByUser":true,"simpleFlow":true}"#,
                    "application/vnd.kii.ThingTypeConfigurationRequest+json", 201
                ),
                ("PUT", "\(r.types)/\(Self.thingType)/firmware-versions/v1", nil, "text/plain", 201),
                ("PUT", "\(r.types)/\(Self.thingType)/firmware-versions/v3", nil, "text/plain", 201),
                (
                    "POST", "\(e.thingIF)/traits/AirConditioner/versions", Self.airConditioner,
                    "application/vnd.kii.TraitCreationRequest+json", 201
                ),
                (
                    "POST", "\(e.thingIF)/traits/Humidity/versions", Self.humidity,
                    "application/vnd.kii.TraitCreationRequest+json", 201
                ),
                (
                    "PUT", "\(r.aliases("v1"))/\(Self.alias)", #"{"traitVersion":"1","trait":"AirConditioner"}"#,
                    "application/vnd.kii.TraitAliasCreationRequest+json", 201
                ),
                (
                    "PUT", "\(r.aliases("v3"))/HumidityAlias", #"{"trait":"Humidity","traitVersion":1}"#,
                    "application/vnd.kii.TraitAliasCreationRequest+json", 201
                )
            ]
            for (method, path, b, type, status) in steps {
                let reply = try await r.admin(method, path, b, type: type)
                try #require(reply.status == status, "\(method) \(path): \(reply.status) \(reply.text)")
            }
            try await body(r)
        }
    }

    @Test(
        "testFailedQueryWithNotDefinedAlias404Error and testSuccessQueryEmptyResults against an entry: v3 lacks the alias before any upload; v1 and an older firmwareVersion read it",
        arguments: stores)
    func aliasQueries(_ factory: StoreFactory) async throws {
        try await withRegistry(factory) { r in
            let (tid, _) = try await r.onboard()
            // testSuccessQueryEmptyResults: the alias is v1's, nothing uploaded: no results.
            let empty = try await r.query(tid)
            #expect(empty.status == 200 && (empty.json["results"] as? [Any])?.isEmpty == true, "\(empty.text)")
            let read = try await r.e.get("\(r.e.target(tid))/states/aliases/\(Self.alias)", token: r.token)
            #expect(read.status == 404 && read.errorCode == "STATE_NOT_FOUND", "\(read.text)")
            // testFailedQueryWithNotDefinedAlias404Error: update(firmwareVersion: "v3"), then
            // HistoryStatesQuery(ALIAS1, clause: AllClause()): 404, with nothing ever uploaded.
            try await r.setFirmware(tid, "v3")
            let q = try await r.query(tid)
            #expect(q.status == 404 && q.errorCode == "TRAIT_ALIAS_NOT_FOUND", "\(q.status) \(q.text)")
            #expect(q.string("message") == "The trait alias was not found")
            let grouped = try await r.query(
                tid, #"{"query":{"clause":{"type":"withinTimeRange","lowerLimit":0,"upperLimit":1000},"grouped":true}}"#
            )
            #expect(grouped.status == 404 && grouped.errorCode == "TRAIT_ALIAS_NOT_FOUND", "\(grouped.text)")
            let alias = try await r.e.get("\(r.e.target(tid))/states/aliases/\(Self.alias)", token: r.token)
            #expect(alias.status == 404 && alias.errorCode == "TRAIT_ALIAS_NOT_FOUND", "\(alias.text)")
            // query5's shape: firmwareVersion v1 reads v1's entry, where the alias is defined.
            let old = try await r.query(tid, #"{"query":{"clause":{"type":"all"}},"firmwareVersion":"v1"}"#)
            #expect(old.status == 200, "\(old.text)")
            // v3's own alias is defined there.
            let humidity = try await r.query(tid, alias: "HumidityAlias")
            #expect(humidity.status == 200, "\(humidity.text)")
            // A firmware version without an entry: today's rule (aliases from the state), so no 404.
            try await r.setFirmware(tid, "v2")
            let none = try await r.query(tid)
            #expect(none.status == 200, "without an entry nothing changes: \(none.text)")
        }
    }

    @Test(
        "A trait command the entry does not define (alias, action, parameters) is 400 WRONG_COMMAND naming the field, and nothing is stored",
        arguments: stores)
    func commands(_ factory: StoreFactory) async throws {
        try await withRegistry(factory) { r in
            let (tid, _) = try await r.onboard()
            let commands = "\(r.e.target(tid))/commands"
            func post(_ actions: String) async throws -> HTTPReply {
                // Kii's CommandCreationRequest, as the SDKs send a trait command.
                try await r.e.call(
                    "POST", commands, token: r.token,
                    body: Data(#"{"actions":\#(actions),"issuer":"user:\#(r.uid)"}"#.utf8),
                    contentType: "application/vnd.kii.CommandCreationRequest+json")
            }
            let ok = try await post(#"[{"AirConditionerAlias":[{"turnPower":true},{"setPresetTemperature":25}]}]"#)
            #expect(ok.status == 201, "\(ok.status) \(ok.text)")
            let refused: [(String, String)] = [
                (#"[{"HumidityAlias":[{"turnPower":true}]}]"#, "HumidityAlias"),
                (#"[{"AirConditionerAlias":[{"fly":true}]}]"#, "fly"),
                (#"[{"AirConditionerAlias":[{"turnPower":"on"}]}]"#, "turnPower"),
                (#"[{"AirConditionerAlias":[{"turnPower":true},{"setPresetTemperature":31}]}]"#, "setPresetTemperature")
            ]
            for (actions, field) in refused {
                let reply = try await post(actions)
                #expect(
                    reply.status == 400 && reply.errorCode == "WRONG_COMMAND",
                    "\(actions): \(reply.status) \(reply.text)")
                #expect(reply.isErrorBody, "\(reply.text)")
                let fields = reply.json["invalidFields"] as? [String: String]
                #expect(fields?.keys.sorted() == [field], "\(actions): \(reply.text)")
            }
            // A trigger's command is checked as a posted one is (WRONG_TRIGGER, Kii's code for a trigger).
            let trigger = try await r.e.call(
                "POST", "\(r.e.target(tid))/triggers", token: r.token,
                body: Data(
                    #"{"predicate":{"eventSource":"SCHEDULE","schedule":"0 8 * * *"},"command":{"actions":[{"AirConditionerAlias":[{"turnPower":"on"}]}],"issuer":"user:\#(r.uid)"}}"#
                        .utf8))
            #expect(trigger.status == 400 && trigger.errorCode == "WRONG_TRIGGER", "\(trigger.text)")
            #expect(trigger.isErrorBody && trigger.text.contains("turnPower"), "\(trigger.text)")
            let list = try await r.e.get(commands, token: r.token)
            #expect((list.json["commands"] as? [Any])?.count == 1, "only the valid command is stored: \(list.text)")
            // A thing of a type without an entry: the same command goes as before.
            let (other, _) = try await r.onboard(type: "OtherType")
            let free = try await r.e.call(
                "POST", "\(r.e.target(other))/commands", token: r.token,
                body: Data(#"{"actions":[{"AnyAlias":[{"fly":"high"}]}],"issuer":"user:\#(r.uid)"}"#.utf8),
                contentType: "application/vnd.kii.CommandCreationRequest+json")
            #expect(free.status == 201, "without an entry nothing changes: \(free.text)")
        }
    }

    @Test(
        "A state upload whose field has the wrong type, or whose alias or state the entry lacks, is 400 naming the field, and nothing is stored",
        arguments: stores)
    func states(_ factory: StoreFactory) async throws {
        try await withRegistry(factory) { r in
            let (tid, thingToken) = try await r.onboard()
            let states = "\(r.e.target(tid))/states"
            for token in [r.token, thingToken] {
                for (body, field) in [
                    (#"{"AirConditionerAlias":{"power":"on"}}"#, "power"),
                    (#"{"AirConditionerAlias":{"currentTemperature":22.5}}"#, "currentTemperature"),
                    (#"{"AirConditionerAlias":{"humidity":3}}"#, "humidity"),
                    (#"{"HumidityAlias":{"currentHumidity":40}}"#, "HumidityAlias")
                ] {
                    let reply = try await r.e.call(
                        "PUT", states, token: token, body: Data(body.utf8),
                        contentType: "application/vnd.kii.MultipleTraitState+json")
                    #expect(reply.status == 400 && reply.errorCode == "INVALID_INPUT_DATA", "\(body): \(reply.text)")
                    #expect(
                        (reply.json["invalidFields"] as? [String: String])?.keys.sorted() == [field], "\(reply.text)")
                }
            }
            let nothing = try await r.e.get(states, token: r.token)
            #expect(nothing.text == "{}", "a refused upload stored: \(nothing.text)")
            let good = try await r.e.call(
                "PUT", states, token: thingToken,
                body: Data(#"{"AirConditionerAlias":{"power":true,"currentTemperature":23}}"#.utf8),
                contentType: "application/vnd.kii.MultipleTraitState+json")
            #expect(good.status == 201, "\(good.text)")
            let read = try await r.e.get("\(states)/aliases/\(Self.alias)", token: r.token)
            #expect(read.status == 200 && read.json["currentTemperature"] as? Int == 23, "\(read.text)")
        }
    }

    @Test(
        "The registry's writes: the adminToken only; a published version or alias does not change (409), a missing reference is 404, bad bodies are refused, and nothing changes",
        arguments: stores)
    func writes(_ factory: StoreFactory) async throws {
        try await withRegistry(factory) { r in
            let e = r.e
            let v1 = "\(e.thingIF)/traits/AirConditioner/versions/1"
            // Reads: the operator or any user; writes: the operator only.
            let read = try await e.get(v1, token: r.token)
            #expect(read.status == 200 && read.json["traitVersion"] as? Int == 1, "\(read.text)")
            #expect((read.json["actions"] as? [Any])?.count == 2)
            let byUser = try await e.call(
                "PUT", v1, token: r.token, body: Data(Self.airConditioner.utf8), contentType: "application/json")
            #expect(byUser.status == 403 && byUser.errorCode == "WRONG_TOKEN", "\(byUser.text)")
            let anonymous = try await e.get(v1, token: nil)
            #expect(anonymous.status == 401, "\(anonymous.text)")
            // The same definition again (keys in another order): 200, unchanged; another: 409.
            let again = try await r.admin(
                "PUT", v1,
                Self.airConditioner.replacingOccurrences(of: #""dataGroupingInterval":"1_MINUTE","#, with: "")
                    .replacingOccurrences(of: "]}", with: #"],"dataGroupingInterval":"1_MINUTE"}"#))
            #expect(again.status == 200, "\(again.text)")
            let redefined = try await r.admin("PUT", v1, Self.humidity)
            #expect(
                redefined.status == 409 && redefined.errorCode == "TRAIT_VERSION_ALREADY_EXISTS", "\(redefined.text)")
            let still = try await e.get(v1, token: r.token)
            #expect((still.json["actions"] as? [Any])?.count == 2, "a refused redefinition changed it: \(still.text)")
            let next = try await r.admin("POST", "\(e.thingIF)/traits/AirConditioner/versions", Self.humidity)
            #expect(next.status == 201 && next.json["traitVersion"] as? Int == 2, "\(next.text)")
            // Aliases: the same again 204, another 409, a missing trait version 404.
            let alias = "\(r.aliases("v1"))/\(Self.alias)"
            let same = try await r.admin("PUT", alias, #"{"trait":"AirConditioner","traitVersion":1}"#)
            #expect(same.status == 204, "\(same.text)")
            let moved = try await r.admin("PUT", alias, #"{"trait":"AirConditioner","traitVersion":2}"#)
            #expect(moved.status == 409 && moved.errorCode == "TRAIT_ALIAS_ALREADY_EXISTS", "\(moved.text)")
            let missing = try await r.admin(
                "PUT", "\(r.aliases("v1"))/NewAlias", #"{"trait":"AirConditioner","traitVersion":9}"#)
            #expect(missing.status == 404 && missing.errorCode == "TRAIT_VERSION_NOT_FOUND", "\(missing.text)")
            let noFirmware = try await r.admin(
                "PUT", "\(r.aliases("v9"))/NewAlias", #"{"trait":"AirConditioner","traitVersion":1}"#)
            #expect(
                noFirmware.status == 404 && noFirmware.errorCode == "FIRMWARE_VERSION_NOT_FOUND", "\(noFirmware.text)")
            let noType = try await r.admin("PUT", "\(r.types)/NoSuchType/firmware-versions/v1", nil, type: nil)
            #expect(noType.status == 404 && noType.errorCode == "THING_TYPE_NOT_FOUND", "\(noType.text)")
            let list = try await e.get(r.aliases("v1"), token: r.token)
            let names = (list.json["aliases"] as? [[String: Any]])?.compactMap { $0["alias"] as? String }
            #expect(names == [Self.alias], "a refused alias was stored: \(list.text)")
            // Bad bodies: malformed, wrong types, deep, oversized, not UTF-8, not JSON.
            let versions = "\(e.thingIF)/traits/Bad/versions"
            var deep = #"{"type":"boolean"}"#
            for _ in 0..<20 { deep = #"{"type":"array","items":\#(deep)}"# }
            let bad: [(Data, String?, Int, String?)] = [
                (Data("{".utf8), "application/json", 400, nil),
                (Data(#"{"actions":{"a":1}}"#.utf8), "application/json", 400, "actions"),
                (
                    Data(#"{"actions":[{"a":{"payloadSchema":{"type":"integer","minimum":"x"}}}]}"#.utf8),
                    "application/json", 400, "actions[0].a.payloadSchema.minimum"
                ),
                (Data(#"{"states":[{"s":{"payloadSchema":\#(deep)}}]}"#.utf8), "application/json", 400, nil),
                (Data(repeating: 0x20, count: 70 * 1024), "application/json", 413, nil),
                (Data([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), "application/json", 400, nil),
                (Data(Self.humidity.utf8), "text/plain", 415, nil)
            ]
            for (body, type, status, field) in bad {
                let reply = try await e.call("POST", versions, token: Self.admin, body: body, contentType: type)
                #expect(reply.status == status, "\(status): \(reply.status) \(reply.text.prefix(200))")
                #expect(reply.errorCode?.isEmpty == false)
                if let field {
                    #expect((reply.json["invalidFields"] as? [String: String])?[field] != nil, "\(reply.text)")
                }
            }
            let none = try await e.get("\(e.thingIF)/traits/Bad/versions", token: r.token)
            #expect(
                none.status == 404 && none.errorCode == "TRAIT_NOT_FOUND",
                "a refused definition was stored: \(none.text)")
            let badName = try await r.admin("POST", "\(e.thingIF)/traits/a%20b/versions", Self.humidity)
            #expect(
                badName.status == 400 && (badName.json["invalidFields"] as? [String: String])?["trait"] != nil,
                "\(badName.text)")
            let traits = try await e.get("\(e.thingIF)/traits", token: r.token)
            #expect(
                (traits.json["traits"] as? [[String: Any]])?.compactMap { $0["trait"] as? String } == [
                    "AirConditioner", "Humidity"
                ], "\(traits.text)")
            let types = try await e.get(r.types, token: Self.admin)
            #expect(types.text == #"[{"thingType":"MyAirConditioner"}]"#, "\(types.text)")
            let fws = try await e.get("\(r.types)/\(Self.thingType)/firmware-versions", token: r.token)
            #expect(fws.text == #"{"results":[{"firmwareVersion":"v1"},{"firmwareVersion":"v3"}]}"#, "\(fws.text)")
        }
    }

    @Test(
        "The thing's own state upload over MQTT is checked too (the whole-state fast path is not taken once the registry is in use)",
        arguments: OneCommitTests.Backend.available)
    func mqttUpload(_ backend: OneCommitTests.Backend) throws {
        let rig = try OneCommitTests.Rig(commands: 0, on: backend)
        defer { rig.stop() }
        let s = rig.hub.store
        #expect(s.setThingType(thingID: rig.thing.thingID, Self.thingType))
        #expect(s.setFirmwareVersion(thingID: rig.thing.thingID, "v1"))
        #expect(s.putThingType(Self.thingType, now: 1) == .created)
        #expect(s.putFirmwareVersion(thingType: Self.thingType, firmwareVersion: "v1", now: 1) == .created)
        let definition = try #require(try? JSON.parse(Self.airConditioner).get())
        _ = s.putTraitVersion(trait: "AirConditioner", version: 1, definition: definition.dump(), now: 1)
        #expect(
            s.putTraitAlias(
                TraitAliasRecord(
                    thingType: Self.thingType, firmwareVersion: "v1", alias: Self.alias, trait: "AirConditioner",
                    traitVersion: 1, createdAt: 1)) == .created)
        let states = "targets/thing:\(rig.thing.thingID)/states"
        rig.hub.thingRequests.handleLane(
            [rig.message("PUT", states, #"{"AirConditionerAlias":{"power":"on"}}"#, id: "bad")].map(Inbound.init))
        #expect(poll(timeoutMs: 10_000) { rig.replies()["bad"] != nil }, "no reply")
        #expect(rig.replies()["bad"] == 400)
        #expect(rig.committedState() == nil, "a refused upload was stored")
        rig.hub.thingRequests.handleLane(
            [rig.message("PUT", states, #"{"AirConditionerAlias":{"power":true}}"#, id: "good")].map(Inbound.init))
        #expect(poll(timeoutMs: 10_000) { rig.replies()["good"] != nil }, "no reply")
        #expect(rig.replies()["good"] == 201)
        #expect(rig.committedState()?.contains("power") == true)
    }

    @Test(
        "A thing's own entry (…/targets/thing:{id}/traits): its owner reads the aliases with their definitions; no entry: registered false; another user 404, no token refused",
        arguments: stores)
    func thingEntry(_ factory: StoreFactory) async throws {
        try await withRegistry(factory) { r in
            let (tid, _) = try await r.onboard()
            let path = "\(r.e.thingIF)/targets/thing:\(tid)/traits"
            let mine = try await r.e.get(path, token: r.token)
            #expect(mine.status == 200, "\(mine.text)")
            let j = try JSON.parse(mine.text).get()
            #expect(j["registered"]?.boolValue == true && j["firmwareVersion"]?.stringValue == "v1", "\(mine.text)")
            let a = j["aliases"]?.elements.first
            #expect(a?["alias"]?.stringValue == Self.alias && a?["traitVersion"]?.intValue == 1, "\(mine.text)")
            #expect(a?["definition"]?["actions"]?.count == 2, "\(mine.text)")
            // The CLI reads it back with the hub's parser.
            guard case .success(let entry?) = TraitEntry.parse(answer: j) else {
                Issue.record("the answer does not parse as an entry: \(mine.text)")
                return
            }
            #expect(entry.checkAction(alias: Self.alias, name: "setPresetTemperature", params: .int(40)) != nil)
            let (other, _) = try await r.onboard("v9")
            let none = try await r.e.get("\(r.e.thingIF)/targets/thing:\(other)/traits", token: r.token)
            #expect(
                none.status == 200 && none.text.contains(#""registered":false"#) && !none.text.contains("aliases"),
                "\(none.text)")
            let (_, stranger) = try await r.e.user()
            #expect(try await r.e.get(path, token: stranger).status == 404)
            let anonymous = try await r.e.get(path, token: nil)
            #expect([401, 403].contains(anonymous.status), "\(anonymous.status) \(anonymous.text)")
        }
    }

    @Test("Without an adminToken the registry's writes are off; reads answer for users")
    func off() async throws {
        try await withHubAPI { e in
            let (_, token) = try await e.user()
            let r = try await e.call(
                "POST", "\(e.thingIF)/traits/AC/versions", token: token, body: Data(Self.humidity.utf8))
            #expect(r.status == 404, "\(r.text)")
            let list = try await e.get("\(e.thingIF)/traits", token: token)
            #expect(list.status == 200 && list.text == #"{"traits":[]}"#, "\(list.text)")
        }
    }
}
