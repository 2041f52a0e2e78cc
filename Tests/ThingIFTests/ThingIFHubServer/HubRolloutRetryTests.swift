// SPDX-License-Identifier: Apache-2.0

import Dispatch
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// Rollouts' time-outs, retries, exponential ramp and released members
/// whose job was never created (docs/UPDATES.md §11): ticks with the
/// test's own clock, on every store, and the store's rules with two
/// PostgresStores on one database (a member released once per attempt).
@Suite("Hub rollout retries", .offPool)
struct HubRolloutRetryTests {
    static let admin = HubImageTests.admin
    typealias Release = HubRolloutTests.Release

    static func job(_ e: HubAPIEnv, _ id: String) throws -> UpdateJobRecord {
        try #require(e.hub.store.updateJob(id: id).value, "no job \(id)")
    }

    @Test("The ramp: its start times its factor once per whole everyS, never above ratePerMinute")
    func rampRate() {
        let r = RolloutRecord(
            rolloutID: "r-1", image: "", version: "", manifest: [], signatures: "[]", trialS: nil,
            target: RolloutTarget(things: ["t"]), ratePerMinute: 20, maxInFlight: 1, abortFailurePercent: nil,
            abortMinExecuted: 1, abortStatuses: [], ramp: RolloutRamp(startPerMinute: 2, factor: 2.5, everyS: 60),
            createdAt: 1_000, updatedAt: 1_000)
        #expect(r.rate(at: 1_000) == 2 && r.rate(at: 60_999) == 2)
        #expect(r.rate(at: 61_000) == 5, "2 × 2.5")
        #expect(r.rate(at: 121_000) == 12, "2 × 2.5², floored")
        #expect(r.rate(at: 181_000) == 20 && r.rate(at: 10_000_000_000) == 20, "never above ratePerMinute")
        #expect(r.rate(at: 0) == 2, "before its creation: the start")
        var flat = r
        flat.ramp = nil
        #expect(flat.rate(at: 1_000) == 20)
    }

    @Test("Refused: retries, timeoutS and ramp out of range, each naming its field")
    func refusals() async throws {
        try await HubUpdateTests().withUpdates(.memory) { e in
            let (uid, userToken) = try await e.user()
            let t = try await e.onboardSilent("rr-ref-1", owner: "user:\(uid)", token: userToken)
            let rel = try await Release.make(e)
            let good = rel.form(target: ["things": [t.thingID]], rate: 10)
            for (extra, field) in [
                (["retries": 4], "retries"), (["retries": -1], "retries"), (["timeoutS": 59], "timeoutS"),
                (["timeoutS": "x"], "timeoutS"), (["ramp": 5], "ramp"),
                (["ramp": ["startPerMinute": 11, "factor": 2, "everyS": 60]], "startPerMinute"),
                (["ramp": ["startPerMinute": 1, "factor": 1, "everyS": 60]], "factor"),
                (["ramp": ["startPerMinute": 1, "factor": "2", "everyS": 60]], "factor"),
                (["ramp": ["startPerMinute": 1, "factor": 1.5, "everyS": 5]], "everyS")
            ] as [([String: Any], String)] {
                var f = good
                for (k, v) in extra { f[k] = v }
                let r = try await HubRolloutTests.create(e, f)
                let named = (r.json["invalidFields"] as? [String: Any])?[field] != nil
                #expect(r.status == 400 && named, "\(extra): \(r.status) \(r.text)")
            }
            var f = good
            f["retries"] = 3
            f["timeoutS"] = 600
            f["ramp"] = ["startPerMinute": 1, "factor": 1.5, "everyS": 60]
            let id = try await HubRolloutTests.created(e, f)
            let r = try await HubRolloutTests.rollout(e, id)
            #expect(r["retries"] as? Int == 3 && r["timeoutS"] as? Int == 600, "\(r)")
            let ramp = try #require(r["ramp"] as? [String: Any])
            #expect(ramp["startPerMinute"] as? Int == 1 && ramp["factor"] as? Double == 1.5, "\(ramp)")
        }
    }

