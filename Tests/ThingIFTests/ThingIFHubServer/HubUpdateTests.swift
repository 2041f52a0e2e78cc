// SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// The hub's side of one thing's update job (docs/UPDATES.md §9), on every
/// store: the operator creates the job over REST with a manifest signed
/// as an offline signer would; the thing receives the offer as a command
/// and, over its own MQTT request channel, fetches the hash pages and the
/// blocks and reports. The refusals, the hostile paths and the bounds.
@Suite("Hub update jobs", .offPool)
struct HubUpdateTests {
    static let admin = HubImageTests.admin
    static let octets = HubImageTests.octets

    func withUpdates(
        _ factory: StoreFactory, options: @escaping @Sendable (inout FrameworkSide.Options) -> Void = { _ in },
        _ body: (HubAPIEnv) async throws -> Void
    ) async throws {
        var security = HubServer.Security()
        security.adminToken = Self.admin
        let (store, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try await withHubAPI(security: security, store: store, options: options, body)
    }

    /// A thing onboarded by its owner, on its own MQTT connection (its
    /// client ID, its token), subscribed to its replies and its commands.
    struct Device {
        let id: String
        let topic: String
        let link: GatewayRequestsTests.Link
        let asker: Asker

        static func onboard(_ e: HubAPIEnv, _ vendor: String, userToken: String, uid: String) async throws -> Device {
            let i = try await e.onboardSilent(vendor, owner: "user:\(uid)", token: userToken)
            let link = try GatewayRequestsTests.Link(
                e,
                GatewayRequestsTests.Gateway(
                    id: i.thingID, vendor: vendor, token: i.token, topic: i.topic, username: i.username,
                    password: i.password))
            try #require(link.probe.subscribe(i.topic) == 1)
            return Device(id: i.thingID, topic: i.topic, link: link, asker: Asker(link))
        }

        func stop() { link.stop() }

        /// The requests at once (a window), then each reply.
        func ask(_ requests: [(method: String, path: String, body: String)], token: String? = nil) -> [KiiResponse?] {
            asker.ask(requests, token: token)
        }

        func ask(_ method: String, _ path: String, body: String = "", token: String? = nil) -> KiiResponse? {
            asker.ask([(method, path, body)], token: token)[0]
        }

        func updates(_ suffix: String, thing: String? = nil) -> String { "things/\(thing ?? id)/updates/\(suffix)" }
    }

    /// Replies by request ID, decoding each message once (a download's
    /// thousand replies, without decoding them all at every poll).
    final class Asker {
        let link: GatewayRequestsTests.Link
        private var seen = 0
        private var replies: [String: KiiResponse] = [:]

        init(_ link: GatewayRequestsTests.Link) { self.link = link }

        func ask(_ requests: [(method: String, path: String, body: String)], token: String?) -> [KiiResponse?] {
            let rids = requests.map { link.send($0.method, $0.path, token: token, body: $0.body) }
            poll(timeoutMs: 30_000) {
                let ms = self.link.probe.messages(on: self.link.replyTopic)
                for m in ms[self.seen...] {
                    if let r = KiiResponse.decode(m.payload), let rid = r.requestID { self.replies[rid] = r }
                }
                self.seen = ms.count
                return rids.allSatisfy { self.replies[$0] != nil }
            }
            return rids.map { replies.removeValue(forKey: $0) }
        }
    }

    static func describe(_ r: KiiResponse?) -> String {
        r.map { "\($0.status) \($0.bodyText.prefix(200))" } ?? "no reply"
    }

    static func code(_ r: KiiResponse?) -> String? {
        guard let r, case .success(let j) = JSON.parse(r.body) else { return nil }
        return j["errorCode"]?.stringValue
    }

    /// Uploads `bytes`: its sha256.
    static func upload(_ e: HubAPIEnv, _ bytes: [UInt8]) async throws -> String {
        let r = try await e.call("POST", "\(e.api)/images", token: admin, body: Data(bytes), contentType: octets)
        try #require(r.status == 201 || r.status == 200, "upload: \(r.status) \(r.text)")
        return try #require(r.string("sha256"))
    }

    /// The job's form: the image, the manifest's bytes and the signer's signature.
    static func form(sha: String, manifest: [UInt8], signer: TestSigner, trialS: Int? = 60) -> [String: Any] {
        let sig = signer.sign(manifest)
        var f: [String: Any] = [
            "image": sha, "manifest": Data(manifest).base64EncodedString(),
            "signatures": [["kid": sig.kid, "alg": "ES256", "sig": Data(sig.der).base64EncodedString()]]
        ]
        if let trialS { f["trialS"] = trialS }
        return f
    }

    static func create(_ e: HubAPIEnv, thing: String, _ form: [String: Any]) async throws -> HTTPReply {
        try await e.call("POST", "\(e.api)/things/\(thing)/updates", token: admin, json: form)
    }

    static func report(_ r: UpdateReport) -> String { String(decoding: r.encode(), as: UTF8.self) }

    @Test("A job: offer, hash pages, every block, reports by seq, SUCCEEDED, then 410", arguments: StoreFactory.all)
    func job(_ factory: StoreFactory) async throws {
        try await withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            let d = try await Device.onboard(e, "upd-ac-1", userToken: userToken, uid: uid)
            defer { d.stop() }
            // Two hash pages (1,025 blocks of 1 KiB) and a short last block.
            let image = HubImageTests.image(1024 * 1024 + 700, seed: 5)
            let blocks = 1025
            let sha = try await Self.upload(e, image)
            let signer = TestSigner(kid: "fw-test")
            let (manifest, hashList) = TestSigner.manifest(for: image, blockSize: 1024)
            let created = try await Self.create(e, thing: d.id, Self.form(sha: sha, manifest: manifest, signer: signer))
            try #require(created.status == 201, "\(created.status) \(created.text)")
            let jobID = try #require(created.string("jobID"))
            let commandID = try #require(created.string("commandID"))
            #expect(created.json["attempt"] as? Int == 1)
            #expect(UpdateCoding.isName(jobID) && jobID.hasPrefix("u-"))

            // The offer, as the thing receives it: a trait command, alias _thingif, one action.
            let m = try #require(d.link.probe.waitForMessage(on: d.topic), "no command on \(d.topic)")
            let command = try JSON.parse(m.payload).get()
            #expect(command["commandID"]?.stringValue == commandID)
            #expect(command["issuer"]?.stringValue == AppAPI.updateIssuer)
            let actions = try #require(command["actions"]).elements
            #expect(actions.count == 1)
            let group = try #require(actions.first?["_thingif"]).elements
            #expect(group.count == 1)
            let params = try #require(group.first?[UpdateOffer.actionName])
            let offer = try UpdateOffer.parse(params).get()
            #expect(offer.jobID == jobID && offer.attempt == 1 && offer.trialSeconds == 60)
            #expect(offer.manifest.bytes == manifest && offer.manifest.blocks == blocks)
            let sig = try #require(offer.signatures.first)
            #expect(
                UpdateCoding.verifyES256(
                    publicKeyPEM: signer.trusted.pem, message: offer.manifest.bytes, signature: sig.der) == true)

            // The hash pages: 1,024 hashes, then 1; no third.
            let pages = d.ask([
                ("GET", d.updates("\(jobID)/hashes/0"), ""), ("GET", d.updates("\(jobID)/hashes/1"), ""),
                ("GET", d.updates("\(jobID)/hashes/2"), "")
            ])
            #expect(pages[0]?.status == 200 && pages[0]?.header("Content-Type") == Self.octets)
            #expect(pages[0]?.body.count == 1024 * 32 && pages[1]?.body.count == 32, "\(Self.describe(pages[1]))")
            #expect(pages[2]?.status == 404 && Self.code(pages[2]) == "UPDATE_PAGE_NOT_FOUND")
            let list = (pages[0]?.body ?? []) + (pages[1]?.body ?? [])
            #expect(list == hashList)
            #expect(BlockHashList.verify(list, for: offer.manifest).isSuccess)

            // Every block, four at a time (the thing's window), checked against its hash.
            var assembled: [UInt8] = []
            var bad = 0
            for first in stride(from: 0, to: blocks, by: 4) {
                let window = (first..<min(first + 4, blocks)).map { ("GET", d.updates("\(jobID)/blocks/\($0)"), "") }
                for (k, r) in d.ask(window).enumerated() {
                    let n = first + k
                    guard let r, r.status == 200 else {
                        bad += 1
                        continue
                    }
                    if Array(SHA256.hash(data: r.body)) != Array(hashList[n * 32..<(n + 1) * 32]) { bad += 1 }
                    assembled += r.body
                }
            }
            #expect(bad == 0)
            #expect(assembled == image, "the blocks reassemble the image")
            let served = String(decoding: e.hub.metrics.exposition(), as: UTF8.self)
            #expect(
                served.contains("thingif_hub_update_bytes_served_total \(image.count + blocks * 32)"),
                "every block and page, counted once")
            let past = d.ask("GET", d.updates("\(jobID)/blocks/\(blocks)"))
            #expect(past?.status == 404 && Self.code(past) == "UPDATE_BLOCK_NOT_FOUND", "\(Self.describe(past))")

