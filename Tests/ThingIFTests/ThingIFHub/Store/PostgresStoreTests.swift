// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// A fresh database on the test server for `body`, dropped afterwards.
private func withDatabase(_ body: (PostgresServer, String) throws -> Void) throws {
    let server = try PostgresServer.get()
    let (name, url) = try server.createDatabase()
    defer { server.dropDatabase(name) }
    try body(server, url)
}

/// The error opening a PostgresStore on `url` gives (as text), nil when it opens.
private func openError(_ url: String, timeout: Int = 5) -> String? {
    do {
        try PostgresStore(url: url, secrets: .fastForTests, timeout: timeout).close()
        return nil
    } catch { return "\(error)" }
}

/// What only PostgresStore does (the HubStore contract itself runs in
/// "Store conformance"): several hubs on one database, migrations, errors.
@Suite("SQL shared by the stores (no server)")
struct SQLPlaceholderTests {
    @Test("SQLStore's ? placeholders are numbered for PostgreSQL; quoted question marks and $n SQL stay")
    func numbered() {
        #expect(
            PostgresConnection.numbered("SELECT a FROM t WHERE b = ? AND c > ?")
                == "SELECT a FROM t WHERE b = $1 AND c > $2")
        #expect(
            PostgresConnection.numbered("UPDATE t SET s = '?' WHERE id = ?") == "UPDATE t SET s = '?' WHERE id = $1")
        #expect(PostgresConnection.numbered(#"SELECT "a?" FROM t WHERE x = ?"#) == #"SELECT "a?" FROM t WHERE x = $1"#)
        #expect(PostgresConnection.numbered("SELECT 1 WHERE x = $1") == "SELECT 1 WHERE x = $1")
    }
}

@Suite(
    "PostgreSQL store", .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"),
    .offPool)
