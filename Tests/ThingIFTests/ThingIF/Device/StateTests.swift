// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing

/// State and firmware-version uploads.
@Suite("State", .offPool)
struct StateTests {
    @Test("A full PUT then a PATCH: the hub merges the patch into the stored state")
    func putThenPatch() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            #expect(
                ct_update_state(t.ct, #"{"power":true,"presetTemperature":25,"fanSpeed":3,"mode":"cool"}"#) == RC.ok)
            #expect(ct_patch_state(t.ct, #"{"presetTemperature":20,"humidity":40}"#) == RC.ok)
            let uploads = env.hub.waitForStateUploads(of: tid, count: 2, timeoutMs: 30_000)
            try #require(uploads.count == 2)
            #expect(uploads.map(\.method) == ["PUT", "PATCH"])
            #expect(parseObject(uploads[1].body)?.count == 2)
            let state = try #require(parseObject(env.hub.thing(tid)?.state))
            #expect(state["power"] as? Bool == true)
            #expect(state["presetTemperature"] as? Int == 20)
            #expect(state["fanSpeed"] as? Int == 3)
            #expect(state["mode"] as? String == "cool")
            #expect(state["humidity"] as? Int == 40)

            // A new PUT replaces everything.
            #expect(ct_update_state(t.ct, #"{"power":false}"#) == RC.ok)
            _ = env.hub.waitForStateUploads(of: tid, count: 3, timeoutMs: 30_000)
            let replaced = try #require(parseObject(env.hub.thing(tid)?.state))
            #expect(replaced.count == 1)
            #expect(replaced["power"] as? Bool == false)
            // Not an object.
            #expect(ct_update_state(t.ct, "[1,2]") == RC.json)
            #expect(
                ct_patch_state(t.ct, "\"on\"") == -1, "jansson itself refuses a bare string without JSON_DECODE_ANY")
        }
    }

    @Test("A PATCH from inside a handler reaches the hub")
    func patchFromHandler() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_upload_state(t.ct, "setPresetTemperature", 2) == 0)
            }
            _ = try env.command(#"[{"setPresetTemperature":{"presetTemperature":22}}]"#, to: tid)
            let uploads = env.hub.waitForStateUploads(of: tid, count: 1, timeoutMs: 30_000)
            #expect(uploads.map(\.method) == ["PATCH"])
            #expect(parseObject(env.hub.thing(tid)?.state)?["presetTemperature"] as? Int == 22)
            #expect(t.records.first?.uploadRc == Int(RC.ok))
        }
    }

    @Test("The periodic state provider uploads every interval (200 ms) and stops when removed")
    func periodicProvider() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_state_provider(t.ct, 200) == RC.ok)
            }
            let uploads = env.hub.waitForStateUploads(of: tid, count: 2, timeoutMs: 30_000)
            try #require(uploads.count >= 2)
            #expect(uploads.allSatisfy { $0.method == "PUT" })
            let ticks = uploads.compactMap { parseObject($0.body)?["tick"] as? Int }
            #expect(ticks.count == uploads.count)
            #expect(ticks == ticks.sorted())
            #expect(ct_state_provider_calls(t.ct) >= 2)

            #expect(ct_set_state_provider(t.ct, 0) == RC.ok)
            let callsAfterRemoval = ct_state_provider_calls(t.ct)
            // Must not happen: provider calls after removal; room for them to show.
            usleep(700_000)
            #expect(ct_state_provider_calls(t.ct) <= callsAfterRemoval + 1)
        }
    }

    @Test("A firmware version update reaches the hub")
    func firmwareVersion() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            #expect(env.hub.thing(tid)?.firmwareVersion == "1.0.0")
            #expect(ct_update_firmware_version(t.ct, "2.0.1") == RC.ok)
            #expect(poll { env.hub.thing(tid)?.firmwareVersion == "2.0.1" })
            // Logged after it is handled: a moment after the store has it.
            let path = "things/\(tid)/firmware-version"
            #expect(poll { env.hub.requests.contains { $0.path == path } })
            let request = env.hub.requests.last { $0.path == path }
            #expect(request?.method == "PUT")
            #expect(request?.status == 204)
        }
    }

    @Test("State queued before the connection is sent once connected")
    func stateQueuedUntilConnected() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon(start: false)
            #expect(ct_update_state(t.ct, #"{"power":true}"#) == RC.ok)
            #expect(ct_update_firmware_version(t.ct, "1.0.1") == RC.ok)
            #expect(env.hub.stateUploads(of: tid).isEmpty)
            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForStateUploads(of: tid, count: 1, timeoutMs: 30_000).count == 1)
            #expect(poll { env.hub.thing(tid)?.firmwareVersion == "1.0.1" })
        }
    }
}
