// SPDX-License-Identifier: Apache-2.0

import CThingIFTestSupport
import Foundation
import Testing

/// Commands from the framework run through C handlers, and results come back.
@Suite("Commands", .offPool)
struct CommandTests {
    @Test("libmosquitto's lines reach a debug log callback as \"mqtt: …\"; an info callback gets none")
    func mqttDebugLines() throws {
        try withEnv { env in
            let (debug, tid) = try env.onlineAircon(
                vendorThingID: "AC-DEBUG", storage: "debug", logLevel: LogLevel.debug)
            _ = try env.command(Aircon.powerOff, to: tid)
            #expect(debug.logs.contains("mqtt: Client"), "\(debug.logs)")
            let (info, iid) = try env.onlineAircon(vendorThingID: "AC-INFO", storage: "info")
            _ = try env.command(Aircon.powerOff, to: iid)
            #expect(!info.logs.contains("mqtt: "), "\(info.logs)")
        }
    }

    @Test("The seeds' three-action command runs in order; state uploaded in a handler reaches the hub")
    func seedsThreeActionCommand() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_upload_state(t.ct, "setFanSpeed", 1) == 0)
            }
            let (id, results) = try env.command(Aircon.allActions, to: tid)

            #expect(results.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            #expect(results.allSatisfy { $0.succeeded && $0.errorMessage == nil && $0.alias == nil })

            let records = t.waitForRecords(3)
            try #require(records.count == 3)
            #expect(records.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            #expect(records.map(\.params) == [#"{"power":true}"#, #"{"presetTemperature":25}"#, #"{"fanSpeed":5}"#])
            #expect(records.map(\.index) == [0, 1, 2])
            for r in records {
                #expect(r.commandID == id)
                #expect(r.schema == Aircon.schema)
                #expect(r.schemaVersion == 1)
                #expect(r.issuer == "user:demo")
                #expect(r.alias == nil)
                #expect(r.thingMatches)
                #expect(r.failRc == nil)
            }
            #expect(records[2].uploadRc == Int(RC.ok))

            let uploads = env.hub.waitForStateUploads(of: tid, count: 1, timeoutMs: 30_000)
            try #require(uploads.count == 1)
            #expect(uploads[0].method == "PUT")
            let state = try #require(parseObject(env.hub.thing(tid)?.state))
            #expect(state["power"] as? Bool == true)
            #expect(state["presetTemperature"] as? Int == 25)
            #expect(state["fanSpeed"] as? Int == 5)
            #expect(env.hub.resultPostCount(of: id) == 1)
        }
    }

    @Test("A command with a subset of the schema's actions (power off only)")
    func powerOffOnly() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            let (_, results) = try env.command(Aircon.powerOff, to: tid)
            #expect(results.count == 1)
            #expect(results.first?.name == "turnPower")
            #expect(results.first?.succeeded == true)
            let records = t.waitForRecords(1)
            #expect(records.count == 1)
            #expect(records.first?.params == #"{"power":false}"#)
        }
    }

    @Test("A handler reads title, description, metadata, issuer, schema, version and command ID")
    func commandFieldsReachHandler() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            let (id, results) = try env.command(
                Aircon.allActions, to: tid, title: "Evening \"cool\" down",
                description: "Cool the room before 19:00 — ✓",
                metadata: #"{"source":"schedule","priority":2}"#)
            #expect(results.count == 3)
            let records = t.waitForRecords(3)
            try #require(records.count == 3)
            for r in records {
                #expect(r.commandID == id)
                #expect(r.issuer == "user:demo")
                #expect(r.schema == Aircon.schema)
                #expect(r.schemaVersion == 1)
                #expect(r.title == "Evening \"cool\" down")
                #expect(r.description == "Cool the room before 19:00 — ✓")
                #expect(r.metadata == #"{"priority":2,"source":"schedule"}"#)
            }
            // A command without them gives NULLs.
            _ = try env.command(Aircon.powerOn, to: tid)
            let more = t.waitForRecords(4)
            try #require(more.count == 4)
            #expect(more[3].title == nil)
            #expect(more[3].description == nil)
            #expect(more[3].metadata == nil)
        }
    }

    @Test("A trait command reaches alias handlers with scalar params; results are grouped by alias")
    func traitCommand() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_register_alias_handlers(t.ct, "AirConditionerAlias") == RC.ok)
                #expect(ct_register_alias_recorder(t.ct, "FanAlias", "setFanSpeed", "fan") == RC.ok)
            }
            let id = "cmd-trait-1"
            try env.publish(
                #"{"commandID":"\#(id)","issuer":"user:1234","actions":[{"AirConditionerAlias":[{"turnPower":true},{"setPresetTemperature":25}]},{"FanAlias":[{"setFanSpeed":3}]}]}"#,
                to: tid)
            let results = try env.results(of: id)
            #expect(results.map(\.alias) == ["AirConditionerAlias", "AirConditionerAlias", "FanAlias"])
            #expect(results.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            #expect(results.allSatisfy { $0.succeeded })

            // The grouping on the wire: one object per alias.
            let raw = try #require(env.hub.results(of: id))
            let doc = try #require(parseObject(raw))
            let groups = try #require(doc["actionResults"] as? [[String: Any]])
            #expect(groups.count == 2)
            #expect(groups.first?.keys.first == "AirConditionerAlias")
            #expect((groups.first?["AirConditionerAlias"] as? [Any])?.count == 2)

            let records = t.waitForRecords(3)
            try #require(records.count == 3)
            #expect(records.map(\.alias) == ["AirConditionerAlias", "AirConditionerAlias", "FanAlias"])
            #expect(records.map(\.params) == ["true", "25", "3"])
            #expect(records.map(\.index) == [0, 1, 2])
            #expect(records.map(\.tag) == ["alias", "alias", "fan"])
            for r in records {
                #expect(r.schema == nil)
                #expect(r.schemaVersion == 0)
                #expect(r.issuer == "user:1234")
                #expect(r.commandID == id)
            }
        }
    }

    @Test("Handler lookup: exact schema+version, schema at version 0, schema NULL, catch-all; cb NULL removes")
    func handlerLookupOrder() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                let ct = t.ct
                #expect(ct_register_recorder(ct, "Lookup", 2, "a1", "exact") == RC.ok)
                #expect(ct_register_recorder(ct, "Lookup", 0, "a1", "schema") == RC.ok)
                #expect(ct_register_recorder(ct, nil, 0, "a1", "any-schema") == RC.ok)
                #expect(ct_register_recorder(ct, "Lookup", 0, "a2", "schema") == RC.ok)
                #expect(ct_register_recorder(ct, nil, 0, "a2", "any-schema") == RC.ok)
                #expect(ct_register_recorder(ct, nil, 0, "a3", "any-schema") == RC.ok)
                #expect(ct_register_recorder(ct, "Other", 2, "a4", "other-schema") == RC.ok)
                #expect(ct_register_recorder(ct, "Lookup", 3, "a4", "other-version") == RC.ok)
                #expect(ct_register_alias_recorder(ct, "Lookup", "a1", "alias") == RC.ok)
                #expect(ct_register_any(ct, "catch-all") == RC.ok)
            }
            let ct = t.ct
            func tags(_ actions: String, schema: String = "Lookup", version: Int = 2) throws -> [String?] {
                ct_clear_records(ct)
                let (_, results) = try env.command(actions, to: tid, schema: schema, version: version)
                #expect(results.allSatisfy { $0.succeeded })
                return t.waitForRecords(results.count).map(\.tag)
            }
            #expect(
                try tags(#"[{"a1":{}},{"a2":{}},{"a3":{}},{"a4":{}}]"#) == [
                    "exact", "schema", "any-schema", "catch-all"
                ])
            #expect(try tags(#"[{"a4":{}}]"#, version: 3) == ["other-version"])
            #expect(try tags(#"[{"a1":{}}]"#, version: 0) == ["schema"])

            // Registering the same key again replaces the handler.
            #expect(ct_register_recorder(ct, "Lookup", 2, "a1", "exact-2") == RC.ok)
            #expect(try tags(#"[{"a1":{}}]"#) == ["exact-2"])

            // Removing each level in turn falls through to the next.
            #expect(ct_unregister(ct, "Lookup", 2, "a1") == RC.ok)
            #expect(try tags(#"[{"a1":{}}]"#) == ["schema"])
            #expect(ct_unregister(ct, "Lookup", 0, "a1") == RC.ok)
            #expect(try tags(#"[{"a1":{}}]"#) == ["any-schema"])
            #expect(ct_unregister(ct, nil, 0, "a1") == RC.ok)
            #expect(try tags(#"[{"a1":{}}]"#) == ["catch-all"])

            // Trait commands: the alias, then schema NULL, then the catch-all.
            let trait = "cmd-lookup-trait"
            ct_clear_records(ct)
            try env.publish(#"{"commandID":"\#(trait)","actions":[{"Lookup":[{"a1":1},{"a3":2},{"a2":3}]}]}"#, to: tid)
            #expect(try env.results(of: trait).allSatisfy { $0.succeeded })
            #expect(t.waitForRecords(3).map(\.tag) == ["alias", "any-schema", "any-schema"])
            #expect(ct_unregister_alias(ct, "Lookup", "a1") == RC.ok)

            // Without the catch-all, a1 finds no handler; the others still run.
            #expect(ct_register_any(ct, nil) == RC.ok)
            ct_clear_records(ct)
            let (_, results) = try env.command(#"[{"a1":{}},{"a3":{}}]"#, to: tid, schema: "Lookup", version: 2)
            try #require(results.count == 2)
            #expect(results[0].succeeded == false)
            #expect(results[0].errorMessage?.contains("no handler for action \"a1\"") == true)
            #expect(results[1].succeeded == true)
            #expect(t.waitForRecords(1).map(\.tag) == ["any-schema"])
        }
    }

    @Test("A failed action carries its message and data; data also rides on a success")
    func failedActionWithMessageAndData() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_fail(t.ct, "setFanSpeed", "fan motor jammed: \"stuck\" at 0 rpm\n") == 0)
                #expect(ct_behave_data(t.ct, "setFanSpeed", #"{"rpm":0,"code":"E42"}"#) == 0)
                #expect(ct_behave_data(t.ct, "setPresetTemperature", #"{"applied":25}"#) == 0)
            }
            let (_, results) = try env.command(Aircon.allActions, to: tid)
            try #require(results.count == 3)
            #expect(results[0].succeeded && results[0].data == nil)
            #expect(results[1].succeeded)
            #expect(results[1].data?["applied"] as? Int == 25)
            #expect(results[2].succeeded == false)
            #expect(results[2].errorMessage == "fan motor jammed: \"stuck\" at 0 rpm\n")
            #expect(results[2].data?["rpm"] as? Int == 0)
            #expect(results[2].data?["code"] as? String == "E42")
            let records = t.waitForRecords(3)
            #expect(records.last?.failRc == Int(RC.ok))
            #expect(records.last?.dataRc == Int(RC.ok))
        }
    }

    @Test("An unknown action fails with a message while the other actions still run")
    func unknownActionFails() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            let (_, results) = try env.command(
                #"[{"turnPower":{"power":true}},{"selfDestruct":{"delay":0}},{"setFanSpeed":{"fanSpeed":2}}]"#, to: tid)
            try #require(results.count == 3)
            #expect(results.map(\.name) == ["turnPower", "selfDestruct", "setFanSpeed"])
            #expect(results[0].succeeded)
            #expect(results[1].succeeded == false)
            let message = try #require(results[1].errorMessage)
            #expect(message.contains("selfDestruct"))
            #expect(message.contains("no handler"))
            #expect(results[2].succeeded)
            #expect(t.waitForRecords(2).map(\.name) == ["turnPower", "setFanSpeed"])
        }
    }
}
