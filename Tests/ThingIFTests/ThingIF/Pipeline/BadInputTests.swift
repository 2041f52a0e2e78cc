// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing

/// Bad input from the network never crashes the thing. With a readable
/// commandID it becomes failed results; without one, a log line. Each test
/// then checks that a good command still runs.
@Suite("Bad input", .offPool)
struct BadInputTests {
    @Test("Malformed JSON: a log line; with a readable commandID, every action of the sent command failed, once")
    func malformedJSON() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            // No readable commandID: a log line and nothing else.
            try env.publish(#"{"actions":[{"turnPower":{"power":true}}"#, to: tid)
            #expect(t.waitForLog("not valid JSON"))
            // An unsafe commandID is not reported either.
            #expect(
                env.hub.publishRawCommand(Array(#"{"commandID":"cmd/evil","actions":["#.utf8), commandID: nil, to: tid))
            // A readable one: the command the hub sent gets every action failed.
            let sent =
                #"{"commandID":"cmd-malformed","schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true}},{"setFanSpeed":{"fanSpeed":3}}]}"#
            let cut = Array(sent.utf8.dropLast(3))
            #expect(env.hub.publishRawCommand(cut, commandID: "cmd-malformed", to: tid, stored: sent))
            let results = try env.results(of: "cmd-malformed")
            #expect(results.map(\.name) == ["turnPower", "setFanSpeed"])
            #expect(
                results.allSatisfy { !$0.succeeded && ($0.errorMessage ?? "").contains("not valid JSON") }, "\(results)"
            )
            #expect(env.hub.store.command(id: "cmd-malformed")?.state == .incomplete)
            // Delivered again (the hub resends what has no results): reported once.
            #expect(env.hub.publishRawCommand(cut, commandID: "cmd-malformed", to: tid))
            try env.expectAlive(tid)
            #expect(env.hub.resultPostCount(of: "cmd-malformed") == 1)
            #expect(env.hub.results(of: "cmd/evil") == nil)
            #expect(t.records.count == 1, "no handler ran for the dropped commands")
        }
    }

