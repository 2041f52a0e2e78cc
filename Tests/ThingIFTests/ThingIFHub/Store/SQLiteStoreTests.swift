// SPDX-License-Identifier: Apache-2.0

import CSQLite
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// What only a store in a file can do.
@Suite("SQLite store", .offPool)
struct SQLiteStoreTests {
    @Test("Everything survives closing and opening the file again (a restart)")
    func survivesRestart() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hub.sqlite"

        var s: SQLiteStore? = try SQLiteStore(path: path, secrets: .fastForTests)
        let t = try register(s!, "AC-1", firmware: "1.0", grouping: "1_MINUTE")
        #expect(s!.addInstallation(thingID: t.thingID, installationID: "i1", mqttTopic: "ta1"))
        #expect(s!.addOwner(thingID: t.thingID, owner: "user:u.a"))
        let state = try #require(s!.applyState(thingID: t.thingID, method: "PUT", upload: #"{"power":true}"#, at: 5))
        let c1 = try #require(s!.insertCommand(command("c1", thing: t.thingID)))
        #expect(s!.recordResults(commandID: "c1", results: "{}", state: .done, at: 6))
        let c2 = try #require(s!.insertCommand(command("c2", thing: t.thingID)))
        let u = try #require(s!.createUser(loginName: "alice", passwordHash: "h"))
        let g = try #require(s!.createGroup(name: "home", ownerUserID: u.userID, members: ["u.x"]))
        let i = try #require(s!.addAppInstallation(userID: u.userID, kind: .mqtt, target: nil))
        s!.close()
        s = nil

