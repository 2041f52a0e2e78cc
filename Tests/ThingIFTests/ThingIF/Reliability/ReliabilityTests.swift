// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// The reliability contract (docs/FAILURE_MODEL.md): at most once execution,
/// at least once reporting, the outbox, deferred actions, reconnects.
@Suite("Reliability", .offPool)
struct ReliabilityTests {
    static let full = Int32(THINGIF_ERR_FULL.rawValue)

    @Test("At most once: a command delivered twice runs once, and the second delivery gets the stored results again")
    func sameCommandTwice() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            let id = FrameworkSide.newCommandID()
            let payload = commandJSON(id, Aircon.powerOn)
            try env.publish(payload, to: tid)
            #expect(try env.results(of: id).map(\.succeeded) == [true])
            // Answered and out of the outbox, so the repeat is sent, not merely still queued.
            #expect(poll { pendingOutbox(env.storage("thing")).isEmpty })

            try env.publish(payload, to: tid)
            #expect(poll { env.hub.resultPostCount(of: id) >= 2 }, "the stored results were not sent again")
            #expect(t.waitForLog("command \(id) arrived again; it ran already"))
            // Commands run in order: once a later one has run, the repeat was decided.
            try env.expectAlive(tid)
            #expect(t.records.filter { $0.commandID == id }.count == 1, "the handler ran again")
            #expect(env.hub.resultPostCount(of: id) == 2)
        }
    }

    @Test("The ledger survives a restart: a new handle on the same storage does not run a command again")
    func ledgerSurvivesRestart() throws {
        try withEnv { env in
            let (t1, tid) = try env.onlineAircon()
            let id = FrameworkSide.newCommandID()
            let payload = commandJSON(id, Aircon.allActions)
            try env.publish(payload, to: tid)
            #expect(try env.results(of: id).count == 3)
            #expect(poll { pendingOutbox(env.storage("thing")).isEmpty })
            #expect(t1.records.count == 3)
            #expect(t1.destroy() == RC.ok)

            let (t2, _) = try env.onlineAircon()
            try env.publish(payload, to: tid)
            #expect(poll { env.hub.resultPostCount(of: id) >= 2 }, "the stored results were not sent again")
            #expect(t2.waitForLog("it ran already"))
            try env.expectAlive(tid)
            #expect(!t2.records.contains { $0.commandID == id }, "the restarted thing ran the command again")
        }
    }

    @Test("A command cut off by a crash is reported as interrupted on the next start, not run again")
    func interruptedCommand() throws {
        try withEnv { env in
            let (t1, tid1) = try env.onlineAircon(start: false)
            #expect(t1.destroy() == RC.ok)
            // What the ledger holds when the process died between "started" and "done".
            let id = "cmd-cut-off-1"
            env.hub.recordCommand(id, for: tid1)
            let line = #"{"c":"\#(id)","a":[{"names":["turnPower","setFanSpeed"]}]}"# + "\n"
            try line.write(toFile: env.storage("thing") + "/ledger.jsonl", atomically: true, encoding: .utf8)

            let (t2, tid) = try env.onlineAircon()
            let results = try env.results(of: id)
            #expect(results.map(\.name) == ["turnPower", "setFanSpeed"])
            #expect(results.allSatisfy { !$0.succeeded })
            #expect(results.allSatisfy { $0.errorMessage?.hasPrefix("interrupted") == true }, "\(results)")
            #expect(t2.logContains("command \(id) was cut off by a restart"))

            // Delivered again, it is still not run.
            try env.publish(commandJSON(id, #"[{"turnPower":{"power":true}},{"setFanSpeed":{"fanSpeed":1}}]"#), to: tid)
            #expect(poll { env.hub.resultPostCount(of: id) >= 2 })
            try env.expectAlive(tid)
            #expect(!t2.records.contains { $0.commandID == id }, "a handler ran: \(t2.records.map { $0.name ?? "" })")
        }
    }

    @Test("The outbox survives a restart: results nobody answered go out after the next start")
    func outboxSurvivesRestart() throws {
        try withEnv { env in
            env.hub.stop()
            let hubDB = env.storage("hub") + "/hub.sqlite"
            let hubA = try startHub(env, store: try makeHubStore(hubDB))
            defer { hubA.stop() }
            let (t1, tid) = try startAircon(env, hub: hubA)
            // The loop pauses so that the command is taken only after the hub is gone.
            #expect(ct_stop(t1.ct, 5000) == RC.ok)
            let id = try #require(
                hubA.sendCommand(
                    to: tid, schema: Aircon.schema, schemaVersion: 1,
                    actions: Aircon.powerOn))
            // The broker's PUBACK: the command waits in the thing's session.
            #expect(poll { hubA.delivery.deliveryState(id).hasPrefix("no attempt in flight") }, "no PUBACK")
            hubA.stop()
            #expect(ct_start(t1.ct) == RC.ok)
            #expect(poll { t1.records.count == 1 })
            #expect(
                poll { pendingOutbox(env.storage("thing")).map(\.kind) == ["results"] },
                "\(pendingOutbox(env.storage("thing")))")
            #expect(t1.destroy() == RC.ok)
            #expect(pendingOutbox(env.storage("thing")).count == 1)

            let hubB = try startHub(env, store: try makeHubStore(hubDB))
            defer { hubB.stop() }
            #expect(hubB.results(of: id) == nil)
            let (t2, _) = try startAircon(env, hub: hubB)
            let text = try #require(hubB.waitForResults(of: id, timeoutMs: 30_000), "the stored results did not arrive")
            #expect(try parseResults(text).map(\.succeeded) == [true])
            #expect(poll { pendingOutbox(env.storage("thing")).isEmpty }, "the outbox was not drained")
            #expect(t2.records.isEmpty)
        }
    }

    @Test(
        "A request answered 5xx, 429 or not at all is sent again under its ID after the request timeout; another 4xx is not"
    )
    func resendAfterTimeoutAnd5xx() throws {
        try withEnv { env in
            let (t, _) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 300) == RC.ok)
            }
            env.hub.stop()
            let fake = try FakeFramework(port: env.broker.port) { seen, nth in
                if seen.body.contains("\"step\":1") { return nth == 1 ? nil : 204 }
                if seen.body.contains("\"step\":2") { return nth == 1 ? 503 : 204 }
                if seen.body.contains("\"step\":3") { return nth == 1 ? 429 : 204 }
                if seen.path.hasSuffix("/firmware-version") { return 400 }
                return 204
            }
            defer { fake.stop() }
            // PATCHes: a full PUT would supersede the one before it.
            #expect(ct_patch_state(t.ct, #"{"step":1}"#) == RC.ok)
            #expect(ct_patch_state(t.ct, #"{"step":2}"#) == RC.ok)
            #expect(ct_patch_state(t.ct, #"{"step":3}"#) == RC.ok)
            #expect(ct_update_firmware_version(t.ct, "9.9.9") == RC.ok)
            #expect(poll { pendingOutbox(env.storage("thing")).isEmpty }, "\(pendingOutbox(env.storage("thing")))")
            usleep(1_200_000)  // four request timeouts: room for a wrong resend of the 4xx

            for step in ["\"step\":1", "\"step\":2", "\"step\":3"] {
                let sent = fake.requests.filter { $0.body.contains(step) }
                #expect(sent.count == 2, "\(step): \(sent.count) sends")
                #expect(Set(sent.map(\.requestID)).count == 1, "the request ID changed on the resend")
            }
            #expect(
                fake.requests.filter { $0.path.hasSuffix("/firmware-version") }.count == 1, "the 4xx was sent again")
            #expect(t.logContains("no answer from the framework to partial state; sending it again"))
            #expect(t.logContains("framework answered partial state with 503"))
            #expect(t.logContains("framework answered partial state with 429"))
            #expect(t.logContains("framework rejected firmware version 9.9.9: 400"))
        }
    }

    @Test(
        "Outbox: a full state supersedes waiting ones; when full the oldest state goes; results are kept, uploads refused and commands wait"
    )
    func outboxFullPolicy() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_OUTBOX_MAX.rawValue), 8) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 300) == RC.ok)
            }
            let topic = try #require(env.hub.thing(tid)?.installations.values.first)
            env.hub.stop()
            let fake = try FakeFramework(port: env.broker.port) { _, _ in nil }
            defer { fake.stop() }
            let dir = env.storage("thing")

            // Full: the oldest partial states go, the newest 8 stay.
            for i in 0..<10 { #expect(ct_patch_state(t.ct, #"{"n":\#(i)}"#) == RC.ok) }
            #expect(t.logContains("outbox full: dropped the oldest state upload, partial state"))
            let kept = pendingOutbox(dir).compactMap { parseObject($0.body)?["n"] as? Int }
            #expect(kept == Array(2..<10))
            // A full state supersedes every state upload still waiting.
            #expect(ct_update_state(t.ct, #"{"n":10}"#) == RC.ok)
            #expect(pendingOutbox(dir).compactMap { parseObject($0.body)?["n"] as? Int } == [10])

            fake.setPolicy { seen, _ in seen.path.hasSuffix("/states") ? 204 : nil }
            #expect(poll { pendingOutbox(dir).isEmpty })
            #expect(fake.requests.contains { $0.path.hasSuffix("/states") && $0.body.contains("\"n\":10") })

            // Results are never dropped: when they fill the outbox, uploads are
            // refused and the next command waits.
            for i in 0..<8 { #expect(fake.publish(commandJSON("cmd-full-\(i)", Aircon.powerOn), topic: topic)) }
            // In the outbox once sent (the ledger has them on disk a moment before).
            #expect(
                poll {
                    t.records.count == 8 && pendingOutbox(dir).count == 8
                        && Set(fake.requests.filter { $0.path.contains("/commands/cmd-full-") }.map(\.path)).count == 8
                })
            #expect(ct_update_state(t.ct, #"{"n":99}"#) == ReliabilityTests.full)
            #expect(t.logContains("state refused"))
            #expect(fake.publish(commandJSON("cmd-full-8", Aircon.powerOn), topic: topic))
            // Must not happen: a command run while results fill the outbox.
            usleep(1_000_000)
            #expect(t.records.count == 8, "a command ran while results filled the outbox")

            fake.setPolicy { _, _ in 204 }
            #expect(poll(timeoutMs: 30_000) { t.records.count == 9 }, "the waiting command did not run")
            // The handler's record comes before its results reach the outbox:
            // wait for the request itself, not for an outbox that may be empty
            // in between.
            #expect(
                poll { fake.requests.contains { $0.path.contains("/commands/cmd-full-8/") } },
                "the waiting command's results were not sent")
            #expect(poll { pendingOutbox(dir).isEmpty })
            #expect(ct_update_state(t.ct, #"{"n":100}"#) == RC.ok)
        }
    }

    @Test(
        "Results fill the outbox while commands keep coming: commands wait up to THINGIF_OPT_INBOX_MAX, those beyond it run, and all complete when the framework answers"
    )
    func inboxBoundWhileOutboxFull() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_OUTBOX_MAX.rawValue), 8) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 300) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_INBOX_MAX.rawValue), 2) == RC.ok)
            }
            let topic = try #require(env.hub.thing(tid)?.installations.values.first)
            env.hub.stop()
            let fake = try FakeFramework(port: env.broker.port) { _, _ in nil }
            defer { fake.stop() }
            for i in 0..<8 { #expect(fake.publish(commandJSON("cmd-fill-\(i)", Aircon.powerOn), topic: topic)) }
            #expect(poll { t.records.count == 8 })
            // Four more. The first waits in the inbox; each next one fills it
            // (bound 2), so the oldest waiting runs: three run, one waits.
            for i in 8..<12 { #expect(fake.publish(commandJSON("cmd-fill-\(i)", Aircon.powerOn), topic: topic)) }
            #expect(poll { t.records.count == 11 }, "\(t.records.count) ran")
            // Must not happen: one more command run while the inbox has room.
            usleep(500_000)
            #expect(t.records.count == 11, "a command ran though the inbox had room")
            #expect(inboxHighWater(t) == 2)
            // The framework answers: the last one runs and every result goes out.
            fake.setPolicy { _, _ in 204 }
            #expect(poll { t.records.count == 12 }, "the waiting command did not run")
            #expect(
                poll {
                    (0..<12).allSatisfy { i in fake.requests.contains { $0.path.contains("/commands/cmd-fill-\(i)/") } }
                })
            #expect(t.records.compactMap(\.commandID) == (0..<12).map { "cmd-fill-\($0)" })
        }
    }

    @Test("Deferred actions: results wait for the completions, in action order, with data and messages")
    func deferredResults() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_fail(t.ct, "setPresetTemperature", "discarded by the defer") == 0)
                #expect(ct_behave_defer(t.ct, "setPresetTemperature", 1) == 0)
                #expect(ct_behave_defer(t.ct, "setFanSpeed", 1) == 0)
            }
            let id = try #require(
                env.hub.sendCommand(
                    to: tid, schema: Aircon.schema, schemaVersion: 1,
                    actions: Aircon.allActions))
            let records = t.waitForRecords(3)
            #expect(records.map { $0.deferred ?? false } == [false, true, true])
            #expect(ct_deferred_count(t.ct) == 2)
            // Must not happen: results before the deferred actions complete.
            usleep(300_000)
            #expect(env.hub.results(of: id) == nil, "results went out before the deferred actions completed")

            #expect(ct_complete_deferred(t.ct, "setFanSpeed", "the fan motor is stuck", nil) == RC.ok)
            // Must not happen: results before the last deferred action completes.
            usleep(200_000)
            #expect(env.hub.results(of: id) == nil)
            #expect(ct_complete_deferred(t.ct, "setPresetTemperature", nil, #"{"reached":25}"#) == RC.ok)
            let results = try env.results(of: id)
            #expect(results.map(\.name) == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            #expect(results.map(\.succeeded) == [true, true, false])
            #expect(results[1].data?["reached"] as? Int == 25)
            #expect(results[1].errorMessage == nil)
            #expect(results[2].errorMessage == "the fan motor is stuck")

            // Data that is not an object: THINGIF_ERR_JSON, and the action succeeds without it.
            let id2 = try #require(
                env.hub.sendCommand(
                    to: tid, schema: Aircon.schema, schemaVersion: 1,
                    actions: #"[{"setFanSpeed":{"fanSpeed":2}}]"#))
            _ = t.waitForRecords(4)
            #expect(ct_complete_deferred(t.ct, "setFanSpeed", nil, "[1,2]") == RC.json)
            let r2 = try env.results(of: id2)
            #expect(r2.map(\.succeeded) == [true])
            #expect(r2.first?.data == nil)
        }
    }

    @Test("A deferred action survives a reconnect: completed after the broker restarted, its results arrive")
    func deferredSurvivesReconnect() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_defer(t.ct, "turnPower", 1) == 0)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 100) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 500) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 500) == RC.ok)
            }
            let id = try #require(
                env.hub.sendCommand(
                    to: tid, schema: Aircon.schema, schemaVersion: 1,
                    actions: Aircon.powerOn))
            _ = t.waitForRecords(1)
            env.broker.stop()
            #expect(poll { !t.isConnected })
            let broker2 = try env.broker.restarted()
            defer {
                broker2.stop()
                broker2.removeFiles()
            }
            #expect(poll(timeoutMs: 30_000) { t.isConnected }, "no reconnect; logs:\n\(t.logs)")
            #expect(env.hub.results(of: id) == nil)
            #expect(ct_complete_deferred(t.ct, "turnPower", nil, #"{"after":"reconnect"}"#) == RC.ok)
            let results = try env.results(of: id, timeoutMs: 30_000)
            #expect(results.map(\.succeeded) == [true])
            #expect(results.first?.data?["after"] as? String == "reconnect")
        }
    }

    @Test(
        "A deferred action pending at destroy: completing returns THINGIF_ERR_STATE; the next start reports it interrupted"
    )
    func deferredAcrossRestart() throws {
        try withEnv { env in
            let (t1, tid) = try env.onlineAircon { t in
                #expect(ct_behave_defer(t.ct, "setFanSpeed", 1) == 0)
            }
            let id = try #require(
                env.hub.sendCommand(
                    to: tid, schema: Aircon.schema, schemaVersion: 1,
                    actions: #"[{"turnPower":{"power":true}},{"setFanSpeed":{"fanSpeed":3}}]"#))
            _ = t1.waitForRecords(2)
            #expect(ct_destroy_handle(t1.ct, 5000) == RC.ok)
            #expect(ct_complete_deferred(t1.ct, "setFanSpeed", nil, nil) == RC.state)
            #expect(env.hub.results(of: id) == nil)

            let (t2, _) = try env.onlineAircon()
            let results = try env.results(of: id)
            #expect(results.map(\.name) == ["turnPower", "setFanSpeed"])
            #expect(
                results.allSatisfy { !$0.succeeded && $0.errorMessage?.hasPrefix("interrupted") == true }, "\(results)")
            try env.expectAlive(tid)
            #expect(!t2.records.contains { $0.commandID == id })
        }
    }

    @Test("Resend on birth: a command the broker lost is sent again by the hub when the thing comes online")
    func resendOnBirth() throws {
        try withEnv { env in
            let (t1, tid) = try env.onlineAircon()
            #expect(t1.destroy() == RC.ok)
            #expect(poll { !env.hub.presence.isOnline(tid) })
            // Queued in the thing's session at the broker, which then restarts
            // without persistence: the session and the command are gone.
            let id = try #require(
                env.hub.sendCommand(
                    to: tid, schema: Aircon.schema, schemaVersion: 1,
                    actions: Aircon.powerOn))
            // Time for the publish to reach the broker; if later, the hub resends it anyway.
            usleep(200_000)
            env.broker.stop()
            let broker2 = try env.broker.restarted()
            defer {
                broker2.stop()
                broker2.removeFiles()
            }
            let (t2, _) = try env.onlineAircon()
            let results = try env.results(of: id, timeoutMs: 30_000)
            #expect(results.map(\.succeeded) == [true])
            #expect(t2.records.map(\.commandID) == [id])
        }
    }

    @Test("Backoff when the broker refuses the CONNACK: a bounded number of attempts, and the thing keeps trying")
    func backoffOnRefusedConnack() throws {
        try withEnv { env in
            let (t, _) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 100) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 800) == RC.ok)
            }
            env.hub.stop()
            // Readable to the broker after it drops root privileges.
            let passwordDir = try makeTempDirectory(prefix: "thingif-passwd")
            defer { try? FileManager.default.removeItem(atPath: passwordDir) }
            chmod(passwordDir, 0o755)
            let passwords = passwordDir + "/passwd"
            try runTool("mosquitto_passwd", ["-c", "-b", passwords, "someone-else", "secret"])
            chmod(passwords, 0o644)
            env.broker.stop()
            #expect(poll { !t.isConnected })
            let authBroker = try env.broker.restarted(passwordFile: passwords)
            let brokerStarted = Date()
            defer {
                authBroker.stop()
                authBroker.removeFiles()
            }
            let refused = "the broker refused the connection"
            #expect(t.waitForLog(refused, timeoutMs: 30_000), "no refused CONNACK; logs:\n\(t.logs)")
            let before = occurrences(of: refused, in: t.logs)
            // The window the attempts are counted in (a rate, not a wait for an event).
            usleep(3_000_000)
            let attempts = occurrences(of: refused, in: t.logs) - before
            // Min 100 ms, cap 800 ms: about 7 in 3 s; a spin would make hundreds.
            #expect((2...15).contains(attempts), "\(attempts) refused attempts in 3 s")
            #expect(
                poll(timeoutMs: 30_000) { occurrences(of: refused, in: t.logs) > before + attempts },
                "the thing stopped trying")
            #expect(!t.isConnected)
            // The broker's own count (its log is flushed when it exits): at
            // most 5 connections a second over its life, not a spin.
            let lived = Date().timeIntervalSince(brokerStarted)
            authBroker.stop()
            let connections = occurrences(of: "New connection from", in: authBroker.log)
            #expect(
                connections >= 2 && Double(connections) <= lived * 5 + 2,
                "the broker saw \(connections) connections in \(lived) s")
            #expect(!t.isConnected)
        }
    }

    @Test("A dead link is detected by keepalive (5 s) and the thing reconnects when the link works again")
    func keepaliveDetectsDeadLink() throws {
        try withEnv { env in
            env.hub.stop()
            let proxy = try CuttingProxy(upstreamPort: env.broker.port)
            defer { proxy.stop() }
            let hub = try startHub(env, advertisedPort: proxy.port)
            defer { hub.stop() }
            let (t, tid) = try startAircon(env, hub: hub) { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_KEEPALIVE_S.rawValue), 5) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 100) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 500) == RC.ok)
            }
            proxy.freeze()
            let frozen = Date()
            #expect(poll(timeoutMs: 11_000) { !t.isConnected }, "the dead link went unnoticed")
            let noticed = Date().timeIntervalSince(frozen)
            #expect(noticed >= 4 && noticed <= 11, "noticed after \(noticed) s")
            proxy.unfreeze()
            #expect(poll(timeoutMs: 30_000) { t.isConnected }, "no reconnect; logs:\n\(t.logs)")
            let id = try #require(
                hub.sendCommand(to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.powerOn))
            #expect(hub.waitForResults(of: id, timeoutMs: 30_000) != nil)
        }
    }

    @Test("The Will: a thing cut off without DISCONNECT shows offline at the hub, and online after it reconnects")
    func willOnCut() throws {
        try withEnv { env in
            env.hub.stop()
            let proxy = try CuttingProxy(upstreamPort: env.broker.port)
            defer { proxy.stop() }
            let hub = try startHub(env, advertisedPort: proxy.port)
            defer { hub.stop() }
            // A slow first retry keeps the thing offline long enough to see it.
            let (t, tid) = try startAircon(env, hub: hub) { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 1500) == RC.ok)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 2000) == RC.ok)
            }
            #expect(hub.presence.isOnline(tid))
            #expect(proxy.cutAll() >= 1)
            #expect(poll(timeoutMs: 30_000) { !hub.presence.isOnline(tid) }, "no offline from the Will")
            #expect(poll(timeoutMs: 30_000) { hub.presence.isOnline(tid) && t.isConnected }, "not online again")
        }
    }
}