    @Test("`actions` not an array: a failed result that says so")
    func actionsNotAnArray() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            try env.publish(
                #"{"commandID":"cmd-not-array","schema":"AirConditioner-Demo","schemaVersion":1,"actions":{"turnPower":{"power":true}}}"#,
                to: tid)
            let results = try env.results(of: "cmd-not-array")
            try #require(results.count == 1)
            #expect(results[0].succeeded == false)
            let message = try #require(results[0].errorMessage)
            #expect(message.contains("\"actions\" must be an array"))
            #expect(message.contains("an object"))
            #expect(t.records.isEmpty)
            try env.expectAlive(tid)
        }
    }

    @Test("An action object with no key fails at its position; the others run")
    func actionWithZeroKeys() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            try env.publish(
                #"{"commandID":"cmd-zero-keys","schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true}},{},{"setFanSpeed":{"fanSpeed":3}}]}"#,
                to: tid)
            let results = try env.results(of: "cmd-zero-keys")
            try #require(results.count == 3)
            #expect(results[0].succeeded && results[0].name == "turnPower")
            #expect(results[1].succeeded == false)
            #expect(results[1].errorMessage?.contains("exactly one key, it has 0") == true)
            #expect(results[2].succeeded && results[2].name == "setFanSpeed")
            #expect(t.waitForRecords(2).map(\.name) == ["turnPower", "setFanSpeed"])
            try env.expectAlive(tid)
        }
    }

    @Test("An action object with two keys fails at its position; the others run")
    func actionWithTwoKeys() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            try env.publish(
                #"{"commandID":"cmd-two-keys","schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true}},{"setPresetTemperature":{"presetTemperature":20},"setFanSpeed":{"fanSpeed":1}},{"setFanSpeed":{"fanSpeed":3}}]}"#,
                to: tid)
            let results = try env.results(of: "cmd-two-keys")
            try #require(results.count == 3)
            #expect(results[0].succeeded)
            #expect(results[1].succeeded == false)
            #expect(results[1].errorMessage?.contains("exactly one key, it has 2") == true)
            #expect(results[2].succeeded)
            let records = t.waitForRecords(2)
            #expect(records.map(\.name) == ["turnPower", "setFanSpeed"])
            #expect(records.map(\.index) == [0, 2])
            try env.expectAlive(tid)
        }
    }

    @Test("A param of the wrong type: the C handler's json_unpack_ex fails the action with the message")
    func paramOfWrongType() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            let (_, results) = try env.command(
                #"[{"setPresetTemperature":{"presetTemperature":"hot"}},{"turnPower":{"pwr":true}},{"setFanSpeed":{"fanSpeed":3}}]"#,
                to: tid)
            try #require(results.count == 3)
            #expect(results[0].succeeded == false)
            let m0 = try #require(results[0].errorMessage)
            #expect(m0.hasPrefix("setPresetTemperature: invalid params:"))
            #expect(m0.contains("integer"))
            #expect(results[1].succeeded == false)
            #expect(results[1].errorMessage?.contains("power") == true)
            #expect(results[2].succeeded)
            #expect(t.waitForRecords(3).map(\.failRc) == [Int(RC.ok), Int(RC.ok), nil])
            try env.expectAlive(tid)
        }
    }

    @Test("A missing commandID: a log line, nothing reported")
    func missingCommandID() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            try env.publish(
                #"{"schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true}}]}"#, to: tid
            )
            #expect(t.waitForLog("without \"commandID\""))
            try env.expectAlive(tid)
            // Only the good command ran.
            #expect(t.records.count == 1)
            // A commandID that is not a string, or that cannot name a topic level, is no better.
            try env.publish(#"{"commandID":42,"actions":[{"turnPower":{"power":true}}]}"#, to: tid)
            #expect(t.waitForLog("\"commandID\" is an integer"))
            try env.publish(#"{"commandID":"a/b","actions":[{"turnPower":{"power":true}}]}"#, to: tid)
            #expect(t.waitForLog("holds '/'"))
            try env.expectAlive(tid)
            #expect(t.records.count == 2)
        }
    }

    @Test("A payload over THINGIF_OPT_MAX_PAYLOAD is dropped with a log line")
    func payloadOverLimit() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_MAX_PAYLOAD.rawValue), 512) == RC.ok)
            }
            let pad = String(repeating: "x", count: 600)
            let sent =
                #"{"commandID":"cmd-big","schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true,"pad":"\#(pad)"}}]}"#
            #expect(env.hub.publishRawCommand(Array(sent.utf8), commandID: "cmd-big", to: tid, stored: sent))
            #expect(t.waitForLog("over the limit of 512 bytes"))
            // The commandID is read from the first bytes: the command is
            // reported with its action failed and the reason, never left open.
            let results = try env.results(of: "cmd-big")
            #expect(results.count == 1 && results[0].name == "turnPower" && !results[0].succeeded)
            #expect(results[0].errorMessage?.contains("over the limit of 512 bytes") == true)
            try env.expectAlive(tid)
            #expect(t.records.count == 1)
        }
    }

    @Test("Non-UTF-8 bytes are dropped with a log line")
    func nonUTF8() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            var bytes = Array(
                #"{"commandID":"cmd-latin1","schema":"AirConditioner-Demo","schemaVersion":1,"title":""#.utf8)
            bytes += [0xC9, 0x74, 0xE9, 0xFF, 0xFE]
            bytes += Array(#"","actions":[{"turnPower":{"power":true}}]}"#.utf8)
            let stored =
                #"{"commandID":"cmd-latin1","schema":"AirConditioner-Demo","schemaVersion":1,"actions":[{"turnPower":{"power":true}}]}"#
            #expect(env.hub.publishRawCommand(bytes, commandID: "cmd-latin1", to: tid, stored: stored))
            #expect(t.waitForLog("not valid JSON"))
            let results = try env.results(of: "cmd-latin1")
            #expect(
                results.count == 1 && !results[0].succeeded
                    && results[0].errorMessage?.contains("not valid JSON") == true)
            try env.expectAlive(tid)
        }
    }

    @Test("Deep nesting (100000 '[') is refused with a log line, without a crash")
    func deepNesting() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_MAX_PAYLOAD.rawValue), 1 << 20) == RC.ok)
            }
            try env.publish([UInt8](repeating: UInt8(ascii: "["), count: 100_000), to: tid)
            // Nesting inside a command with a readable ID: refused by the parser too.
            let deep = String(repeating: "[", count: 100_000)
            try env.publish(#"{"commandID":"cmd-deep","actions":[{"turnPower":\#(deep)"#, to: tid)
            #expect(t.waitForLog("not valid JSON"))
            try env.expectAlive(tid)
            #expect(env.hub.results(of: "cmd-deep") == nil)
        }
    }

    @Test("A top level that is not an object is dropped with a log line")
    func nonObjectTopLevel() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            try env.publish(#"[{"commandID":"cmd-in-array"}]"#, to: tid)
            #expect(t.waitForLog("is an array, not a JSON object"))
            try env.publish("42", to: tid)
            try env.publish([], to: tid)
            try env.expectAlive(tid)
            #expect(t.records.count == 1)
        }
    }
}
