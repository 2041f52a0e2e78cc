// SPDX-License-Identifier: Apache-2.0

import Dispatch
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// Rollouts (docs/UPDATES.md §11), on every store: created over REST (the
/// refusals), released by ticks the test runs with its own clock (the
/// harness's hubs run no schedules) within the rate and the cap, driven
/// by the things' own reports over MQTT, aborted at the threshold, paused,
/// resumed and cancelled; two hubs on one PostgreSQL release each member
/// once and record an abort once.
@Suite("Hub rollouts", .offPool)
struct HubRolloutTests {
    static let admin = HubImageTests.admin
    typealias Device = HubUpdateTests.Device

    /// An uploaded image and a rollout form for it (the manifest signed as an offline signer would).
    struct Release {
        let sha: String
        let manifest: [UInt8]
        let offer: [String: Any]

        static func make(_ e: HubAPIEnv, seed: UInt8 = 3) async throws -> Release {
            let image = HubImageTests.image(5_000, seed: seed)
            let sha = try await HubUpdateTests.upload(e, image)
            let (manifest, _) = TestSigner.manifest(for: image, blockSize: 1024)
            return Release(
                sha: sha, manifest: manifest,
                offer: HubUpdateTests.form(sha: sha, manifest: manifest, signer: TestSigner(kid: "fw-test")))
        }

        func form(
            target: [String: Any], rate: Int = 100, cap: Int = 100, abort: [String: Any]? = nil
        ) -> [String: Any] {
            var f = offer
            f["target"] = target
            f["ratePerMinute"] = rate
            f["maxInFlight"] = cap
            if let abort { f["abort"] = abort }
            return f
        }
    }

    static func create(_ e: HubAPIEnv, _ form: [String: Any], token: String? = admin) async throws -> HTTPReply {
        try await e.call("POST", "\(e.api)/rollouts", token: token, json: form)
    }

    static func created(_ e: HubAPIEnv, _ form: [String: Any]) async throws -> String {
        let r = try await create(e, form)
        try #require(r.status == 201, "\(r.status) \(r.text)")
        return try #require(r.string("rolloutID"))
    }

    static func rollout(_ e: HubAPIEnv, _ id: String) async throws -> [String: Any] {
        let r = try await e.get("\(e.api)/rollouts/\(id)", token: admin)
        try #require(r.status == 200, "\(r.status) \(r.text)")
        return r.json
    }

    static func counts(_ e: HubAPIEnv, _ id: String) async throws -> [String: Int] {
        (try await rollout(e, id)["counts"] as? [String: Int]) ?? [:]
    }

    /// The members' states by thingID, and their jobs.
    static func members(_ e: HubAPIEnv, _ id: String) async throws -> [String: (state: String, jobID: String?)] {
        let r = try await e.get("\(e.api)/rollouts/\(id)/things", token: admin)
        try #require(r.status == 200, "\(r.status) \(r.text)")
        var out: [String: (state: String, jobID: String?)] = [:]
        for m in (r.json["things"] as? [[String: Any]]) ?? [] {
            if let t = m["thingID"] as? String, let s = m["state"] as? String { out[t] = (s, m["jobID"] as? String) }
        }
        return out
    }

    static func change(_ e: HubAPIEnv, _ id: String, _ what: String) async throws -> HTTPReply {
        try await e.call("POST", "\(e.api)/rollouts/\(id)/\(what)", token: admin, json: [String: Any]())
    }