            // Reports: applied by seq; a lower one is dropped (204 all the same).
            let path = d.updates(jobID)
            func put(_ body: String) -> KiiResponse? { d.ask("PUT", path, body: body) }
            let downloading = UpdateReport(
                attempt: 1, seq: 2048, status: .downloading, bytes: 65_536, of: Int64(image.count))
            #expect(put(Self.report(downloading))?.status == 204)
            let late = UpdateReport(attempt: 1, seq: 1024, status: .accepted)
            #expect(put(Self.report(late))?.status == 204)
            let read = try await e.get("\(e.api)/things/\(d.id)/updates/\(jobID)", token: Self.admin)
            #expect(read.status == 200 && read.string("status") == "DOWNLOADING", "\(read.text)")
            #expect(read.json["seq"] as? Int == 2048 && read.json["bytes"] as? Int == 65_536)
            #expect(
                read.string("image") == sha && read.string("version") == "1.2.0"
                    && read.string("commandID") == commandID)
            // Another attempt: 409; malformed: 400 with the refusal's message; oversized: 413.
            let other = put(Self.report(UpdateReport(attempt: 2, seq: 9000, status: .downloading)))
            #expect(other?.status == 409 && Self.code(other) == "UPDATE_ATTEMPT_MISMATCH", "\(Self.describe(other))")
            let malformed = put(#"{"attempt":1,"seq":-1,"status":"DOWNLOADING"}"#)
            #expect(
                malformed?.status == 400 && malformed?.bodyText.contains("seq") == true, "\(Self.describe(malformed))")
            let noVersion = put(#"{"attempt":1,"seq":9000,"status":"SUCCEEDED"}"#)
            #expect(noVersion?.status == 400 && noVersion?.bodyText.contains("version") == true)
            let oversized = put(
                #"{"attempt":1,"seq":9000,"status":"DOWNLOADING","step":""# + String(repeating: "x", count: 3000)
                    + #""}"#)
            #expect(oversized?.status == 413, "\(Self.describe(oversized))")
            let still = try await e.get("\(e.api)/things/\(d.id)/updates/\(jobID)", token: Self.admin)
            #expect(still.json["seq"] as? Int == 2048, "nothing refused was applied: \(still.text)")

            // SUCCEEDED: the thing's firmware version is the report's.
            let done = UpdateReport(attempt: 1, seq: 8192, status: .succeeded, version: "1.2.0")
            #expect(put(Self.report(done))?.status == 204)
            #expect(e.hub.store.thing(id: d.id)?.firmwareVersion == "1.2.0")
            let list2 = try await e.get("\(e.api)/things/\(d.id)/updates", token: Self.admin)
            let jobs = list2.json["updates"] as? [[String: Any]] ?? []
            #expect(jobs.count == 1 && jobs.first?["status"] as? String == "SUCCEEDED", "\(list2.text)")
            #expect(jobs.first?["reportedVersion"] as? String == "1.2.0")
            // A final job serves no more blocks.
            let ended = d.ask("GET", d.updates("\(jobID)/blocks/0"))
            #expect(ended?.status == 410 && Self.code(ended) == "UPDATE_JOB_ENDED", "\(Self.describe(ended))")
            // And a new job may start.
            let next = try await Self.create(e, thing: d.id, Self.form(sha: sha, manifest: manifest, signer: signer))
            #expect(next.status == 201, "\(next.text)")
            let newest = try await e.get("\(e.api)/things/\(d.id)/updates", token: Self.admin)
            let ids = (newest.json["updates"] as? [[String: Any]] ?? []).compactMap { $0["jobID"] as? String }
            #expect(ids.count == 2 && ids.last == jobID, "newest first: \(ids)")
        }
    }

    @Test("Refused: another thing's job, a second job, bad forms, hostile paths", arguments: StoreFactory.all)
    func refusals(_ factory: StoreFactory) async throws {
        try await withUpdates(factory) { e in
            let (uid, userToken) = try await e.user()
            let a = try await Device.onboard(e, "upd-ac-a", userToken: userToken, uid: uid)
            defer { a.stop() }
            let b = try await Device.onboard(e, "upd-ac-b", userToken: userToken, uid: uid)
            defer { b.stop() }
            let image = HubImageTests.image(10_000)
            let sha = try await Self.upload(e, image)
            let signer = TestSigner(kid: "fw-test")
            let (manifest, _) = TestSigner.manifest(for: image, blockSize: 1024)
            let good = Self.form(sha: sha, manifest: manifest, signer: signer, trialS: nil)
            let created = try await Self.create(e, thing: a.id, good)
            try #require(created.status == 201, "\(created.text)")
            let jobID = try #require(created.string("jobID"))

            // A second job while one is under way.
            let second = try await Self.create(e, thing: a.id, good)
            #expect(second.status == 409 && second.errorCode == "UPDATE_JOB_UNDER_WAY", "\(second.text)")
            // B asks for A's job under its own thingID: the same 404 as for none.
            for suffix in ["\(jobID)/blocks/0", "\(jobID)/hashes/0", "u-0000000000000000/blocks/0"] {
                let r = b.ask("GET", b.updates(suffix))
                #expect(r?.status == 404 && Self.code(r) == "UPDATE_JOB_NOT_FOUND", "\(suffix): \(Self.describe(r))")
            }
            let foreignReport = b.ask(
                "PUT", b.updates(jobID), body: Self.report(UpdateReport(attempt: 1, seq: 1, status: .failed)))
            #expect(foreignReport?.status == 404 && Self.code(foreignReport) == "UPDATE_JOB_NOT_FOUND")
            // Under A's thingID with B's token: not B's to ask.
            let asA = b.ask("GET", a.updates("\(jobID)/blocks/0", thing: a.id))
            #expect(asA?.status == 403, "\(Self.describe(asA))")
            #expect(a.ask("GET", a.updates("\(jobID)/blocks/0"))?.status == 200, "A's own request works")
            #expect(try await e.get("\(e.api)/things/\(b.id)/updates/\(jobID)", token: Self.admin).status == 404)

            // Hostile paths: the router's unknown answer, as for any path it does not know.
            let unknown = a.ask("GET", "things/\(a.id)/no-such-thing")
            #expect(unknown?.status == 404 && Self.code(unknown) == "NOT_FOUND")
            for suffix in [
                "../x", "\(jobID)/../x", "..", ".", "\(jobID)/blocks/-1", "\(jobID)/blocks/01",
                "\(jobID)/blocks/00", "\(jobID)/blocks/1?x=1", "\(jobID)/blocks/1/more", "\(jobID)/other/1",
                "\(jobID)/blocks/", "\(jobID)/blocks/99999999", "\(jobID)?x", ""
            ] {
                let r = a.ask("GET", "things/\(a.id)/updates/\(suffix)")
                #expect(r?.status == 404 && Self.code(r) == "NOT_FOUND", "updates/\(suffix): \(Self.describe(r))")
                #expect(
                    RequestRoute(api: .thingIF, path: "things/\(a.id)/updates/\(suffix)") == .unknown(bootstrap: false))
            }
            // A sign MQTT refuses in a topic name ('+'): the router's reading alone.
            for suffix in ["\(jobID)/blocks/+1", "\(jobID)/hashes/+0", "+/blocks/0"] {
                #expect(
                    RequestRoute(api: .thingIF, path: "things/\(a.id)/updates/\(suffix)") == .unknown(bootstrap: false))
            }
            #expect(a.ask("POST", a.updates(jobID))?.status == 404, "no POST of a report")
            #expect(a.ask("PUT", a.updates("\(jobID)/blocks/0"))?.status == 404, "no PUT of a block")

            // The operator's refusals.
            var noSig = good
            noSig["signatures"] = [[String: Any]]()
            let r1 = try await Self.create(e, thing: b.id, noSig)
            #expect(r1.status == 400, "\(r1.text)")
            var badAlg = good
            badAlg["signatures"] = [["kid": "fw-test", "alg": "RS256", "sig": "AAAA"]]
            #expect(try await Self.create(e, thing: b.id, badAlg).status == 400)
            var notBase64 = good
            notBase64["manifest"] = "***"
            #expect(try await Self.create(e, thing: b.id, notBase64).status == 400)
            // A manifest of other bytes: 422 as manifest-check answers.
            let (otherManifest, _) = TestSigner.manifest(for: HubImageTests.image(10_000, seed: 9), blockSize: 1024)
            let mismatch = try await Self.create(
                e, thing: b.id, Self.form(sha: sha, manifest: otherManifest, signer: signer))
            #expect(mismatch.status == 422 && mismatch.errorCode == "MANIFEST_MISMATCH", "\(mismatch.text)")
            var unknownImage = good
            unknownImage["image"] = HubImageTests.sha([1, 2, 3])
            #expect(try await Self.create(e, thing: b.id, unknownImage).status == 404)
            #expect(try await Self.create(e, thing: "th.nosuchthing", good).status == 404)
            #expect(try await e.get("\(e.api)/things/th.nosuchthing/updates", token: Self.admin).status == 404)
            for token in [nil, userToken, "not-the-admin"] as [String?] {
                let r = try await e.call("POST", "\(e.api)/things/\(b.id)/updates", token: token, json: good)
                #expect(r.status == 403 && r.errorCode == "WRONG_TOKEN", "\(r.status) \(r.text)")
                #expect(try await e.get("\(e.api)/things/\(a.id)/updates", token: token).status == 403)
            }
            #expect(e.hub.store.updateJobs(thingID: b.id)?.isEmpty == true, "nothing refused was stored")
        }
    }

    @Test("Block reads wait on a pool of their own: the thing's other requests on its lane are answered meanwhile")
    func offTheLanes() async throws {
        try await withUpdates(
            .memory,
            options: { o in
                o.limits.updateServeThreads = 1
                o.limits.updateServeQueue = 1
            }
        ) { e in
            let (uid, userToken) = try await e.user()
            let d = try await Device.onboard(e, "upd-ac-lanes", userToken: userToken, uid: uid)
            defer { d.stop() }
            let image = HubImageTests.image(8192)
            let sha = try await Self.upload(e, image)
            let (manifest, _) = TestSigner.manifest(for: image, blockSize: 4096)
            let created = try await Self.create(
                e, thing: d.id, Self.form(sha: sha, manifest: manifest, signer: TestSigner(kid: "fw-test")))
            let jobID = try #require(created.string("jobID"), "\(created.text)")
            let pool = e.hub.thingRequests.updateServing.pool
            // The pool's one thread is held; block 0 waits in its one place.
            let gate = DispatchSemaphore(value: 0)
            #expect(pool.trySubmit { gate.wait() })
            #expect(poll(timeoutMs: 30_000) { pool.running == 1 })
            let waiting = d.link.send("GET", d.updates("\(jobID)/blocks/0"))
            #expect(poll(timeoutMs: 30_000) { pool.waiting == 1 }, "block 0 queued on the pool")
            // The queue is full: 429 at once, from the lane.
            let full = d.ask("GET", d.updates("\(jobID)/blocks/1"))
            #expect(full?.status == 429, "\(Self.describe(full))")
            // The same thing's lane serves its report and its state upload meanwhile.
            let report = UpdateReport(attempt: 1, seq: 1024, status: .downloading, bytes: 0, of: 8192)
            #expect(d.ask("PUT", d.updates(jobID), body: Self.report(report))?.status == 204)
            let state = d.ask("PUT", "targets/thing:\(d.id)/states", body: #"{"power":true}"#)
            #expect(state?.isSuccess == true, "\(Self.describe(state))")
            #expect(d.link.replies()[waiting] == nil, "block 0 still waits for the pool")
            gate.signal()
            let block = d.link.reply(waiting)
            #expect(block?.status == 200 && block?.body == Array(image[0..<4096]), "\(Self.describe(block))")
        }
    }

    /// The store's rules, with `a` and `b` two stores on one database (two
    /// hubs) or one store twice: one open job per thing however many ask
    /// at once, and a report applied only above the stored seq, whichever
    /// store applies it.
    static func jobRules(_ a: HubStore, _ b: HubStore) throws {
        let t = try a.registerThing(
            vendorThingID: "upd-store-\(Platform.randomHex(bytes: 4))", password: "pw", thingType: "AirConditioner",
            firmwareVersion: "1.0.0", dataGroupingInterval: nil, layoutPosition: nil
        ).get()
        func job(_ id: String) -> UpdateJobRecord {
            UpdateJobRecord(
                jobID: id, thingID: t.thingID, image: String(repeating: "a", count: 64), version: "1.2.0",
                manifest: [1, 2, 3], blockSize: 1024, blocks: 3, attempt: 1, commandID: "cmd-" + id, createdAt: 1,
                updatedAt: 1)
        }
        let inserts = Locked<[UpdateJobInsert?]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let r = (i % 2 == 0 ? a : b).insertUpdateJob(job("u-\(i)"))
            inserts.withLock { $0.append(r) }
        }
        let all = inserts.withLock { $0 }
        #expect(all.filter { $0 == .created }.count == 1, "\(all)")
        #expect(all.filter { if case .busy? = $0 { return true } else { return false } }.count == 7, "\(all)")
        let id = try #require(b.updateJobs(thingID: t.thingID)?.first?.jobID)
        #expect(b.updateJobs(thingID: t.thingID)?.count == 1)
        DispatchQueue.concurrentPerform(iterations: 40) { i in
            let r = UpdateReport(attempt: 1, seq: Int64(i), status: .downloading, bytes: Int64(i), of: 100)
            _ = (i % 2 == 0 ? a : b).applyUpdateReport(jobID: id, thingID: t.thingID, report: r, now: Int64(i))
        }
        let j = try #require(a.updateJob(id: id).value)
        #expect(j.seq == 39 && j.bytes == 39 && j.status == .downloading, "the highest seq is kept: \(j.seq)")
        let late = UpdateReport(attempt: 1, seq: 10, status: .accepted)
        #expect(b.applyUpdateReport(jobID: id, thingID: t.thingID, report: late, now: 50) == .stale)
        let other = UpdateReport(attempt: 2, seq: 100, status: .downloading)
        #expect(a.applyUpdateReport(jobID: id, thingID: t.thingID, report: other, now: 50) == .otherAttempt(1))
        #expect(a.applyUpdateReport(jobID: id, thingID: "th.other", report: other, now: 50) == .noJob)
        let done = UpdateReport(attempt: 1, seq: 100, status: .succeeded, version: "1.2.0")
        #expect(b.applyUpdateReport(jobID: id, thingID: t.thingID, report: done, now: 60) == .applied)
        #expect(a.thing(id: t.thingID)?.firmwareVersion == "1.2.0")
        #expect(a.updateJob(id: id).value?.reportedVersion == "1.2.0")
        // Final: the next job may start.
        #expect(a.insertUpdateJob(job("u-next")) == .created)
        #expect(b.updateJobs(thingID: t.thingID)?.map(\.jobID).first == "u-next", "newest first (then by ID)")
        #expect(a.deleteUpdateJob(id: "u-next") && !a.deleteUpdateJob(id: "u-next"))
        // Jobs go with their thing.
        #expect(a.deleteThing(id: t.thingID))
        #expect(b.updateJob(id: id).value == nil)
    }

    @Test(
        "The store: one open job per thing, reports by seq, SUCCEEDED's firmware version", arguments: StoreFactory.all)
    func store(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try Self.jobRules(s, s)
    }

    @Test(
        "Two hubs on one PostgreSQL: one open job per thing, and a late report never overwrites a newer one",
        .enabled(if: PostgresServer.enabled))
    func twoHubsOneJob() throws {
        try PostgresServer.get().withTwoStores { a, b in try Self.jobRules(a, b) }
    }

    @Test("Block serving is bounded: the bytes a second in all (429), and the reads in flight per thing")
    func budget() async throws {
        try await withUpdates(
            .memory,
            options: { o in
                // One largest block's burst (32 KiB), refilled at 1 KiB/s.
                o.limits.updateBytesPerSecond = 1024
            }
        ) { e in
            let (uid, userToken) = try await e.user()
            let d = try await Device.onboard(e, "upd-ac-budget", userToken: userToken, uid: uid)
            defer { d.stop() }
            let image = HubImageTests.image(4096 * 16)
            let sha = try await Self.upload(e, image)
            let (manifest, _) = TestSigner.manifest(for: image, blockSize: 4096)
            let created = try await Self.create(
                e, thing: d.id, Self.form(sha: sha, manifest: manifest, signer: TestSigner(kid: "fw-test")))
            let jobID = try #require(created.string("jobID"), "\(created.text)")
            var statuses: [Int] = []
            for n in 0..<12 { statuses.append(d.ask("GET", d.updates("\(jobID)/blocks/\(n)"))?.status ?? 0) }
            // 32 KiB is 8 blocks of 4 KiB; then 1 KiB/s is a block every 4 s.
            #expect(statuses.prefix(8).allSatisfy { $0 == 200 }, "\(statuses)")
            #expect(statuses.contains(429), "\(statuses)")
            let busy = d.ask("GET", d.updates("\(jobID)/blocks/0"))
            #expect(busy?.status == 429 && Self.code(busy) == "TOO_MANY_REQUESTS", "\(Self.describe(busy))")
            let metrics = String(decoding: e.hub.metrics.exposition(), as: UTF8.self)
            let refused = statuses.filter { $0 == 429 }.count + 1
            #expect(metrics.contains(#"thingif_hub_refused_total{defence="update_busy"} \#(refused)"#), "\(metrics)")
        }
        // The reads in flight per thing, and their release.
        var limits = HubLimits()
        limits.updateRequestsPerThing = 2
        limits.updateBytesPerSecond = 0
        let s = UpdateServing(limits: limits)
        #expect(s.admit("th.a", cost: 1024) && s.admit("th.a", cost: 1024))
        #expect(!s.admit("th.a", cost: 1024), "a third in flight")
        #expect(s.admit("th.b", cost: 1024), "another thing's own budget")
        s.release("th.a", served: 1024)
        #expect(s.inFlight("th.a") == 1 && s.admit("th.a", cost: 1024))
        #expect(s.refused == 1 && s.servedBytes == 1024)
    }
}

extension Result {
    fileprivate var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
