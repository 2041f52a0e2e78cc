// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// Issue #27: commands that expire, can be cancelled, and always end
/// (CommandLifecycle.swift, docs/PROTOCOL.md §9.1). A real broker, hub,
/// REST API and C appliance; timings are bounded by polling, not slept.
@Suite("Command lifecycle: expiry, cancel, bounded end", .offPool)
struct CommandLifecycleTests {
    /// GETs the command until `done` holds for it (bounded).
    private func waitForCommand(
        _ e: HubAPIEnv, _ tid: String, _ cid: String, token: String, timeoutMs: Int = 15_000,
        _ done: ([String: Any]) -> Bool
    ) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        var last: [String: Any] = [:]
        while Date() < deadline {
            let r = try await e.get("\(e.target(tid))/commands/\(cid)", token: token)
            try #require(r.status == 200, "get command: \(r.status) \(r.text)")
            last = r.json
            if done(last) { return last }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw HarnessError("command \(cid) did not reach the expected state within \(timeoutMs) ms: \(last)")
    }

    /// An MQTT app installation of the user and a listener on its topic.
    private func notifications(_ e: HubAPIEnv, token: String) async throws -> (TopicListener, String) {
        let mqtt = try await e.installation("MQTT", token: token)
        let topic = try #require(mqtt.topic)
        let listener = try await offPool { Result { try TopicListener(port: e.env.broker.port, topics: [topic]) } }
            .get()
        return (listener, topic)
    }

    /// Stops the appliance and waits until the hub has its `offline`.
    private func takeOffline(_ e: HubAPIEnv, _ t: TestThing, _ tid: String) async throws {
        let hub = e.hub
        let gone = await offPool { () -> Bool in
            t.destroy()
            return poll(timeoutMs: 30_000) { !hub.presence.isOnline(tid) }
        }
        try #require(gone, "the hub did not see \(tid) go offline")
    }

    @Test("Expiry: a command to an offline thing expires, is notified, and never runs when the thing returns")
    func expiresWhileOffline() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user(loginName: "exp-alice")
            let (tid, thingToken) = try await e.onboard("AC-EXP-1", owner: "user:\(uid)", token: token)
            let first = try await e.appliance(thingID: tid, token: thingToken, storage: "exp")
            let (listener, topic) = try await notifications(e, token: token)
            defer { listener.stop() }
            try await takeOffline(e, first, tid)

            // Refused shapes: an absolute expiresAt, a TTL out of range.
            for bad: [String: Any] in [["expiresAt": 1], ["timeToLive": 0], ["timeToLive": "10"]] {
                let r = try await e.call(
                    "POST", "\(e.target(tid))/commands", token: token,
                    json: [
                        "schema": Aircon.schema, "schemaVersion": 1, "issuer": "user:\(uid)",
                        "actions": HubAPIEnv.threeActions
                    ].merging(bad) { $1 })
                #expect(r.status == 400 && r.errorCode == "WRONG_COMMAND", "\(bad): \(r.status) \(r.text)")
            }

            let before = Int64(Date().timeIntervalSince1970 * 1000)
            let cid = try await e.postCommand(tid, token: token, userID: uid, extra: ["timeToLive": 2])
            let fresh = try await e.get("\(e.target(tid))/commands/\(cid)", token: token)
            #expect(fresh.json["commandState"] as? String == "SENDING", "\(fresh.text)")
            let expiresAt = try #require((fresh.json["expiresAt"] as? NSNumber)?.int64Value, "\(fresh.text)")
            #expect(expiresAt >= before + 2000 && expiresAt <= before + 60_000)