    @Test("Refused: a bad target, an unknown thing or image, a manifest of other bytes, a form out of range, no admin")
    func refusals() async throws {
        try await HubUpdateTests().withUpdates(.memory) { e in
            let (uid, userToken) = try await e.user()
            let t = try await e.onboardSilent("ro-ref-1", owner: "user:\(uid)", token: userToken)
            let rel = try await Release.make(e)
            let good = rel.form(target: ["things": [t.thingID]])
            for token in [nil, userToken, "not-the-admin"] {
                let r = try await Self.create(e, good, token: token)
                #expect(r.status == 403 && r.errorCode == "WRONG_TOKEN", "\(token ?? "none"): \(r.status) \(r.text)")
            }
            func refused(_ form: [String: Any], _ status: Int, _ code: String, _ what: String) async throws {
                let r = try await Self.create(e, form)
                #expect(r.status == status && r.errorCode == code, "\(what): \(r.status) \(r.text)")
            }
            var noTarget = good
            noTarget["target"] = nil
            try await refused(noTarget, 400, "INVALID_INPUT_DATA", "no target")
            try await refused(rel.form(target: [:]), 400, "INVALID_INPUT_DATA", "an empty target")
            try await refused(rel.form(target: ["things": "x"]), 400, "INVALID_INPUT_DATA", "things not a list")
            try await refused(rel.form(target: ["things": [String]()]), 400, "INVALID_INPUT_DATA", "no things")
            try await refused(rel.form(target: ["thingType": 5]), 400, "INVALID_INPUT_DATA", "a thingType not a string")
            try await refused(rel.form(target: ["things": ["th.none"]]), 404, "TARGET_NOT_FOUND", "an unknown thing")
            try await refused(
                rel.form(target: ["thingType": "NoSuchType"]), 422, "ROLLOUT_TARGET_EMPTY", "a target of no thing")
            try await refused(
                rel.form(target: ["things": [t.thingID]], rate: 0), 400, "INVALID_INPUT_DATA", "a rate of 0")
            try await refused(
                rel.form(target: ["things": [t.thingID]], cap: -1), 400, "INVALID_INPUT_DATA", "a cap below 1")
            try await refused(
                rel.form(target: ["things": [t.thingID]], abort: ["failurePercent": 101]), 400, "INVALID_INPUT_DATA",
                "a percentage over 100")
            try await refused(
                rel.form(target: ["things": [t.thingID]], abort: ["failurePercent": 10, "statuses": ["SUCCEEDED"]]),
                400, "INVALID_INPUT_DATA", "SUCCEEDED as a failure")
            var unknownImage = good
            unknownImage["image"] = String(repeating: "0", count: 64)
            try await refused(unknownImage, 404, "IMAGE_NOT_FOUND", "an unknown image")
            // A manifest of other bytes than the image's.
            let other = HubImageTests.image(5_000, seed: 9)
            let (otherManifest, _) = TestSigner.manifest(for: other, blockSize: 1024)
            var mismatch = good
            mismatch["manifest"] = Data(otherManifest).base64EncodedString()
            try await refused(mismatch, 422, "MANIFEST_MISMATCH", "another image's manifest")
            var unsigned = good
            unsigned["signatures"] = [[String: Any]]()
            try await refused(unsigned, 400, "INVALID_INPUT_DATA", "no signature")
            // Nothing was stored by any of them.
            let list = try await e.get("\(e.api)/rollouts", token: Self.admin)
            #expect(list.status == 200 && (list.json["rollouts"] as? [Any])?.isEmpty == true, "\(list.text)")
            #expect(
                try await e.get("\(e.api)/rollouts/r-0000000000000000", token: Self.admin).errorCode
                    == "ROLLOUT_NOT_FOUND")
            // The good form, then: one member, and the admin's routes only.
            let id = try await Self.created(e, good)
            #expect(try await Self.counts(e, id) == ["queued": 1])
            #expect(try await e.get("\(e.api)/rollouts/\(id)", token: userToken).status == 403)
            #expect(try await e.get("\(e.api)/rollouts/\(id)/things", token: userToken).status == 403)
        }
    }

    @Test(
        "Ticks release within the rate and the cap, one job each as a single job's, reports make members final",
        arguments: StoreFactory.all)
    func releases(_ factory: StoreFactory) async throws {
        try await HubUpdateTests().withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            var devices: [Device] = []
            defer { for d in devices { d.stop() } }
            for i in 0..<7 {
                devices.append(try await Device.onboard(e, "ro-rel-\(i)", userToken: userToken, uid: uid))
            }
            // The seventh runs another firmware: not in the target.
            let outside = devices[6]
            #expect(e.hub.store.setFirmwareVersion(thingID: outside.id, "0.9.0"))
            // One already has a job under way: it stays queued until it ends.
            let rel = try await Release.make(e)
            let busy = devices[0]
            let single = try await HubUpdateTests.create(e, thing: busy.id, rel.offer)
            try #require(single.status == 201, "\(single.text)")
            let singleJob = try #require(single.string("jobID"))

            let id = try await Self.created(
                e, rel.form(target: ["thingType": "AirConditioner", "firmwareVersions": ["1.0.0"]], rate: 2, cap: 3))
            let r0 = try await Self.rollout(e, id)
            #expect(r0["status"] as? String == "running" && r0["members"] as? Int == 6, "\(r0)")
            #expect((try await Self.members(e, id))[outside.id] == nil, "another firmware version is not a member")

            // Tick 1: the rate (2 a minute) releases two.
            let t0 = Platform.epochMs()
            #expect(e.hub.app.rolloutTick(now: t0) == 2)
            #expect(e.hub.app.rolloutTick(now: t0 + 1_000) == 0, "the minute's two are out")
            var m = try await Self.members(e, id)
            #expect(m[busy.id]?.state == "queued", "a thing with a job under way stays queued")
            let first = m.filter { $0.value.state == "offered" }
            #expect(first.count == 2)
            // Each released thing got its offer, a job as POST …/updates makes, with the member's jobID.
            for (thing, member) in first {
                let d = try #require(devices.first { $0.id == thing })
                let msg = try #require(d.link.probe.waitForMessage(on: d.topic), "no offer on \(d.topic)")
                let command = try JSON.parse(msg.payload).get()
                #expect(command["issuer"]?.stringValue == AppAPI.updateIssuer)
                let params = try #require(command["actions"]?.elements.first?["_thingif"]?.elements.first?["update"])
                let offer = try UpdateOffer.parse(params).get()
                #expect(offer.jobID == member.jobID && offer.manifest.bytes == rel.manifest)
                let job = try await e.get("\(e.api)/things/\(thing)/updates/\(offer.jobID)", token: Self.admin)
                #expect(job.status == 200 && job.string("image") == rel.sha, "\(job.text)")
            }

            // A minute on: the cap (3 in flight) lets one more out, not two.
            #expect(e.hub.app.rolloutTick(now: t0 + 61_000) == 1)
            m = try await Self.members(e, id)
            let offered = m.filter { $0.value.state == "offered" }
            #expect(offered.count == 3)
            // The busy thing's single job ends: it may be released now.
            #expect(
                busy.ask(
                    "PUT", busy.updates(singleJob),
                    body: HubUpdateTests.report(UpdateReport(attempt: 1, seq: 1, status: .failed, reason: "X")))?
                    .status == 204)

            // A report through the thing's request channel makes its member final.
            let (doneThing, done) = try #require(offered.min { $0.key < $1.key })
            let d = try #require(devices.first { $0.id == doneThing })
            let ok = UpdateReport(attempt: 1, seq: 9_000, status: .succeeded, version: "1.2.0")
            #expect(d.ask("PUT", d.updates(try #require(done.jobID)), body: HubUpdateTests.report(ok))?.status == 204)
            #expect((try await Self.members(e, id))[doneThing]?.state == "SUCCEEDED")
            #expect(e.hub.store.thing(id: doneThing)?.firmwareVersion == "1.2.0")
            #expect(e.hub.app.rolloutTick(now: t0 + 62_000) == 1, "a place in flight, and one of the minute's two")
            #expect(e.hub.app.rolloutTick(now: t0 + 63_000) == 0, "the minute's two are out")

            // Drive everything to its end: the rollout completes.
            var now = t0 + 200_000
            for _ in 0..<10 {
                let all = try await Self.members(e, id)
                for (thing, member) in all where member.state == "offered" {
                    let dev = try #require(devices.first { $0.id == thing })
                    let r = UpdateReport(attempt: 1, seq: 9_000, status: .succeeded, version: "1.2.0")
                    _ = dev.ask("PUT", dev.updates(try #require(member.jobID)), body: HubUpdateTests.report(r))
                }
                if all.values.allSatisfy({ $0.state == "SUCCEEDED" }) { break }
                now += 61_000
                e.hub.app.rolloutTick(now: now)
            }
            let end = try await Self.rollout(e, id)
            #expect(end["status"] as? String == "completed", "\(end)")
            #expect(end["counts"] as? [String: Int] == ["SUCCEEDED": 6], "\(end)")
            #expect(e.hub.app.rolloutTick(now: now + 61_000) == 0)
            // /metrics: the members by state, counted at the scrape.
            let metrics = try await e.metrics(token: nil)
            #expect(metrics.value("thingif_hub_rollout_members", ["state": "SUCCEEDED"]) == 6, "\(metrics.samples)")
        }
    }

    @Test(
        "An abort at the threshold: recorded once, no more releases, the jobs not installing yet ended (410)",
        arguments: StoreFactory.all)
    func abort(_ factory: StoreFactory) async throws {
        try await HubUpdateTests().withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            var devices: [Device] = []
            defer { for d in devices { d.stop() } }
            for i in 0..<6 { devices.append(try await Device.onboard(e, "ro-ab-\(i)", userToken: userToken, uid: uid)) }
            let rel = try await Release.make(e)
            let id = try await Self.created(
                e,
                rel.form(
                    target: ["things": devices.map(\.id)], rate: 100, cap: 4,
                    abort: ["failurePercent": 50, "minExecuted": 2]))
            let t0 = Platform.epochMs()
            #expect(e.hub.app.rolloutTick(now: t0) == 4)
            let m = try await Self.members(e, id)
            let order = m.filter { $0.value.state == "offered" }.keys.sorted()
            try #require(order.count == 4)
            func device(_ t: String) throws -> Device { try #require(devices.first { $0.id == t }) }
            func report(_ t: String, _ r: UpdateReport) throws -> KiiResponse? {
                let d = try device(t)
                return d.ask("PUT", d.updates(try #require(m[t]?.jobID)), body: HubUpdateTests.report(r))
            }
            let (installing, downloading, failing, succeeding) = (order[0], order[1], order[2], order[3])
            #expect(try report(installing, UpdateReport(attempt: 1, seq: 5_000, status: .installing))?.status == 204)
            #expect(
                try report(
                    downloading, UpdateReport(attempt: 1, seq: 2_000, status: .downloading, bytes: 1, of: 5_000))?
                    .status == 204)
            // One failure of one executed: 100 %, but fewer than minExecuted (2).
            #expect(
                try report(failing, UpdateReport(attempt: 1, seq: 3_000, status: .failed, reason: "BAD"))?.status == 204
            )
            #expect(try await Self.rollout(e, id)["status"] as? String == "running")
            // A fifth is released into the freed place.
            #expect(e.hub.app.rolloutTick(now: t0 + 1_000) == 1)
            let fifth = try #require(
                (try await Self.members(e, id)).first { $0.value.state == "offered" && !order.contains($0.key) })
            // One of two executed failed: 50 %, the threshold.
            #expect(
                try report(succeeding, UpdateReport(attempt: 1, seq: 9_000, status: .succeeded, version: "1.2.0"))?
                    .status == 204)
            let aborted = try await Self.rollout(e, id)
            #expect(aborted["status"] as? String == "aborted", "\(aborted)")
            #expect((aborted["reason"] as? String)?.contains("1 of 2 executed failed") == true, "\(aborted)")
            let after = try await Self.members(e, id)
            #expect(after[installing]?.state == "offered", "an install under way is not ended")
            #expect(after[downloading]?.state == "CANCELLED" && after[fifth.key]?.state == "CANCELLED")
            #expect(after.values.filter { $0.state == "queued" }.count == 1)
            for t in [downloading, fifth.key] {
                let job = try await e.get(
                    "\(e.api)/things/\(t)/updates/\(try #require(after[t]?.jobID))", token: Self.admin)
                #expect(job.string("status") == "CANCELLED" && job.string("reason") == "ROLLOUT_ABORTED", "\(job.text)")
            }
            let installingJob = try await e.get(
                "\(e.api)/things/\(installing)/updates/\(try #require(m[installing]?.jobID))", token: Self.admin)
            #expect(installingJob.string("status") == "INSTALLING")
            // The downloading thing's next block: 410, which the device turns into CANCELLED.
            let d = try device(downloading)
            let block = d.ask("GET", d.updates("\(try #require(m[downloading]?.jobID))/blocks/0"))
            #expect(
                block?.status == 410 && HubUpdateTests.code(block) == "UPDATE_JOB_ENDED",
                "\(HubUpdateTests.describe(block))")
            // No more releases, and the abort is recorded once.
            #expect(e.hub.app.rolloutTick(now: t0 + 120_000) == 0)
            #expect(
                try report(installing, UpdateReport(attempt: 1, seq: 6_000, status: .rolledBack, reason: "TRIAL"))?
                    .status == 204)
            let still = try await Self.rollout(e, id)
            #expect(
                still["status"] as? String == "aborted" && still["reason"] as? String == aborted["reason"] as? String)
            #expect((try await Self.members(e, id))[installing]?.state == "ROLLED_BACK")
            let resumed = try await Self.change(e, id, "resume")
            #expect(resumed.status == 409 && resumed.errorCode == "ROLLOUT_STATUS")
        }
    }

    @Test("Pause, resume and cancel: a paused rollout releases nothing, a cancel ends the offered jobs")
    func pauseResumeCancel() async throws {
        try await HubUpdateTests().withUpdates(.memory) { e in
            let (uid, userToken) = try await e.user()
            var things: [String] = []
            for i in 0..<3 {
                things.append(try await e.onboardSilent("ro-p-\(i)", owner: "user:\(uid)", token: userToken).thingID)
            }
            let rel = try await Release.make(e)
            let id = try await Self.created(e, rel.form(target: ["things": things], rate: 100, cap: 1))
            let paused = try await Self.change(e, id, "pause")
            #expect(paused.status == 200 && paused.string("status") == "paused", "\(paused.text)")
            #expect(try await Self.change(e, id, "pause").errorCode == "ROLLOUT_STATUS")
            let t0 = Platform.epochMs()
            #expect(e.hub.app.rolloutTick(now: t0) == 0, "paused: nothing released")
            #expect(try await Self.change(e, id, "resume").string("status") == "running")
            #expect(e.hub.app.rolloutTick(now: t0) == 1)
            #expect(e.hub.app.rolloutTick(now: t0 + 1) == 0, "the cap of one")
            let offered = try #require((try await Self.members(e, id)).first { $0.value.state == "offered" })
            let cancelled = try await Self.change(e, id, "cancel")
            #expect(cancelled.status == 200 && cancelled.string("status") == "cancelled", "\(cancelled.text)")
            #expect(cancelled.string("reason") == "cancelled by the operator")
            let job = try await e.get(
                "\(e.api)/things/\(offered.key)/updates/\(try #require(offered.value.jobID))", token: Self.admin)
            #expect(job.string("status") == "CANCELLED" && job.string("reason") == "ROLLOUT_CANCELLED", "\(job.text)")
            #expect(try await Self.counts(e, id) == ["CANCELLED": 1, "queued": 2])
            #expect(e.hub.app.rolloutTick(now: t0 + 120_000) == 0)
            #expect(try await Self.change(e, id, "resume").errorCode == "ROLLOUT_STATUS")
            #expect(try await Self.change(e, id, "cancel").errorCode == "ROLLOUT_STATUS")
            #expect(try await Self.change(e, "r-0000000000000000", "pause").errorCode == "ROLLOUT_NOT_FOUND")
        }
    }

    /// The store's rules with `a` and `b` two stores on one database (two
    /// hubs) or one store twice: releases within the rate and the cap,
    /// each member once however many ask at once, a busy thing passed
    /// over, a status changed once.
    static func rolloutRules(_ a: HubStore, _ b: HubStore) throws {
        var things: [String] = []
        for i in 0..<12 {
            things.append(
                try a.registerThing(
                    vendorThingID: "ro-store-\(i)-\(Platform.randomHex(bytes: 4))", password: "pw",
                    thingType: "Lamp-\(Platform.randomHex(bytes: 2))", firmwareVersion: "1.0.0",
                    dataGroupingInterval: nil, layoutPosition: nil
                ).get().thingID)
        }
        // One has a job under way.
        let busy = things.sorted()[0]
        #expect(
            a.insertUpdateJob(
                UpdateJobRecord(
                    jobID: "u-busy-\(Platform.randomHex(bytes: 4))", thingID: busy,
                    image: String(repeating: "a", count: 64),
                    version: "2", manifest: [1], blockSize: 1024, blocks: 1, attempt: 1, commandID: "c", createdAt: 1,
                    updatedAt: 1)) == .created)
        let id = "r-" + Platform.randomHex(bytes: 8)
        let r = RolloutRecord(
            rolloutID: id, image: String(repeating: "a", count: 64), version: "2", manifest: [1], signatures: "[]",
            trialS: nil, target: RolloutTarget(firmwareVersions: ["1.0.0"], things: things), ratePerMinute: 8,
            maxInFlight: 5, abortFailurePercent: 50, abortMinExecuted: 1, abortStatuses: [.failed],
            createdAt: 1, updatedAt: 1)
        #expect(a.insertRollout(r) == 12)
        #expect(b.rollout(id: id).value == r)
        let released = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let got = (i % 2 == 0 ? a : b).releaseRolloutMembers(id: id, now: 1_000_000) ?? []
            released.withLock { $0 += got.map(\.thingID) }
        }
        let first = released.withLock { $0 }
        #expect(first.count == 5 && Set(first).count == 5, "the cap, each once: \(first)")
        #expect(!first.contains(busy), "a thing with a job under way is passed over")
        #expect(b.rolloutCounts(id: id) == ["queued": 7, "offered": 5])
        // Three end: the rate's window (8 a minute) leaves three more.
        let members = try #require(a.rolloutMembers(id: id)).filter { $0.state == RolloutMember.offered }
        for m in members.prefix(3) {
            #expect(a.setRolloutMember(id: id, thingID: m.thingID, state: "SUCCEEDED", from: RolloutMember.offered))
            #expect(!b.setRolloutMember(id: id, thingID: m.thingID, state: "FAILED", from: RolloutMember.offered))
        }
        released.withLock { $0 = [] }
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let got = (i % 2 == 0 ? a : b).releaseRolloutMembers(id: id, now: 1_030_000) ?? []
            released.withLock { $0 += got.map(\.thingID) }
        }
        let second = released.withLock { $0 }
        #expect(second.count == 3 && Set(second + first).count == 8, "the rate: \(second)")
        // A minute on, the in-flight cap (5) is what holds.
        #expect(b.releaseRolloutMembers(id: id, now: 1_061_000)?.count == 0)
        // A member finished by its job, once.
        let offered = try #require(b.rolloutMembers(id: id)).filter { $0.state == RolloutMember.offered }
        let job = try #require(offered.first?.jobID)
        #expect(a.finishRolloutMember(jobID: job, status: .failed) == id)
        #expect(b.finishRolloutMember(jobID: job, status: .failed) == nil)
        // The status, changed once however many hubs try.
        let changed = Locked<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            if (i % 2 == 0 ? a : b).setRolloutStatus(id: id, to: .aborted, from: [.running], reason: "r\(i)", now: 2)
                == true
            {
                changed.withLock { $0 += 1 }
            }
        }
        #expect(changed.withLock { $0 } == 1)
        #expect(a.rollout(id: id).value?.status == .aborted)
        #expect(b.releaseRolloutMembers(id: id, now: 2_000_000)?.isEmpty == true, "an aborted rollout releases none")
        #expect(a.runningRolloutIDs()?.contains(id) == false)
        // A job ended by the hub only before its install.
        #expect(a.endUpdateJobBeforeInstall(jobID: job, reason: "X", now: 3) == false, "no such job")
        let busyJob = try #require(a.updateJobs(thingID: busy)?.first?.jobID)
        #expect(
            a.applyUpdateReport(
                jobID: busyJob, thingID: busy, report: UpdateReport(attempt: 1, seq: 1, status: .installing), now: 3)
                == .applied)
        #expect(b.endUpdateJobBeforeInstall(jobID: busyJob, reason: "X", now: 3) == false, "installing: too late")
        // Members go with their thing.
        #expect(a.deleteThing(id: things[5]))
        #expect(b.rolloutMembers(id: id)?.count == 11)
    }

    @Test("The store: releases within the rate and the cap, busy things passed over", arguments: StoreFactory.all)
    func store(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try Self.rolloutRules(s, s)
    }

    @Test(
        "Two hubs on one PostgreSQL: each member released once, within the cap; an abort recorded once",
        .enabled(if: PostgresServer.enabled))
    func twoHubs() throws {
        try PostgresServer.get().withTwoStores { a, b in try Self.rolloutRules(a, b) }
    }
}