        let r = try SQLiteStore(path: path, secrets: .fastForTests)
        defer { r.close() }
        let back = try #require(r.thing(accessToken: t.accessToken))
        #expect(back.thingID == t.thingID)
        #expect(back.firmwareVersion == "1.0" && back.dataGroupingInterval == "1_MINUTE")
        #expect(back.installations == ["i1": "ta1"])
        #expect(r.thing(mqttTopic: "ta1")?.thingID == t.thingID)
        #expect(back.owners == ["user:u.a"])
        #expect(back.state == state)
        #expect(r.stateHistory(thingID: back.thingID, from: 0, to: .max).map(\.method) == ["PUT"])
        #expect(r.stateHistory(thingID: t.thingID, from: 0, to: 10).count == 1)
        #expect(r.command(id: "c1")?.results == "{}")
        #expect(r.unansweredCommands(thingID: t.thingID).map(\.commandID) == ["c2"])
        #expect(r.insertCommand(command("c2", thing: t.thingID)) == nil)
        // seq keeps increasing across the restart.
        let c3 = try #require(r.insertCommand(command("c3", thing: t.thingID)))
        #expect(c3.seq > c2.seq && c2.seq > c1.seq)
        #expect(!r.recordResults(commandID: "c1", results: "{\"again\":1}", state: .done, at: 7))
        #expect(r.user(loginName: "alice")?.userID == u.userID)
        #expect(r.createUser(loginName: "alice", passwordHash: "h2") == nil)
        #expect(r.group(id: g.groupID)?.members == ["u.x"])
        #expect(r.groups(ofUser: "u.x").map(\.groupID) == [g.groupID])
        #expect(r.appInstallation(id: i.installationID)?.target == HubIDs.notificationTopic(i.installationID))
        #expect(
            failure(
                r.registerThing(
                    vendorThingID: "AC-1", password: "bad", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil)) == .wrongPassword)
    }

    @Test("Triggers and automation survive a restart; a version 1 database is migrated to the current version")
    func triggersSurviveAndMigrate() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hub.sqlite"
        var s: SQLiteStore? = try SQLiteStore(path: path, secrets: .fastForTests)
        let t = try register(s!, "AC-MIG")
        #expect(
            s!.insertTrigger(
                ServerTriggerRecord(triggerID: "trg-1", thingID: t.thingID, definition: "{}", createdAt: 1)))
        #expect(s!.saveAutomation(thingID: t.thingID, config: "{}")?.version == 1)
        s!.close()
        s = nil
        let r = try SQLiteStore(path: path, secrets: .fastForTests)
        #expect(r.trigger(id: "trg-1")?.thingID == t.thingID)
        #expect(r.saveAutomation(thingID: t.thingID, config: "{}")?.version == 2)
        r.close()

        // A database as the version 1 hub left it: no trigger tables.
        let v1 = dir + "/v1.sqlite"
        try SQLiteStore(path: v1, secrets: .fastForTests, retention: StateRetention(), migrateTo: 1).close()
        try execSQL(
            v1,
            """
            INSERT INTO things (thing_id, vendor_thing_id, password, access_token, created_at)
            VALUES ('th.v1', 'AC-MIG', 'pw', 'v1token', 1)
            """)
        let m = try SQLiteStore(path: v1, secrets: .fastForTests)
        defer { m.close() }
        #expect(SQLiteStore.schemaVersion == 16)
        // 15 -> 16: the request partitions' leases (unused by one hub, the schema as PostgreSQL's).
        try execSQL(v1, "INSERT INTO partition_leases (part, hub_id, expires_at) VALUES (0, 'hub', 1)")
        try execSQL(v1, "INSERT INTO partition_hubs (hub_id, expires_at) VALUES ('hub', 1)")
        #expect(m.thing(id: "th.v1")?.vendorThingID == "AC-MIG")
        // 10 -> 11: update jobs.
        #expect(
            m.insertUpdateJob(
                UpdateJobRecord(
                    jobID: "u-mig", thingID: "th.v1", image: String(repeating: "a", count: 64), version: "2",
                    manifest: [1], blockSize: 1024, blocks: 1, attempt: 1, commandID: "c-u", createdAt: 1,
                    updatedAt: 1)) == .created)
        // 11 -> 12: rollouts, their members resolved from the things.
        let migrated = RolloutRecord(
            rolloutID: "r-mig", image: String(repeating: "a", count: 64), version: "2", manifest: [1],
            signatures: "[]", trialS: nil, target: RolloutTarget(things: ["th.v1"]), ratePerMinute: 1, maxInFlight: 1,
            abortFailurePercent: nil, abortMinExecuted: 1, abortStatuses: RolloutRecord.defaultAbortStatuses,
            timeoutS: 600, retries: 2, ramp: RolloutRamp(startPerMinute: 1, factor: 1.5, everyS: 60), createdAt: 1,
            updatedAt: 1)
        #expect(m.insertRollout(migrated) == 1)
        #expect(m.rolloutMembers(id: "r-mig")?.map(\.thingID) == ["th.v1"])
        // 12 -> 13: time-outs, retries, the ramp; members' attempts.
        #expect(m.rollout(id: "r-mig").value == migrated)
        #expect(m.rolloutMembers(id: "r-mig")?.map(\.attempts) == [0])
        // 13 -> 14: the trait registry.
        #expect(m.putThingType("AC", now: 1) == .created)
        #expect(m.putFirmwareVersion(thingType: "AC", firmwareVersion: "v1", now: 1) == .created)
        #expect(m.traitEntry(thingType: "AC", firmwareVersion: "v1").value?.isEmpty == true)
        // 14 -> 15: an image's chunks stay under its upload's key.
        #expect(m.stageImageChunk(upload: "upload:mig", n: 0, bytes: [7]))
        #expect(m.commitImage(upload: "upload:mig", sha256: String(repeating: "b", count: 64), size: 1, now: 1) != nil)
        #expect(m.imageChunk(sha256: String(repeating: "b", count: 64), n: 0) == [7])
        // 4 -> 5: results make a notification due.
        _ = try #require(
            m.insertCommand(
                CommandRecord(
                    commandID: "c-mig", thingID: "th.v1", issuer: nil, issuingInstallationID: nil, payload: "{}",
                    createdAt: 1, modifiedAt: 1)))
        #expect(m.recordResults(commandID: "c-mig", results: "{}", state: .done, at: 2))
        #expect(
            m.claimUnnotified(now: 2 + StoreRules.notificationGraceMs, leaseMs: 1, limit: 5).map(\.commandID) == [
                "c-mig"
            ])
        #expect(m.thing(accessToken: "v1token")?.thingID == "th.v1")
        #expect(m.allTriggers().isEmpty && m.automation(thingID: "th.v1") == nil)
        #expect(
            m.insertTrigger(ServerTriggerRecord(triggerID: "trg-2", thingID: "th.v1", definition: "{}", createdAt: 2)))
        #expect(m.saveAutomation(thingID: "th.v1", config: "{}")?.version == 1)
        // Version 4's column: the thing's report.
        #expect(m.saveAutomationReport(thingID: "th.v1", report: #"{"applied":true}"#))
        #expect(m.automation(thingID: "th.v1")?.report == #"{"applied":true}"#)
        // 5 -> 6: a command's expiry and end.
        #expect(m.insertCommand(command("c-mig6", thing: "th.v1")) != nil)
        #expect(m.setCommandExpiry(commandID: "c-mig6", expiresAt: 5))
        #expect(
            m.commandsDueToEnd(now: 5, sentBefore: nil, deliveredBefore: nil, limit: 5).map(\.commandID) == ["c-mig6"])
        #expect(m.endCommand(commandID: "c-mig6", state: .expired, reason: "expired", at: 6))
        #expect(m.command(id: "c-mig6")?.endReason == "expired")
        // 7 -> 8: things' certificates, revoked with their thing.
        #expect(m.recordCertificate(thingID: "th.v1", installationID: "i1", serial: "0f", notAfter: Int64.max))
        // 8 -> 9: the thing's layout.
        #expect(m.thing(id: "th.v1")?.layoutPosition == .standalone)
        #expect(m.deleteThing(id: "th.v1"))
        #expect(m.revokedCertificates(now: 1)?.map(\.serial) == ["0f"])
    }

    @Test(
        "A version 2 database is migrated to 3: raw tokens become SHA-256 rows, thing passwords KDF hashes, a legacy user hash is re-hashed at login"
    )
    func migratesSecrets() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hub.sqlite"
        // The schema as the version 2 hub left it, with its plain secrets.
        try SQLiteStore(path: path, secrets: .fastForTests, retention: StateRetention(), migrateTo: 2).close()
        let legacy = legacyHash("secret1", salt: "abcd", iterations: 3)
        try execSQL(
            path,
            """
            INSERT INTO things (thing_id, vendor_thing_id, password, thing_type, firmware_version, access_token,
                data_grouping_interval, state, created_at)
            VALUES ('th.old', 'AC-OLD', 'pw', 'AirConditioner', '1.0', 'oldthingtoken', NULL, '{"p":1}', 1);
            INSERT INTO thing_installations VALUES ('th.old', 'i1', 'told');
            INSERT INTO thing_owners VALUES ('th.old', 'user:u.old');
            INSERT INTO state_samples (thing_id, at, method, upload, state) VALUES ('th.old', 5, 'PUT', '{"p":1}', '{"p":1}');
            INSERT INTO users (user_id, login_name, password_hash, access_token, created_at)
            VALUES ('u.old', 'olduser', '\(legacy)', 'olduserstoken', 2);
            """)
        let m = try SQLiteStore(path: path, secrets: .fastForTests)
        defer { m.close() }
        let t = try #require(m.thing(accessToken: "oldthingtoken"))
        #expect(t.thingID == "th.old" && t.installations == ["i1": "told"] && t.owners == ["user:u.old"])
        #expect(t.state == #"{"p":1}"# && m.stateHistory(thingID: "th.old", from: 0, to: .max).count == 1)
        #expect(t.passwordHash?.hasPrefix("pbkdf2-sha256$") == true)
        #expect(
            failure(
                m.registerThing(
                    vendorThingID: "AC-OLD", password: "bad", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil)) == .wrongPassword)
        let again = try #require(
            try? m.registerThing(
                vendorThingID: "AC-OLD", password: "pw", thingType: nil,
                firmwareVersion: nil, dataGroupingInterval: nil, layoutPosition: nil
            ).get())
        #expect(again.thingID == "th.old")
        #expect(m.user(accessToken: "olduserstoken")?.userID == "u.old")
        // No raw token is left in any table.
        #expect(
            try sqlCount(path, "SELECT count(*) FROM tokens WHERE token_hash IN ('oldthingtoken', 'olduserstoken')")
                == 0)
        #expect(
            try sqlCount(
                path, "SELECT count(*) FROM tokens WHERE token_hash = '\(LibCrypto.sha256Hex("oldthingtoken"))'")
                == 1)
        #expect(
            try sqlCount(
                path, "SELECT count(*) FROM pragma_table_info('things') WHERE name IN ('access_token', 'password')")
                == 0)
        #expect(try sqlCount(path, "SELECT count(*) FROM pragma_table_info('users') WHERE name = 'access_token'") == 0)

        // The legacy user hash verifies once and is replaced by the KDF.
        let hub = try #require(FrameworkSide(.init(appID: "a", appKey: "k", brokerPort: 1), store: m))
        #expect(hub.app.login(loginName: "olduser", password: "wrong").failureStatus == 400)
        #expect(m.user(id: "u.old")?.passwordHash == legacy)
        let logged = try hub.app.login(loginName: "olduser", password: "secret1").get()
        #expect(m.user(accessToken: logged.accessToken)?.userID == "u.old")
        #expect(m.user(id: "u.old")?.passwordHash?.hasPrefix("pbkdf2-sha256$1000$") == true)
        #expect((try? hub.app.login(loginName: "olduser", password: "secret1").get()) != nil)
    }

    @Test("An image's commit renames no chunk row; one committed before the chunks column is read and deleted")
    func imageChunkKeys() throws {
        let dir = try makeTempDirectory(prefix: "thingif-sqlite-images")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hub.sqlite"
        let old = String(repeating: "a", count: 64)
        // A version 14 database with an image committed as that hub did:
        // the chunks renamed to its SHA-256, no `chunks` column.
        try SQLiteStore(path: path, secrets: .fastForTests, retention: StateRetention(), migrateTo: 14).close()
        try execSQL(
            path,
            """
            INSERT INTO images (sha256, size, created_at) VALUES ('\(old)', 2, 1);
            INSERT INTO image_chunks (image, n, bytes) VALUES ('\(old)', 0, X'0102');
            """)
        let s = try SQLiteStore(path: path, secrets: .fastForTests)
        #expect(s.imageChunk(sha256: old, n: 0) == [1, 2])

        let sha = String(repeating: "c", count: 64)
        for n in 0..<3 { #expect(s.stageImageChunk(upload: "upload:one", n: n, bytes: [UInt8(n)])) }
        #expect(
            s.commitImage(upload: "upload:one", sha256: sha, size: 3, now: 2)
                == .created(ImageRecord(sha256: sha, size: 3, createdAt: 2)))
        #expect(s.stagedImageChunks() == 0, "a committed upload's chunks are the image's, not staged")
        #expect(s.imageChunk(sha256: sha, n: 2) == [2])
        // The same bytes again: found, and the second copy's chunks dropped.
        for n in 0..<3 { #expect(s.stageImageChunk(upload: "upload:two", n: n, bytes: [UInt8(n)])) }
        #expect(s.stagedImageChunks() == 3)
        #expect(
            s.commitImage(upload: "upload:two", sha256: sha, size: 3, now: 3)
                == .existing(ImageRecord(sha256: sha, size: 3, createdAt: 2)))
        s.close()
        #expect(try sqlCount(path, "SELECT COUNT(*) FROM image_chunks WHERE image = 'upload:one'") == 3, "not renamed")
        #expect(try sqlCount(path, "SELECT COUNT(*) FROM image_chunks WHERE image = 'upload:two'") == 0)

        // More chunks than one delete batch, and the old image: both go.
        let t = try SQLiteStore(path: path, secrets: .fastForTests)
        defer { t.close() }
        for n in 0..<(SQLiteStore.chunkBatch * 2 + 5) {
            #expect(t.stageImageChunk(upload: "upload:big", n: n, bytes: [1]))
        }
        let big = String(repeating: "d", count: 64)
        #expect(
            t.commitImage(upload: "upload:big", sha256: big, size: Int64(SQLiteStore.chunkBatch * 2 + 5), now: 4) != nil
        )
        #expect(t.deleteImage(sha256: big) == true)
        #expect(t.deleteImage(sha256: old) == true)
        #expect(t.deleteImage(sha256: old) == false)
        #expect(t.imageChunk(sha256: old, n: 0) == nil)
        #expect(try sqlCount(path, "SELECT COUNT(*) FROM image_chunks WHERE image <> 'upload:one'") == 0)
    }

    @Test("The database file and its -wal and -shm files are 0600, whatever the umask")
    func fileModes() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hub.sqlite"
        let old = umask(0o022)
        defer { umask(old) }
        let s = try SQLiteStore(path: path, secrets: .fastForTests)
        _ = try register(s, "AC-MODE")
        for p in [path, path + "-wal", path + "-shm"] {
            var st = stat()
            #expect(stat(p, &st) == 0, "\(p) exists while the store is open")
            #expect(st.st_mode & 0o777 == 0o600, "\(p) is \(String(st.st_mode & 0o777, radix: 8))")
        }
        s.close()
        // A file an older hub left world-readable is tightened at open.
        #expect(chmod(path, 0o644) == 0)
        let r = try SQLiteStore(path: path, secrets: .fastForTests)
        defer { r.close() }
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o600)
    }

    @Test("Two connections on one file see each other's writes")
    func twoConnections() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try SQLiteStore(path: dir + "/hub.sqlite", secrets: .fastForTests)
        let b = try SQLiteStore(path: dir + "/hub.sqlite", secrets: .fastForTests)
        defer { a.close(); b.close() }
        let t = try register(a, "AC-1")
        #expect(b.thing(accessToken: t.accessToken)?.thingID == t.thingID)
        let c1 = try #require(a.insertCommand(command("c1", thing: t.thingID)))
        let c2 = try #require(b.insertCommand(command("c2", thing: t.thingID)))
        #expect(c2.seq > c1.seq)
        #expect(a.insertCommand(command("c2", thing: t.thingID)) == nil)
    }

    @Test("A path that cannot be a database gives an error, not a crash")
    func badPaths() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // No such directory.
        #expect(throws: SQLiteError.self) { try SQLiteStore(path: dir + "/missing/dir/hub.sqlite") }
        // A directory.
        #expect(throws: SQLiteError.self) { try SQLiteStore(path: dir) }
        // A file that is not a database.
        let junk = dir + "/junk.sqlite"
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }).write(to: URL(fileURLWithPath: junk))
        #expect(throws: SQLiteError.self) { try SQLiteStore(path: junk) }
    }

    @Test("A schema newer than this code is refused")
    func newerSchema() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hub.sqlite"
        try SQLiteStore(path: path, secrets: .fastForTests).close()
        // Bump the version with the sqlite3 API through a second store's file.
        try setUserVersion(path, SQLiteStore.schemaVersion + 1)
        #expect(throws: SQLiteError.self) { try SQLiteStore(path: path, secrets: .fastForTests) }
    }

    @Test("After the connection is gone, calls fail as storage errors")
    func closedConnection() throws {
        let s = try SQLiteStore(path: ":memory:", secrets: .fastForTests)
        let t = try register(s, "AC-1")
        s.close()
        #expect(s.thing(id: t.thingID) == nil)
        #expect(
            failure(
                s.registerThing(
                    vendorThingID: "AC-2", password: "p", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil)) == .storage)
        #expect(s.insertCommand(command("c1", thing: t.thingID)) == nil)
        #expect(!s.recordResults(commandID: "c1", results: "{}", state: .done, at: 1))
        #expect(!s.addOwner(thingID: t.thingID, owner: "user:x"))
        #expect(s.applyState(thingID: t.thingID, method: "PUT", upload: "{}", at: 1) == nil)
        #expect(s.commands(thingID: t.thingID, afterSeq: 0, limit: 10).isEmpty)
        #expect(s.createUser(loginName: nil, passwordHash: nil) == nil)
        #expect(s.createGroup(name: "g", ownerUserID: "u", members: []) == nil)
        #expect(s.addAppInstallation(userID: "u", kind: .sse, target: nil) == nil)
    }

    /// How fast is bench/hubs.sh's question; this one is that a long run of
    /// them leaves nothing behind.
    @Test("1,000 commands stored, delivered and answered, one transaction each: none left unanswered")
    func throughput() throws {
        let dir = try makeTempDirectory(prefix: "thingif-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try SQLiteStore(path: dir + "/hub.sqlite", secrets: .fastForTests)
        defer { s.close() }
        let t = try register(s, "AC-1")
        for i in 0..<1000 {
            let id = "c\(i)"
            _ = s.thing(id: t.thingID)
            #expect(s.insertCommand(command(id, thing: t.thingID)) != nil)
            #expect(s.markDelivered(commandID: id, at: 1))
            #expect(s.recordResults(commandID: id, results: "{}", state: .done, at: 2))
        }
        #expect(s.unansweredCommands(thingID: t.thingID).isEmpty)
        #expect(s.commands(thingID: t.thingID, afterSeq: 0, limit: 2000).count == 1000)
    }
}

