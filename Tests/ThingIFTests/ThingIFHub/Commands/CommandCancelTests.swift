// SPDX-License-Identifier: Apache-2.0

import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// Issue #27, a cancel that reaches the thing (docs/PROTOCOL.md §9.1): the
/// hub sends a DELIVERED command's cancel to the thing and answers CANCELLED
/// only when the thing refused it. A real broker, hub, REST API and C
/// appliance; bounds are generous and polled.
@Suite("Command cancel reaches the thing", .offPool)
struct CommandCancelTests {
    private func state(_ e: HubAPIEnv, _ tid: String, _ cid: String, token: String) async throws -> [String: Any] {
        let r = try await e.get("\(e.target(tid))/commands/\(cid)", token: token)
        try #require(r.status == 200, "get command: \(r.status) \(r.text)")
        return r.json
    }

    private func waitForState(
        _ e: HubAPIEnv, _ tid: String, _ cid: String, token: String, timeoutMs: Int = 15_000,
        _ done: (String) -> Bool
    ) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        var last: [String: Any] = [:]
        while Date() < deadline {
            last = try await state(e, tid, cid, token: token)
            if let s = last["commandState"] as? String, done(s) { return last }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw HarnessError("command \(cid) did not reach the expected state within \(timeoutMs) ms: \(last)")
    }

    /// A user, a thing whose turnPower handler holds its loop until the test
    /// releases it (ct_release; at most 120 s), a first command in that
    /// handler and a second one DELIVERED behind it. The caller releases
    /// the handler (and must, before the thing is destroyed).
    private func busyThenSecond(_ e: HubAPIEnv, _ name: String) async throws -> (
        uid: String, token: String, tid: String, thingToken: String, thing: TestThing, busy: String,
        second: String
    ) {
        let (uid, token) = try await e.user(loginName: "\(name)-alice")
        let (tid, thingToken) = try await e.onboard("AC-\(name.uppercased())-1", owner: "user:\(uid)", token: token)
        let thing = try await e.appliance(thingID: tid, token: thingToken, storage: name) {
            _ = ct_behave_hold($0.ct, "turnPower", 120_000)
        }
        let busy = try await e.postCommand(tid, token: token, userID: uid, actions: [["turnPower": ["power": true]]])
        let ct = thing.ct
        #expect(await offPool { poll(timeoutMs: 60_000) { ct_holding(ct) == 1 } }, "the thing is in its handler")
        let second = try await e.postCommand(
            tid, token: token, userID: uid, actions: [["setFanSpeed": ["fanSpeed": 3]]])
        _ = try await waitForState(e, tid, second, token: token) { $0 == "DELIVERED" }
        return (uid, token, tid, thingToken, thing, busy, second)
    }

