// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing

/// The C API's argument checks, status texts and version.
@Suite("C API", .offPool)
struct APITests {
    @Test("NULL, empty and out-of-range arguments to every function are refused (checked from C)")
    func misuseFromC() throws {
        let scratch = try makeTempDirectory(prefix: "thingif-misuse")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var report = [CChar](repeating: 0, count: 16384)
        let failures = ct_api_misuse(scratch, &report, report.count)
        let text = String(cString: report)
        #expect(failures == 0, "\(text)")
        #expect(text.isEmpty)
    }

    @Test("thingif_strerror: a distinct non-empty text per status; unknown gives \"unknown status\"")
    func strerrorTexts() {
        var seen = Set<String>()
        for status in RC.ok...RC.last {
            let text = String(cString: ct_strerror(status))
            #expect(!text.isEmpty)
            #expect(text != "unknown status", "status \(status)")
            seen.insert(text)
        }
        #expect(seen.count == Int(RC.last) + 1)
        for status: Int32 in [-1, RC.last + 1, 1000, .max, .min] {
            #expect(String(cString: ct_strerror(status)) == "unknown status")
        }
    }

    @Test("thingif_version matches THINGIF_VERSION_STRING")
    func version() {
        let version = String(cString: ct_version())
        #expect(version == String(cString: ct_version_macro()))
        #expect(version.split(separator: ".").count == 3)
        #expect(version == "\(THINGIF_VERSION_MAJOR).\(THINGIF_VERSION_MINOR).\(THINGIF_VERSION_PATCH)")
    }

    @Test("Before onboarding: the loop, loop_start and state uploads give THINGIF_ERR_NOT_ONBOARDED")
    func beforeOnboarding() throws {
        let root = try makeTempDirectory(prefix: "thingif-new")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let made = ct_new("app", "key", root + "/thing", 1883, LogLevel.debug)
        let t = TestThing(ct: try #require(made))
        defer { t.destroy() }
        #expect(ct_loop_once(t.ct, 0) == RC.notOnboarded)
        #expect(ct_loop_for(t.ct, 10) == RC.notOnboarded)
        #expect(ct_start(t.ct) == RC.notOnboarded)
        #expect(ct_stop(t.ct, 1000) == RC.state)
        #expect(ct_update_state(t.ct, #"{"power":true}"#) == RC.notOnboarded)
        #expect(ct_patch_state(t.ct, #"{"power":true}"#) == RC.notOnboarded)
        #expect(ct_update_firmware_version(t.ct, "1.0") == RC.notOnboarded)
        #expect(t.thingID == nil)
        #expect(!t.isConnected)
    }

    @Test("Out-of-range options are refused and leave the old value")
    func optionRanges() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                let maxPayload = Int32(THINGIF_OPT_MAX_PAYLOAD.rawValue)
                #expect(ct_set_option(t.ct, maxPayload, 300) == RC.ok)
                #expect(ct_set_option(t.ct, maxPayload, 100) == RC.invalid)
                #expect(ct_set_option(t.ct, maxPayload, 1 << 30) == RC.invalid)
                #expect(ct_set_option(t.ct, 42, 1) == RC.invalid)
            }
            // The limit of 300 bytes still holds: a longer command is dropped.
            let pad = String(repeating: "y", count: 400)
            try env.publish(
                #"{"commandID":"cmd-300","actions":[{"turnPower":{"power":true,"pad":"\#(pad)"}}]}"#, to: tid)
            #expect(t.waitForLog("over the limit of 300 bytes"))
            try env.expectAlive(tid)
        }
    }
}