    @Test(
        "Time-outs end jobs before their install (FAILED TIMED_OUT, the offer cancelled), retries make new attempts within the cap, ROLLED_BACK is not retried",
        arguments: StoreFactory.all)
    func timeoutsAndRetries(_ factory: StoreFactory) async throws {
        try await HubUpdateTests().withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            var things: [String] = []
            for i in 0..<3 {
                things.append(try await e.onboardSilent("rr-to-\(i)", owner: "user:\(uid)", token: userToken).thingID)
            }
            things.sort()
            let rel = try await Release.make(e)
            var form = rel.form(target: ["things": things], rate: 100, cap: 3)
            form["timeoutS"] = 60
            form["retries"] = 1
            let id = try await HubRolloutTests.created(e, form)
            let t0 = Platform.epochMs()
            #expect(e.hub.app.rolloutTick(now: t0) == 3)
            var m = try await HubRolloutTests.members(e, id)
            let first = try things.map { try #require(m[$0]?.jobID) }
            #expect(try first.map { try Self.job(e, $0).attempt } == [1, 1, 1])
            func report(_ i: Int, _ job: String, _ seq: Int64, _ s: UpdateStatus) {
                #expect(
                    e.hub.store.applyUpdateReport(
                        jobID: job, thingID: things[i], report: UpdateReport(attempt: 1, seq: seq, status: s),
                        now: Platform.epochMs()) == .applied)
            }
            // 0 downloads, 1 installs, 2 is silent.
            report(0, first[0], 2_048, .downloading)
            report(1, first[1], 5_000, .installing)
            #expect(e.hub.app.rolloutTick(now: t0 + 59_000) == 0, "not timed out yet")
            // Past the time-out: 0's and 2's jobs are ended, retried at once (the cap has room); 1 installs on.
            #expect(e.hub.app.rolloutTick(now: t0 + 61_000) == 2)
            for j in [first[0], first[2]] {
                let ended = try Self.job(e, j)
                #expect(ended.status == .failed && ended.reason == "TIMED_OUT", "\(ended)")
                #expect(e.hub.store.command(id: ended.commandID)?.state == .cancelled, "the offer ends with its job")
            }
            #expect(try Self.job(e, first[1]).status == .installing, "an install under way is not timed out")
            m = try await HubRolloutTests.members(e, id)
            let second = try [0, 2].map { try #require(m[things[$0]]?.jobID) }
            #expect(Set(second).isDisjoint(with: first), "a new job each")
            #expect(try second.map { try Self.job(e, $0).attempt } == [2, 2], "the second attempt")
            let listed = try await e.get("\(e.api)/rollouts/\(id)/things", token: Self.admin)
            let attempts = (listed.json["things"] as? [[String: Any]])?.map { $0["attempts"] as? Int }
            #expect(attempts == [2, 1, 2], "\(listed.text)")
            // The second attempts time out too: no retry left, FAILED. 1 rolls back: not retried.
            #expect(e.hub.app.rolloutTick(now: t0 + 122_000) == 0)
            report(1, first[1], 6_000, .rolledBack)
            #expect(e.hub.app.rolloutTick(now: t0 + 123_000) == 0)
            let end = try await HubRolloutTests.rollout(e, id)
            #expect(end["counts"] as? [String: Int] == ["FAILED": 2, "ROLLED_BACK": 1], "\(end)")
            #expect(end["status"] as? String == "completed", "\(end)")
        }
    }

    @Test(
        "A member released without its job (its hub stopped) goes back to the queue after a minute, then is released again",
        arguments: StoreFactory.all)
    func orphan(_ factory: StoreFactory) async throws {
        try await HubUpdateTests().withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            let t = try await e.onboardSilent("rr-or-1", owner: "user:\(uid)", token: userToken).thingID
            let rel = try await Release.make(e)
            let id = try await HubRolloutTests.created(e, rel.form(target: ["things": [t]], rate: 100, cap: 1))
            // The release's commit, as a hub that stopped before the job's creation left it.
            let t0 = Platform.epochMs()
            let orphan = try #require(e.hub.store.releaseRolloutMembers(id: id, now: t0)?.first)
            #expect(orphan.attempt == 1)
            #expect(e.hub.app.rolloutTick(now: t0 + 59_000) == 0, "within the bound: left offered (the cap is full)")
            #expect(try await HubRolloutTests.members(e, id)[t]?.state == "offered")
            #expect(e.hub.app.rolloutTick(now: t0 + 61_000) == 1, "back in the queue, released again")
            let m = try #require(try await HubRolloutTests.members(e, id)[t])
            let job = try Self.job(e, try #require(m.jobID))
            #expect(job.jobID != orphan.jobID && job.attempt == 1, "the orphan's attempt was taken back")
            #expect(e.hub.store.updateJob(id: orphan.jobID).value == nil)
        }
    }