/// Sets PRAGMA user_version of a database file (as a newer hub would have).
private func setUserVersion(_ path: String, _ version: Int64) throws {
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
        sqlite3_close_v2(db)
        throw HarnessError("cannot open \(path)")
    }
    defer { sqlite3_close_v2(db) }
    guard sqlite3_exec(db, "PRAGMA user_version = \(version)", nil, nil, nil) == SQLITE_OK else {
        throw HarnessError("cannot set user_version")
    }
}

/// Runs SQL on a database file, outside any store.
private func execSQL(_ path: String, _ sql: String) throws {
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else {
        sqlite3_close_v2(db)
        throw HarnessError("cannot open \(path)")
    }
    defer { sqlite3_close_v2(db) }
    guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw HarnessError("cannot run \(sql)") }
}

/// The first hubs' hand-made password chain, to seed a version 2 database.
private func legacyHash(_ password: String, salt: String, iterations: Int) -> String {
    var digest = LibCrypto.sha256(Array((salt + ":" + password).utf8))
    for _ in 1..<iterations { digest = LibCrypto.sha256(digest + Array(salt.utf8)) }
    return "sha256$\(iterations)$\(salt)$\(LibCrypto.hex(digest))"
}

/// The integer a one-value query gives.
private func sqlCount(_ path: String, _ sql: String) throws -> Int64 {
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else {
        sqlite3_close_v2(db)
        throw HarnessError("cannot open \(path)")
    }
    defer { sqlite3_close_v2(db) }
    var stmt: OpaquePointer?
    guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else { throw HarnessError("cannot prepare \(sql)") }
    defer { sqlite3_finalize(stmt) }
    guard sqlite3_step(stmt) == SQLITE_ROW else { throw HarnessError("no row for \(sql)") }
    return sqlite3_column_int64(stmt, 0)
}
