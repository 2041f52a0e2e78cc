// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing

/// The two ways to run the loop, and what may be called from where.
@Suite("Threads", .offPool)
struct ThreadTests {
    @Test("thingif_loop_start / thingif_loop_stop, then the caller-driven loop on the same handle")
    func loopStartStop() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            #expect(ct_start(t.ct) == RC.state, "a second start is refused")
            _ = try env.command(Aircon.powerOn, to: tid)
            #expect(ct_stop(t.ct, 5000) == RC.ok)
            #expect(ct_stop(t.ct, 5000) == RC.state, "stopping a stopped loop")

            // Stopped: nothing services the connection, so the command waits.
            let id = try #require(
                env.hub.sendCommand(to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.powerOff))
            #expect(env.hub.waitForResults(of: id, timeoutMs: 300) == nil)
            // The caller's thread takes over.
            #expect(poll { ct_loop_for(t.ct, 100) == RC.ok && env.hub.results(of: id) != nil })
            #expect(t.records.map(\.params) == [#"{"power":true}"#, #"{"power":false}"#])

            // And the own thread again.
            #expect(ct_start(t.ct) == RC.ok)
            _ = try env.command(Aircon.powerOn, to: tid)
            #expect(ct_stop(t.ct, 5000) == RC.ok)
        }
    }

    @Test("Caller-driven thingif_loop connects, runs handlers on the caller's thread and reports")
    func callerDrivenLoop() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon(start: false)
            #expect(!t.isConnected)
            #expect(
                poll {
                    ct_loop_for(t.ct, 50); return t.isConnected && env.hub.presence.isOnline(tid)
                })
            #expect(ct_loop_once(t.ct, 0) == RC.ok)
            let id = try #require(
                env.hub.sendCommand(to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.allActions))
            #expect(
                poll {
                    ct_loop_for(t.ct, 50); return env.hub.results(of: id) != nil
                })
            let results = try parseResults(try #require(env.hub.results(of: id)))
            #expect(results.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            #expect(results.allSatisfy { $0.succeeded })
            #expect(t.records.count == 3)
        }
    }

    @Test("From inside a handler on the loop thread: loop_stop, destroy, loop, onboard refused; no deadlock")
    func reentryOnOwnThread() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_probe(t.ct, "turnPower") == 0)
            }
            let (_, results) = try env.command(
                #"[{"turnPower":{"power":true}},{"setFanSpeed":{"fanSpeed":2}}]"#, to: tid)
            #expect(results.count == 2)
            // A message that is not UTF-8 still fails the action (repaired);
            // a refused set_data leaves it as it was.
            #expect(results.map(\.succeeded) == [false, true])
            #expect(results.first?.errorMessage == "\u{FFFD}\u{FFFD} not UTF-8")
            #expect(results.first?.data == nil)
            let probe = try #require(t.waitForRecords(2).first)
            let forbidden = try #require(probe.forbidden)
            for name in ["loop_stop", "destroy", "loop", "onboard", "use_onboarded"] {
                #expect(forbidden[name] == Int(RC.inCallback), "\(name) from inside a handler")
            }
            let allowed = try #require(probe.allowed)
            #expect(allowed["thing_id"] == 1)
            #expect(allowed["is_connected"] == 1)
            for name in ["set_option", "set_log_callback", "on_action", "on_alias_action", "update_firmware_version"] {
                #expect(allowed[name] == Int(RC.ok), "\(name) from inside a handler")
            }
            #expect(allowed["fail_bad_utf8"] == Int(RC.ok))
            #expect(allowed["set_data_array"] == Int(RC.json))
            #expect(allowed["set_data_null"] == Int(RC.invalid))
            // The firmware version sent from the handler arrives.
            #expect(poll { env.hub.thing(tid)?.firmwareVersion == "probe-1.0" })
            // The loop still stops and the handle is destroyed, within bounds.
            #expect(ct_stop(t.ct, 5000) == RC.ok)
            #expect(t.destroy() == RC.ok)
        }
    }

    @Test("From inside a handler of the caller-driven loop the same calls are refused")
    func reentryInCallerDrivenLoop() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon(start: false) { t in
                #expect(ct_behave_probe(t.ct, "setFanSpeed") == 0)
            }
            #expect(
                poll {
                    ct_loop_for(t.ct, 50); return env.hub.presence.isOnline(tid)
                })
            let id = try #require(
                env.hub.sendCommand(to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.allActions))
            #expect(
                poll {
                    ct_loop_for(t.ct, 50); return env.hub.results(of: id) != nil
                })
            let probe = try #require(t.records.last)
            #expect(probe.name == "setFanSpeed")
            let forbidden = try #require(probe.forbidden)
            for name in ["loop_stop", "destroy", "loop", "onboard", "use_onboarded"] {
                #expect(forbidden[name] == Int(RC.inCallback), "\(name) from inside a handler")
            }
            #expect(t.destroy() == RC.ok)
        }
    }

    @Test("While the loop thread runs: thingif_loop, onboard and set_broker give THINGIF_ERR_STATE")
    func callsWhileThreadRuns() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            #expect(ct_loop_once(t.ct, 0) == RC.state)
            #expect(ct_loop_for(t.ct, 10) == RC.state)
            #expect(ct_onboard(t.ct, "AC-0001", "password-1", nil, nil, nil) == RC.state)
            #expect(ct_use_onboarded(t.ct, tid, "token") == RC.state)
            #expect(ct_set_broker(t.ct, "127.0.0.1", Int32(env.broker.port)) == RC.state)
            try env.expectAlive(tid)
            #expect(ct_stop(t.ct, 5000) == RC.ok)
            #expect(ct_set_broker(t.ct, "127.0.0.1", Int32(env.broker.port)) == RC.ok)
        }
    }

    @Test("thingif_destroy while the loop thread runs stops it and publishes offline")
    func destroyWhileRunning() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            try env.expectAlive(tid)
            #expect(t.destroy() == RC.ok)
            #expect(env.hub.wait(timeoutMs: 30_000) { !env.hub.presence.isOnline(tid) })
        }
    }
}