    /// The store's retry rules with `a` and `b` two stores on one database
    /// (two hubs) or one store twice: a FAILED member with retries left is
    /// queued once and released once per attempt; ROLLED_BACK and the last
    /// attempt are final; the ramp holds the release.
    static func retryRules(_ a: HubStore, _ b: HubStore) throws {
        var things: [String] = []
        for i in 0..<4 {
            things.append(
                try a.registerThing(
                    vendorThingID: "rr-store-\(i)-\(Platform.randomHex(bytes: 4))", password: "pw",
                    thingType: "Lamp", firmwareVersion: "1.0.0", dataGroupingInterval: nil, layoutPosition: nil
                ).get().thingID)
        }
        things.sort()
        let id = "r-" + Platform.randomHex(bytes: 8)
        let r = RolloutRecord(
            rolloutID: id, image: String(repeating: "a", count: 64), version: "2", manifest: [1], signatures: "[]",
            trialS: nil, target: RolloutTarget(things: things), ratePerMinute: 100, maxInFlight: 4,
            abortFailurePercent: nil, abortMinExecuted: 1, abortStatuses: [.failed], timeoutS: 60, retries: 1,
            ramp: RolloutRamp(startPerMinute: 1, factor: 3, everyS: 60), createdAt: 1_000_000, updatedAt: 1_000_000)
        #expect(a.insertRollout(r) == 4)
        #expect(b.rollout(id: id).value == r)
        func releaseAtOnce(_ now: Int64) -> [RolloutRelease] {
            let got = Locked<[RolloutRelease]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let r = (i % 2 == 0 ? a : b).releaseRolloutMembers(id: id, now: now) ?? []
                got.withLock { $0 += r }
            }
            return got.withLock { $0 }
        }
        // The ramp: one in the first minute, three in the second.
        let one = releaseAtOnce(1_000_000)
        #expect(one.count == 1 && one.first?.attempt == 1, "\(one.map(\.thingID))")
        let three = releaseAtOnce(1_060_001)
        #expect(three.count == 3 && Set(three.map(\.thingID)).count == 3, "\(three.map(\.thingID))")
        let jobs = Dictionary(uniqueKeysWithValues: (one + three).map { ($0.thingID, $0.jobID) })
        // things[0]'s job fails: queued again, once however many hubs finish it.
        let finished = Locked<[String?]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let got = (i % 2 == 0 ? a : b).finishRolloutMember(jobID: jobs[things[0]] ?? "", status: .failed)
            finished.withLock { $0.append(got) }
        }
        #expect(finished.withLock { $0.compactMap { $0 } } == [id], "finished once")
        let queued = try #require(b.rolloutMembers(id: id)?.first { $0.thingID == things[0] })
        #expect(queued.state == RolloutMember.queued && queued.jobID == nil && queued.attempts == 1)
        // Released once for its second attempt, whatever both hubs do.
        let again = releaseAtOnce(1_200_000)
        #expect(again.map(\.thingID) == [things[0]] && again.first?.attempt == 2, "\(again.map(\.thingID))")
        // Its second failure is final; a ROLLED_BACK job is never retried.
        #expect(a.finishRolloutMember(jobID: again.first?.jobID ?? "", status: .failed) == id)
        #expect(b.finishRolloutMember(jobID: jobs[things[1]] ?? "", status: .rolledBack) == id)
        let states = Dictionary(uniqueKeysWithValues: (try #require(a.rolloutMembers(id: id))).map { ($0.thingID, $0) })
        #expect(states[things[0]]?.state == "FAILED" && states[things[0]]?.attempts == 2)
        #expect(states[things[1]]?.state == "ROLLED_BACK")
        // Offered before a bound: the time-outs' and the orphans' read.
        let old = try #require(b.offeredMembers(id: id, releasedBefore: 1_060_002)).map(\.thingID)
        #expect(old == [things[2], things[3]].filter { jobs[$0] != nil }.sorted())
        #expect(b.offeredMembers(id: id, releasedBefore: 1_060_001)?.isEmpty == true)
        // A member put back in the queue from offered takes its attempt back.
        #expect(
            a.setRolloutMember(id: id, thingID: things[2], state: RolloutMember.queued, from: RolloutMember.offered))
        #expect(b.rolloutMembers(id: id)?.first { $0.thingID == things[2] }?.attempts == 0)
        // A cancelled rollout retries nothing.
        #expect(a.setRolloutStatus(id: id, to: .cancelled, from: [.running], reason: nil, now: 2) == true)
        #expect(b.finishRolloutMember(jobID: jobs[things[3]] ?? "", status: .failed) == id)
        #expect(a.rolloutMembers(id: id)?.first { $0.thingID == things[3] }?.state == "FAILED")
    }

    @Test("The store: retries once per attempt, the ramp", arguments: StoreFactory.all)
    func store(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try Self.retryRules(s, s)
    }

    @Test(
        "Two hubs on one PostgreSQL: a retried member released once per attempt",
        .enabled(if: PostgresServer.enabled))
    func twoHubs() throws {
        try PostgresServer.get().withTwoStores { a, b in try Self.retryRules(a, b) }
    }
}