// MARK: helpers

/// A schema command of the AirConditioner-Demo as the framework sends it.
private func commandJSON(_ id: String, _ actions: String) -> String {
    #"{"commandID":"\#(id)","schema":"\#(Aircon.schema)","schemaVersion":1,"issuer":"user:test","actions":\#(actions)}"#
}

/// The requests in storage_dir/outbox.jsonl not yet answered or dropped.
/// What the thing still owes the framework, as its files say: the outbox's
/// uploads, then the results the ledger holds until acknowledged.
func pendingOutbox(_ dir: String) -> [(id: String, kind: String, body: String)] {
    var out: [(id: String, kind: String, body: String)] = []
    if let ledger = try? String(contentsOfFile: dir + "/ledger.jsonl", encoding: .utf8) {
        var owed: [(id: String, kind: String, body: String)] = []
        for line in ledger.split(separator: "\n") {
            guard let o = parseObject(String(line)), let id = o["c"] as? String else { continue }
            if o["t"] != nil, o["k"] == nil, let r = o["r"],
                let data = try? JSONSerialization.data(withJSONObject: r)
            {
                owed.append((id, "results", String(decoding: data, as: UTF8.self)))
            } else if o["k"] != nil {
                owed.removeAll { $0.id == id }
            }
        }
        out += owed
    }
    guard let text = try? String(contentsOfFile: dir + "/outbox.jsonl", encoding: .utf8) else { return out }
    for line in text.split(separator: "\n") {
        guard let o = parseObject(String(line)), let id = o["id"] as? String else { continue }
        switch o["op"] as? String {
        case "add": out.append((id, o["k"] as? String ?? "", o["b"] as? String ?? ""))
        case "ack", "drop": out.removeAll { $0.id == id }
        default: break
        }
    }
    return out
}

