// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
import ThingIFHubServer

/// The refusals of a thing's action sets and timer triggers over REST, on
/// a real hub: each bad body is a 400 INVALID_INPUT_DATA with the hub's
/// message, Kii's invalidFields naming the one field at fault (none when
/// no one field is: a body that is no JSON object, a name in the path),
/// and nothing is stored or published.
@Suite("Action set and timer trigger refusals over REST", .offPool)
struct AutomationRefusalTests {
    /// Sends each (body, field) to `path` and checks the answer.
    static func expectRefused(
        _ e: HubAPIEnv, _ path: String, token: String, _ cases: [(String, String?)]
    ) async throws {
        for (body, field) in cases {
            let r = try await e.call("PUT", path, token: token, body: Data(body.utf8))
            #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(body): \(r.status) \(r.text)")
            #expect(r.isErrorBody, "\(body): \(r.text)")
            let fields = r.json["invalidFields"] as? [String: String]
            #expect(fields.map { Array($0.keys) } == field.map { [$0] }, "\(body): \(r.text)")
            if let field { #expect(fields?[field] == r.string("message"), "the hub's message: \(r.text)") }
        }
    }

    /// A user, a thing of theirs with an MQTT installation (so its
    /// configuration has somewhere to go) and the action set "morning".
    static func withThing(_ body: (HubAPIEnv, String, String) async throws -> Void) async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-REFUSE-\(randomHexString(4))", owner: "user:\(uid)", token: token)
            #expect(
                e.hub.store.addInstallation(
                    thingID: tid, installationID: Platform.randomHex(bytes: 10),
                    mqttTopic: "t" + Platform.randomHex(bytes: 11)
                ))
            let ok = try await e.call(
                "PUT", "\(e.target(tid))/action-sets/morning", token: token,
                body: Data(
                    #"{"actions":[{"schema":"AC","schemaVersion":1,"action":"turnPower","params":{"power":true}}]}"#
                        .utf8))
            try #require(ok.status == 204, "\(ok.text)")
            try await body(e, tid, token)
        }
    }

    @Test("Action sets: malformed, wrong types, missing fields and limits are 400s naming the field at fault")
    func actionSets() async throws {
        try await Self.withThing { e, tid, token in
            let sets = "\(e.target(tid))/action-sets"
            let big = String(repeating: "x", count: AppLimits.maxActionBytes)
            let one = #"{"schema":"AC","schemaVersion":1,"action":"turnPower"}"#
            let many = Array(repeating: one, count: AutomationLimits.maxActionsPerSet + 1).joined(separator: ",")
            try await Self.expectRefused(
                e, "\(sets)/evening", token: token,
                [
                    (#"{"actions":["#, nil),
                    (#"[{"schema":"AC"}]"#, nil),
                    (#"{}"#, "actions"),
                    (#"{"actions":null}"#, "actions"),
                    (#"{"actions":{"schema":"AC"}}"#, "actions"),
                    (#"{"actions":[]}"#, "actions"),
                    (#"{"actions":[\#(many)]}"#, "actions"),
                    (#"{"actions":[7]}"#, "actions"),
                    (#"{"actions":[{"schema":"AC","action":"a","params":{"s":"\#(big)"}}]}"#, "actions"),
                    (#"{"actions":[{"schemaVersion":1,"action":"turnPower"}]}"#, "schema"),
                    (#"{"actions":[{"schema":"","action":"turnPower"}]}"#, "schema"),
                    (#"{"actions":[{"schema":1,"action":"turnPower"}]}"#, "schema"),
                    (#"{"actions":[{"schema":"AC","schemaVersion":1}]}"#, "action"),
                    (#"{"actions":[\#(one),{"schema":"AC","action":["turnPower"]}]}"#, "action"),
                    (#"{"actions":[{"schema":"AC","schemaVersion":-1,"action":"turnPower"}]}"#, "schemaVersion"),
                    (#"{"actions":[{"schema":"AC","schemaVersion":1,"action":"turnPower","params":[1]}]}"#, "params"),
                    (#"{"actions":[{"schema":"AC","schemaVersion":1,"action":"turnPower","params":"on"}]}"#, "params")
                ])
            // A name the path gives that no set may have: no field of the body is at fault.
            try await Self.expectRefused(
                e, "\(sets)/\(String(repeating: "n", count: AutomationLimits.maxName + 1))", token: token,
                [(#"{"actions":[\#(one)]}"#, nil)])
            let listed = try await e.get(sets, token: token)
            let names = (listed.json["actionSets"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
            #expect(names == ["morning"], "nothing stored: \(listed.text)")
        }
    }

    @Test("Timer triggers: malformed, wrong types, missing fields and limits are 400s naming the field at fault")
    func timerTriggers() async throws {
        try await Self.withThing { e, tid, token in
            let timers = "\(e.target(tid))/timer-triggers"
            let future = Platform.epochMs() + 86_400_000
            let fire = #""fireDate":\#(future)"#, zone = #""timeZone":"Europe/Paris""#
            let sets = #""actionSets":["morning"]"#
            try await Self.expectRefused(
                e, "\(timers)/wake", token: token,
                [
                    (#"{"fireDate":"#, nil),
                    (#""fireDate""#, nil),
                    (#"{\#(zone),\#(sets)}"#, "fireDate"),
                    (#"{"fireDate":"tomorrow",\#(zone),\#(sets)}"#, "fireDate"),
                    (#"{"fireDate":1.5,\#(zone),\#(sets)}"#, "fireDate"),
                    (#"{"fireDate":\#(Platform.epochMs() - 1_000),\#(zone),\#(sets)}"#, "fireDate"),
                    (#"{\#(fire),\#(sets)}"#, "timeZone"),
                    (#"{\#(fire),"timeZone":5,\#(sets)}"#, "timeZone"),
                    (#"{\#(fire),"timeZone":"Mars/Olympus_Mons",\#(sets)}"#, "timeZone"),
                    (#"{\#(fire),\#(zone),\#(sets),"recurrence":"daily"}"#, "recurrence"),
                    (#"{\#(fire),\#(zone),\#(sets),"recurrence":{"unit":"fortnight","count":1}}"#, "recurrence"),
                    (#"{\#(fire),\#(zone),\#(sets),"recurrence":{"unit":"day"}}"#, "recurrence"),
                    (#"{\#(fire),\#(zone),\#(sets),"recurrence":{"unit":"minute","count":4}}"#, "recurrence"),
                    (#"{\#(fire),\#(zone),\#(sets),"recurrence":{"unit":"week","count":6}}"#, "recurrence"),
                    (#"{\#(fire),\#(zone)}"#, "actionSets"),
                    (#"{\#(fire),\#(zone),"actionSets":"morning"}"#, "actionSets"),
                    (#"{\#(fire),\#(zone),"actionSets":[1]}"#, "actionSets"),
                    (#"{\#(fire),\#(zone),"actionSets":[]}"#, "actionSets"),
                    (#"{\#(fire),\#(zone),"actionSets":["nope"]}"#, "actionSets"),
                    (
                        #"{\#(fire),\#(zone),"actionSets":[\#(Array(repeating: #""morning""#, count: AutomationLimits.maxActionSetsPerTrigger + 1).joined(separator: ","))]}"#,
                        "actionSets"
                    )
                ])
            try await Self.expectRefused(
                e, "\(timers)/\(String(repeating: "n", count: AutomationLimits.maxName + 1))", token: token,
                [(#"{\#(fire),\#(zone),\#(sets)}"#, nil)])
            let listed = try await e.get(timers, token: token)
            #expect((listed.json["timerTriggers"] as? [Any])?.isEmpty == true, "nothing stored: \(listed.text)")
            // The same body, well formed, is stored: the refusals above were about their one field.
            let ok = try await e.call(
                "PUT", "\(timers)/wake", token: token, body: Data(#"{\#(fire),\#(zone),\#(sets)}"#.utf8))
            #expect(ok.status == 204, "\(ok.text)")
        }
    }

    @Test("Onboarding by the owner over REST names the field at fault in invalidFields")
    func onboarding() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let base = #""vendorThingID":"AC-F-1","thingPassword":"pw","owner":"user:\#(uid)""#
            for (body, field) in [
                (#"{\#(base),"dataGroupingInterval":"2_DAYS"}"#, "dataGroupingInterval"),
                (#"{\#(base),"layoutPosition":"ENDNODE"}"#, "layoutPosition"),
                (#"{"vendorThingID":"AC-F-1","thingPassword":"","owner":"user:\#(uid)"}"#, "thingPassword"),
                (#"{"vendorThingID":"AC-F-1","thingPassword":"pw","owner":"\#(uid)"}"#, "owner")
            ] {
                let r = try await e.call(
                    "POST", "\(e.thingIF)/onboardings", token: token, body: Data(body.utf8),
                    contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA" && r.isErrorBody, "\(body): \(r.text)")
                let fields = r.json["invalidFields"] as? [String: String]
                #expect(fields == [field: r.string("message") ?? ""], "\(body): \(r.text)")
            }
        }
    }
}
