// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub

/// Kii Thing-IF clients against the hub: the exact requests Kii's SDKs send,
/// and the answers parsed as they parse them. Each vector names its source.
@Suite("Kii compatibility", .offPool)
struct KiiCompatTests {
    static let traitContentType = "application/vnd.kii.CommandCreationRequest+json"

    @Test(
        "A trait command (CommandCreationRequest, no schema) runs on the thing's alias handlers and comes back as sent")
    func traitCommandRoundTrip() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-KII-TRAIT", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_register_alias_handlers(t.ct, "AirConditionerAlias") == RC.ok)
            }
            let commands = "\(e.target(tid))/commands"
            // KiiPlatform/thing-if-JSSDK, the trait usage guide (1.1.4 "Send command") and the
            // REST example of the same request; Content-Type as MEDIA_TYPE_POST_NEW_COMMAND_TRAIT
            // in KiiPlatform/thing-if-AndroidSDK thingif/src/main/java/com/kii/thingif/internal/http.
            let body =
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[{"turnPower":true},{"setPresetTemperature":25}]}]}"#
            let posted = try await e.call(
                "POST", commands, token: token, body: Data(body.utf8), contentType: Self.traitContentType)
            try #require(posted.status == 201, "\(posted.status) \(posted.text)")
            let cid = try #require(posted.string("commandID"))
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "DONE")
            #expect(c["schema"] == nil && c["schemaVersion"] == nil, "a trait command has no schema")
            // "actions" as sent; results grouped by alias, as Kii's AliasActionResult parses them.
            let actions = try #require(c["actions"] as? [[String: [[String: Any]]]])
            #expect(actions.count == 1 && actions[0]["AirConditionerAlias"]?.count == 2)
            #expect(actions[0]["AirConditionerAlias"]?[0]["turnPower"] as? Bool == true)
            #expect(actions[0]["AirConditionerAlias"]?[1]["setPresetTemperature"] as? Int == 25)
            let results = try #require(c["actionResults"] as? [[String: [[String: [String: Any]]]]])
            let group = try #require(results.first?["AirConditionerAlias"])
            #expect(group.count == 2)
            #expect(group[0]["turnPower"]?["succeeded"] as? Bool == true)
            #expect(group[1]["setPresetTemperature"]?["succeeded"] as? Bool == true)

            // A value the thing refuses: INCOMPLETE, the failure in its alias group.
            let bad =
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[{"setPresetTemperature":"hot"}]}],"title":"t"}"#
            let r2 = try await e.call(
                "POST", commands, token: token, body: Data(bad.utf8), contentType: Self.traitContentType)
            try #require(r2.status == 201, "\(r2.status) \(r2.text)")
            let c2 = try await e.waitForFinished(tid, try #require(r2.string("commandID")), token: token)
            #expect(c2["commandState"] as? String == "INCOMPLETE")
            let g2 = try #require(
                (c2["actionResults"] as? [[String: [[String: [String: Any]]]]])?.first?["AirConditionerAlias"])
            #expect(g2.first?["setPresetTemperature"]?["succeeded"] as? Bool == false)

            // Malformed trait forms: 400 and nothing stored.
            for form in [
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[]}]}"#,
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[{"turnPower":true,"x":1}]}]}"#,
                #"{"issuer":"user:\#(uid)","actions":[{"":[{"turnPower":true}]}]}"#,
                #"{"actions":[{"AirConditionerAlias":[{"turnPower":true}]}]}"#
            ] {
                let r = try await e.call(
                    "POST", commands, token: token, body: Data(form.utf8), contentType: Self.traitContentType)
                #expect(r.status == 400 && r.isErrorBody, "\(form): \(r.status) \(r.text)")
            }
            let listed = try #require(try await e.get(commands, token: token).json["commands"] as? [[String: Any]])
            #expect(listed.count == 2)
        }
    }

    @Test("Pseudo-user registration answers _accessToken, the field Kii's clients read, and it works")
    func pseudoUserAccessToken() async throws {
        try await withHubAPI { e in
            // KiiPlatform/thing-if-JSSDK browser-test/js/TestHelper.js (createKiiUser): POST …/users with
            // RegistrationAndAuthorizationRequest {loginName, password}; browser-test/js/
            // ThingIFAPICommandTest.js then uses the answer's "_accessToken" as the owner's token.
            let registration = try await e.call(
                "POST", "\(e.api)/users", body: Data(#"{"loginName":"kii-js-user","password":"test12345"}"#.utf8),
                contentType: "application/vnd.kii.RegistrationAndAuthorizationRequest+json")
            try #require(registration.status == 201, "\(registration.status) \(registration.text)")
            let normal = try #require(registration.string("_accessToken"))
            #expect(e.hub.store.user(accessToken: normal)?.loginName == "kii-js-user")
            // The same call without loginName makes a pseudo user.
            let r = try await e.call("POST", "\(e.api)/users", json: [String: Any]())
            try #require(r.status == 201, "\(r.status) \(r.text)")
            let token = try #require(r.string("_accessToken"))
            #expect(r.string("accessToken") == token)
            let uid = try #require(r.string("userID"))
            let (tid, _) = try await e.onboard("AC-KII-PSEUDO", owner: "user:\(uid)", token: token)
            #expect(try await e.get("\(e.target(tid))/commands", token: token).status == 200)
        }
    }

    @Test("The MQTT endpoint answer carries X-MQTT-TTL and the WebSocket ports; Kii's own answer decodes")
    func mqttEndpointFields() throws {
        let ep = MQTTEndpoint(
            installationID: "i1", host: "127.0.0.1", portTCP: 1883, portSSL: 8883, username: "u", password: "p",
            mqttTopic: "t1", ttl: 2_147_483_647)
        let o = ep.encode()
        // The fields Kii's C thing SDK reads from the answer: KiiPlatform/ebisu kii/kii_push.c
        // (username, password, host, mqttTopic, portTCP, portSSL, X-MQTT-TTL); portWS and portWSS
        // as KiiPlatform/thing-if-JSSDK src/OnboardingResult.ts (MqttEndpoint) declares them.
        for key in [
            "username", "password", "mqttTopic", "host", "X-MQTT-TTL", "portTCP", "portSSL", "portWS", "portWSS"
        ] {
            #expect(o[key] != nil, "\(key) missing")
        }
        #expect(
            o["X-MQTT-TTL"]?.intValue == 2_147_483_647 && o["portSSL"]?.intValue == 8883 && o["portWS"]?.intValue == 0)
        // Kii Cloud's answer, KiiPlatform/ebisu tests/small_test/jkii/src/jkii_test.cpp
        // ("KiiJson, PushRetrieveEndpoint"): no "ttl".
        let kii =
            #"{"installationID":"XXXXXXXXXXXXXXXXXXXXXXXXX","username":"XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX","password":"XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX","mqttTopic":"XXXXXXXXXXXXXXXXXXXXXXX","host":"XXXXXXXXXXXXXXXXXXXX.kii.com","portTCP":1883,"portSSL":8883,"X-MQTT-TTL":2147483647}"#
        guard case .success(let j) = JSON.parse(kii), let d = MQTTEndpoint.decode(j) else {
            Issue.record("Kii's endpoint answer did not decode")
            return
        }
        #expect(
            d.ttl == 2_147_483_647 && d.portTCP == 1883 && d.portSSL == 8883 && d.mqttTopic == "XXXXXXXXXXXXXXXXXXXXXXX"
        )
    }

    @Test(
        "installPush: IOS, ANDROID and JPUSH installations are kept as Kii keeps them; MQTT answers installationRegistrationID"
    )
    func installPush() async throws {
        try await withHubAPI { e in
            let (_, token) = try await e.user()
            let installations = "\(e.api)/installations"
            let kiiType = "application/vnd.kii.InstallationCreationRequest+json"
            // KiiPlatform/thing-if-JSSDK test/small/PushOpsTest.ts ("Test installFCM",
            // "Test installMQTT", "Test uninstall").
            for deviceType in ["ANDROID", "IOS", "JPUSH"] {
                let body =
                    #"{"installationRegistrationID":"69lp6jr0evcirfcfk2mmwiow5","deviceType":"\#(deviceType)","development":true}"#
                let r = try await e.call(
                    "POST", installations, token: token, body: Data(body.utf8), contentType: kiiType)
                #expect(r.status == 201, "\(deviceType): \(r.status) \(r.text)")
                let id = try #require(r.string("installationID"))
                let stored = try #require(e.hub.store.appInstallation(id: id))
                #expect(stored.kind.rawValue == deviceType && stored.target == "69lp6jr0evcirfcfk2mmwiow5")
                #expect(try await e.call("DELETE", "\(installations)/\(id)", token: token).status == 204)
                let again = try await e.call("DELETE", "\(installations)/\(id)", token: token)
                #expect(again.status == 404 && again.errorCode == "INSTALLATION_NOT_FOUND")
            }
            // A push installation needs its token.
            let missing = #"{"deviceType":"IOS","development":false}"#
            let r = try await e.call(
                "POST", installations, token: token, body: Data(missing.utf8), contentType: kiiType)
            #expect(r.status == 400 && r.isErrorBody)
            let mqtt = try await e.call(
                "POST", installations, token: token, body: Data(#"{"deviceType":"MQTT","development":true}"#.utf8),
                contentType: kiiType)
            #expect(mqtt.status == 201, "\(mqtt.status) \(mqtt.text)")
            #expect(mqtt.string("installationRegistrationID") != nil && mqtt.string("installationID") != nil)
        }
    }

    @Test("Onboarding by thingID (OnboardingWithThingIDByOwner): the owner binds a thing that onboarded itself")
    func onboardingByThingID() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            // The thing onboards itself through the real C library.
            let env = e.env
            let thing = try await offPool { () -> Result<TestThing, Error> in
                Result {
                    let t = try env.newThing(storage: "self")
                    let rc = ct_onboard(t.ct, "AC-KII-SELF", "password", "AirConditioner", "1.0.0", nil)
                    guard rc == RC.ok else { throw HarnessError("onboard: \(rc)\n\(t.logs)") }
                    return t
                }
            }.get()
            let tid = try #require(e.hub.store.thing(vendorThingID: "AC-KII-SELF")?.thingID)
            #expect(String(cString: ct_thing_id(thing.ct)) == tid)
            let onboardings = "\(e.thingIF)/onboardings"
            let kiiType = "application/vnd.kii.OnboardingWithThingIDByOwner+json"
            // KiiPlatform/thing-if-JSSDK test/small/OnboardingOpsTest.ts ("#onboardWithThingID()").
            let body = #"{"thingID":"\#(tid)","thingPassword":"password","owner":"user:\#(uid)"}"#
            let r = try await e.call("POST", onboardings, token: token, body: Data(body.utf8), contentType: kiiType)
            try #require(r.status == 200, "\(r.status) \(r.text)")
            #expect(r.string("thingID") == tid && r.string("accessToken") != nil)
            #expect(e.hub.store.thing(id: tid)?.owners == ["user:\(uid)"])
            #expect(try await e.get("\(e.target(tid))/commands", token: token).status == 200)
            // A wrong password, an unknown thingID.
            let wrong = #"{"thingID":"\#(tid)","thingPassword":"nope","owner":"user:\#(uid)"}"#
            let w = try await e.call("POST", onboardings, token: token, body: Data(wrong.utf8), contentType: kiiType)
            #expect(w.status == 403 && w.isErrorBody, "\(w.status) \(w.text)")
            let unknown = #"{"thingID":"th.nope","thingPassword":"password","owner":"user:\#(uid)"}"#
            let u = try await e.call("POST", onboardings, token: token, body: Data(unknown.utf8), contentType: kiiType)
            #expect(u.status == 404 && u.errorCode == "THING_NOT_FOUND")
        }
    }

    @Test("Error bodies carry Kii's codes and statuses: WRONG_COMMAND, WRONG_TOKEN, TARGET_NOT_FOUND, WRONG_TRIGGER")
    func errorCodes() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-KII-ERR", owner: "user:\(uid)", token: token)
            let commands = "\(e.target(tid))/commands"
            // KiiPlatform/thing-if-JSSDK test/small/CommandOpsTest.ts ("handle 400 response"):
            // an empty actions list is 400 WRONG_COMMAND.
            let empty = #"{"schema":"led","schemaVersion":1,"actions":[],"issuer":"user:\#(uid)"}"#
            let r1 = try await e.call("POST", commands, token: token, body: Data(empty.utf8))
            #expect(r1.status == 400 && r1.errorCode == "WRONG_COMMAND", "\(r1.status) \(r1.text)")
            // KiiPlatform/thing-if-JSSDK test/small/PushOpsTest.ts ("handle 403 error response"):
            // a token that is not valid is 403 WRONG_TOKEN.
            let r2 = try await e.get(commands, token: "dummy-token")
            #expect(r2.status == 403 && r2.errorCode == "WRONG_TOKEN", "\(r2.status) \(r2.text)")
            // KiiPlatform/thing-if-JSSDK test/small/QueryOps/GroupedQueryTest.ts ("handle 404
            // respones"): an unknown target is 404 TARGET_NOT_FOUND, "Target thing:… not found".
            let r3 = try await e.get("\(e.target("th.nope"))/commands", token: token)
            #expect(r3.status == 404 && r3.errorCode == "TARGET_NOT_FOUND", "\(r3.status) \(r3.text)")
            #expect(r3.string("message") == "Target thing:th.nope not found")
            // A server-code trigger (Kii's "serverCode" in place of "command"): the hub runs none.
            let serverCode =
                #"{"predicate":{"eventSource":"STATES","triggersWhen":"CONDITION_CHANGED","condition":{"type":"eq","field":"power","value":true}},"serverCode":{"endpoint":"fn","executorAccessToken":"t"}}"#
            let r4 = try await e.call("POST", "\(e.target(tid))/triggers", token: token, body: Data(serverCode.utf8))
            #expect(r4.status == 400 && r4.errorCode == "WRONG_TRIGGER", "\(r4.status) \(r4.text)")
            #expect(r4.text.contains("server-code"))
            // Nothing of these was stored.
            #expect((try await e.get(commands, token: token).json["commands"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("Triggers: metadata kept, PATCH, list paging with bestEffortLimit and paginationKey, a trait command")
    func triggers() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-KII-TRG", owner: "user:\(uid)", token: token)
            let triggers = "\(e.target(tid))/triggers"
            let predicate =
                #"{"eventSource":"STATES","triggersWhen":"CONDITION_CHANGED","condition":{"type":"eq","field":"power","value":true}}"#
            // A trigger with a trait command, as KiiPlatform/thing-if-JSSDK's trait usage guide
            // (1.1.5 "Create Trigger") builds it, with Kii's triggersWhat and metadata.
            let traitCommand =
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[{"setPresetTemperature":25}]}]}"#
            let body =
                #"{"triggersWhat":"COMMAND","predicate":\#(predicate),"command":\#(traitCommand),"title":"t1","metadata":{"k":"v"}}"#
            let created = try await e.call("POST", triggers, token: token, body: Data(body.utf8))
            try #require(created.status == 201, "\(created.status) \(created.text)")
            let id = try #require(created.string("triggerID"))
            var got = try await e.get("\(triggers)/\(id)", token: token).json
            #expect((got["metadata"] as? [String: Any])?["k"] as? String == "v" && got["title"] as? String == "t1")
            #expect(
                ((got["command"] as? [String: Any])?["actions"] as? [[String: Any]])?.first?["AirConditionerAlias"]
                    != nil)
            // PATCH (KiiPlatform/thing-if-JSSDK test/small/TriggerOpsTest.ts, "#patchCommandTrigger()"):
            // title and metadata replaced, the predicate kept.
            let patch = #"{"title":"t2","metadata":{"k":"w"}}"#
            let patched = try await e.call("PATCH", "\(triggers)/\(id)", token: token, body: Data(patch.utf8))
            #expect(patched.status == 200, "\(patched.status) \(patched.text)")
            got = try await e.get("\(triggers)/\(id)", token: token).json
            #expect(got["title"] as? String == "t2" && (got["metadata"] as? [String: Any])?["k"] as? String == "w")
            #expect((got["predicate"] as? [String: Any])?["eventSource"] as? String == "STATES")
            let bad = try await e.call(
                "PATCH", "\(triggers)/\(id)", token: token, body: Data(#"{"predicate":{"eventSource":"NEVER"}}"#.utf8))
            #expect(bad.status == 400 && bad.errorCode == "WRONG_TRIGGER", "\(bad.status) \(bad.text)")
            let unknown = try await e.call("PATCH", "\(triggers)/trg-nope", token: token, body: Data(patch.utf8))
            #expect(unknown.status == 404 && unknown.errorCode == "TRIGGER_NOT_FOUND")
            // Two more, then pages of two (KiiPlatform/thing-if-JSSDK test/small/TriggerOpsTest.ts,
            // "#listTriggers()": ?bestEffortLimit=…, then ?paginationKey= of nextPaginationKey).
            for _ in 0..<2 {
                let r = try await e.call("POST", triggers, token: token, body: Data(body.utf8))
                #expect(r.status == 201)
            }
            let first = try await e.get("\(triggers)?bestEffortLimit=2", token: token).json
            #expect((first["triggers"] as? [Any])?.count == 2)
            let key = try #require(first["nextPaginationKey"] as? String)
            let second = try await e.get("\(triggers)?bestEffortLimit=2&paginationKey=\(key)", token: token).json
            #expect((second["triggers"] as? [Any])?.count == 1 && second["nextPaginationKey"] == nil)
            let ids = ((first["triggers"] as? [[String: Any]]) ?? []) + ((second["triggers"] as? [[String: Any]]) ?? [])
            #expect(Set(ids.compactMap { $0["triggerID"] as? String }).count == 3)
        }
    }

    @Test("State queries: ungrouped and grouped, per trait alias, withinTimeRange, _created, paging")
    func stateQueries() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-KII-STATE", owner: "user:\(uid)", token: token, interval: "1_MINUTE")
            // Three uploads a thing made (trait state nested by alias), in two grouping minutes.
            let base = (Platform.epochMs() / 60_000 - 10) * 60_000
            let uploads: [(Int64, String)] = [
                (base, #"{"AirConditionerAlias":{"power":true},"power":true}"#),
                (base + 10_000, #"{"AirConditionerAlias":{"power":true,"currentTemperature":23},"power":true}"#),
                (base + 70_000, #"{"AirConditionerAlias":{"power":false},"power":false}"#)
            ]
            for (at, body) in uploads {
                #expect(e.hub.store.applyState(thingID: tid, method: "PUT", upload: body, at: at) != nil)
            }
            let states = "\(e.target(tid))/states"
            let kiiType = "application/vnd.kii.TraitStateQueryRequest+json"
            func query(_ path: String, _ body: String) async throws -> HTTPReply {
                try await e.call("POST", path, token: token, body: Data(body.utf8), contentType: kiiType)
            }
            // KiiPlatform/thing-if-JSSDK test/small/QueryOps/UngroupedQueryTest.ts: {"query":{"clause":{"type":"all"}}}.
            let all = try await query("\(states)/query", #"{"query":{"clause":{"type":"all"}}}"#)
            try #require(all.status == 200, "\(all.status) \(all.text)")
            let results = try #require(all.json["results"] as? [[String: Any]])
            #expect(results.map { $0["_created"] as? Int } == uploads.map { Int($0.0) })
            #expect(results.last?["power"] as? Bool == false)
            // KiiPlatform/thing-if-JSSDK test/small/QueryOps/GroupedQueryTest.ts: per alias, grouped.
            let grouped = try await query(
                "\(states)/aliases/AirConditionerAlias/query",
                #"{"query":{"grouped":true,"clause":{"type":"withinTimeRange","lowerLimit":\#(base),"upperLimit":\#(base + 120_000)}}}"#
            )
            try #require(grouped.status == 200, "\(grouped.status) \(grouped.text)")
            let groups = try #require(grouped.json["groupedResults"] as? [[String: Any]])
            #expect(groups.count == 2)
            let first = try #require(groups.first)
            #expect((first["range"] as? [String: Any])?["from"] as? Int == Int(base))
            let objects = try #require(first["objects"] as? [[String: Any]])
            #expect(
                objects.count == 2 && objects[1]["currentTemperature"] as? Int == 23
                    && objects[1]["_created"] as? Int == Int(base + 10_000))
            #expect(objects.allSatisfy { $0["AirConditionerAlias"] == nil }, "the alias's own state, not the whole")
            // Paging.
            let page1 = try await query("\(states)/query", #"{"query":{"clause":{"type":"all"}},"bestEffortLimit":2}"#)
            #expect((page1.json["results"] as? [Any])?.count == 2)
            let key = try #require(page1.json["nextPaginationKey"] as? String)
            let page2 = try await query(
                "\(states)/query", #"{"query":{"clause":{"type":"all"}},"bestEffortLimit":2,"paginationKey":"\#(key)"}"#
            )
            #expect((page2.json["results"] as? [Any])?.count == 1 && page2.json["nextPaginationKey"] == nil)
            // Bad queries.
            for bad in [
                #"{"query":{"clause":{"type":"eq"}}}"#, #"{"query":{"grouped":true,"clause":{"type":"all"}}}"#, #"{}"#,
                // The inclusive upper limit + 1 overflowed here once (a trap, the hub gone).
                #"{"query":{"clause":{"type":"withinTimeRange","lowerLimit":0,"upperLimit":9223372036854775807}}}"#,
                #"{"query":{"grouped":"yes","clause":{"type":"withinTimeRange","lowerLimit":0,"upperLimit":5}}}"#,
                #"{"query":{"clause":{"type":"all"}},"paginationKey":5}"#
            ] {
                let r = try await query("\(states)/query", bad)
                #expect(r.status == 400 && r.isErrorBody, "\(bad): \(r.status)")
            }
            #expect(try await query("\(states)/query", #"{"query":{"clause":{"type":"all"}}}"#).status == 200)
        }
    }

    @Test("A trigger condition naming a trait alias fires on that alias's state, uploaded by a real thing")
    func aliasCondition() async throws {
        try await withHubAPI { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-KII-ALIAS", owner: "user:\(uid)", token: token)
            let t = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_register_alias_handlers(t.ct, "AirConditionerAlias") == RC.ok)
            }
            // KiiPlatform/thing-if-JSSDK, the trait usage guide (1.1.5 "Create Trigger"):
            // GreaterThan("currentTemperature", 30, "AirConditionerAlias") under CONDITION_CHANGED.
            let predicate =
                #"{"eventSource":"STATES","triggersWhen":"CONDITION_FALSE_TO_TRUE","condition":{"type":"range","field":"currentTemperature","lowerLimit":30,"lowerIncluded":false,"alias":"AirConditionerAlias"}}"#
            let command =
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[{"setPresetTemperature":25}]}]}"#
            let created = try await e.call(
                "POST", "\(e.target(tid))/triggers", token: token,
                body: Data(#"{"predicate":\#(predicate),"command":\#(command)}"#.utf8))
            try #require(created.status == 201, "\(created.status) \(created.text)")
            let triggerID = try #require(created.string("triggerID"), "\(created.text)")
            let commands = "\(e.target(tid))/commands"
            func fired() async throws -> [[String: Any]] {
                (try await e.get(commands, token: token).json["commands"] as? [[String: Any]] ?? [])
                    .filter { $0["firedByTriggerID"] != nil }
            }
            // A top-level currentTemperature of 35 is not the alias's: no firing.
            #expect(
                ct_update_state(t.ct, #"{"currentTemperature":35,"AirConditionerAlias":{"currentTemperature":20}}"#)
                    == RC.ok)
            // The alias's own field passes 30: one firing, a trait command run by the thing.
            #expect(ct_update_state(t.ct, #"{"AirConditionerAlias":{"currentTemperature":31}}"#) == RC.ok)
            // The thing's uploads go in order on its lane, each one's triggers
            // evaluated before the next is stored and reported ("state of"):
            // a firing on the first (which must not happen) shows before the
            // second's report, the right one after it.
            let stateOf = "state of \(tid): "
            let second: @Sendable (String) -> Bool = { line in
                guard line.hasPrefix(stateOf) else { return false }
                let state = parseObject(String(line.dropFirst(stateOf.count)))
                return (state?["AirConditionerAlias"] as? [String: Any])?["currentTemperature"] as? Int == 31
            }
            let issued = "trigger \(triggerID) of \(tid) issued "
            #expect(
                await offPool { events.wait(second) && events.wait { $0.hasPrefix(issued) } }, "\(events.all)")
            let lines = events.all
            let reported = try #require(lines.firstIndex(where: second))
            #expect(!lines[..<reported].contains { $0.hasPrefix(issued) }, "fired on the top-level field: \(lines)")
            let list = try await fired()
            try #require(list.count == 1, "\(list)")
            let cid = try #require(list[0]["commandID"] as? String)
            #expect(lines.filter { $0.hasPrefix(issued) } == [issued + cid], "\(lines)")
            let done = try await e.waitForFinished(tid, cid, token: token)
            #expect(done["commandState"] as? String == "DONE")
        }
    }

    @Test(
        "A thing's calls over HTTP, as Kii's thing SDKs make them: onboarding, installation, endpoint, state, results, firmware"
    )
    func thingCallsOverHTTP() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let onboardings = "\(e.thingIF)/onboardings"
            // KiiPlatform/thing-if-ThingSDK kii_iot.c (onboard_with_vendor_thing_id): POST
            // …/onboardings with CONTENT_TYPE_VENDOR_THING_ID and an app token, body
            // {vendorThingID, thingPassword, thingType}; the answer's thingID, accessToken and
            // mqttEndpoint are read. The app token is no credential here: the password is.
            let byThing = "application/vnd.kii.OnboardingWithVendorThingIDByThing+json"
            let body = #"{"vendorThingID":"AC-KII-HTTP","thingPassword":"pw","thingType":"AirConditioner"}"#
            let r = try await e.call(
                "POST", onboardings, token: "some-app-token", body: Data(body.utf8), contentType: byThing)
            try #require(r.status == 200, "\(r.status) \(r.text)")
            let tid = try #require(r.string("thingID"))
            let thingToken = try #require(r.string("accessToken"))
            let ep = try #require(r.json["mqttEndpoint"] as? [String: Any])
            for key in ["installationID", "username", "password", "mqttTopic", "host", "X-MQTT-TTL", "portTCP"] {
                #expect(ep[key] != nil, "\(key) missing from \(ep)")
            }
            // The endpoint is real: its credentials connect and may read the command topic.
            let topic = try #require(ep["mqttTopic"] as? String)
            let probe = try MqttProbe(
                port: e.env.broker.port, clientID: topic, username: ep["username"] as? String,
                password: ep["password"] as? String)
            #expect(probe.connackCode == 0)
            #expect(probe.subscribe(topic).map { $0 < 0x80 } == true)
            probe.stop()
            // A wrong password; a charset parameter on the media type is the same type.
            let wrong = #"{"vendorThingID":"AC-KII-HTTP","thingPassword":"nope","thingType":"AirConditioner"}"#
            let w = try await e.call(
                "POST", onboardings, body: Data(wrong.utf8), contentType: byThing + "; charset=utf-8")
            #expect(w.status == 403 && w.errorCode == "WRONG_PASSWORD", "\(w.status) \(w.text)")

            // An MQTT installation with the thing's token and its endpoint (thing-if-ThingSDK:
            // POST api/apps/{appID}/installations {"deviceType":"MQTT"}, then GET
            // …/installations/{id}/mqtt-endpoint).
            let inst = try await e.call(
                "POST", "\(e.api)/installations", token: thingToken, json: ["deviceType": "MQTT"])
            try #require(inst.status == 201, "\(inst.status) \(inst.text)")
            let iid = try #require(inst.string("installationID"))
            let got = try await e.get("\(e.api)/installations/\(iid)/mqtt-endpoint", token: thingToken)
            try #require(got.status == 200, "\(got.status) \(got.text)")
            #expect(got.string("installationID") == iid && got.json["X-MQTT-TTL"] != nil)
            #expect(try await e.get("\(e.api)/installations/nope/mqtt-endpoint", token: thingToken).status == 404)
            // As KiiThingSDK-Embedded (thing-if-ThingSDK) sends it: the scheme in lower case and
            // "installationType" for "deviceType"; a field of another type is still refused.
            let lower = try await e.call(
                "POST", "\(e.api)/installations", json: ["installationType": "MQTT", "development": false],
                headers: ["authorization": "bearer \(thingToken)"])
            #expect(lower.status == 201 && lower.string("installationID") != nil, "\(lower.status) \(lower.text)")
            let wrongType = try await e.call(
                "POST", "\(e.api)/installations", token: thingToken, json: ["installationType": 1])
            #expect(wrongType.status == 400 && wrongType.errorCode == "INVALID_INPUT_DATA", "\(wrongType.text)")
            // A token that is no thing's: Kii's 403 WRONG_TOKEN over HTTP, as the app API answers.
            let notThings = try await e.get("\(e.api)/installations/\(iid)/mqtt-endpoint", token: token)
            #expect(notThings.status == 403 && notThings.errorCode == "WRONG_TOKEN", "\(notThings.status)")

            // The owner binds it by thingID; the answer carries an endpoint of a new
            // installation (KiiPlatform/thing-if-JSSDK src/OnboardingResult.ts reads mqttEndpoint),
            // and the thing's own installations keep working.
            let own = #"{"thingID":"\#(tid)","thingPassword":"pw","owner":"user:\#(uid)"}"#
            let o = try await e.call(
                "POST", onboardings, token: token, body: Data(own.utf8),
                contentType: "application/vnd.kii.OnboardingWithThingIDByOwner+json")
            try #require(o.status == 200, "\(o.status) \(o.text)")
            let handed = try #require(o.json["mqttEndpoint"] as? [String: Any])
            let handedID = try #require(handed["installationID"] as? String)
            #expect(handedID != iid && handedID != ep["installationID"] as? String)
            #expect(e.hub.store.thing(id: tid)?.installations[handedID] == handed["mqttTopic"] as? String)

            // State, PUT then PATCH (Kii's thing SDK: PUT …/targets/thing:{id}/states).
            let states = "\(e.target(tid))/states"
            let put = try await e.call(
                "PUT", states, token: thingToken, body: Data(#"{"power":true,"presetTemperature":25}"#.utf8))
            #expect(put.status == 201, "the first upload, as Kii answers it: \(put.status) \(put.text)")
            let patch = try await e.call("PATCH", states, token: thingToken, body: Data(#"{"fanSpeed":3}"#.utf8))
            #expect(patch.status == 204, "\(patch.status) \(patch.text)")
            let latest = try await e.get(states, token: token)
            #expect(latest.json["power"] as? Bool == true && latest.json["fanSpeed"] as? Int == 3, "\(latest.text)")

            // A command from the owner, answered by the thing over HTTP.
            let cid = try await e.postCommand(tid, token: token, userID: uid)
            let results = "\(e.target(tid))/commands/\(cid)/action-results"
            let answer =
                #"{"actionResults":[{"turnPower":{"succeeded":true}},{"setPresetTemperature":{"succeeded":true}},{"setFanSpeed":{"succeeded":true}}]}"#
            // Refused first: no token, the owner's token, another thing's token, bad JSON.
            #expect(try await e.call("PUT", results, body: Data(answer.utf8)).status == 401)
            let ownersToken = try await e.call("PUT", results, token: token, body: Data(answer.utf8))
            #expect(ownersToken.status == 403 && ownersToken.errorCode == "WRONG_TOKEN", "\(ownersToken.text)")
            let (_, otherToken) = try await e.onboard("AC-KII-HTTP-OTHER", owner: "user:\(uid)", token: token)
            let other = try await e.call("PUT", results, token: otherToken, body: Data(answer.utf8))
            #expect(other.status == 403 && other.isErrorBody, "\(other.status) \(other.text)")
            let bad = try await e.call("PUT", results, token: thingToken, body: Data("{".utf8))
            #expect(bad.status == 400 && bad.isErrorBody, "\(bad.status) \(bad.text)")
            let big = try await e.call(
                "PUT", states, token: thingToken,
                body: Data(("{\"x\":\"" + String(repeating: "a", count: 70_000) + "\"}").utf8))
            #expect(big.status == 413, "\(big.status)")
            let done = try await e.call("PUT", results, token: thingToken, body: Data(answer.utf8))
            #expect(done.status == 204, "\(done.status) \(done.text)")
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "DONE")

            // Firmware version.
            let fw = try await e.call(
                "PUT", "\(e.thingIF)/things/\(tid)/firmware-version", token: thingToken,
                body: Data(#"{"firmwareVersion":"2.0.1"}"#.utf8))
            #expect(fw.status == 204, "\(fw.status) \(fw.text)")
            #expect(e.hub.store.thing(id: tid)?.firmwareVersion == "2.0.1")

            // Installations are bounded per thing (each is a broker client), and a new one past
            // the bound retires the oldest: Kii's SDKs make one at every start.
            let before = Set(e.hub.store.installationsOldestFirst(thingID: tid).map(\.installationID))
            var last = 0
            for _ in 0..<ThingInstallations.limit {
                last = try await e.call(
                    "POST", "\(e.api)/installations", token: thingToken, json: ["deviceType": "MQTT"]
                )
                .status
            }
            #expect(last == 201)
            let after = e.hub.store.installationsOldestFirst(thingID: tid).map(\.installationID)
            #expect(after.count == ThingInstallations.limit && Set(after).isDisjoint(with: before))
            let retired = try await e.get("\(e.api)/installations/\(iid)/mqtt-endpoint", token: thingToken)
            #expect(retired.status == 404 && retired.errorCode == "INSTALLATION_NOT_FOUND", "\(retired.text)")
        }
    }

    @Test(
        "The app token (client_credentials) that Kii's thing SDKs fetch before onboarding: given for the appID with any secret, opens nothing else"
    )
    func appToken() async throws {
        try await withHubAPI { e in
            let tokenPath = "\(e.api)/oauth2/token"
            // KiiPlatform/thing-if-ThingSDK kii_thing_if.c (prv_kii_thing_if_get_anonymous_token):
            // POST /api/apps/{appID}/oauth2/token, application/json, the app ID and app key; the
            // answer's "access_token" is read.
            let body =
                #"{"grant_type":"client_credentials","client_id":"\#(e.appID)","client_secret":"\#(Env.appKey)"}"#
            let r = try await e.call("POST", tokenPath, body: Data(body.utf8), contentType: "application/json")
            try #require(r.status == 200, "\(r.status) \(r.text)")
            let appToken = try #require(r.string("access_token"))
            #expect(appToken.count >= 40 && r.string("token_type") == "Bearer")
            // KiiPlatform/ebisu kii/kii_ti_impl.c (_get_anonymous_token) sends "client_secret":"dummy":
            // Kii no longer uses the app key (any value passes), and the token grants nothing.
            let dummy = #"{"grant_type":"client_credentials","client_id":"\#(e.appID)","client_secret":"dummy"}"#
            let d = try await e.call("POST", tokenPath, body: Data(dummy.utf8), contentType: "application/json")
            #expect(d.status == 200 && (d.string("access_token")?.count ?? 0) >= 40, "\(d.status) \(d.text)")
            let otherApp =
                #"{"grant_type":"client_credentials","client_id":"otherApp","client_secret":"\#(Env.appKey)"}"#
            let o = try await e.call("POST", tokenPath, body: Data(otherApp.utf8), contentType: "application/json")
            #expect(o.status == 400 && o.errorCode == "invalid_client", "\(o.status) \(o.text)")
            let noSecret = #"{"grant_type":"client_credentials","client_id":"\#(e.appID)"}"#
            let n = try await e.call("POST", tokenPath, body: Data(noSecret.utf8), contentType: "application/json")
            #expect(n.status == 400 && n.errorCode == "INVALID_INPUT_DATA", "\(n.status) \(n.text)")

            // With it, the thing onboards (thing-if-ThingSDK kii_thing_if.c,
            // prv_onboard_with_vendor_thing_id: CONTENT_TYPE_VENDOR_THING_ID, the app token as bearer).
            let onboard = #"{"vendorThingID":"AC-KII-APPTOKEN","thingPassword":"pw","thingType":"AirConditioner"}"#
            let ob = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: appToken, body: Data(onboard.utf8),
                contentType: MediaType.onboardingByThing)
            try #require(ob.status == 200, "\(ob.status) \(ob.text)")
            let tid = try #require(ob.string("thingID"))
            // Nothing else: not an owner's call, not a thing's.
            let (uid, userToken) = try await e.user()
            #expect(e.hub.store.user(accessToken: appToken) == nil && e.hub.store.thing(accessToken: appToken) == nil)
            let asOwner = try await e.get("\(e.target(tid))/commands", token: appToken)
            #expect(asOwner.status == 403 && asOwner.errorCode == "WRONG_TOKEN", "\(asOwner.status) \(asOwner.text)")
            let bind = #"{"thingID":"\#(tid)","thingPassword":"pw","owner":"user:\#(uid)"}"#
            let asBinder = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: appToken, body: Data(bind.utf8),
                contentType: "application/vnd.kii.OnboardingWithThingIDByOwner+json")
            #expect(asBinder.status == 403 && asBinder.errorCode == "WRONG_TOKEN", "\(asBinder.status)")
            let asThing = try await e.call(
                "PUT", "\(e.target(tid))/states", token: appToken, body: Data(#"{"power":true}"#.utf8))
            #expect(asThing.status == 403 && asThing.errorCode == "WRONG_TOKEN", "\(asThing.status) \(asThing.text)")
            let inst = try await e.call("POST", "\(e.api)/installations", token: appToken, json: ["deviceType": "MQTT"])
            #expect(inst.status == 403 && inst.errorCode == "WRONG_TOKEN", "\(inst.status) \(inst.text)")
            #expect(e.hub.store.thing(id: tid)?.owners.isEmpty == true && e.hub.store.thing(id: tid)?.state == nil)
            _ = userToken
        }
    }

    @Test("Onboarding by the thing with its thingID (OnboardingWithThingIDByThing), over HTTP and over MQTT")
    func onboardingWithThingIDByThing() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-KII-TIDBYTHING", owner: "user:\(uid)", token: token)
            let onboardings = "\(e.thingIF)/onboardings"
            // KiiPlatform/thing-if-ThingSDK kii_thing_if.c (prv_onboard_with_thing_id, behind
            // onboard_with_thing_id): CONTENT_TYPE_THING_ID, body {thingID, thingPassword, thingType?,
            // thingProperties?, firmwareVersion?, layoutPosition?}.
            let type = "application/vnd.kii.OnboardingWithThingIDByThing+json"
            let body =
                #"{"thingID":"\#(tid)","thingPassword":"pw","thingType":"AirConditioner","firmwareVersion":"1.0.0","layoutPosition":"STANDALONE"}"#
            let r = try await e.call("POST", onboardings, body: Data(body.utf8), contentType: type)
            try #require(r.status == 200, "\(r.status) \(r.text)")
            #expect(r.string("thingID") == tid)
            let thingToken = try #require(r.string("accessToken"))
            #expect(e.hub.store.thing(accessToken: thingToken)?.thingID == tid)
            let ep = try #require(r.json["mqttEndpoint"] as? [String: Any])
            #expect(e.hub.store.thing(id: tid)?.installations[ep["installationID"] as? String ?? ""] != nil)
            // A wrong password, an unknown thingID, a body without thingID.
            let wrong = #"{"thingID":"\#(tid)","thingPassword":"nope"}"#
            let w = try await e.call("POST", onboardings, body: Data(wrong.utf8), contentType: type)
            #expect(w.status == 403 && w.errorCode == "WRONG_PASSWORD", "\(w.status) \(w.text)")
            let unknown = #"{"thingID":"th.nope","thingPassword":"pw"}"#
            let u = try await e.call("POST", onboardings, body: Data(unknown.utf8), contentType: type)
            #expect(u.status == 404 && u.errorCode == "THING_NOT_FOUND", "\(u.status) \(u.text)")
            let vendor = #"{"vendorThingID":"AC-KII-TIDBYTHING","thingPassword":"pw"}"#
            let v = try await e.call("POST", onboardings, body: Data(vendor.utf8), contentType: type)
            #expect(v.status == 400 && v.errorCode == "INVALID_INPUT_DATA", "\(v.status) \(v.text)")

            // The same request over MQTT, on a bootstrap connection with the app's credentials.
            let boot = try MqttProbe.bootstrap(port: e.env.broker.port)
            let bootID = boot.client.clientID
            defer { boot.stop() }
            #expect(boot.subscribe(Topics.response(clientID: bootID)) == 1)
            boot.publish(
                Topics.request(clientID: bootID, appID: Env.appID, path: "onboardings"),
                kiiRequest("POST", token: nil, contentType: type, requestID: "tid1", body: body), correlation: "tid1")
            let replies = Topics.response(clientID: bootID)
            #expect(poll { !boot.messages(on: replies).isEmpty })
            let reply = try #require(boot.messages(on: replies).first.flatMap { KiiResponse.decode($0.payload) })
            #expect(reply.status == 200, "\(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            guard case .success(let j) = JSON.parse(reply.body), let answer = OnboardingResponse.decode(j) else {
                Issue.record("the MQTT answer is not an onboarding response")
                return
            }
            #expect(answer.thingID == tid)
        }
    }

    @Test("Firmware version and thing type (GET, PUT) by owner and thing; the current state of one trait alias")
    func thingFieldsAndAliasState() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-KII-FIELDS", owner: "user:\(uid)", token: token)
            let thing = "\(e.thingIF)/things/\(tid)"
            // KiiPlatform/thing-if-JSSDK src/ops/ThingOps.ts (getFirmwareVersion, updateFirmwareVersion,
            // getThingType, updateThingType): GET answers {"firmwareVersion"} / {"thingType"}, PUT
            // sends ThingFirmwareVersionUpdateRequest / ThingTypeUpdateRequest.
            let fw = try await e.get("\(thing)/firmware-version", token: token)
            #expect(fw.status == 200 && fw.string("firmwareVersion") == "1.0.0", "\(fw.status) \(fw.text)")
            let put = try await e.call(
                "PUT", "\(thing)/firmware-version", token: token, body: Data(#"{"firmwareVersion":"v2"}"#.utf8),
                contentType: "application/vnd.kii.ThingFirmwareVersionUpdateRequest+json")
            #expect(put.status == 204, "\(put.status) \(put.text)")
            #expect(e.hub.store.thing(id: tid)?.firmwareVersion == "v2")
            let tt = try await e.call(
                "PUT", "\(thing)/thing-type", token: token, body: Data(#"{"thingType":"AirPurifier"}"#.utf8),
                contentType: "application/vnd.kii.ThingTypeUpdateRequest+json")
            #expect(tt.status == 204, "\(tt.status) \(tt.text)")
            #expect(try await e.get("\(thing)/thing-type", token: token).string("thingType") == "AirPurifier")
            // KiiPlatform/thing-if-ThingSDK kii_thing_if.c (get_firmware_version, update_firmware_version,
            // get_thing_type, update_thing_type): the same paths with the thing's token.
            let byThing = try await e.get("\(thing)/thing-type", token: thingToken)
            #expect(byThing.status == 200 && byThing.string("thingType") == "AirPurifier", "\(byThing.text)")
            let fwByThing = try await e.call(
                "PUT", "\(thing)/firmware-version", token: thingToken, body: Data(#"{"firmwareVersion":"v3"}"#.utf8))
            #expect(fwByThing.status == 204 && e.hub.store.thing(id: tid)?.firmwareVersion == "v3")
            // Refused: another owner, another thing's token, a bad body, an unknown thing.
            let (_, stranger) = try await e.user()
            let s = try await e.get("\(thing)/firmware-version", token: stranger)
            // Kii's answer for a /things/{thingID} path (thing-if-JSSDK test/small/ThingOpsTest.ts).
            #expect(s.status == 404 && s.errorCode == "THING_NOT_FOUND", "\(s.status) \(s.text)")
            let (otherTid, otherToken) = try await e.onboard("AC-KII-FIELDS-2", owner: "user:\(uid)", token: token)
            let x = try await e.call(
                "PUT", "\(thing)/thing-type", token: otherToken, body: Data(#"{"thingType":"Evil"}"#.utf8))
            #expect(x.status == 403 && x.isErrorBody, "\(x.status) \(x.text)")
            let bad = try await e.call(
                "PUT", "\(thing)/thing-type", token: token, body: Data(#"{"thingType":""}"#.utf8))
            #expect(bad.status == 400 && bad.errorCode == "INVALID_INPUT_DATA", "\(bad.status) \(bad.text)")
            #expect(e.hub.store.thing(id: tid)?.thingType == "AirPurifier")
            // A thing without a thing type: Kii's THING_WITHOUT_THING_TYPE, which ThingOps.ts reads as none.
            let bare = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token,
                json: ["vendorThingID": "AC-KII-BARE", "thingPassword": "pw", "owner": "user:\(uid)"],
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            let bareID = try #require(bare.string("thingID"))
            let none = try await e.get("\(e.thingIF)/things/\(bareID)/thing-type", token: token)
            #expect(none.status == 404 && none.errorCode == "THING_WITHOUT_THING_TYPE", "\(none.status) \(none.text)")
            let noFW = try await e.get("\(e.thingIF)/things/\(bareID)/firmware-version", token: token)
            #expect(noFW.status == 404 && noFW.errorCode == "THING_WITHOUT_FIRMWARE_VERSION", "\(noFW.text)")
            _ = otherTid

            // KiiPlatform/thing-if-JSSDK src/ops/StateOps.ts (getState(alias)): GET
            // …/states/aliases/{alias} answers that alias's state.
            let states = "\(e.target(tid))/states"
            // Before the first upload, as Kii answers (thing-if-iOSSDK ThingIFSDKLargeTests/
            // ThingIFAPIGetTargetStateTests.swift, run against Kii's servers): the whole state is
            // {}, and an alias's is 404 STATE_NOT_FOUND "Thing state not found".
            let empty = try await e.get(states, token: token)
            #expect(empty.status == 200 && empty.text == "{}", "\(empty.status) \(empty.text)")
            let noState = try await e.get("\(states)/aliases/AirConditionerAlias", token: token)
            #expect(
                noState.status == 404 && noState.errorCode == "STATE_NOT_FOUND", "\(noState.status) \(noState.text)")
            #expect(noState.json["message"] as? String == "Thing state not found", "\(noState.text)")
            let upload = try await e.call(
                "PUT", states, token: thingToken,
                body: Data(
                    #"{"AirConditionerAlias":{"power":true,"presetTemperature":25},"HumidityAlias":{"h":40}}"#.utf8))
            #expect(upload.status == 201, "the first upload, as Kii answers it: \(upload.status) \(upload.text)")
            let alias = try await e.get("\(states)/aliases/AirConditionerAlias", token: token)
            #expect(alias.status == 200, "\(alias.status) \(alias.text)")
            #expect(alias.json["presetTemperature"] as? Int == 25 && alias.json["h"] == nil, "\(alias.text)")
            let missing = try await e.get("\(states)/aliases/NoSuchAlias", token: token)
            #expect(missing.status == 404 && missing.errorCode == "TRAIT_ALIAS_NOT_FOUND", "\(missing.status)")
            #expect(try await e.get("\(states)/aliases/AirConditionerAlias", token: stranger).status == 404)
        }
    }

    @Test("Flat action results for a trait command (as Kii's thing-if-ThingSDK posts them) are stored grouped by alias")
    func flatResultsRegrouped() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-KII-FLAT", owner: "user:\(uid)", token: token)
            let commands = "\(e.target(tid))/commands"
            func post(_ body: String) async throws -> String {
                let r = try await e.call(
                    "POST", commands, token: token, body: Data(body.utf8), contentType: Self.traitContentType)
                try #require(r.status == 201, "\(r.status) \(r.text)")
                return try #require(r.string("commandID"))
            }
            let cid = try await post(
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[{"turnPower":true},{"setPresetTemperature":25}]},{"HumidityAlias":[{"setPresetHumidity":45}]}]}"#
            )
            // KiiPlatform/thing-if-ThingSDK kii_thing_if.c (handle_command): one flat list over every
            // alias, {"actionResults":[{"<action>":{"succeeded":…,"errorMessage"?}},…]}.
            let flat =
                #"{"actionResults":[{"turnPower":{"succeeded":true}},{"setPresetTemperature":{"succeeded":true}},{"setPresetHumidity":{"succeeded":false,"errorMessage":"busy"}}]}"#
            let put = try await e.call(
                "PUT", "\(commands)/\(cid)/action-results", token: thingToken, body: Data(flat.utf8))
            #expect(put.status == 204, "\(put.status) \(put.text)")
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "INCOMPLETE")
            let results = try #require(c["actionResults"] as? [[String: [[String: [String: Any]]]]], "\(c)")
            #expect(results.count == 2)
            #expect(results.first?["AirConditionerAlias"]?.count == 2)
            #expect(results.first?["AirConditionerAlias"]?[1]["setPresetTemperature"]?["succeeded"] as? Bool == true)
            let humidity = try #require(results.last?["HumidityAlias"]?.first?["setPresetHumidity"])
            #expect(humidity["succeeded"] as? Bool == false && humidity["errorMessage"] as? String == "busy")

            // Results that do not fit the command (another action name) are kept as sent.
            let cid2 = try await post(
                #"{"issuer":"user:\#(uid)","actions":[{"AirConditionerAlias":[{"turnPower":true}]}]}"#)
            let odd = #"{"actionResults":[{"setFanSpeed":{"succeeded":true}}]}"#
            let put2 = try await e.call(
                "PUT", "\(commands)/\(cid2)/action-results", token: thingToken, body: Data(odd.utf8))
            #expect(put2.status == 204)
            let c2 = try await e.waitForFinished(tid, cid2, token: token)
            let kept = try #require(c2["actionResults"] as? [[String: Any]])
            #expect(kept.count == 1 && kept[0]["setFanSpeed"] != nil, "\(kept)")
        }
    }
}