    @Test(
        "A delivered command waiting behind a busy handler: the cancel answers CANCELLED, it never runs, not after a restart either"
    )
    func cancelDeliveredNotRun() async throws {
        // The cancel waits for the thing as long as its busy handler may take
        // on a loaded machine: the answer comes when that handler returns.
        try await withHubAPI(options: { $0.cancelWaitMs = 60_000 }) { e in
            let (uid, token, tid, thingToken, thing, busy, second) = try await busyThenSecond(e, "cxl")
            defer { thing.release() }
            let events = Locked<[String]>([])
            e.hub.onEvent = { line in events.withLock { $0.append(line) } }
            // A second subscriber of the thing's command topic: when the
            // broker has passed the cancel on to it, it has passed it on to
            // the thing too (one pass over the topic's subscribers).
            let topic = try #require(e.hub.delivery.commandTopic(of: tid), "the thing's command topic")
            let port = e.env.broker.port
            let listener = try await offPool { Result { try TopicListener(port: port, topics: [topic]) } }.get()
            defer { listener.stop() }
            async let cancel = e.call("POST", "\(e.target(tid))/commands/\(second)/cancel", token: token)
            // The handler returns once the hub has sent the cancel and the
            // broker has passed it on: the thing's next loop pass reads the
            // second command and the cancel together.
            let sent = await offPool {
                poll(timeoutMs: 60_000) {
                    events.withLock { $0.contains { $0.hasPrefix("cancel of \(second) sent") } }
                }
            }
            #expect(sent, "\(events.withLock { $0 })")
            let passedOn = await offPool {
                poll(timeoutMs: 60_000) {
                    listener.payloads(on: topic).contains { $0.contains(#""cancel""#) && $0.contains(second) }
                }
            }
            #expect(passedOn, "the broker did not pass the cancel on: \(listener.payloads(on: topic))")
            thing.release()
            let r = try await cancel
            #expect(r.status == 200, "\(r.status) \(r.text)")
            #expect(r.json["commandState"] as? String == "CANCELLED", "\(r.text)")
            let results = try #require(r.json["actionResults"] as? [[String: Any]], "\(r.text)")
            let fan = try #require(results.first?["setFanSpeed"] as? [String: Any], "\(r.text)")
            #expect(fan["succeeded"] as? Bool == false)
            #expect((fan["data"] as? [String: Any])?["reason"] as? String == "CANCELLED", "\(r.text)")
            _ = try await e.waitForFinished(tid, busy, token: token, timeoutMs: 60_000)
            #expect(!thing.records.contains { $0.commandID == second }, "\(thing.records.map(\.commandID))")
            // Again: the same answer.
            let again = try await e.call("POST", "\(e.target(tid))/commands/\(second)/cancel", token: token)
            #expect(again.status == 200 && again.json["commandState"] as? String == "CANCELLED", "\(again.text)")

            // A restart, then the same command delivered again: the ledger refuses it.
            let hub = e.hub
            _ = await offPool { () -> Bool in
                thing.destroy()
                return poll(timeoutMs: 30_000) { !hub.presence.isOnline(tid) }
            }
            let back = try await e.appliance(thingID: tid, token: thingToken, storage: "cxl")
            let payload = try #require(hub.store.command(id: second)?.payload)
            #expect(hub.delivery.publish(Array(payload.utf8), to: tid))
            #expect(await offPool { poll(timeoutMs: 30_000) { back.logContains("command \(second) arrived again") } })
            let probe = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await e.waitForFinished(tid, probe, token: token)
            #expect(!back.records.contains { $0.commandID == second }, "\(back.records.map(\.commandID))")
            let still = try await state(e, tid, second, token: token)
            #expect(still["commandState"] as? String == "CANCELLED")
        }
    }

    @Test("Cancel racing delivery: a command answered CANCELLED never ran; one that ran answers 409 with its state")
    func cancelRacingDelivery() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user(loginName: "race-alice")
            let (tid, thingToken) = try await e.onboard("AC-RACE-1", owner: "user:\(uid)", token: token)
            // A slow last action: commands queue up behind each other on the thing.
            let thing = try await e.appliance(thingID: tid, token: thingToken, storage: "race") {
                _ = ct_behave_sleep($0.ct, "setFanSpeed", 60)
            }
            // Rounds of eight send-then-cancel at once, so that cancels meet
            // commands in flight, in the thing's inbox and in its handlers.
            var answers: [(cid: String, status: Int, state: String?)] = []
            for _ in 0..<5 {
                try await withThrowingTaskGroup(of: (String, Int, String?).self) { g in
                    for _ in 0..<8 {
                        g.addTask {
                            let cid = try await e.postCommand(tid, token: token, userID: uid)
                            let r = try await e.call("POST", "\(e.target(tid))/commands/\(cid)/cancel", token: token)
                            let s = r.status == 409 ? r.string("commandState") : r.json["commandState"] as? String
                            return (cid, r.status, s)
                        }
                    }
                    for try await a in g { answers.append(a) }
                }
            }
            // Every command ends; then nothing more may run.
            for a in answers {
                _ = try await waitForState(e, tid, a.cid, token: token) {
                    ["DONE", "INCOMPLETE", "CANCELLED"].contains($0)
                }
            }
            let probe = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await e.waitForFinished(tid, probe, token: token)
            let ran = Set(thing.records.compactMap(\.commandID))
            var cancelled = 0
            for a in answers {
                switch a.status {
                case 200:
                    cancelled += 1
                    #expect(a.state == "CANCELLED", "\(a)")
                    #expect(!ran.contains(a.cid), "\(a.cid) was answered CANCELLED but ran")
                    let now = try await state(e, tid, a.cid, token: token)
                    #expect(now["commandState"] as? String == "CANCELLED", "\(now)")
                case 409:
                    #expect(a.state == "DONE" || a.state == "INCOMPLETE", "\(a)")
                    #expect(ran.contains(a.cid), "\(a.cid) answered 409 \(a.state ?? "?") but never ran")
                default:
                    Issue.record("unexpected answer \(a) for a thing that is online")
                }
            }
            // Each ran at most once.
            let counts = Dictionary(grouping: thing.records.compactMap(\.commandID), by: { $0 })
            for a in answers { #expect((counts[a.cid]?.count ?? 0) <= 3, "\(a.cid) ran twice") }
            // Both outcomes are legal; which one each gets is the race's.
            print("cancel race: \(cancelled) of \(answers.count) answered CANCELLED")
        }
    }

    @Test("A thing that does not answer in time: 202 with the cancel pending; its refusal later makes it CANCELLED")
    func cancelPending() async throws {
        try await withHubAPI(options: { $0.cancelWaitMs = 500 }) { e in
            let (_, token, tid, _, thing, _, second) = try await busyThenSecond(e, "pend")
            defer { thing.release() }
            let r = try await e.call("POST", "\(e.target(tid))/commands/\(second)/cancel", token: token)
            #expect(r.status == 202, "\(r.status) \(r.text)")
            #expect(r.json["commandState"] as? String == "DELIVERED" && r.json["cancelPending"] as? Bool == true)
            // The thing, free again, reads the cancel before the command.
            thing.release()
            let ended = try await waitForState(e, tid, second, token: token, timeoutMs: 60_000) { $0 != "DELIVERED" }
            #expect(ended["commandState"] as? String == "CANCELLED", "\(ended)")
            #expect(!thing.records.contains { $0.commandID == second })
        }
    }

    @Test(
        "A device that cannot be told (no status, as Kii's SDKs): a DELIVERED command answers 409 DELIVERED, no cancel sent"
    )
    func cancelSilentDevice() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user(loginName: "kii-alice")
            let installation = try await e.onboardSilent("AC-KII-1", owner: "user:\(uid)", token: token)
            let (tid, thingTopic) = (installation.thingID, installation.topic)
            let device = try await e.silentDevice(installation)
            defer { device.stop() }
            let cid = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await waitForState(e, tid, cid, token: token) { $0 == "DELIVERED" }
            let c = try await e.call("POST", "\(e.target(tid))/commands/\(cid)/cancel", token: token)
            #expect(c.status == 409 && c.errorCode == "COMMAND_NOT_CANCELLABLE", "\(c.status) \(c.text)")
            #expect(c.string("commandState") == "DELIVERED")
            // Must not happen: a cancel sent; room for it to show.
            try await Task.sleep(nanoseconds: 300_000_000)
            #expect(!device.payloads(on: thingTopic).contains { $0.contains("\"cancel\"") })
        }
    }
}
