// SPDX-License-Identifier: Apache-2.0

import Dispatch
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
import ThingIFHubServer

/// The jobs the hub ends itself (docs/UPDATES.md §9, §11; UpdateJobEnds):
/// the offer's command is cancelled with the job, so a thing offline when
/// a rollout aborts never gets a dead offer; the operator's cancel of one
/// job before its install (409 after); an offer that expired unanswered
/// ends its job FAILED, and the thing may have a new one.
@Suite("Hub update ends", .offPool)
struct HubUpdateEndTests {
    static let admin = HubImageTests.admin
    typealias Device = HubUpdateTests.Device

    static func cancel(_ e: HubAPIEnv, _ thing: String, _ job: String, token: String? = admin) async throws
        -> HTTPReply
    {
        try await e.call("POST", "\(e.api)/things/\(thing)/updates/\(job)/cancel", token: token, json: [String: Any]())
    }

    static func messages(_ d: Device, containing s: String) -> Int {
        d.link.probe.messages(on: d.topic).filter { String(decoding: $0.payload, as: UTF8.self).contains(s) }.count
    }

    /// The thing announces `up` on its status topic; the hub has taken it.
    static func announce(_ e: HubAPIEnv, _ d: Device, _ up: Bool) {
        #expect(
            d.link.probe.publish(
                Topics.status(clientID: d.topic), Array((up ? "online" : "offline").utf8), retain: true))
        #expect(
            poll { e.hub.presence.isOnline(d.id) == up }, "the hub did not take \(d.id) \(up ? "online" : "offline")")
    }

    @Test(
        "A rollout's abort cancels the offer held for an offline thing: online again, it gets no offer",
        arguments: StoreFactory.all)
    func abortCancelsHeldOffer(_ factory: StoreFactory) async throws {
        try await HubUpdateTests().withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            let a = try await Device.onboard(e, "ue-ab-a", userToken: userToken, uid: uid)
            let b = try await Device.onboard(e, "ue-ab-b", userToken: userToken, uid: uid)
            let c = try await Device.onboard(e, "ue-ab-c", userToken: userToken, uid: uid)
            defer {
                a.stop()
                b.stop()
                c.stop()
            }
            // b announces itself, then goes offline: the hub holds its commands. c is online.
            Self.announce(e, b, true)
            Self.announce(e, b, false)
            Self.announce(e, c, true)
            let rel = try await HubRolloutTests.Release.make(e)
            let id = try await HubRolloutTests.created(
                e, rel.form(target: ["things": [a.id, b.id, c.id]], rate: 100, cap: 3, abort: ["failurePercent": 50]))
            #expect(e.hub.app.rolloutTick(now: Platform.epochMs()) == 3)
            let m = try await HubRolloutTests.members(e, id)
            let (aJob, bJob, cJob) = (
                try #require(m[a.id]?.jobID), try #require(m[b.id]?.jobID), try #require(m[c.id]?.jobID)
            )
            let offer = try #require(e.hub.store.updateJob(id: bJob).value?.commandID)
            let delivered = try #require(e.hub.store.updateJob(id: cJob).value?.commandID)
            #expect(e.hub.store.command(id: offer)?.state == .sending, "held for the offline thing")
            #expect(e.hub.store.command(id: delivered)?.state == .delivered, "delivered to the online thing")
            #expect(poll { Self.messages(c, containing: delivered) == 1 }, "no offer for c")
            // a takes its offer and fails: one of one executed, the rollout aborts.
            #expect(a.link.probe.waitForMessage(on: a.topic) != nil, "no offer for a")
            let failed = UpdateReport(attempt: 1, seq: 3_000, status: .failed, reason: "BAD")
            #expect(a.ask("PUT", a.updates(aJob), body: HubUpdateTests.report(failed))?.status == 204)
            #expect(try await HubRolloutTests.rollout(e, id)["status"] as? String == "aborted")
            let ended = try #require(e.hub.store.updateJob(id: bJob).value)
            #expect(ended.status == .cancelled && ended.reason == "ROLLOUT_ABORTED")
            #expect(e.hub.store.command(id: offer)?.state == .cancelled, "the offer's command ends with its job")
            #expect(e.hub.store.command(id: offer)?.endReason == EndReason.cancelled.rawValue)
            // The online thing's delivered offer: the cancel goes to it (its library drops an offer it has not started).
            #expect(e.hub.store.updateJob(id: cJob).value?.status == .cancelled)
            #expect(
                poll {
                    Self.messages(c, containing: "\"cancel\":true") == 1 && Self.messages(c, containing: delivered) == 2
                },
                "no cancel of \(delivered) on \(c.topic)")
            // b online again: nothing open to send it, and a command posted
            // after arrives while the offer never does.
            Self.announce(e, b, true)
            #expect(e.hub.delivery.resendUnanswered(to: b.id) == 0, "no open command for b")
            let later = try await GatewayRequestsTests.command(e, b.id, uid: uid, token: userToken)
            #expect(poll { Self.messages(b, containing: later) == 1 }, "the later command did not arrive")
            #expect(Self.messages(b, containing: offer) == 0, "the dead offer reached the thing")
        }
    }

    @Test(
        "The operator cancels one job before its install (its command, its member), 409 after, 404 for none",
        arguments: StoreFactory.all)
    func cancelOne(_ factory: StoreFactory) async throws {
        try await HubUpdateTests().withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            let t = try await e.onboardSilent("ue-c-1", owner: "user:\(uid)", token: userToken).thingID
            let other = try await e.onboardSilent("ue-c-2", owner: "user:\(uid)", token: userToken).thingID
            let rel = try await HubRolloutTests.Release.make(e)
            func job() async throws -> String {
                let r = try await HubUpdateTests.create(e, thing: t, rel.offer)
                try #require(r.status == 201, "\(r.status) \(r.text)")
                return try #require(r.string("jobID"))
            }
            func report(_ j: String, _ seq: Int64, _ s: UpdateStatus) {
                #expect(
                    e.hub.store.applyUpdateReport(
                        jobID: j, thingID: t, report: UpdateReport(attempt: 1, seq: seq, status: s, version: "1.2.0"),
                        now: Platform.epochMs()) == .applied)
            }
            // No report yet: cancelled, with its command.
            let first = try await job()
            for token in [nil, userToken] {
                let r = try await Self.cancel(e, t, first, token: token)
                #expect(r.status == 403 && r.errorCode == "WRONG_TOKEN", "\(r.status) \(r.text)")
            }
            let c = try await Self.cancel(e, t, first)
            #expect(c.status == 200 && c.string("status") == "CANCELLED", "\(c.status) \(c.text)")
            #expect(c.string("reason") == "CANCELLED_BY_OPERATOR")
            let command = try #require(c.string("commandID"))
            #expect(e.hub.store.command(id: command)?.state == .cancelled)
            let again = try await Self.cancel(e, t, first)
            #expect(again.status == 409 && again.errorCode == "UPDATE_JOB_ENDED", "\(again.status) \(again.text)")
            // Downloading: not too late; installing: too late; final: ended.
            let second = try await job()
            report(second, 2_048, .downloading)
            #expect(try await Self.cancel(e, t, second).string("status") == "CANCELLED")
            let third = try await job()
            report(third, 5_000, .installing)
            let late = try await Self.cancel(e, t, third)
            #expect(late.status == 409 && late.errorCode == "UPDATE_TOO_LATE", "\(late.status) \(late.text)")
            #expect(e.hub.store.updateJob(id: third).value?.status == .installing, "the install goes on")
            report(third, 9_000, .succeeded)
            #expect(try await Self.cancel(e, t, third).errorCode == "UPDATE_JOB_ENDED")
            // None, and another thing's: the same 404.
            #expect(try await Self.cancel(e, t, "u-0000000000000000").errorCode == "UPDATE_JOB_NOT_FOUND")
            #expect(try await Self.cancel(e, other, third).errorCode == "UPDATE_JOB_NOT_FOUND")
            // A rollout's member: CANCELLED with its job, and the rollout completes.
            let id = try await HubRolloutTests.created(e, rel.form(target: ["things": [other]]))
            #expect(e.hub.app.rolloutTick(now: Platform.epochMs()) == 1)
            let member = try #require((try await HubRolloutTests.members(e, id))[other]?.jobID)
            #expect(try await Self.cancel(e, other, member).status == 200)
            #expect(try await HubRolloutTests.members(e, id)[other]?.state == "CANCELLED")
            #expect(try await HubRolloutTests.rollout(e, id)["status"] as? String == "completed")
            // /metrics: the jobs by status, counted at the scrape.
            let metrics = try await e.metrics(token: nil)
            #expect(metrics.value("thingif_hub_update_jobs", ["status": "CANCELLED"]) == 3, "\(metrics.samples)")
            #expect(metrics.value("thingif_hub_update_jobs", ["status": "SUCCEEDED"]) == 1, "\(metrics.samples)")
            #expect((metrics.value("thingif_hub_update_jobs", ["status": "none"]) ?? 0) == 0, "\(metrics.samples)")
        }
    }

    @Test("An offer that expires unanswered ends its job FAILED OFFER_EXPIRED: the thing may have a new one")
    func offerExpired() async throws {
        try await HubUpdateTests().withUpdates(.memory) { e in
            let (uid, userToken) = try await e.user()
            let t = try await e.onboardSilent("ue-x-1", owner: "user:\(uid)", token: userToken).thingID
            let rel = try await HubRolloutTests.Release.make(e)
            var form = rel.offer
            form["timeToLive"] = 1
            let r = try await HubUpdateTests.create(e, thing: t, form)
            try #require(r.status == 201, "\(r.status) \(r.text)")
            let job = try #require(r.string("jobID"))
            let busy = try await HubUpdateTests.create(e, thing: t, rel.offer)
            #expect(busy.status == 409 && busy.errorCode == "UPDATE_JOB_UNDER_WAY")
            // The lifecycle sweep (every second) ends the offer EXPIRED, and with it the job.
            #expect(poll { e.hub.store.updateJob(id: job).value?.status == .failed }, "the job stayed open")
            let ended = try #require(e.hub.store.updateJob(id: job).value)
            #expect(ended.reason == "OFFER_EXPIRED" && ended.step == "ended by the hub")
            #expect(e.hub.store.command(id: ended.commandID)?.state == .expired)
            let next = try await HubUpdateTests.create(e, thing: t, rel.offer)
            #expect(next.status == 201, "\(next.status) \(next.text)")
            // A job the thing reported on is its own: its offer's end leaves it.
            let nextJob = try #require(next.string("jobID"))
            #expect(
                e.hub.store.applyUpdateReport(
                    jobID: nextJob, thingID: t, report: UpdateReport(attempt: 1, seq: 1_024, status: .accepted),
                    now: Platform.epochMs()) == .applied)
            var offer = try #require(e.hub.store.command(id: e.hub.store.updateJob(id: nextJob).value?.commandID ?? ""))
            offer.state = .expired
            UpdateJobEnds(store: e.hub.store, delivery: e.hub.delivery).offerEnded(offer)
            #expect(e.hub.store.updateJob(id: nextJob).value?.status == .accepted)
        }
    }

    @Test(
        "A job whose offer ended EXPIRED while no hub ended the job (one stopped between) is ended at the next sweep",
        arguments: StoreFactory.all)
    func expiredOfferSwept(_ factory: StoreFactory) async throws {
        try await HubUpdateTests().withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            let rel = try await HubRolloutTests.Release.make(e)
            var jobs: [String] = []
            for n in 0..<4 {
                let t = try await e.onboardSilent("ue-sw-\(n)", owner: "user:\(uid)", token: userToken).thingID
                let r = try await HubUpdateTests.create(e, thing: t, rel.offer)
                try #require(r.status == 201, "\(r.status) \(r.text)")
                jobs.append(try #require(r.string("jobID")))
            }
            let offers = try jobs.map { try #require(e.hub.store.updateJob(id: $0).value) }
            // What the lifecycle's sweep wrote before its hub stopped: the
            // offers of jobs 0, 1 and 3 EXPIRED, straight in the store (the
            // delivery's hook, which would end the jobs, never ran). Job 1
            // has a report, so it is the thing's and stays; job 2's offer
            // is open.
            for o in [offers[0], offers[1], offers[3]] {
                #expect(
                    e.hub.store.endCommand(
                        commandID: o.commandID, state: .expired, reason: "expired", at: Platform.epochMs()))
            }
            #expect(
                e.hub.store.applyUpdateReport(
                    jobID: jobs[1], thingID: offers[1].thingID,
                    report: UpdateReport(attempt: 1, seq: 1_024, status: .accepted), now: Platform.epochMs())
                    == .applied)
            #expect(Set(e.hub.store.jobsOfExpiredOffers(limit: 10) ?? []) == [jobs[0], jobs[3]])
            #expect(e.hub.store.jobsOfExpiredOffers(limit: 1)?.count == 1)
            // Batches of one: the sweep goes on while a batch ended some.
            #expect(e.hub.app.jobEnds.endExpiredOffers(batch: 1) == 2)
            for j in [jobs[0], jobs[3]] {
                let ended = try #require(e.hub.store.updateJob(id: j).value)
                #expect(ended.status == .failed && ended.reason == "OFFER_EXPIRED")
            }
            #expect(e.hub.store.updateJob(id: jobs[1]).value?.status == .accepted)
            #expect(e.hub.store.updateJob(id: jobs[2]).value?.status == nil)
            #expect(e.hub.app.jobEnds.endExpiredOffers() == 0, "ended once")
        }
    }

    /// The hub's end of a job racing the thing's INSTALLING report, `a` and
    /// `b` two stores on one database (two hubs) or one store twice: the
    /// end is made once at most, and the report always applies (its seq is
    /// above anything stored), so the job ends INSTALLING, the thing's word.
    static func endRacesInstall(_ a: HubStore, _ b: HubStore) throws {
        let thing = try a.registerThing(
            vendorThingID: "ue-race-\(Platform.randomHex(bytes: 4))", password: "pw", thingType: "Lamp",
            firmwareVersion: "1.0.0", dataGroupingInterval: nil, layoutPosition: nil
        ).get().thingID
        for round in 0..<5 {
            let job = "u-race-\(round)-\(Platform.randomHex(bytes: 4))"
            #expect(
                a.insertUpdateJob(
                    UpdateJobRecord(
                        jobID: job, thingID: thing, image: String(repeating: "a", count: 64), version: "2",
                        manifest: [1], blockSize: 1024, blocks: 1, attempt: 1, commandID: "c", createdAt: 1,
                        updatedAt: 1)) == .created)
            #expect(
                a.applyUpdateReport(
                    jobID: job, thingID: thing, report: UpdateReport(attempt: 1, seq: 1_024, status: .verified), now: 2)
                    == .applied)
            let ended = Locked(0)
            let applied = Locked(0)
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let s = i % 2 == 0 ? a : b
                if i % 4 < 2 {
                    if s.endUpdateJob(
                        jobID: job, status: .cancelled, reason: "CANCELLED_BY_OPERATOR",
                        from: UpdateStatus.beforeInstall,
                        now: 3) == true
                    {
                        ended.withLock { $0 += 1 }
                    }
                } else if s.applyUpdateReport(
                    jobID: job, thingID: thing, report: UpdateReport(attempt: 1, seq: 5_000, status: .installing),
                    now: 3) == .applied
                {
                    applied.withLock { $0 += 1 }
                }
            }
            #expect(ended.withLock { $0 } <= 1, "ended once at most")
            #expect(applied.withLock { $0 } == 1, "the report applies once")
            #expect(b.updateJob(id: job).value?.status == .installing, "the thing's word wins")
            // Ended for the next round.
            #expect(
                a.applyUpdateReport(
                    jobID: job, thingID: thing, report: UpdateReport(attempt: 1, seq: 9_000, status: .succeeded), now: 4
                )
                    == .applied)
        }
    }

    @Test("The store: the hub's end of a job and an INSTALLING report at once", arguments: StoreFactory.all)
    func endRacesInstallStore(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try Self.endRacesInstall(s, s)
    }

    @Test(
        "Two hubs on one PostgreSQL: the hub's end of a job and an INSTALLING report at once",
        .enabled(if: PostgresServer.enabled))
    func endRacesInstallTwoHubs() throws {
        try PostgresServer.get().withTwoStores { a, b in try Self.endRacesInstall(a, b) }
    }
}