private func occurrences(of needle: String, in text: String) -> Int {
    text.components(separatedBy: needle).count - 1
}

/// Runs a tool to its end, bounded (runChild: posix_spawn and waitpid on
/// its own pid). Not Foundation's Process: its waitUntilExit once waited
/// for ever on a mosquitto_passwd that had exited, and held a CI run.
private func runTool(_ name: String, _ args: [String]) throws {
    let log = NSTemporaryDirectory() + "/thingif-tool-" + randomHexString(4) + ".log"
    defer { try? FileManager.default.removeItem(atPath: log) }
    let status = try runChild("/usr/bin/env", [name] + args, logPath: log)
    guard status == 0 else {
        throw HarnessError("\(name) failed: \(status) \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }
}

/// A framework side of the test's own, on the Env's broker; the caller stops it.
private func startHub(_ env: Env, advertisedPort: Int? = nil, store: HubStore = MemoryStore(secrets: .fastForTests))
    throws -> FrameworkSide
{
    guard
        let hub = FrameworkSide(
            Env.hubOptions(
                appID: Env.appID, appKey: Env.appKey, broker: env.broker,
                advertisedPort: advertisedPort), store: store)
    else {
        throw HarnessError("cannot create a framework side")
    }
    guard hub.start(timeoutMs: 30_000) else {
        hub.stop()
        throw HarnessError("the framework side did not start: \(hub.startProblem ?? "?")")
    }
    return hub
}

/// Env.onlineAircon against another hub.
private func startAircon(
    _ env: Env, hub: FrameworkSide, storage: String = "thing",
    configure: (TestThing) -> Void = { _ in }
) throws -> (TestThing, String) {
    let t = try env.newThing(storage: storage)
    #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
    configure(t)
    let rc = ct_onboard(t.ct, "AC-0001", "password-1", "AirConditioner", "1.0.0", nil)
    guard rc == RC.ok else { throw HarnessError("onboarding failed: \(rc); logs:\n\(t.logs)") }
    let tid = try #require(t.thingID)
    #expect(ct_start(t.ct) == RC.ok)
    guard hub.waitForOnline(tid, timeoutMs: 30_000) else {
        throw HarnessError("\(tid) did not come online; logs:\n\(t.logs)")
    }
    return (t, tid)
}

/// A stand-in for the framework on a raw MQTT client: it takes every
/// request, answers as its policy says (nil: no answer at all), records what
/// it saw, and publishes commands.
private final class FakeFramework: @unchecked Sendable {
    struct Seen {
        var path: String
        var requestID: String
        var body: String
    }

    /// (the request, how many times its request ID has arrived, from 1) -> status or nil.
    typealias Policy = (Seen, Int) -> Int?

    private let client: MqttClient
    private let lock = NSLock()
    private var seen: [Seen] = []
    private var policy: Policy
    private var subacks = 0

    init(port: Int, policy: @escaping Policy) throws {
        guard let c = MqttClient(clientID: "fake-framework-" + Platform.randomHex(bytes: 4), cleanStart: true) else {
            throw HarnessError("cannot create an MQTT client")
        }
        client = c
        self.policy = policy
        // The hub's broker identity (the Env's hub gave it its role).
        _ = c.setCredentials(username: BrokerSecrets.adminUsername, password: BrokerSecrets.adminPassword)
        let topics = Topics.hubSubscriptions(shared: false)
        client.onConnect = { [unowned self] rc in
            guard rc == 0 else { return }
            for topic in topics { _ = self.client.subscribe(topic, qos: 1) }
        }
        client.onSubscribe = { [unowned self] _ in self.lock.withLock { self.subacks += 1 } }
        client.onMessage = { [unowned self] m in self.handle(m) }
        guard client.connect(host: "127.0.0.1", port: port, keepalive: 30) == 0, client.startThread() == 0,
            poll(timeoutMs: 30_000, { lock.withLock { subacks >= topics.count } })
        else {
            stop()
            throw HarnessError("the fake framework did not subscribe")
        }
    }

    func setPolicy(_ p: @escaping Policy) { lock.withLock { policy = p } }

    var requests: [Seen] { lock.withLock { seen } }

    func publish(_ text: String, topic: String) -> Bool {
        client.publish(topic: topic, payload: Array(text.utf8), qos: 1) == 0
    }

    func stop() {
        client.disconnect()
        _ = client.stopThread(force: false)
    }

    private func handle(_ m: MqttClient.Message) {
        guard let t = Topics.parseRequest(m.topic), let req = KiiRequest.decode(m.payload) else { return }
        let rid = m.correlationData.map { String(decoding: $0, as: UTF8.self) } ?? req.requestID ?? ""
        let s = Seen(path: t.path, requestID: rid, body: String(decoding: req.body, as: UTF8.self))
        let status = lock.withLock { () -> Int? in
            seen.append(s)
            return policy(s, seen.filter { $0.requestID == rid }.count)
        }
        guard let status, let responseTopic = m.responseTopic else { return }
        let body = status >= 400 ? Array(#"{"errorCode":"TEST","message":"as the test wants"}"#.utf8) : []
        let reply = KiiResponse(status: status, headers: [(KiiFraming.requestIDHeader, rid)], body: body)
        _ = client.publish(topic: responseTopic, payload: reply.encode(), qos: 1, correlationData: m.correlationData)
    }
}