            let ended = try await waitForCommand(e, tid, cid, token: token) {
                $0["commandState"] as? String == "EXPIRED"
            }
            #expect(ended["endReason"] as? String == "expired")
            #expect(ended["actionResults"] == nil)
            #expect(
                await offPool { poll(timeoutMs: 30_000) { listener.payloads(on: topic).contains { $0.contains(cid) } } }
            )
            let note = try #require(parseObject(listener.payloads(on: topic).first { $0.contains(cid) }))
            #expect(note["commandState"] as? String == "EXPIRED" && note["endReason"] as? String == "expired")

            // The thing comes back (same storage: its persistent session):
            // nothing of the expired command reaches it.
            let back = try await e.appliance(thingID: tid, token: thingToken, storage: "exp")
            // A command with an expiry still ahead runs (the device reads past expiresAt).
            let probe = try await e.postCommand(tid, token: token, userID: uid, extra: ["timeToLive": 600])
            let ran = try await e.waitForFinished(tid, probe, token: token)
            #expect(ran["commandState"] as? String == "DONE" && ran["expiresAt"] != nil)
            #expect(!back.records.contains { $0.commandID == cid }, "\(back.records.map(\.commandID))")
            let after = try await e.get("\(e.target(tid))/commands/\(cid)", token: token)
            #expect(after.json["commandState"] as? String == "EXPIRED")
        }
    }

    @Test(
        "Cancel: before delivery the thing never runs it; again is the same answer; a non-owner gets 404; after results 409"
    )
    func cancel() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user(loginName: "cancel-alice")
            let (_, otherToken) = try await e.user(loginName: "cancel-mallory")
            let (tid, thingToken) = try await e.onboard("AC-CAN-1", owner: "user:\(uid)", token: token)
            let first = try await e.appliance(thingID: tid, token: thingToken, storage: "can")
            let (listener, topic) = try await notifications(e, token: token)
            defer { listener.stop() }
            try await takeOffline(e, first, tid)

            let cid = try await e.postCommand(tid, token: token, userID: uid)
            let cancel = "\(e.target(tid))/commands/\(cid)/cancel"
            let stranger = try await e.call("POST", cancel, token: otherToken)
            #expect(stranger.status == 404 && stranger.isErrorBody, "\(stranger.status) \(stranger.text)")
            let r = try await e.call("POST", cancel, token: token)
            #expect(r.status == 200, "\(r.status) \(r.text)")
            #expect(r.json["commandState"] as? String == "CANCELLED" && r.json["endReason"] as? String == "cancelled")
            let again = try await e.call("POST", cancel, token: token)
            #expect(again.status == 200 && again.json["commandState"] as? String == "CANCELLED")
            let unknown = try await e.call("POST", "\(e.target(tid))/commands/cmd-nope/cancel", token: token)
            #expect(unknown.status == 404 && unknown.errorCode == "COMMAND_NOT_FOUND")
            #expect(
                await offPool { poll(timeoutMs: 30_000) { listener.payloads(on: topic).contains { $0.contains(cid) } } }
            )
            let note = try #require(parseObject(listener.payloads(on: topic).first { $0.contains(cid) }))
            #expect(note["commandState"] as? String == "CANCELLED")

            // The thing returns: the cancelled command never runs; a new one does.
            let back = try await e.appliance(thingID: tid, token: thingToken, storage: "can")
            let next = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await e.waitForFinished(tid, next, token: token)
            #expect(!back.records.contains { $0.commandID == cid }, "\(back.records.map(\.commandID))")
            let still = try await e.get("\(e.target(tid))/commands/\(cid)", token: token)
            #expect(still.json["commandState"] as? String == "CANCELLED")

            // Too late: the results came first. 409 with the actual state.
            let late = try await e.call("POST", "\(e.target(tid))/commands/\(next)/cancel", token: token)
            #expect(late.status == 409 && late.errorCode == "COMMAND_NOT_CANCELLABLE", "\(late.status) \(late.text)")
            #expect(late.string("commandState") == "DONE")
            let done = try await e.get("\(e.target(tid))/commands/\(next)", token: token)
            #expect(done.json["commandState"] as? String == "DONE")
        }
    }

    @Test("An ended command whose issuer has no MQTT or webhook target is never due for the notification sweep")
    func endedNotSwept() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user(loginName: "exp-sse")
            let (tid, thingToken) = try await e.onboard("AC-EXP-SSE", owner: "user:\(uid)", token: token)
            let first = try await e.appliance(thingID: tid, token: thingToken, storage: "exp-sse")
            // An event stream is the user's one target: each hub tells its own, no sweep does.
            _ = try await e.installation("SSE", token: token)
            try await takeOffline(e, first, tid)
            let cid = try await e.postCommand(tid, token: token, userID: uid, extra: ["timeToLive": 2])
            _ = try await waitForCommand(e, tid, cid, token: token) { $0["commandState"] as? String == "EXPIRED" }
            // Not due now, nor after the grace period: nothing for a sweep to claim.
            let due = e.hub.store.claimUnnotified(now: Platform.epochMs() + 60_000, leaseMs: 1, limit: 10)
            #expect(due.isEmpty, "\(due.map(\.commandID))")
        }
    }

    @Test("No command without an end: undelivered and unanswered ones end EXPIRED; late results still count, once")
    func boundedEnd() async throws {
        try await withHubAPI(options: { $0.lifetimes = CommandLifetimes(undeliveredLimit: 2, unansweredLimit: 2) }) {
            e in
            let (uid, token) = try await e.user(loginName: "bound-alice")
            // Onboarding by the owner hands out an installation; nobody reads it yet.
            let installation = try await e.onboardSilent("AC-BND-1", owner: "user:\(uid)", token: token)
            let (tid, thingToken, thingTopic) = (installation.thingID, installation.token, installation.topic)
            let (listener, topic) = try await notifications(e, token: token)
            defer { listener.stop() }

            // Undelivered: no subscription took it within the bound.
            let a = try await e.postCommand(tid, token: token, userID: uid)
            let endedA = try await waitForCommand(e, tid, a, token: token) {
                $0["commandState"] as? String == "EXPIRED"
            }
            #expect(endedA["endReason"] as? String == "undelivered")

            // A device that subscribes (as Kii's SDKs do: no status) and never answers.
            let device = try await e.silentDevice(installation)
            defer { device.stop() }
            let b = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await waitForCommand(e, tid, b, token: token) { $0["commandState"] as? String != "SENDING" }
            let endedB = try await waitForCommand(e, tid, b, token: token) {
                $0["commandState"] as? String == "EXPIRED"
            }
            #expect(endedB["endReason"] as? String == "unanswered")
            #expect(
                await offPool { poll(timeoutMs: 30_000) { listener.payloads(on: topic).contains { $0.contains(b) } } })

            // The device ran it after all: its results are recorded and decide the state.
            let answer =
                #"{"actionResults":[{"turnPower":{"succeeded":true}},{"setPresetTemperature":{"succeeded":true}},{"setFanSpeed":{"succeeded":false,"errorMessage":"stuck"}}]}"#
            let results = "\(e.target(tid))/commands/\(b)/action-results"
            let put = try await e.call("PUT", results, token: thingToken, body: Data(answer.utf8))
            #expect(put.status == 204, "\(put.status) \(put.text)")
            let repeatPut = try await e.call(
                "PUT", results, token: thingToken,
                body: Data(#"{"actionResults":[{"turnPower":{"succeeded":true}}]}"#.utf8))
            #expect(repeatPut.status == 204)
            let late = try await e.get("\(e.target(tid))/commands/\(b)", token: token)
            #expect(late.json["commandState"] as? String == "INCOMPLETE", "\(late.text)")
            #expect(late.json["endReason"] as? String == "unanswered")
            #expect((late.json["actionResults"] as? [Any])?.count == 3)
            #expect(
                await offPool {
                    poll(timeoutMs: 30_000) {
                        listener.payloads(on: topic).contains { $0.contains(b) && $0.contains("INCOMPLETE") }
                    }
                })
            // Cancel is too late for both.
            for cid in [a, b] {
                let c = try await e.call("POST", "\(e.target(tid))/commands/\(cid)/cancel", token: token)
                #expect(c.status == 409 && c.errorCode == "COMMAND_NOT_CANCELLABLE", "\(c.text)")
            }
            // Counted by reason (GET /metrics).
            let m = try Exposition(try await e.get("/metrics", token: nil).text)
            #expect(m.value("thingif_hub_commands_ended_total", ["state": "EXPIRED", "reason": "undelivered"]) == 1)
            #expect(m.value("thingif_hub_commands_ended_total", ["state": "EXPIRED", "reason": "unanswered"]) == 1)
            // The device got b once and never the expired a.
            #expect(device.payloads(on: thingTopic).filter { $0.contains(b) }.count == 1)
            #expect(!device.payloads(on: thingTopic).contains { $0.contains(a) })
        }
    }

    @Test(
        "Settings: TTL default none, bounds a day, cancel wait 5 s; flags, environment and file; a TTL over a year is refused"
    )
    func settings() throws {
        func load(_ args: [String], env: [String: String] = [:], file: String? = nil) throws -> HubConfig {
            guard
                case .run(let c) = try HubConfig.load(
                    arguments: args + (file != nil ? ["--config", "f.json"] : []), environment: env,
                    readFile: { _ in file.map { Array($0.utf8) } })
            else { throw HarnessError("help") }
            return c
        }
        let defaults = try load([]).commandLifetimes
        #expect(defaults == CommandLifetimes())
        #expect(
            defaults.defaultTimeToLive == 0 && defaults.undeliveredLimit == 86_400 && defaults.unansweredLimit == 86_400
        )
        let flags = try load([
            "--command-ttl", "300", "--command-undelivered-limit", "0", "--command-unanswered-limit", "60"
        ])
        #expect(
            flags.commandLifetimes == CommandLifetimes(defaultTimeToLive: 300, undeliveredLimit: 0, unansweredLimit: 60)
        )
        let env = try load([], env: ["THINGIF_HUB_COMMAND_TTL": "30"])
        #expect(env.commandTimeToLive == 30)
        let file = try load([], file: #"{"commandUnansweredLimit":120}"#)
        #expect(file.commandUnansweredLimit == 120)
        #expect(throws: HubConfig.ConfigError.self) { try load(["--command-ttl", "31536001"]) }
        #expect(throws: HubConfig.ConfigError.self) { try load(["--command-ttl", "-1"]) }
        // How long a cancel waits for the thing (ms): 5 s, up to a minute.
        #expect(try load([]).commandCancelWaitMs == 5000)
        #expect(try load(["--command-cancel-wait", "800"]).commandCancelWaitMs == 800)
        #expect(try load([], env: ["THINGIF_HUB_COMMAND_CANCEL_WAIT": "0"]).commandCancelWaitMs == 0)
        #expect(try load([], file: #"{"commandCancelWait":2000}"#).commandCancelWaitMs == 2000)
        #expect(throws: HubConfig.ConfigError.self) { try load(["--command-cancel-wait", "60001"]) }

        // The rule the REST API applies: timeToLive, else the default TTL, else none.
        let l = CommandLifetimes(defaultTimeToLive: 300)
        let form = { (s: String) in try JSON.parse(s).get() }
        #expect(try l.expiry(form: form(#"{"timeToLive":10}"#), now: 1_000).get() == 11_000)
        #expect(try l.expiry(form: form("{}"), now: 1_000).get() == 301_000)
        #expect(try CommandLifetimes().expiry(form: form("{}"), now: 1_000).get() == nil)
        #expect(try l.expiry(form: form(#"{"timeToLive":null}"#), now: 1_000).get() == 301_000)
        for bad in [#"{"timeToLive":0}"#, #"{"timeToLive":1.5}"#, #"{"timeToLive":31536001}"#, #"{"expiresAt":5}"#] {
            #expect(throws: HubError.self) { try l.expiry(form: form(bad), now: 1_000).get() }
        }
    }
}
