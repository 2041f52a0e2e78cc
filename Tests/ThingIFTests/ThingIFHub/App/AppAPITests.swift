// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// The app API's rules, without HTTP and without a broker: the framework
/// side is not started, so commands stay SENDING.
@Suite("App logic", .offPool)
struct AppLogicTests {
    let hub = FrameworkSide(
        .init(appID: "app", appKey: "key", brokerPort: 1), store: MemoryStore(secrets: .fastForTests))!

    func user(_ login: String? = nil) throws -> UserRecord {
        try hub.app.createUser(loginName: login, password: login == nil ? nil : "pass-\(login!)").get()
    }

    func ownedThing(_ u: UserRecord, _ vendor: String = "AC-1", interval: String? = nil) throws -> ThingRecord {
        try hub.app.onboardByOwner(
            user: u, vendorThingID: vendor, password: "pw", owner: "user:\(u.userID)",
            thingType: "AirConditioner", firmwareVersion: nil, dataGroupingInterval: interval
        ).get()
    }

    func form(_ text: String) -> JSON { try! JSON.parse(text).get() }

    @Test(
        "libcrypto: SHA-256 and PBKDF2-HMAC-SHA256 match the published vectors; password hashes carry their iterations, verify and differ by salt"
    )
    func passwordHashes() {
        #expect(LibCrypto.sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(LibCrypto.sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            LibCrypto.sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // RFC 7914 section 11 / the PBKDF2-HMAC-SHA256 test vectors (dkLen 32).
        #expect(
            LibCrypto.hex(LibCrypto.pbkdf2("password", salt: Array("salt".utf8), iterations: 1))
                == "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b")
        #expect(
            LibCrypto.hex(LibCrypto.pbkdf2("password", salt: Array("salt".utf8), iterations: 4096))
                == "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a")
        #expect(PasswordHash.defaultIterations == 600_000)
        let a = PasswordHash.make("secret", iterations: 1000), b = PasswordHash.make("secret", iterations: 2000)
        #expect(a.hasPrefix("pbkdf2-sha256$1000$") && b.hasPrefix("pbkdf2-sha256$2000$"))
        #expect(a.split(separator: "$").map(\.count) == [13, 4, 32, 64])
        #expect(a != PasswordHash.make("secret", iterations: 1000))
        #expect(PasswordHash.verify("secret", a) && PasswordHash.verify("secret", b))
        #expect(!PasswordHash.verify("Secret", a))
        #expect(!PasswordHash.verify("secret", "garbage"))
        // A hash with its iteration count changed no longer verifies.
        #expect(!PasswordHash.verify("secret", a.replacingOccurrences(of: "$1000$", with: "$1001$")))
        // The default: the full production cost.
        #expect(PasswordHash.make("x").hasPrefix("pbkdf2-sha256$600000$"))
    }

    @Test("Users: pseudo and named; a taken loginName, a bad name or password is refused; login checks the password")
    func users() throws {
        let pseudo = try user()
        #expect(pseudo.pseudo && pseudo.passwordHash == nil)
        let named = try user("alice")
        #expect(!named.pseudo && named.passwordHash?.hasPrefix("pbkdf2-sha256$1000$") == true)
        #expect(hub.app.createUser(loginName: "alice", password: "other").failureStatus == 409)
        #expect(hub.app.createUser(loginName: "a b", password: "pass").failureStatus == 400)
        #expect(hub.app.createUser(loginName: "bob", password: "x").failureStatus == 400)
        #expect(hub.app.createUser(loginName: nil, password: "x").failureStatus == 400)
        #expect(try hub.app.login(loginName: "alice", password: "pass-alice").get().userID == named.userID)
        #expect(hub.app.login(loginName: "alice", password: "nope").failureStatus == 400)
        #expect(hub.app.user(token: named.accessToken)?.userID == named.userID)
    }

    @Test("Login issues a new token each time; earlier ones stay valid until revoked; only one's own token is revoked")
    func loginTokens() throws {
        let alice = try user("alice")
        let bob = try user("bob")
        let t1 = try hub.app.login(loginName: "alice", password: "pass-alice").get().accessToken
        let t2 = try hub.app.login(loginName: "alice", password: "pass-alice").get().accessToken
        #expect(Set([alice.accessToken, t1, t2]).count == 3)
        for t in [alice.accessToken, t1, t2] { #expect(hub.app.user(token: t)?.userID == alice.userID) }
        #expect(!hub.app.revoke(token: t1, by: bob))
        #expect(hub.app.user(token: t1)?.userID == alice.userID)
        #expect(hub.app.revoke(token: t1, by: alice))
        #expect(hub.app.user(token: t1) == nil)
        #expect(hub.app.user(token: t2)?.userID == alice.userID)
        #expect(!hub.app.revoke(token: t1, by: alice))
    }

    @Test("A login of an unknown user costs the same KDF work as a wrong password (no timing oracle)")
    func unknownUserTiming() throws {
        let slow = FrameworkSide(
            .init(appID: "app", appKey: "key", brokerPort: 1),
            store: MemoryStore(secrets: HubSecrets(passwordIterations: 100_000)))!
        _ = try slow.app.createUser(loginName: "alice", password: "pass-alice").get()
        // This thread's CPU time, not the wall clock: other tests running
        // meanwhile stretch the wall time of one login and not the other.
        func cpuSeconds(_ body: () -> Void) -> Double {
            var a = timespec(), b = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a)
            body()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b)
            return Double(b.tv_sec - a.tv_sec) + Double(b.tv_nsec - a.tv_nsec) / 1e9
        }
        var wrong = Double.infinity, unknown = Double.infinity
        for _ in 0..<3 {
            wrong = min(
                wrong, cpuSeconds { #expect(slow.app.login(loginName: "alice", password: "nope").failureStatus == 400) }
            )
            unknown = min(
                unknown,
                cpuSeconds { #expect(slow.app.login(loginName: "nobody", password: "nope").failureStatus == 400) })
        }
        // 100,000 iterations take tens of milliseconds of CPU; skipping them would take microseconds.
        #expect(wrong > 0.005, "a wrong password took \(wrong) s")
        #expect(unknown > wrong * 0.3, "unknown \(unknown) s, wrong password \(wrong) s")
    }

    @Test("Onboarding by an owner binds it; another user sees nothing; a group's members see the group's thing")
    func ownership() throws {
        let alice = try user("alice"), bob = try user("bob"), carol = try user("carol")
        let t = try ownedThing(alice)
        #expect(t.owners == ["user:\(alice.userID)"])
        #expect(hub.app.ownedThing(user: alice, thingID: t.thingID).isSuccess)
        #expect(hub.app.ownedThing(user: bob, thingID: t.thingID).failureStatus == 404)
        // Owning as someone else, or with a wrong password, is refused.
        #expect(
            hub.app.onboardByOwner(
                user: bob, vendorThingID: "AC-1", password: "pw", owner: "user:\(alice.userID)",
                thingType: nil, firmwareVersion: nil, dataGroupingInterval: nil
            ).failureStatus == 403)
        #expect(
            hub.app.onboardByOwner(
                user: bob, vendorThingID: "AC-1", password: "wrong", owner: "user:\(bob.userID)",
                thingType: nil, firmwareVersion: nil, dataGroupingInterval: nil
            ).failureStatus == 403)
        #expect(
            hub.app.onboardByOwner(
                user: bob, vendorThingID: "AC-9", password: "pw", owner: "user:\(bob.userID)",
                thingType: nil, firmwareVersion: nil, dataGroupingInterval: "2_HOURS"
            ).failureStatus == 400)
        // Several owners can share a thing.
        let shared = try hub.app.onboardByOwner(
            user: bob, vendorThingID: "AC-1", password: "pw", owner: "user:\(bob.userID)",
            thingType: nil, firmwareVersion: nil, dataGroupingInterval: nil
        ).get()
        #expect(Set(shared.owners) == ["user:\(alice.userID)", "user:\(bob.userID)"])
        // A group owns a thing; its member carol sees it.
        let g = try hub.app.createGroup(name: "home", owner: alice, members: [carol.userID]).get()
        let gt = try hub.app.onboardByOwner(
            user: alice, vendorThingID: "AC-2", password: "pw", owner: "group:\(g.groupID)",
            thingType: nil, firmwareVersion: nil, dataGroupingInterval: nil
        ).get()
        #expect(hub.app.ownedThing(user: carol, thingID: gt.thingID).isSuccess)
        #expect(hub.app.ownedThing(user: bob, thingID: gt.thingID).failureStatus == 404)
        #expect(hub.app.createGroup(name: "x", owner: alice, members: ["u.nobody"]).failureStatus == 400)
    }

    @Test("postNewCommand validates the CommandForm and stores nothing on a 4xx")
    func commandForm() throws {
        let alice = try user("alice")
        let t = try ownedThing(alice)
        let issuer = "user:\(alice.userID)"
        let good =
            #"{"schema":"AirConditioner-Demo","schemaVersion":1,"issuer":"\#(issuer)","actions":[{"turnPower":{"power":true}}]}"#
        let c = try hub.app.postCommand(user: alice, thingID: t.thingID, form: form(good), installationID: nil).get()
        #expect(c.state == .sending && c.issuer == issuer)
        let bad: [String] = [
            #"[]"#,
            #"{"schemaVersion":1,"issuer":"\#(issuer)","actions":[{"a":1}]}"#,
            #"{"schema":"S","issuer":"\#(issuer)","actions":[{"a":1}]}"#,
            #"{"schema":"S","schemaVersion":"1","issuer":"\#(issuer)","actions":[{"a":1}]}"#,
            #"{"schema":"S","schemaVersion":1,"issuer":"\#(issuer)","actions":{}}"#,
            #"{"schema":"S","schemaVersion":1,"issuer":"\#(issuer)","actions":[]}"#,
            #"{"schema":"S","schemaVersion":1,"issuer":"\#(issuer)","actions":[{"a":1,"b":2}]}"#,
            #"{"schema":"S","schemaVersion":1,"issuer":"\#(issuer)","actions":[{"a":1}],"title":7}"#,
            #"{"schema":"S","schemaVersion":1,"issuer":"\#(issuer)","actions":[{"a":1}],"title":"\#(String(repeating: "t", count: 51))"}"#,
            #"{"schema":"S","schemaVersion":1,"issuer":"\#(issuer)","actions":[{"a":1}],"metadata":[1]}"#
        ]
        for b in bad {
            #expect(
                hub.app.postCommand(user: alice, thingID: t.thingID, form: form(b), installationID: nil).failureStatus
                    == 400, "\(b)")
        }
        let otherIssuer = #"{"schema":"S","schemaVersion":1,"issuer":"user:someone","actions":[{"a":1}]}"#
        #expect(
            hub.app.postCommand(user: alice, thingID: t.thingID, form: form(otherIssuer), installationID: nil)
                .failureStatus
                == 403)
        #expect(
            hub.app.postCommand(user: alice, thingID: "th.none", form: form(good), installationID: nil).failureStatus
                == 404
        )
        #expect(
            hub.app.postCommand(user: alice, thingID: t.thingID, form: form(good), installationID: "nope").failureStatus
                == 400)
        // Only the good one was stored.
        #expect(hub.store.commands(thingID: t.thingID, afterSeq: 0, limit: 100).map(\.commandID) == [c.commandID])
    }

    @Test("listCommands: 30 commands read as three pages of 10, ascending, no key after the last page")
    func pagination() throws {
        let alice = try user("alice")
        let t = try ownedThing(alice)
        var ids: [String] = []
        for i in 0..<30 {
            let f =
                #"{"schema":"S","schemaVersion":1,"issuer":"user:\#(alice.userID)","actions":[{"setFanSpeed":{"fanSpeed":\#(i % 10)}}]}"#
            ids.append(
                try hub.app.postCommand(user: alice, thingID: t.thingID, form: form(f), installationID: nil).get()
                    .commandID
            )
        }
        var key: String?
        var seen: [String] = []
        var pages = 0
        repeat {
            let (page, next) = try hub.app.listCommands(
                user: alice, thingID: t.thingID, paginationKey: key, bestEffortLimit: 10
            ).get()
            #expect(page.count == 10)
            seen += page.map(\.commandID)
            key = next
            pages += 1
        } while key != nil && pages < 5
        #expect(pages == 3 && seen == ids)
        #expect(
            hub.app.listCommands(user: alice, thingID: t.thingID, paginationKey: "x", bestEffortLimit: 10).failureStatus
                == 400)
        #expect(
            hub.app.listCommands(user: alice, thingID: t.thingID, paginationKey: nil, bestEffortLimit: 0).failureStatus
                == 400)
    }

    @Test("State history groups by the thing's data grouping interval")
    func stateHistory() throws {
        let alice = try user("alice")
        let t = try ownedThing(alice, interval: "1_MINUTE")
        let base: Int64 = 1_700_000_040_000  // a whole minute
        for (i, at) in [base + 1_000, base + 2_000, base + 61_000, base + 3 * 60_000].enumerated() {
            _ = hub.store.applyState(thingID: t.thingID, method: "PUT", upload: #"{"n":\#(i)}"#, at: at)
        }
        let groups = try hub.app.stateHistory(user: alice, thingID: t.thingID, from: base, to: base + 10 * 60_000).get()
            .groups
        #expect(groups.map(\.from) == [base, base + 60_000, base + 180_000])
        #expect(groups.map(\.samples.count) == [2, 1, 1])
        #expect(groups.allSatisfy { $0.to - $0.from == 60_000 })
        #expect(hub.app.stateHistory(user: alice, thingID: t.thingID, from: 10, to: 5).failureStatus == 400)
    }

    @Test("Notified marks wait for the scheduler's flush, in one call; a stop writes those left")
    func notifiedMarksOnStop() throws {
        let u = try user("bob")
        let t = try ownedThing(u, "AC-MARK")
        let ids = try (0..<3).map { i in
            try hub.app.postCommand(
                user: u, thingID: t.thingID,
                form: form(#"{"schema":"S","schemaVersion":1,"issuer":"user:\#(u.userID)","actions":[{"a":\#(i)}]}"#),
                installationID: nil
            ).get().commandID
        }
        for id in ids { #expect(hub.store.recordResults(commandID: id, results: "{}", state: .done, at: 1)) }
        for id in ids { hub.notifications.markSoon(id) }
        let late: Int64 = 1 + StoreRules.notificationGraceMs
        // Not written yet (this hub is not started: no tick) ...
        #expect(hub.notifications.marks.withLock { $0 } == ids)
        hub.stop()
        // ... the stop wrote them: no sweep claims them.
        #expect(hub.notifications.marks.withLock { $0 }.isEmpty)
        #expect(hub.store.claimUnnotified(now: late, leaseMs: 1, limit: 10).isEmpty)
    }

    @Test("Notification targets: a pseudo user only on the issuing installation; a normal user on all")
    func notificationTargets() throws {
        let pseudo = try user(), named = try user("alice")
        let p1 = try hub.app.addAppInstallation(user: pseudo, kind: .mqtt, webhookURL: nil).get()
        _ = try hub.app.addAppInstallation(user: pseudo, kind: .sse, webhookURL: nil).get()
        let n1 = try hub.app.addAppInstallation(user: named, kind: .sse, webhookURL: nil).get()
        // A public address (TEST-NET-3, never called here): the app rules
        // refuse a loopback webhook without the operator's allow-list.
        #expect(
            hub.app.addAppInstallation(user: named, kind: .webhook, webhookURL: "http://127.0.0.1:9/hook").failureStatus
                == 400)
        let n2 = try hub.app.addAppInstallation(user: named, kind: .webhook, webhookURL: "http://203.0.113.9/hook")
            .get()
        #expect(p1.target == "n/\(p1.installationID)")
        #expect(hub.app.addAppInstallation(user: named, kind: .webhook, webhookURL: "ftp://x").failureStatus == 400)
        #expect(hub.app.addAppInstallation(user: named, kind: .sse, webhookURL: "http://x").failureStatus == 400)

        let pt = try ownedThing(pseudo, "AC-P")
        let nt = try ownedThing(named, "AC-N")
        let f = { (u: UserRecord) in
            #"{"schema":"S","schemaVersion":1,"issuer":"user:\#(u.userID)","actions":[{"a":1}]}"#
        }
        let pc = try hub.app.postCommand(
            user: pseudo, thingID: pt.thingID, form: form(f(pseudo)), installationID: p1.installationID
        ).get()
        let nc = try hub.app.postCommand(
            user: named, thingID: nt.thingID, form: form(f(named)), installationID: n1.installationID
        ).get()
        #expect(hub.notifications.targets(for: pc).map(\.installationID) == [p1.installationID])
        #expect(Set(hub.notifications.targets(for: nc).map(\.installationID)) == [n1.installationID, n2.installationID])
        #expect(hub.app.removeAppInstallation(user: pseudo, installationID: n1.installationID) == false)
        #expect(hub.app.removeAppInstallation(user: named, installationID: n1.installationID))
        #expect(hub.notifications.targets(for: nc).map(\.installationID) == [n2.installationID])
    }
}

extension Result where Failure == HubError {
    var failureStatus: Int? {
        if case .failure(let e) = self { return e.status }
        return nil
    }
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