struct PostgresStoreTests {
    @Test(
        "One of two hubs holds the schedule lease; it passes on when that hub's store closes; a trigger is claimed once"
    )
    func scheduleLease() throws {
        try withDatabase { _, url in
            let a = try PostgresStore(url: url, secrets: .fastForTests)
            let b = try PostgresStore(url: url, secrets: .fastForTests)
            defer { b.close() }
            #expect(a.holdsScheduleLease())
            #expect(!b.holdsScheduleLease(), "a second hub must not run the schedules too")
            #expect(a.holdsScheduleLease(), "the lease is kept from tick to tick")
            let t = try #require(
                try? a.registerThing(
                    vendorThingID: "AC-LEASE", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil
                ).get())
            #expect(
                a.insertTrigger(
                    ServerTriggerRecord(triggerID: "trg-1", thingID: t.thingID, definition: "{}", createdAt: 1)))
            let claims = Locked<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                if (i % 2 == 0 ? a : b).claimTrigger(id: "trg-1") { claims.withLock { $0 += 1 } }
            }
            #expect(claims.withLock { $0 } == 1)
            // The hub holding it goes away (its sessions end): the other takes over.
            a.close()
            var taken = false
            for _ in 0..<50 where !taken {
                taken = b.holdsScheduleLease()
                if !taken { usleep(100_000) }
            }
            #expect(taken, "the lease passes to the hub left")
        }
    }

    @Test(
        "putState writes in the statement that reads the token's thing, only for that thing, its installations' topics and the state it read"
    )
    func putStateInOneStatement() throws {
        try withDatabase { _, url in
            let s = try PostgresStore(url: url, secrets: .fastForTests)
            defer { s.close() }
            func register(_ v: String) throws -> ThingRecord { try OneCommitTests.registered(v, in: s) }
            let t = try register("AC-PUT")
            let other = try register("AC-OTHER")
            #expect(s.addInstallation(thingID: t.thingID, installationID: "inst-1", mqttTopic: "topic-1"))
            func put(_ token: String, _ tid: String, client: String?, _ state: String, at: Int64)
                -> StoreRead<StatePut>
            {
                s.putState(accessToken: token, thingID: tid, clientID: client, upload: state, state: state, at: at)
            }
            func samples(_ tid: String) -> Int { s.stateHistory(thingID: tid, from: 0, to: .max).count }

            // The thing's own token, over HTTP: written, with the thing as it was.
            var shared: PostgresConnection?
            var prepared = 0
            let run = s.inOneTransaction {
                shared = try? s.attempt { $0 }.get()
                prepared = shared?.preparedCount ?? 0
                guard case .found(let p) = put(t.accessToken, t.thingID, client: nil, #"{"a":1}"#, at: 10) else {
                    Issue.record("the thing's own upload was not written")
                    return
                }
                #expect(p.thing.thingID == t.thingID && p.thing.state == nil)
                #expect(p.thing.installations["inst-1"] == "topic-1")
                #expect(p.write == StateWrite(state: #"{"a":1}"#, hasEnabledTrigger: false))
                prepared = (shared?.preparedCount ?? 0) - prepared
            }
            #expect(run == .committed)
            // BEGIN with the statement, then COMMIT (and its prepare on first use).
            #expect(shared?.lastSharedRoundTrips == 2 + prepared)
            #expect(s.thing(id: t.thingID)?.state == #"{"a":1}"#)
            #expect(samples(t.thingID) == 1)

            // Over MQTT from one of its installations' topics; with a trigger.
            #expect(
                s.insertTrigger(
                    ServerTriggerRecord(triggerID: "trg-put", thingID: t.thingID, definition: "{}", createdAt: 1)))
            if case .found(let p) = put(t.accessToken, t.thingID, client: "topic-1", #"{"a":2}"#, at: 20) {
                #expect(p.thing.state == #"{"a":1}"#, "the thing as it was before the write")
                #expect(p.write.hasEnabledTrigger == true)
            } else {
                Issue.record("an upload from the thing's installation was not written")
            }

            // Another hub's upload commits between the statement's read and
            // its write (the row is locked until then): nothing written, and
            // the caller takes the locked read-merge-write.
            let otherHub = try PostgresConnection(url: url)
            defer { otherHub.close() }
            _ = try otherHub.run("BEGIN", [])
            _ = try otherHub.run(
                "UPDATE things SET state = ? WHERE thing_id = ?", [.text(#"{"b":3}"#), .text(t.thingID)])
            let raced = Locked<StoreRead<StatePut>?>(nil)
            let token = t.accessToken
            let tid = t.thingID
            let racer = Thread {
                let r = s.putState(
                    accessToken: token, thingID: tid, clientID: nil, upload: #"{"a":3}"#, state: #"{"a":3}"#, at: 25)
                raced.withLock { $0 = r }
            }
            racer.start()
            // The racer waits on the row lock (a third connection sees it
            // waiting) before the other hub commits.
            let watcher = try PostgresConnection(url: url)
            defer { watcher.close() }
            let waiting = poll {
                var n: Int64 = 0
                try? watcher.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                ) { n = $0.int(0) }
                return n > 0
            }
            #expect(waiting, "the racer never waited on the row lock")
            _ = try otherHub.run("COMMIT", [])
            #expect(poll(timeoutMs: 30_000) { raced.withLock { $0 } != nil })
            if case .found = raced.withLock({ $0 }) { Issue.record("written over a state it did not read") }
            #expect(s.thing(id: t.thingID)?.state == #"{"b":3}"#)
            #expect(samples(t.thingID) == 2)

            // Nothing written for what authorisation refuses: the caller
            // then reads, and answers the refusal.
            let refused: [(String, String, String?, String)] = [
                (t.accessToken, other.thingID, nil, "another thing's target"),
                (other.accessToken, t.thingID, nil, "another thing's token"),
                (t.accessToken, t.thingID, "topic-2", "a client that is not one of its installations"),
                ("no-such-token", t.thingID, nil, "an unknown token"),
                (t.accessToken, t.thingID, "", "an empty client")
            ]
            for (token, tid, client, what) in refused {
                if case .found = put(token, tid, client: client, #"{"x":1}"#, at: 30) {
                    Issue.record("written for \(what)")
                }
            }
            #expect(s.revokeToken(t.accessToken))
            if case .found = put(t.accessToken, t.thingID, client: nil, #"{"x":1}"#, at: 40) {
                Issue.record("written with a revoked token")
            }
            #expect(s.thing(id: t.thingID)?.state == #"{"b":3}"#)
            #expect(s.thing(id: other.thingID)?.state == nil)
            #expect(samples(t.thingID) == 2 && samples(other.thingID) == 0)
        }
    }

    @Test("The pool: overlapping calls get connections of their own, at most its capacity; a closed pool refuses")
    func pool() throws {
        try withDatabase { _, url in
            let pool = PostgresPool(
                first: try PostgresConnection(url: url), url: url, timeout: 5, capacity: 2)
            let held = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let ids = Locked<[ObjectIdentifier]>([])
            let third = Locked<Bool>(false)
            let group = DispatchGroup()
            // Two callers hold a connection each until released.
            for _ in 0..<2 {
                DispatchQueue.global().async(group: group) {
                    _ = try? pool.with { c -> Void in
                        ids.withLock { $0.append(ObjectIdentifier(c)) }
                        _ = try? c.run("SELECT 1")
                        held.signal()
                        release.wait()
                    }
                }
            }
            held.wait()
            held.wait()
            #expect(Set(ids.withLock { $0 }).count == 2, "two overlapping calls, two connections")
            // A third waits for one of them.
            DispatchQueue.global().async(group: group) {
                _ = try? pool.with { c in
                    _ = try? c.run("SELECT 1")
                    third.withLock { $0 = true }
                }
            }
            // Must not happen: a call beyond the capacity; room for it to show.
            usleep(300_000)
            #expect(!third.withLock { $0 }, "beyond the capacity a call waits")
            release.signal()
            release.signal()
            #expect(group.wait(timeout: .now() + 10) == .success)
            #expect(third.withLock { $0 })
            pool.close()
            #expect(throws: PostgresError.self) { try pool.with { _ in () } }
        }
    }

    @Test("Two hubs on one database tick the same SCHEDULE trigger: it fires once an hour; the other hub takes over")
    func scheduleAcrossHubs() throws {
        try withDatabase { _, url in
            let sa = try PostgresStore(url: url, secrets: .fastForTests)
            let sb = try PostgresStore(url: url, secrets: .fastForTests)
            defer {
                sa.close()
                sb.close()
            }
            let a = try Offline(store: sa)
            let b = try Offline(store: sb, sharing: a)
            let id = try a.create("{\"eventSource\":\"SCHEDULE\",\"schedule\":\"0 * * * *\"}")
            let start = a.clock.withLock { $0 }
            // Three hours, both hubs ticking every 20 s (as they would each second).
            var t = start
            while t < start + 3 * 3_600_000 {
                t += 20_000
                a.advance(to: t)
                a.hub.triggerEngine.tick()
                b.hub.triggerEngine.tick()
            }
            #expect(a.fired(by: id) == 3, "once an hour, not once per hub")
            // Hub A goes away: once PostgreSQL has ended A's session (it
            // releases A's advisory lock when it sees the connection close,
            // a moment later on a loaded machine), B holds the lease and fires.
            sa.close()
            #expect(poll(timeoutMs: 30_000) { sb.holdsScheduleLease() }, "B never took the lease over")
            while t < start + 4 * 3_600_000 + 60_000 {
                t += 20_000
                a.advance(to: t)
                b.hub.triggerEngine.tick()
            }
            #expect(b.fired(by: id) == 4)
        }
    }

    @Test("Two stores on one database (two hubs): racing writes resolve to one outcome")
    func twoHubs() throws {
        try withDatabase { _, url in
            let a = try PostgresStore(url: url, secrets: .fastForTests)
            let b = try PostgresStore(url: url, secrets: .fastForTests)
            defer {
                a.close()
                b.close()
            }
            // The same first registration on both at once: one thing.
            let results = Locked<[Result<ThingRecord, RegisterError>]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let s = i % 2 == 0 ? a : b
                let r = s.registerThing(
                    vendorThingID: "AC-SHARED", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil)
                results.withLock { $0.append(r) }
            }
            let ids = Set(results.withLock { $0 }.compactMap { try? $0.get().thingID })
            #expect(ids.count == 1 && results.withLock { $0 }.allSatisfy { (try? $0.get()) != nil })
            let thingID = try #require(ids.first)
            #expect(b.thing(vendorThingID: "AC-SHARED")?.thingID == thingID)

            // A commandID once, whichever hub stores it; the first results win.
            let inserted = Locked<Int>(0)
            let recorded = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let s = i % 2 == 0 ? a : b
                let cmd = CommandRecord(
                    commandID: "c-shared", thingID: thingID, issuer: "user:u", issuingInstallationID: nil,
                    payload: "{}", createdAt: 1, modifiedAt: 1)
                if s.insertCommand(cmd) != nil { inserted.withLock { $0 += 1 } }
                if s.recordResults(commandID: "c-shared", results: #"{"by":\#(i)}"#, state: .done, at: 2) {
                    recorded.withLock { $0.append(#"{"by":\#(i)}"#) }
                }
            }
            #expect(inserted.withLock { $0 } == 1)
            #expect(recorded.withLock { $0 }.count == 1)
            #expect(a.command(id: "c-shared")?.results == recorded.withLock { $0 }.first)

            // PATCHes from both hubs merge one after the other: none is lost.
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let s = i % 2 == 0 ? a : b
                for j in 0..<10 {
                    _ = s.applyState(thingID: thingID, method: "PATCH", upload: #"{"k\#(i)_\#(j)":1}"#, at: 3)
                }
            }
            #expect(parseObject(a.thing(id: thingID)?.state)?.count == 80)

            // A login name is taken once across hubs.
            let users = Locked<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 6) { i in
                if (i % 2 == 0 ? a : b).createUser(loginName: "alice", passwordHash: "h") != nil {
                    users.withLock { $0 += 1 }
                }
            }
            #expect(users.withLock { $0 } == 1)

            // End nodes onboarded onto one gateway from both hubs at once:
            // the gateway's row lock keeps them under its cap.
            let g = try a.registerThing(
                vendorThingID: "GW-SHARED", password: "pw", thingType: nil, firmwareVersion: nil,
                dataGroupingInterval: nil, layoutPosition: .gateway
            ).get()
            let created = Locked<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                if case .onboarded(_, created: true) = (i % 2 == 0 ? a : b).onboardEndNode(
                    gatewayThingID: g.thingID, vendorThingID: "EN-SHARED-\(i)", password: "np", thingType: nil,
                    firmwareVersion: nil, owners: [], maxEndNodes: 5)
                {
                    created.withLock { $0 += 1 }
                }
            }
            #expect(created.withLock { $0 } == 5)
            #expect(b.endNodeCount(gatewayThingID: g.thingID) == 5)
        }
    }

    @Test("Sweeps of two hubs at once claim each due notification once (FOR UPDATE SKIP LOCKED)")
    func notificationClaimsAcrossHubs() throws {
        try withDatabase { _, url in
            let a = try PostgresStore(url: url, secrets: .fastForTests)
            let b = try PostgresStore(url: url, secrets: .fastForTests)
            defer {
                a.close()
                b.close()
            }
            let ids = (0..<60).map { "c\($0)" }
            for id in ids {
                let cmd = CommandRecord(
                    commandID: id, thingID: "th.x", issuer: nil, issuingInstallationID: nil, payload: "{}",
                    createdAt: 1, modifiedAt: 1)
                _ = try #require(a.insertCommand(cmd))
                #expect(b.recordResults(commandID: id, results: "{}", state: .done, at: 2))
            }
            let claimed = Locked<[String]>([])
            let now = 2 + StoreRules.notificationGraceMs
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let s = i % 2 == 0 ? a : b
                while true {
                    let got = s.claimUnnotified(now: now, leaseMs: 60_000, limit: 3)
                    if got.isEmpty { break }
                    claimed.withLock { $0 += got.map(\.commandID) }
                }
            }
            let all = claimed.withLock { $0 }
            #expect(all.count == ids.count && Set(all) == Set(ids), "\(all.count) claims")
        }
    }

    @Test("A store hears of the results another store records (LISTEN/NOTIFY), not of its own")
    func resultsFeed() throws {
        try withDatabase { _, url in
            let a = try PostgresStore(url: url, secrets: .fastForTests)
            let b = try PostgresStore(url: url, secrets: .fastForTests)
            defer {
                a.close()
                b.close()
            }
            let heardByA = Locked<[String]>([])
            let heardByB = Locked<[String]>([])
            try a.listenForResults { id in heardByA.withLock { $0.append(id) } }
            try b.listenForResults { id in heardByB.withLock { $0.append(id) } }
            for id in ["c1", "c2", "c3"] {
                let cmd = CommandRecord(
                    commandID: id, thingID: "th.x", issuer: nil, issuingInstallationID: nil, payload: "{}",
                    createdAt: 1, modifiedAt: 1)
                _ = try #require(a.insertCommand(cmd))
            }
            #expect(b.recordResults(commandID: "c1", results: "{}", state: .done, at: 2))
            #expect(a.recordResults(commandID: "c2", results: "{}", state: .done, at: 2))
            // A repeat records nothing and announces nothing.
            #expect(!a.recordResults(commandID: "c1", results: "{}", state: .done, at: 3))
            #expect(b.recordResults(commandID: "c3", results: "{}", state: .incomplete, at: 2))
            #expect(poll(timeoutMs: 30_000) { heardByA.withLock { $0 } == ["c1", "c3"] }, "\(heardByA.withLock { $0 })")
            #expect(poll(timeoutMs: 30_000) { heardByB.withLock { $0 } == ["c2"] }, "\(heardByB.withLock { $0 })")
            // Must not happen: a notice heard twice or by the other hub.
            usleep(300_000)
            #expect(heardByA.withLock { $0 } == ["c1", "c3"] && heardByB.withLock { $0 } == ["c2"])
            // An end (EXPIRED, CANCELLED) is announced the same way, once.
            _ = try #require(
                a.insertCommand(
                    CommandRecord(
                        commandID: "c4", thingID: "th.x", issuer: nil, issuingInstallationID: nil, payload: "{}",
                        createdAt: 1, modifiedAt: 1)))
            #expect(b.endCommand(commandID: "c4", state: .cancelled, reason: "cancelled", at: 4))
            #expect(!a.endCommand(commandID: "c4", state: .expired, reason: "expired", at: 5))
            #expect(
                poll(timeoutMs: 30_000) { heardByA.withLock { $0 } == ["c1", "c3", "c4"] },
                "\(heardByA.withLock { $0 })"
            )
            // Must not happen: the other hub hearing c4.
            usleep(300_000)
            #expect(heardByB.withLock { $0 } == ["c2"])
        }
    }

    @Test("A URL with the server's Unix socket (host=/dir) serves the store and its listener, as TCP does")
    func unixSocket() throws {
        try withDatabase { server, url in
            // The database's name from the TCP URL; the socket is in the server's folder.
            let name = try #require(url.split(separator: "/").last?.split(separator: "?").first).description
            let socketURL =
                "postgres://\(PostgresServer.user)@/\(name)?host=\(server.directory)&port=\(server.port)&connect_timeout=30"
            let viaSocket = try PostgresStore(url: socketURL, secrets: .fastForTests)
            let viaTCP = try PostgresStore(url: url, secrets: .fastForTests)
            defer {
                viaSocket.close()
                viaTCP.close()
            }
            let heard = Locked<[String]>([])
            try viaSocket.listenForResults { id in heard.withLock { $0.append(id) } }
            guard
                case .success(let t) = viaSocket.registerThing(
                    vendorThingID: "AC-SOCKET", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil)
            else {
                Issue.record("no registration over the socket")
                return
            }
            #expect(viaTCP.thing(accessToken: t.accessToken)?.thingID == t.thingID)
            _ = try #require(
                viaSocket.insertCommand(
                    CommandRecord(
                        commandID: "cs1", thingID: t.thingID, issuer: nil, issuingInstallationID: nil, payload: "{}",
                        createdAt: 1, modifiedAt: 1)))
            #expect(viaTCP.recordResults(commandID: "cs1", results: "{}", state: .done, at: 2))
            #expect(poll(timeoutMs: 30_000) { heard.withLock { $0 } == ["cs1"] }, "\(heard.withLock { $0 })")
            // A socket folder with no server is a clear error, not a hang.
            let missing = try #require(
                openError("postgres://\(PostgresServer.user)@/\(name)?host=/nonexistent-thingif&port=\(server.port)"))
            #expect(missing.contains("nonexistent-thingif"), "\(missing)")
        }
    }

    @Test("The schema version is kept; hubs that start together on a new database migrate it once")
    func migrations() throws {
        try withDatabase { server, url in
            let stores = Locked<[PostgresStore]>([])
            let errors = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do {
                    let s = try PostgresStore(url: url, secrets: .fastForTests)
                    stores.withLock { $0.append(s) }
                } catch { errors.withLock { $0.append("\(error)") } }
            }
            #expect(errors.withLock { $0 }.isEmpty, "\(errors.withLock { $0 })")
            for s in stores.withLock({ $0 }) { s.close() }
            let name = String(url.split(separator: "/").last?.split(separator: "?").first ?? "")
            let version = try server.psql("SELECT version FROM thingif_schema", database: name)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(version == "\(PostgresStore.schemaVersion)")
            #expect(PostgresStore.migrations.count == Int(PostgresStore.schemaVersion))

            // Opening again changes nothing and keeps the data.
            let s = try PostgresStore(url: url, secrets: .fastForTests)
            let t = try #require(
                try? s.registerThing(
                    vendorThingID: "AC-1", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil
                ).get())
            s.close()
            let again = try PostgresStore(url: url, secrets: .fastForTests)
            #expect(again.thing(id: t.thingID)?.vendorThingID == "AC-1")
            again.close()
        }
    }

    @Test("A schema newer than this code is refused")
    func newerSchema() throws {
        try withDatabase { _, url in
            try PostgresStore(url: url, secrets: .fastForTests).close()
            let name = String(url.split(separator: "/").last?.split(separator: "?").first ?? "")
            let server = try PostgresServer.get()
            try server.psql("UPDATE thingif_schema SET version = \(PostgresStore.schemaVersion + 1)", database: name)
            let e = openError(url)
            #expect(e?.contains("newer than this hub's") == true, "\(e ?? "opened")")
        }
    }

    @Test("An unreachable server gives a clear error within the timeout, without the password")
    func unreachable() throws {
        let port = try #require(Broker.freePort())
        let start = Platform.nowMs()
        let e = openError("postgres://thingif:secret-pw@127.0.0.1:\(port)/hub", timeout: 2)
        #expect(e?.contains("cannot connect to 127.0.0.1:\(port)/hub") == true, "\(e ?? "opened")")
        #expect(e?.contains("secret-pw") == false)
        #expect(Platform.nowMs() - start < 5_000)
        #expect(PostgresStore.isURL("postgres://u@h/db") && PostgresStore.isURL("postgresql://u@h/db"))
        #expect(!PostgresStore.isURL("./thingif-hub.sqlite") && !PostgresStore.isURL(":memory:"))
    }

    @Test("A connection the server ended fails one call as a storage error, then works again")
    func reconnects() throws {
        try withDatabase { server, url in
            let s = try PostgresStore(url: url, secrets: .fastForTests)
            defer { s.close() }
            let t = try #require(
                try? s.registerThing(
                    vendorThingID: "AC-1", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil
                ).get())
            let name = String(url.split(separator: "/").last?.split(separator: "?").first ?? "")
            try server.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND pid <> pg_backend_pid()"
            )
            // The first call after may fail (nil), never crash; then it works again.
            _ = s.thing(id: t.thingID)
            #expect(poll(timeoutMs: 30_000) { s.thing(id: t.thingID)?.vendorThingID == "AC-1" })
        }
    }
}
