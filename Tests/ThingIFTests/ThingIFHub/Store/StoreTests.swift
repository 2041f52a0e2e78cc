// SPDX-License-Identifier: Apache-2.0

import CSQLite
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// Makes a fresh store of one kind; the directory (if any) is removed by `cleanup`.
struct StoreFactory: CustomStringConvertible, Sendable {
    let description: String
    let make: @Sendable (HubSecrets, StateRetention) throws -> (HubStore, cleanup: () -> Void)

    static let memory = StoreFactory(description: "MemoryStore") { (MemoryStore(secrets: $0, retention: $1), {}) }
    static let sqlite = StoreFactory(description: "SQLiteStore") { secrets, retention in
        let dir = try makeTempDirectory(prefix: "thingif-store")
        let store = try SQLiteStore(path: dir + "/hub.sqlite", secrets: secrets, retention: retention)
        return (
            store,
            {
                store.close(); try? FileManager.default.removeItem(atPath: dir)
            }
        )
    }
    static let sqliteInMemory = StoreFactory(description: "SQLiteStore(:memory:)") {
        (try SQLiteStore(path: ":memory:", secrets: $0, retention: $1), {})
    }
    /// A fresh database on the test process's PostgreSQL server (dropped by `cleanup`).
    static let postgres = StoreFactory(description: "PostgresStore") { secrets, retention in
        let server = try PostgresServer.get()
        let (name, url) = try server.createDatabase()
        do {
            let store = try PostgresStore(url: url, secrets: secrets, retention: retention)
            return (
                store,
                {
                    store.close(); server.dropDatabase(name)
                }
            )
        } catch {
            server.dropDatabase(name)
            throw error
        }
    }
    /// PostgresStore runs where PostgreSQL is installed, and always in CI
    /// (where a missing server fails its tests instead of skipping them).
    static let all = [memory, sqlite, sqliteInMemory] + (PostgresServer.enabled ? [postgres] : [])
}

private func withStore(
    _ factory: StoreFactory, secrets: HubSecrets = .fastForTests,
    retention: StateRetention = StateRetention(), _ body: (HubStore) throws -> Void
) throws {
    let (store, cleanup) = try factory.make(secrets, retention)
    defer { cleanup() }
    try body(store)
}

func register(
    _ s: HubStore, _ vendor: String, password: String = "pw", type: String? = "AirConditioner",
    firmware: String? = nil, grouping: String? = nil
) throws -> ThingRecord {
    switch s.registerThing(
        vendorThingID: vendor, password: password, thingType: type, firmwareVersion: firmware,
        dataGroupingInterval: grouping, layoutPosition: nil)
    {
    case .success(let t): return t
    case .failure(let e): throw HarnessError("registration of \(vendor) failed: \(e)")
    }
}

func command(_ id: String, thing: String, issuer: String? = "user:u1", at: Int64 = 1000) -> CommandRecord {
    CommandRecord(
        commandID: id, thingID: thing, issuer: issuer, issuingInstallationID: nil,
        payload: #"{"commandID":"\#(id)"}"#, createdAt: at, modifiedAt: at)
}

func failure(_ r: Result<ThingRecord, RegisterError>) -> RegisterError? {
    if case .failure(let e) = r { return e }
    return nil
}

/// The HubStore contract, run against every store.
@Suite("Store conformance", .offPool)
struct StoreConformanceTests {
    @Test(
        "Registering a thing: created once, same password again, wrong password, wrong type",
        arguments: StoreFactory.all)
    func registerThing(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let t = try register(s, "AC-1", type: nil, firmware: "1.0", grouping: "1_HOUR")
            #expect(t.thingID.hasPrefix("th."))
            #expect(t.thingID.count == 23)
            #expect(t.accessToken.count == 40)
            #expect(t.vendorThingID == "AC-1")
            // The password only as its KDF hash, with the store's iteration count.
            let hash = try #require(t.passwordHash)
            #expect(hash.hasPrefix("pbkdf2-sha256$1000$") && !hash.contains("pw"))
            #expect(PasswordHash.verify("pw", hash) && !PasswordHash.verify("pw2", hash))
            #expect(t.thingType == nil)
            #expect(t.firmwareVersion == "1.0")
            #expect(t.dataGroupingInterval == "1_HOUR")
            #expect(
                t.installations.isEmpty && t.owners.isEmpty && t.state == nil
                    && s.stateHistory(thingID: t.thingID, from: 0, to: .max).isEmpty)
            #expect(t.createdAt > 1_600_000_000_000)

            // Again with the same password: the same thing with a NEW token
            // (the old one stays valid); a nil type is set now, nil firmware
            // and grouping leave what was stored.
            let again = try register(s, "AC-1", type: "AirConditioner")
            #expect(again.thingID == t.thingID)
            #expect(again.accessToken.count == 40 && again.accessToken != t.accessToken)
            #expect(s.thing(accessToken: t.accessToken)?.thingID == t.thingID)
            #expect(s.thing(accessToken: again.accessToken)?.thingID == t.thingID)
            // A looked-up record does not know any raw token.
            #expect(s.thing(id: t.thingID)?.accessToken == "")
            #expect(again.thingType == "AirConditioner")
            #expect(again.firmwareVersion == "1.0")
            #expect(again.dataGroupingInterval == "1_HOUR")
            #expect(again.createdAt == t.createdAt)

            // Given values update; a nil type matches any.
            let updated = try register(s, "AC-1", type: nil, firmware: "2.0", grouping: "15_MINUTES")
            #expect(updated.thingType == "AirConditioner")
            #expect(updated.firmwareVersion == "2.0")
            #expect(updated.dataGroupingInterval == "15_MINUTES")

            #expect(
                failure(
                    s.registerThing(
                        vendorThingID: "AC-1", password: "other", thingType: nil,
                        firmwareVersion: "9", dataGroupingInterval: nil, layoutPosition: nil)) == .wrongPassword)
            #expect(
                failure(
                    s.registerThing(
                        vendorThingID: "AC-1", password: "pw", thingType: "Lamp",
                        firmwareVersion: "9", dataGroupingInterval: nil, layoutPosition: nil)) == .wrongType)
            // A refused registration changes nothing.
            #expect(s.thing(id: t.thingID)?.firmwareVersion == "2.0")
            #expect(s.thing(id: t.thingID)?.thingType == "AirConditioner")

            let other = try register(s, "AC-2")
            #expect(other.thingID != t.thingID)
            #expect(other.accessToken != t.accessToken)
        }
    }

    @Test(
        "A thing's token and a command ID read the thing and that command of its own, in one statement on SQL",
        arguments: StoreFactory.all)
    func thingWithCommand(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let fast = FastPaths(s)  // as the hub calls them
            let a = try register(s, "AC-JOIN-1")
            let b = try register(s, "AC-JOIN-2")
            #expect(s.addInstallation(thingID: a.thingID, installationID: "i1", mqttTopic: "tj1"))
            #expect(s.addInstallation(thingID: a.thingID, installationID: "i2", mqttTopic: "tj2"))
            #expect(s.addOwner(thingID: a.thingID, owner: "user:u1"))
            var mine = command("cj-a", thing: a.thingID, at: 10)
            mine.results = #"{"actionResults":[]}"#
            _ = try #require(s.insertCommand(mine))
            _ = try #require(s.insertCommand(command("cj-b", thing: b.thingID, at: 11)))

            let both = try #require(fast.thing(accessToken: a.accessToken, command: "cj-a").value)
            let alone = try #require(s.thing(accessToken: a.accessToken))
            // The same record as the thing's own read, lists included.
            #expect(both.thing.thingID == a.thingID && both.thing.vendorThingID == "AC-JOIN-1")
            #expect(both.thing.installations == alone.installations && both.thing.installations.count == 2)
            #expect(both.thing.owners == alone.owners && both.thing.owners == ["user:u1"])
            #expect(both.thing.thingType == alone.thingType && both.thing.createdAt == alone.createdAt)
            // The same command as its own read.
            let c = try #require(both.command)
            let own = try #require(s.command(id: "cj-a"))
            #expect(c.commandID == "cj-a" && c.thingID == a.thingID && c.seq == own.seq)
            #expect(c.payload == own.payload && c.results == own.results && c.state == own.state)
            #expect(c.createdAt == 10 && c.issuer == "user:u1" && c.expiresAt == nil)
            // Another thing's command, or none: the thing without one.
            #expect(try #require(fast.thing(accessToken: a.accessToken, command: "cj-b").value).command == nil)
            #expect(try #require(fast.thing(accessToken: a.accessToken, command: "cj-none").value).command == nil)
            #expect(
                try #require(fast.thing(accessToken: b.accessToken, command: "cj-b").value).command?.thingID
                    == b.thingID)
            // No thing for an unknown token, even with a known command; SQL in a value is data.
            guard case .notFound = fast.thing(accessToken: "nope", command: "cj-a") else {
                Issue.record("a thing (or a failure) for an unknown token")
                return
            }
            #expect(try #require(fast.thing(accessToken: a.accessToken, command: "' OR 1=1 --").value).command == nil)

            // Whom a user's command tells comes with it on SQL: the rule of
            // notificationInstallations (all of a user's installations, a
            // pseudo user's issuing one only), in its order.
            let joined: Bool
            switch s {
            case is SQLiteStore, is PostgresStore: joined = true
            default: joined = false
            }
            let alice = try #require(s.createUser(loginName: "alice-join", passwordHash: nil))
            let pseudo = try #require(s.createUser(loginName: nil, passwordHash: nil))
            var issuing: [String: String] = [:]
            for (user, kinds) in [(alice, [AppInstallation.Kind.sse, .mqtt, .sse]), (pseudo, [.sse, .sse])] {
                for kind in kinds {
                    let i = try #require(s.addAppInstallation(userID: user.userID, kind: kind, target: nil))
                    issuing[user.userID] = i.installationID
                }
            }
            for (id, issuer, from) in [
                ("cj-alice", "user:" + alice.userID, issuing[alice.userID]),
                ("cj-pseudo", "user:" + pseudo.userID, issuing[pseudo.userID]),
                ("cj-nobody", "user:no-such-user", nil), ("cj-group", "group:g1", nil)
            ] {
                var c = command(id, thing: a.thingID, at: 12)
                c.issuer = issuer
                c.issuingInstallationID = from
                _ = try #require(s.insertCommand(c))
                let read = try #require(fast.thing(accessToken: a.accessToken, command: id).value)
                #expect(read.command?.commandID == id)
                guard issuer.hasPrefix("user:"), joined else {
                    #expect(read.targets == nil, "\(id)")
                    continue
                }
                let expected = s.notificationInstallations(
                    userID: String(issuer.dropFirst(5)), issuingInstallationID: from)
                #expect(read.targets?.map(\.installationID) == expected.map(\.installationID), "\(id)")
                #expect(read.targets?.map(\.kind) == expected.map(\.kind), "\(id)")
            }
            // Alice's three, the pseudo user's issuing one, nobody's none.
            for (id, count) in [("cj-alice", 3), ("cj-pseudo", 1), ("cj-nobody", 0)] {
                let targets = fast.thing(accessToken: a.accessToken, command: id).value?.targets
                #expect(targets?.count == (joined ? count : nil), "\(id)")
            }
        }
    }

    @Test(
        "A user's token and a thingID read the user and that thing, in one statement on SQL",
        arguments: StoreFactory.all)
    func userWithThing(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let fast = FastPaths(s)  // as the hub calls them
            let u = try #require(s.createUser(loginName: "owner-join", passwordHash: "h"))
            let t = try register(s, "AC-UJOIN", firmware: "1.2")
            #expect(s.addInstallation(thingID: t.thingID, installationID: "i1", mqttTopic: "tu1"))
            #expect(s.addOwner(thingID: t.thingID, owner: "user:\(u.userID)"))
            #expect(s.addOwner(thingID: t.thingID, owner: "group:g1"))
            let both = try #require(fast.user(accessToken: u.accessToken, thing: t.thingID))
            let alone = try #require(s.thing(id: t.thingID))
            #expect(both.user.userID == u.userID && both.user.loginName == "owner-join")
            #expect(both.user.passwordHash == "h" && both.user.createdAt == u.createdAt)
            let thing = try #require(both.thing)
            #expect(thing.thingID == t.thingID && thing.vendorThingID == "AC-UJOIN" && thing.firmwareVersion == "1.2")
            #expect(thing.installations == alone.installations && thing.installations == ["i1": "tu1"])
            #expect(thing.owners == alone.owners && thing.owners == ["user:\(u.userID)", "group:g1"])
            // An unknown thing: the user alone. An unknown token, or a thing's: nothing.
            let none = try #require(fast.user(accessToken: u.accessToken, thing: "th.nope"))
            #expect(none.user.userID == u.userID && none.thing == nil)
            #expect(fast.user(accessToken: "nope", thing: t.thingID) == nil)
            #expect(fast.user(accessToken: t.accessToken, thing: t.thingID) == nil)
            #expect(try #require(fast.user(accessToken: u.accessToken, thing: "' OR 1=1 --")).thing == nil)
        }
    }

    @Test("Things are found by ID, vendorThingID, token and MQTT topic", arguments: StoreFactory.all)
    func lookups(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let a = try register(s, "AC-1")
            let b = try register(s, "AC-2")
            #expect(s.thing(id: a.thingID)?.vendorThingID == "AC-1")
            #expect(s.thing(vendorThingID: "AC-2")?.thingID == b.thingID)
            #expect(s.thing(accessToken: b.accessToken)?.thingID == b.thingID)
            #expect(s.thing(id: "th.nope") == nil)
            #expect(s.thing(vendorThingID: "AC-3") == nil)
            #expect(s.thing(accessToken: "nope") == nil)
            #expect(s.thing(mqttTopic: "tnope") == nil)
            // Values that look like SQL are only data.
            #expect(s.thing(vendorThingID: "' OR 1=1 --") == nil)

            #expect(s.addInstallation(thingID: a.thingID, installationID: "i1", mqttTopic: "ta1"))
            #expect(s.addInstallation(thingID: a.thingID, installationID: "i2", mqttTopic: "ta2"))
            #expect(s.addInstallation(thingID: b.thingID, installationID: "i3", mqttTopic: "tb1"))
            #expect(!s.addInstallation(thingID: "th.nope", installationID: "i4", mqttTopic: "tx"))
            #expect(s.thing(id: a.thingID)?.installations == ["i1": "ta1", "i2": "ta2"])
            #expect(s.thing(mqttTopic: "ta2")?.thingID == a.thingID)
            #expect(s.thing(mqttTopic: "tb1")?.thingID == b.thingID)
            #expect(s.thing(mqttTopic: "tx") == nil)
            // The same installation again replaces its topic.
            #expect(s.addInstallation(thingID: a.thingID, installationID: "i1", mqttTopic: "ta3"))
            #expect(s.thing(id: a.thingID)?.installations == ["i1": "ta3", "i2": "ta2"])
            #expect(s.thing(mqttTopic: "ta3")?.thingID == a.thingID)
        }
    }

    @Test(
        "Owners are kept in order without duplicates; firmware versions and thing types are set",
        arguments: StoreFactory.all)
    func ownersAndFirmware(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let t = try register(s, "AC-1", firmware: "1.0")
            #expect(s.addOwner(thingID: t.thingID, owner: "user:u2"))
            #expect(s.addOwner(thingID: t.thingID, owner: "group:g1"))
            #expect(s.addOwner(thingID: t.thingID, owner: "user:u2"))
            #expect(s.addOwner(thingID: t.thingID, owner: "user:u1"))
            #expect(!s.addOwner(thingID: "th.nope", owner: "user:u1"))
            #expect(s.thing(id: t.thingID)?.owners == ["user:u2", "group:g1", "user:u1"])

            #expect(s.setFirmwareVersion(thingID: t.thingID, "1.1"))
            #expect(!s.setFirmwareVersion(thingID: "th.nope", "1.1"))
            #expect(s.thing(id: t.thingID)?.firmwareVersion == "1.1")
            #expect(s.thing(vendorThingID: "AC-1")?.firmwareVersion == "1.1")

            // Kii's ThingTypeUpdateRequest.
            #expect(s.setThingType(thingID: t.thingID, "AirPurifier"))
            #expect(!s.setThingType(thingID: "th.nope", "AirPurifier"))
            #expect(s.thing(id: t.thingID)?.thingType == "AirPurifier")
            #expect(s.thing(vendorThingID: "AC-1")?.thingType == "AirPurifier")
        }
    }

    @Test("Things by owner: any of the given owners, each thing once, by thingID", arguments: StoreFactory.all)
    func thingsByOwner(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let a = try register(s, "AC-1", firmware: "1.0")
            let b = try register(s, "AC-2")
            _ = try register(s, "AC-3")
            #expect(s.addOwner(thingID: a.thingID, owner: "user:u1"))
            #expect(s.addOwner(thingID: a.thingID, owner: "group:g1"))
            #expect(s.addOwner(thingID: b.thingID, owner: "group:g1"))
            let both = s.things(ownedBy: ["user:u1", "group:g1"])
            #expect(both.map(\.thingID) == [a.thingID, b.thingID].sorted())
            #expect(both.first { $0.thingID == a.thingID }?.firmwareVersion == "1.0")
            #expect(both.first { $0.thingID == a.thingID }?.owners == ["user:u1", "group:g1"])
            #expect(s.things(ownedBy: ["user:u1"]).map(\.thingID) == [a.thingID])
            #expect(s.things(ownedBy: ["user:u2"]).isEmpty)
            #expect(s.things(ownedBy: []).isEmpty)
        }
    }

    @Test("State: PUT replaces, PATCH merges, uploads and history are kept", arguments: StoreFactory.all)
    func state(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let t = try register(s, "AC-1")
            #expect(s.applyState(thingID: "th.nope", method: "PUT", upload: #"{"a":1}"#, at: 1) == nil)

            let put = try #require(
                s.applyState(
                    thingID: t.thingID, method: "PUT",
                    upload: #"{"power":true, "fanSpeed":3}"#, at: 100))
            #expect(parseObject(put)?.count == 2)
            // A PATCH on no state yet stores the upload as it is.
            let patched = try #require(
                s.applyState(
                    thingID: t.thingID, method: "PATCH",
                    upload: #"{"fanSpeed":5,"mode":"cool"}"#, at: 200))
            let o = try #require(parseObject(patched))
            #expect(o["power"] as? Bool == true)
            #expect(o["fanSpeed"] as? Int == 5)
            #expect(o["mode"] as? String == "cool")
            #expect(s.thing(id: t.thingID)?.state == patched)

            let replaced = try #require(
                s.applyState(
                    thingID: t.thingID, method: "PUT", upload: #"{"power":false}"#,
                    at: 300))
            #expect(parseObject(replaced)?.count == 1)
            let record = try #require(s.thing(id: t.thingID))
            #expect(record.state == replaced)
            let uploads = s.stateHistory(thingID: record.thingID, from: 0, to: .max)
            #expect(uploads.map(\.method) == ["PUT", "PATCH", "PUT"])
            #expect(uploads[1].upload == #"{"fanSpeed":5,"mode":"cool"}"#)

            // from <= at < to, oldest first, each with the state after it.
            let all = s.stateHistory(thingID: t.thingID, from: 0, to: 1000)
            #expect(all.map(\.at) == [100, 200, 300])
            #expect(all.map(\.method) == ["PUT", "PATCH", "PUT"])
            #expect(all[1].state == patched)
            #expect(all[1].upload == #"{"fanSpeed":5,"mode":"cool"}"#)
            #expect(all.allSatisfy { $0.thingID == t.thingID })
            #expect(s.stateHistory(thingID: t.thingID, from: 100, to: 300).map(\.at) == [100, 200])
            #expect(s.stateHistory(thingID: t.thingID, from: 201, to: 300).isEmpty)
            #expect(s.stateHistory(thingID: "th.nope", from: 0, to: 1000).isEmpty)

            // Another thing's state is its own.
            let u = try register(s, "AC-2")
            #expect(s.applyState(thingID: u.thingID, method: "PATCH", upload: #"{"x":1}"#, at: 150) != nil)
            #expect(s.stateHistory(thingID: t.thingID, from: 0, to: 1000).count == 3)
            #expect(s.stateHistory(thingID: u.thingID, from: 0, to: .max).count == 1)
        }
    }

    @Test("Commands: insert once, seq increasing, delivered, results recorded once", arguments: StoreFactory.all)
    func commands(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let a = try #require(s.insertCommand(command("c1", thing: "th.a", at: 10)))
            let b = try #require(s.insertCommand(command("c2", thing: "th.b", at: 11)))
            let c = try #require(s.insertCommand(command("c3", thing: "th.a", at: 12)))
            #expect(a.seq > 0 && b.seq > a.seq && c.seq > b.seq)
            #expect(s.insertCommand(command("c1", thing: "th.b")) == nil)
            #expect(s.command(id: "c1")?.thingID == "th.a")

            let stored = try #require(s.command(id: "c1"))
            #expect(stored.seq == a.seq)
            #expect(stored.issuer == "user:u1")
            #expect(stored.issuingInstallationID == nil)
            #expect(stored.payload == #"{"commandID":"c1"}"#)
            #expect(stored.results == nil)
            #expect(stored.state == .sending)
            #expect(stored.createdAt == 10 && stored.modifiedAt == 10)
            #expect(s.command(id: "nope") == nil)

            var withInstallation = command("c4", thing: "th.a", issuer: nil)
            withInstallation.issuingInstallationID = "inst-1"
            #expect(s.insertCommand(withInstallation) != nil)
            #expect(s.command(id: "c4")?.issuingInstallationID == "inst-1")
            #expect(s.command(id: "c4")?.issuer == nil)

            #expect(s.markDelivered(commandID: "c1", at: 20))
            #expect(s.command(id: "c1")?.state == .delivered)
            #expect(s.command(id: "c1")?.modifiedAt == 20)
            #expect(!s.markDelivered(commandID: "nope", at: 20))

            #expect(s.recordResults(commandID: "c1", results: #"{"actionResults":[]}"#, state: .done, at: 30))
            #expect(!s.recordResults(commandID: "c1", results: #"{"other":1}"#, state: .incomplete, at: 40))
            #expect(!s.recordResults(commandID: "nope", results: "{}", state: .done, at: 40))
            let done = try #require(s.command(id: "c1"))
            #expect(done.results == #"{"actionResults":[]}"#)
            #expect(done.state == .done)
            #expect(done.modifiedAt == 30)
            // Once answered, a command is not marked delivered again.
            #expect(!s.markDelivered(commandID: "c1", at: 50))
            #expect(s.command(id: "c1")?.state == .done)

            #expect(s.recordResults(commandID: "c3", results: "{}", state: .incomplete, at: 31))
            #expect(s.command(id: "c3")?.state == .incomplete)
            #expect(s.unansweredCommands(thingID: "th.a").map(\.commandID) == ["c4"])
            #expect(s.unansweredCommands(thingID: "th.b").map(\.commandID) == ["c2"])
            #expect(s.unansweredCommands(thingID: "th.none").isEmpty)
        }
    }

    @Test(
        "Batch marks: delivered and notified for 300 commandIDs in portions; only open or due ones count; padding changes nothing",
        arguments: StoreFactory.all)
    func batchMarks(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let ids = (0..<300).map { "b\($0)" }
            for id in ids { _ = try #require(s.insertCommand(command(id, thing: "th.a"))) }
            // b0 has results, b1 ended: neither is open.
            #expect(s.recordResults(commandID: "b0", results: "{}", state: .done, at: 10))
            #expect(s.endCommand(commandID: "b1", state: .expired, reason: "ttl", at: 10))
            let asked = ids + ["unknown", "b5"]
            let marked = s.markDelivered(commandIDs: asked, at: 50)
            #expect(marked == Set(ids.dropFirst(2)), "\(marked.count) marked")
            #expect(s.command(id: "b299")?.state == .delivered && s.command(id: "b299")?.modifiedAt == 50)
            #expect(s.command(id: "b0")?.state == .done && s.command(id: "b1")?.state == .expired)
            // Again: delivered ones stay open and are marked again, the others not.
            #expect(s.markDelivered(commandIDs: ["b0", "b2"], at: 60) == ["b2"])
            #expect(s.markDelivered(commandIDs: [], at: 60).isEmpty)
            // Notified: due are those with results (b0, b1's end, and 20 more), each once.
            for id in ids[2..<22] { #expect(s.recordResults(commandID: id, results: "{}", state: .done, at: 70)) }
            #expect(s.markNotified(commandIDs: ids + ["b3", "unknown"]) == 22)
            #expect(s.markNotified(commandIDs: ids) == 0)
            #expect(s.claimUnnotified(now: 10_000_000, leaseMs: 1, limit: 400).isEmpty)
        }
    }

    @Test(
        "Notification installations in one call: a named user's all, in order; a pseudo user's issuing one; none for an unknown user",
        arguments: StoreFactory.all)
    func notificationInstallations(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let alice = try #require(s.createUser(loginName: "alice", passwordHash: "h"))
            let pseudo = try #require(s.createUser(loginName: nil, passwordHash: nil))
            let a = try (0..<3).map { _ in
                try #require(s.addAppInstallation(userID: alice.userID, kind: .sse, target: nil))
            }
            let p = try (0..<2).map { _ in
                try #require(s.addAppInstallation(userID: pseudo.userID, kind: .sse, target: nil))
            }
            #expect(
                s.notificationInstallations(userID: alice.userID, issuingInstallationID: nil).map(\.installationID)
                    == a.map(\.installationID))
            #expect(
                s.notificationInstallations(userID: alice.userID, issuingInstallationID: p[0].installationID).count == 3
            )
            #expect(
                s.notificationInstallations(userID: pseudo.userID, issuingInstallationID: p[1].installationID)
                    .map(\.installationID) == [p[1].installationID])
            #expect(s.notificationInstallations(userID: pseudo.userID, issuingInstallationID: nil).isEmpty)
            // Another user's installation is not the pseudo user's.
            #expect(
                s.notificationInstallations(userID: pseudo.userID, issuingInstallationID: a[0].installationID).isEmpty)
            #expect(s.notificationInstallations(userID: "nobody", issuingInstallationID: p[0].installationID).isEmpty)
        }
    }

    @Test(
        "A command is stored with its state and expiry; DELIVERED goes back to SENDING only without results",
        arguments: StoreFactory.all)
    func insertStateAndExpiry(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            var c = command("x1", thing: "th.a")
            c.state = .delivered
            c.expiresAt = 9_000
            #expect(s.insertCommand(c)?.state == .delivered)
            let stored = try #require(s.command(id: "x1"))
            #expect(stored.state == .delivered && stored.expiresAt == 9_000)
            #expect(s.markUndelivered(commandID: "x1", at: 5))
            #expect(s.command(id: "x1")?.state == .sending && s.command(id: "x1")?.modifiedAt == 5)
            #expect(!s.markUndelivered(commandID: "x1", at: 6), "SENDING already")
            #expect(s.markDelivered(commandID: "x1", at: 7))
            #expect(s.recordResults(commandID: "x1", results: "{}", state: .done, at: 8))
            #expect(!s.markUndelivered(commandID: "x1", at: 9), "it has results")
            #expect(s.command(id: "x1")?.state == .done)
            #expect(!s.markUndelivered(commandID: "unknown", at: 9))
            // Without an expiry given, none is stored.
            _ = try #require(s.insertCommand(command("x2", thing: "th.a")))
            #expect(s.command(id: "x2")?.expiresAt == nil)
        }
    }

    @Test("Batch portions: at most batchMax each, padded to 1, 16 or batchMax with the portion's last ID")
    func batchPortions() {
        #expect(StoreRules.batches([]).isEmpty)
        #expect(StoreRules.batches(["a"]) == [["a"]])
        let two = StoreRules.batches(["a", "b"])
        #expect(two.count == 1 && two[0].count == 16 && two[0].prefix(2) == ["a", "b"] && Set(two[0]) == ["a", "b"])
        let ids = (0..<(StoreRules.batchMax + 17)).map { "c\($0)" }
        let parts = StoreRules.batches(ids)
        #expect(parts.map(\.count) == [StoreRules.batchMax, StoreRules.batchMax])
        #expect(Array(parts[0]) == Array(ids.prefix(StoreRules.batchMax)))
        #expect(Set(parts[1]) == Set(ids.dropFirst(StoreRules.batchMax)))
        #expect(StoreRules.placeholders(3) == "(?, ?, ?)")
    }

    @Test(
        "Result notifications: due after the grace period unless marked sent; a claim holds them for its lease",
        arguments: StoreFactory.all)
    func notificationClaims(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            for id in ["n1", "n2", "n3", "n4", "n5"] {
                _ = try #require(s.insertCommand(command(id, thing: "th.a")))
            }
            let grace = StoreRules.notificationGraceMs
            // Nothing is due before results.
            #expect(s.claimUnnotified(now: 1_000_000, leaseMs: 10, limit: 10).isEmpty)
            #expect(!s.markNotified(commandID: "n1"))
            #expect(s.recordResults(commandID: "n1", results: "{}", state: .done, at: 100))
            #expect(s.recordResults(commandID: "n2", results: "{}", state: .incomplete, at: 200))
            #expect(s.recordResults(commandID: "n3", results: "{}", state: .done, at: 300))
            // Results with no target a sweep sends to: never due, nothing to mark.
            #expect(s.recordResults(commandID: "n5", results: "{}", state: .done, at: 300, swept: false))
            #expect(s.command(id: "n5")?.results == "{}")
            // The hub that recorded n2 sent its notification: never claimed.
            #expect(s.markNotified(commandID: "n2"))
            #expect(!s.markNotified(commandID: "n2"))
            // Within the grace period nothing is due; a repeat of results changes nothing.
            #expect(s.claimUnnotified(now: 100 + grace - 1, leaseMs: 1_000, limit: 10).isEmpty)
            #expect(!s.recordResults(commandID: "n1", results: "{}", state: .done, at: 5_000_000))
            let first = s.claimUnnotified(now: 100 + grace, leaseMs: 1_000, limit: 10)
            #expect(first.map(\.commandID) == ["n1"])
            #expect(first.first?.results == "{}" && first.first?.state == .done)
            // Claimed: not again until the lease ends; the limit holds.
            let t = 300 + grace
            #expect(s.claimUnnotified(now: t, leaseMs: 1_000, limit: 10).map(\.commandID) == ["n3"])
            #expect(s.claimUnnotified(now: t + 500, leaseMs: 1_000, limit: 10).isEmpty)
            // The claimer of n1 died (never marked it): the next sweep takes it.
            #expect(s.markNotified(commandID: "n3"))
            #expect(s.claimUnnotified(now: 100 + grace + 1_000, leaseMs: 1_000, limit: 1).map(\.commandID) == ["n1"])
            #expect(s.markNotified(commandID: "n1"))
            #expect(s.claimUnnotified(now: 10_000_000, leaseMs: 1_000, limit: 10).isEmpty)
            #expect(!s.markNotified(commandID: "n5"))
            #expect(s.command(id: "n4")?.results == nil)
        }
    }

    @Test(
        "Command lifecycle: expiry kept, due to end by expiry or bound, ended once, never delivered again, late results recorded",
        arguments: StoreFactory.all)
    func commandLifecycle(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            for (id, at) in [("e1", Int64(100)), ("e2", 200), ("e3", 300), ("e4", 400)] {
                _ = try #require(s.insertCommand(command(id, thing: "th.a", at: at)))
            }
            #expect(s.command(id: "e1")?.expiresAt == nil && s.command(id: "e1")?.endReason == nil)
            #expect(s.setCommandExpiry(commandID: "e1", expiresAt: 1_000))
            #expect(!s.setCommandExpiry(commandID: "nope", expiresAt: 1_000))
            #expect(s.command(id: "e1")?.expiresAt == 1_000)
            #expect(s.markDelivered(commandID: "e2", at: 250))
            #expect(s.recordResults(commandID: "e4", results: "{}", state: .done, at: 450))
            #expect(s.markNotified(commandID: "e4"))

            // No bounds: only a passed expiry is due; an answered command never.
            #expect(s.commandsDueToEnd(now: 999, sentBefore: nil, deliveredBefore: nil, limit: 10).isEmpty)
            #expect(
                s.commandsDueToEnd(now: 1_000, sentBefore: nil, deliveredBefore: nil, limit: 10).map(\.commandID) == [
                    "e1"
                ])
            // SENDING counts from creation, DELIVERED from its (last) delivery.
            #expect(
                s.commandsDueToEnd(now: 0, sentBefore: 300, deliveredBefore: nil, limit: 10).map(\.commandID) == [
                    "e1", "e3"
                ])
            #expect(
                s.commandsDueToEnd(now: 0, sentBefore: nil, deliveredBefore: 249, limit: 10).isEmpty)
            #expect(
                s.commandsDueToEnd(now: 2_000, sentBefore: 10_000, deliveredBefore: 250, limit: 10).map(\.commandID)
                    == ["e1", "e2", "e3"])
            #expect(
                s.commandsDueToEnd(now: 2_000, sentBefore: 10_000, deliveredBefore: 250, limit: 2).map(\.commandID)
                    == ["e1", "e2"])

            // Ended once; the end makes a notification due, like results.
            #expect(s.endCommand(commandID: "e1", state: .expired, reason: "expired", at: 1_001))
            #expect(!s.endCommand(commandID: "e1", state: .cancelled, reason: "cancelled", at: 1_002))
            #expect(!s.endCommand(commandID: "e4", state: .cancelled, reason: "cancelled", at: 1_002))
            #expect(!s.endCommand(commandID: "nope", state: .expired, reason: "expired", at: 1_002))
            #expect(s.endCommand(commandID: "e2", state: .cancelled, reason: "cancelled", at: 1_003))
            let e1 = try #require(s.command(id: "e1"))
            #expect(e1.state == .expired && e1.endReason == "expired" && e1.modifiedAt == 1_001)
            #expect(s.command(id: "e2")?.state == .cancelled && s.command(id: "e2")?.endReason == "cancelled")
            #expect(s.command(id: "e4")?.state == .done && s.command(id: "e4")?.endReason == nil)
            let grace = StoreRules.notificationGraceMs
            #expect(
                s.claimUnnotified(now: 1_003 + grace, leaseMs: 1_000, limit: 10).map(\.commandID) == ["e1", "e2"])
            #expect(s.markNotified(commandID: "e1") && s.markNotified(commandID: "e2"))

            // Ended commands are no longer due, never marked delivered again,
            // and still listed as unanswered (results may come).
            #expect(
                s.commandsDueToEnd(now: 9_999, sentBefore: 9_999, deliveredBefore: 9_999, limit: 10).map(\.commandID)
                    == ["e3"])
            #expect(!s.markDelivered(commandID: "e1", at: 1_100))
            #expect(s.command(id: "e1")?.state == .expired)
            #expect(s.unansweredCommands(thingID: "th.a").map(\.commandID) == ["e1", "e2", "e3"])
            // An end with no target a sweep sends to is never due (nor marked).
            #expect(s.endCommand(commandID: "e3", state: .cancelled, reason: "cancelled", at: 1_004, swept: false))
            #expect(s.claimUnnotified(now: 1_004 + grace, leaseMs: 1_000, limit: 10).isEmpty)
            #expect(!s.markNotified(commandID: "e3"))

            // Late results are recorded once, with the state the caller gives; the reason stays.
            #expect(s.recordResults(commandID: "e1", results: #"{"actionResults":[]}"#, state: .done, at: 1_200))
            #expect(!s.recordResults(commandID: "e1", results: "{}", state: .incomplete, at: 1_300))
            let late = try #require(s.command(id: "e1"))
            #expect(late.state == .done && late.results == #"{"actionResults":[]}"# && late.endReason == "expired")
            #expect(s.claimUnnotified(now: 1_200 + grace, leaseMs: 1_000, limit: 10).map(\.commandID) == ["e1"])
        }
    }

    @Test("Command listing: ascending seq after a cursor, at most limit", arguments: StoreFactory.all)
    func commandListing(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            var seqs: [Int64] = []
            for i in 0..<10 {
                let r = try #require(s.insertCommand(command("a\(i)", thing: "th.a")))
                seqs.append(r.seq)
                _ = s.insertCommand(command("b\(i)", thing: "th.b"))
            }
            #expect(seqs == seqs.sorted() && Set(seqs).count == 10)
            let all = s.commands(thingID: "th.a", afterSeq: 0, limit: 100)
            #expect(all.map(\.commandID) == (0..<10).map { "a\($0)" })
            #expect(all.map(\.seq) == seqs)
            let page1 = s.commands(thingID: "th.a", afterSeq: 0, limit: 4)
            #expect(page1.map(\.commandID) == ["a0", "a1", "a2", "a3"])
            let page2 = s.commands(thingID: "th.a", afterSeq: page1.last!.seq, limit: 4)
            #expect(page2.map(\.commandID) == ["a4", "a5", "a6", "a7"])
            let page3 = s.commands(thingID: "th.a", afterSeq: page2.last!.seq, limit: 4)
            #expect(page3.map(\.commandID) == ["a8", "a9"])
            #expect(s.commands(thingID: "th.a", afterSeq: page3.last!.seq, limit: 4).isEmpty)
            #expect(s.commands(thingID: "th.a", afterSeq: 0, limit: 0).isEmpty)
            #expect(s.commands(thingID: "th.a", afterSeq: 0, limit: -1).isEmpty)
            #expect(s.commands(thingID: "th.none", afterSeq: 0, limit: 10).isEmpty)
            #expect(s.unansweredCommands(thingID: "th.b").count == 10)
        }
    }

    @Test("Users: pseudo and named, a login name only once, lookups", arguments: StoreFactory.all)
    func users(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let pseudo = try #require(s.createUser(loginName: nil, passwordHash: nil))
            #expect(pseudo.pseudo)
            #expect(pseudo.userID.hasPrefix("u."))
            #expect(pseudo.accessToken.count == 40)
            let pseudo2 = try #require(s.createUser(loginName: nil, passwordHash: nil))
            #expect(pseudo2.userID != pseudo.userID)

            let alice = try #require(s.createUser(loginName: "alice", passwordHash: "hash-a"))
            #expect(!alice.pseudo)
            #expect(s.createUser(loginName: "alice", passwordHash: "hash-b") == nil)
            #expect(s.user(loginName: "alice")?.passwordHash == "hash-a")
            #expect(s.user(loginName: "alice")?.userID == alice.userID)
            #expect(s.user(id: alice.userID)?.loginName == "alice")
            #expect(s.user(accessToken: alice.accessToken)?.userID == alice.userID)
            #expect(s.user(id: pseudo.userID)?.loginName == nil)
            #expect(s.user(id: pseudo.userID)?.passwordHash == nil)
            #expect(s.user(accessToken: pseudo2.accessToken)?.userID == pseudo2.userID)
            #expect(s.user(id: alice.userID)?.createdAt == alice.createdAt)
            #expect(s.user(id: "u.nope") == nil)
            #expect(s.user(accessToken: "nope") == nil)
            #expect(s.user(loginName: "bob") == nil)
        }
    }

    @Test(
        "Tokens: kept only as SHA-256, new ones on issue, revocation, expiry, kinds kept apart",
        arguments: StoreFactory.all)
    func tokens(_ factory: StoreFactory) throws {
        let secrets = HubSecrets(passwordIterations: 1_000, userTokenLifetime: 1, thingTokenLifetime: 0)
        try withStore(factory, secrets: secrets) { s in
            let u = try #require(s.createUser(loginName: "alice", passwordHash: "h"))
            let t = try register(s, "AC-TOK")
            #expect(s.user(accessToken: u.accessToken)?.userID == u.userID)
            #expect(s.user(accessToken: u.accessToken)?.accessToken == "")
            // A user's token is no thing's and the other way round.
            #expect(s.thing(accessToken: u.accessToken) == nil)
            #expect(s.user(accessToken: t.accessToken) == nil)
            // The SHA-256 of a token is not itself a token.
            #expect(s.user(accessToken: LibCrypto.sha256Hex(u.accessToken)) == nil)

            let second = try #require(s.issueToken(kind: .user, subjectID: u.userID))
            #expect(second != u.accessToken && second.count == 40)
            #expect(s.issueToken(kind: .user, subjectID: "u.nope") == nil)
            #expect(s.issueToken(kind: .thing, subjectID: "th.nope") == nil)
            #expect(s.revokeToken(u.accessToken))
            #expect(!s.revokeToken(u.accessToken))
            #expect(!s.revokeToken("nope"))
            #expect(s.user(accessToken: u.accessToken) == nil)
            #expect(s.user(accessToken: second)?.userID == u.userID)
            let thingToken = try #require(s.issueToken(kind: .thing, subjectID: t.thingID))
            #expect(s.revokeToken(t.accessToken))
            #expect(s.thing(accessToken: t.accessToken) == nil)
            #expect(s.thing(accessToken: thingToken)?.thingID == t.thingID)

            // Users' tokens live 1 s here; things' do not expire.
            Thread.sleep(forTimeInterval: 1.2)
            #expect(s.user(accessToken: second) == nil)
            #expect(s.thing(accessToken: thingToken)?.thingID == t.thingID)
            // A new one (login) works again.
            let third = try #require(s.issueToken(kind: .user, subjectID: u.userID))
            #expect(s.user(accessToken: third)?.userID == u.userID)
        }
    }

    @Test(
        "Registration runs the KDF outside the store's lock: concurrent first registrations of one vendorThingID agree",
        arguments: StoreFactory.all)
    func registrationOutsideLock(_ factory: StoreFactory) throws {
        try withStore(factory, secrets: HubSecrets(passwordIterations: 200_000)) { s in
            // Eight threads register the same new vendorThingID at once.
            let results = Locked<[Result<ThingRecord, RegisterError>]>([])
            let group = DispatchGroup()
            for _ in 0..<8 {
                group.enter()
                Thread {
                    let r = s.registerThing(
                        vendorThingID: "AC-RACE", password: "pw", thingType: nil,
                        firmwareVersion: nil, dataGroupingInterval: nil, layoutPosition: nil)
                    results.withLock { $0.append(r) }
                    group.leave()
                }.start()
            }
            group.wait()
            let ids = Set(results.withLock { $0 }.compactMap { try? $0.get().thingID })
            #expect(ids.count == 1 && results.withLock { $0.count } == 8, "\(results.withLock { $0 })")
            let tokens = results.withLock { $0 }.compactMap { try? $0.get().accessToken }
            #expect(Set(tokens).count == 8)
            for t in tokens { #expect(s.thing(accessToken: t)?.thingID == ids.first) }
        }
    }

    /// One long KDF (1,000,000 rounds, about a third of a second here) in a
    /// registration, and lookups one after another until it is done: behind
    /// the store's lock one of them would wait out most of the KDF, every
    /// time; outside it, none waits. A loaded machine can stall one lookup
    /// past half a KDF, so the test takes the best of three registrations: a
    /// lock held over the KDF fails all three.
    @Test("A lookup does not wait for a registration's KDF", arguments: StoreFactory.all)
    func lookupDuringKDF(_ factory: StoreFactory) throws {
        try withStore(factory, secrets: HubSecrets(passwordIterations: 1_000_000)) { s in
            let other = try register(s, "AC-OTHER")
            var tries: [(waited: Int64, kdf: Int64)] = []
            for attempt in 0..<3 {
                let k0 = Platform.nowMs()
                _ = PasswordHash.make("pw", iterations: 1_000_000)
                let kdf = Platform.nowMs() - k0
                let done = DispatchSemaphore(value: 0)
                Thread {
                    _ = s.registerThing(
                        vendorThingID: "AC-SLOW-\(attempt)", password: "pw", thingType: nil, firmwareVersion: nil,
                        dataGroupingInterval: nil, layoutPosition: nil)
                    done.signal()
                }.start()
                // Until the registration is done (its own event), the longest lookup.
                var longest: Int64 = 0
                repeat {
                    let t0 = Platform.nowMs()
                    #expect(s.thing(id: other.thingID)?.vendorThingID == "AC-OTHER")
                    longest = max(longest, Platform.nowMs() - t0)
                } while done.wait(timeout: .now() + .milliseconds(5)) == .timedOut
                tries.append((longest, kdf))
                if longest < kdf / 2 { break }
            }
            #expect(
                tries.contains { $0.waited < $0.kdf / 2 },
                "the longest lookup waited (ms, against one KDF's ms): \(tries)")
        }
    }

    @Test(
        "State with the old state the caller read: the same result, and a stale one merges onto the stored state",
        arguments: StoreFactory.all)
    func stateAfterKnownOld(_ factory: StoreFactory) throws {
        try withStore(factory, retention: StateRetention(maxSamples: 3, maxAgeDays: 0)) { s in
            let fast = FastPaths(s)  // as the hub calls them
            let t = try register(s, "AC-AFTER")
            #expect(fast.applyState(thingID: "th.nope", method: "PUT", upload: "{}", at: 1, after: nil) == nil)
            let first = try #require(
                fast.applyState(thingID: t.thingID, method: "PATCH", upload: #"{"a":1}"#, at: 10, after: nil)?.state)
            #expect(parseObject(first)?["a"] as? Int == 1)
            // The right old state.
            let second = try #require(
                fast.applyState(thingID: t.thingID, method: "PATCH", upload: #"{"b":2}"#, at: 20, after: first)?.state)
            #expect(parseObject(second)?.count == 2)
            // A stale one (another upload came between): merged onto what is stored, not onto it.
            let third = try #require(
                fast.applyState(thingID: t.thingID, method: "PATCH", upload: #"{"c":3}"#, at: 30, after: first)?.state)
            let o = try #require(parseObject(third))
            #expect(o["a"] as? Int == 1 && o["b"] as? Int == 2 && o["c"] as? Int == 3)
            #expect(s.thing(id: t.thingID)?.state == third)
            // Each upload is one sample, and the retention holds.
            _ = try #require(
                fast.applyState(thingID: t.thingID, method: "PUT", upload: #"{"d":4}"#, at: 40, after: third))
            let all = s.stateHistory(thingID: t.thingID, from: 0, to: .max)
            #expect(all.map(\.at) == [20, 30, 40])
            #expect(all.last?.state == #"{"d":4}"#)
        }
    }

    @Test(
        "A state write says whether the thing has an enabled trigger when the store read it (PostgreSQL always does)",
        arguments: StoreFactory.all)
    func stateWriteTriggerFlag(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let fast = FastPaths(s)  // as the hub calls them
            let t = try register(s, "AC-TRIG-FLAG")
            let other = try register(s, "AC-TRIG-OTHER")
            func flag(_ old: String?) throws -> (state: String, flag: Bool?) {
                let w = try #require(
                    fast.applyState(thingID: t.thingID, method: "PUT", upload: #"{"p":1}"#, at: 1, after: old))
                return (w.state, w.hasEnabledTrigger)
            }
            let isPostgres = factory.description == StoreFactory.postgres.description
            // No trigger: none (or not read).
            var (state, f) = try flag(nil)
            #expect(f != true && (!isPostgres || f == false), "\(String(describing: f))")
            // Another thing's enabled trigger is not this one's.
            #expect(
                s.insertTrigger(
                    ServerTriggerRecord(triggerID: "trg-other", thingID: other.thingID, definition: "{}", createdAt: 1))
            )
            (state, f) = try flag(state)
            #expect(f != true && (!isPostgres || f == false), "\(String(describing: f))")
            // Its own, enabled: read it.
            #expect(
                s.insertTrigger(
                    ServerTriggerRecord(triggerID: "trg-own", thingID: t.thingID, definition: "{}", createdAt: 2)))
            (state, f) = try flag(state)
            #expect(f != false && (!isPostgres || f == true), "\(String(describing: f))")
            // Disabled: none again.
            #expect(s.setTriggerEnabled(id: "trg-own", enabled: false))
            (state, f) = try flag(state)
            #expect(f != true && (!isPostgres || f == false), "\(String(describing: f))")
            // A stale old state takes the locked path, which does not read them: never a wrong "none".
            #expect(s.setTriggerEnabled(id: "trg-own", enabled: true))
            (_, f) = try flag("{\"stale\":true}")
            #expect(f != false, "\(String(describing: f))")
        }
    }

    @Test(
        "Retention by count above 127 samples: the cut runs every maxSamples/64 uploads, so at most that many minus one extra are kept",
        arguments: StoreFactory.all)
    func retentionAmortized(_ factory: StoreFactory) throws {
        let retention = StateRetention(maxSamples: 256, maxAgeDays: 0)
        #expect(retention.pruneEvery == 4 && StateRetention(maxSamples: 127).pruneEvery == 1)
        try withStore(factory, retention: retention) { s in
            let fast = FastPaths(s)  // as the hub calls them
            let t = try register(s, "AC-PRUNE")
            var old: String? = nil
            var counts: [Int] = []
            for i in 1...300 {
                // Both paths: the one-statement write (after:) and the locked one.
                old =
                    i % 2 == 0
                    ? fast.applyState(
                        thingID: t.thingID, method: "PUT", upload: #"{"i":\#(i)}"#, at: Int64(i), after: old)?.state
                    : s.applyState(thingID: t.thingID, method: "PUT", upload: #"{"i":\#(i)}"#, at: Int64(i))
                if i >= 256 { counts.append(s.stateHistory(thingID: t.thingID, from: 0, to: .max).count) }
            }
            #expect(counts.allSatisfy { (256...259).contains($0) }, "\(counts)")
            #expect(counts.contains(256), "the cut ran: \(counts)")
            let all = s.stateHistory(thingID: t.thingID, from: 0, to: .max)
            // The newest are kept, in order, without a gap.
            #expect(all.last?.at == 300 && all.map(\.at) == Array(Int64(301 - all.count)...300))
        }
    }

    @Test("State history: pages by cursor, retention by count and by age", arguments: StoreFactory.all)
    func historyPagesAndRetention(_ factory: StoreFactory) throws {
        try withStore(factory, retention: StateRetention(maxSamples: 5, maxAgeDays: 1)) { s in
            let t = try register(s, "AC-HIST")
            let other = try register(s, "AC-HIST-2")
            for i in 0..<8 {
                _ = try #require(
                    s.applyState(thingID: t.thingID, method: "PUT", upload: #"{"i":\#(i)}"#, at: 1000 + Int64(i)))
                _ = try #require(s.applyState(thingID: other.thingID, method: "PUT", upload: "{}", at: 1000 + Int64(i)))
            }
            // The newest five are kept.
            let all = s.stateHistory(thingID: t.thingID, from: 0, to: .max)
            #expect(all.map(\.upload) == (3..<8).map { #"{"i":\#($0)}"# })
            var pages: [[String]] = []
            var after: Int64 = 0
            while pages.count < 10 {
                let page = s.stateHistoryPage(thingID: t.thingID, from: 0, to: .max, after: after, limit: 2)
                pages.append(page.samples.map(\.upload))
                guard let next = page.next else { break }
                after = next
            }
            #expect(pages.map(\.count) == [2, 2, 1])
            #expect(pages.flatMap { $0 } == all.map(\.upload))
            #expect(
                s.stateHistoryPage(thingID: t.thingID, from: 1005, to: 1007, after: 0, limit: 10).samples.count == 2)
            // A sample two days newer drops those older than a day.
            _ = try #require(s.applyState(thingID: t.thingID, method: "PUT", upload: "{}", at: 1000 + 2 * 86_400_000))
            #expect(s.stateHistory(thingID: t.thingID, from: 0, to: .max).count == 1)
            // Another thing's history is its own.
            #expect(s.stateHistory(thingID: other.thingID, from: 0, to: .max).count == 5)
        }
    }

    @Test("Groups: found by owner or member, members in order", arguments: StoreFactory.all)
    func groups(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let g1 = try #require(s.createGroup(name: "home", ownerUserID: "u.a", members: ["u.b", "u.c"]))
            let g2 = try #require(s.createGroup(name: "work", ownerUserID: "u.b", members: []))
            let g3 = try #require(s.createGroup(name: "other", ownerUserID: "u.c", members: ["u.d"]))
            #expect(g1.groupID.hasPrefix("g."))
            #expect(Set([g1.groupID, g2.groupID, g3.groupID]).count == 3)
            let read = try #require(s.group(id: g1.groupID))
            #expect(read.name == "home" && read.ownerUserID == "u.a" && read.members == ["u.b", "u.c"])
            #expect(s.group(id: g2.groupID)?.members == [])
            #expect(s.group(id: "g.nope") == nil)

            #expect(s.groups(ofUser: "u.a").map(\.groupID) == [g1.groupID])
            #expect(s.groups(ofUser: "u.b").map(\.groupID) == [g1.groupID, g2.groupID].sorted())
            #expect(s.groups(ofUser: "u.c").map(\.groupID) == [g1.groupID, g3.groupID].sorted())
            #expect(s.groups(ofUser: "u.d").map(\.groupID) == [g3.groupID])
            #expect(s.groups(ofUser: "u.z").isEmpty)
            #expect(s.groups(ofUser: "u.b").first { $0.groupID == g1.groupID }?.members == ["u.b", "u.c"])
        }
    }

    @Test("App installations: kinds, the MQTT topic, removal by their user only", arguments: StoreFactory.all)
    func appInstallations(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let m = try #require(s.addAppInstallation(userID: "u.a", kind: .mqtt, target: "ignored"))
            #expect(m.target == HubIDs.notificationTopic(m.installationID))
            #expect(m.installationID.count == 20)
            let e = try #require(s.addAppInstallation(userID: "u.a", kind: .sse, target: nil))
            #expect(e.target == nil)
            let w = try #require(s.addAppInstallation(userID: "u.a", kind: .webhook, target: "http://h/hook"))
            #expect(w.target == "http://h/hook")
            let other = try #require(s.addAppInstallation(userID: "u.b", kind: .sse, target: nil))

            let read = try #require(s.appInstallation(id: m.installationID))
            #expect(read.kind == .mqtt && read.userID == "u.a" && read.target == m.target)
            #expect(read.createdAt == m.createdAt)
            #expect(s.appInstallation(id: w.installationID)?.kind == .webhook)
            #expect(s.appInstallation(id: "nope") == nil)
            #expect(
                Set(s.appInstallations(userID: "u.a").map(\.installationID))
                    == [m.installationID, e.installationID, w.installationID])
            #expect(s.appInstallations(userID: "u.b").map(\.installationID) == [other.installationID])
            #expect(s.appInstallations(userID: "u.z").isEmpty)

            #expect(!s.removeAppInstallation(id: other.installationID, userID: "u.a"))
            #expect(s.appInstallation(id: other.installationID) != nil)
            #expect(s.removeAppInstallation(id: e.installationID, userID: "u.a"))
            #expect(!s.removeAppInstallation(id: e.installationID, userID: "u.a"))
            #expect(!s.removeAppInstallation(id: "nope", userID: "u.a"))
            #expect(s.appInstallation(id: e.installationID) == nil)
            #expect(
                Set(s.appInstallations(userID: "u.a").map(\.installationID))
                    == [m.installationID, w.installationID])
        }
    }

    @Test(
        "claimTrigger disables an enabled trigger once; a store one hub uses always holds the schedule lease",
        arguments: StoreFactory.all)
    func claimTrigger(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let t = try register(s, "AC-CLAIM")
            #expect(
                s.insertTrigger(
                    ServerTriggerRecord(triggerID: "trg-once", thingID: t.thingID, definition: "{}", createdAt: 1)))
            #expect(s.claimTrigger(id: "trg-once"))
            #expect(s.trigger(id: "trg-once")?.enabled == false)
            #expect(!s.claimTrigger(id: "trg-once"), "a disabled trigger is claimed by nobody")
            #expect(s.setTriggerEnabled(id: "trg-once", enabled: true) && s.claimTrigger(id: "trg-once"))
            #expect(!s.claimTrigger(id: "nope"))
            #expect(s.holdsScheduleLease() && s.holdsScheduleLease())
        }
    }

    @Test(
        "Server triggers: insert once, listed in order, enabled and last match kept, deleted",
        arguments: StoreFactory.all)
    func serverTriggers(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let t = try register(s, "AC-TRG")
            let a = ServerTriggerRecord(
                triggerID: "trg-a", thingID: t.thingID, definition: #"{"predicate":{}}"#, createdAt: 5)
            #expect(s.insertTrigger(a))
            #expect(!s.insertTrigger(a))
            #expect(
                s.insertTrigger(
                    ServerTriggerRecord(
                        triggerID: "trg-b", thingID: t.thingID, definition: "{}",
                        enabled: false, lastMatch: true, createdAt: 6)))
            #expect(
                s.insertTrigger(
                    ServerTriggerRecord(triggerID: "trg-c", thingID: "th.other", definition: "{}", createdAt: 7)))
            let back = try #require(s.trigger(id: "trg-a"))
            #expect(
                back.thingID == t.thingID && back.definition == #"{"predicate":{}}"# && back.enabled
                    && back.lastMatch == nil && back.createdAt == 5)
            #expect(s.trigger(id: "trg-b")?.enabled == false && s.trigger(id: "trg-b")?.lastMatch == true)
            #expect(s.triggers(thingID: t.thingID).map(\.triggerID) == ["trg-a", "trg-b"])
            #expect(s.allTriggers().map(\.triggerID) == ["trg-a", "trg-b", "trg-c"])
            #expect(s.setTriggerEnabled(id: "trg-a", enabled: false))
            #expect(s.setTriggerLastMatch(id: "trg-a", lastMatch: false))
            #expect(s.trigger(id: "trg-a")?.enabled == false && s.trigger(id: "trg-a")?.lastMatch == false)
            #expect(s.setTriggerLastMatch(id: "trg-a", lastMatch: nil) && s.trigger(id: "trg-a")?.lastMatch == nil)
            #expect(!s.setTriggerEnabled(id: "nope", enabled: true))
            #expect(!s.setTriggerLastMatch(id: "nope", lastMatch: true))
            #expect(s.deleteTrigger(id: "trg-a"))
            #expect(!s.deleteTrigger(id: "trg-a"))
            #expect(s.trigger(id: "trg-a") == nil)
            #expect(s.triggers(thingID: t.thingID).map(\.triggerID) == ["trg-b"])
            // PATCH: a new definition, the last match forgotten.
            #expect(s.updateTrigger(id: "trg-b", definition: #"{"title":"x"}"#))
            #expect(s.trigger(id: "trg-b")?.definition == #"{"title":"x"}"# && s.trigger(id: "trg-b")?.lastMatch == nil)
            #expect(!s.updateTrigger(id: "nope", definition: "{}"))
        }
    }

    @Test(
        "Thing automation: saved per thing, the version increases, unknown things refused", arguments: StoreFactory.all)
    func thingAutomation(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let t = try register(s, "AC-AUTO")
            let u = try register(s, "AC-AUTO-2")
            #expect(s.automation(thingID: t.thingID) == nil)
            #expect(s.saveAutomation(thingID: t.thingID, config: #"{"actionSets":[]}"#)?.version == 1)
            #expect(s.saveAutomation(thingID: t.thingID, config: #"{"actionSets":[1]}"#)?.version == 2)
            #expect(s.saveAutomation(thingID: u.thingID, config: "{}")?.version == 1)
            let a = try #require(s.automation(thingID: t.thingID))
            #expect(a.config == #"{"actionSets":[1]}"# && a.version == 2 && a.thingID == t.thingID)
            #expect(s.saveAutomation(thingID: "th.nope", config: "{}") == nil)
            #expect(s.automation(thingID: "th.nope") == nil)
            // The thing's report: kept until the next change.
            #expect(a.report == nil)
            #expect(s.saveAutomationReport(thingID: t.thingID, report: #"{"applied":false}"#))
            #expect(s.automation(thingID: t.thingID)?.report == #"{"applied":false}"#)
            #expect(s.automation(thingID: u.thingID)?.report == nil)
            #expect(s.saveAutomation(thingID: t.thingID, config: "{}")?.version == 3)
            #expect(s.automation(thingID: t.thingID)?.report == nil)
            #expect(!s.saveAutomationReport(thingID: "th.nope", report: "{}"))
            let w = try register(s, "AC-AUTO-3")
            #expect(!s.saveAutomationReport(thingID: w.thingID, report: "{}"), "no configuration, no report")
        }
    }

    @Test(
        "Deleting a thing removes it and what belongs to it (installations, owners, state, commands, triggers, automation, tokens); other things keep theirs",
        arguments: StoreFactory.all)
    func deleteThing(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            // Two things with one of everything each.
            var things: [ThingRecord] = []
            for (n, vendor) in ["AC-DEL", "AC-KEEP"].enumerated() {
                let t = try register(s, vendor)
                things.append(t)
                #expect(s.addInstallation(thingID: t.thingID, installationID: "i\(n)", mqttTopic: "topic-\(n)"))
                #expect(s.addOwner(thingID: t.thingID, owner: "user:u1"))
                #expect(s.applyState(thingID: t.thingID, method: "PUT", upload: #"{"n":\#(n)}"#, at: 1000) != nil)
                #expect(s.insertCommand(command("cmd-\(n)", thing: t.thingID)) != nil)
                #expect(s.insertCommand(command("cmd-\(n)-answered", thing: t.thingID)) != nil)
                #expect(s.recordResults(commandID: "cmd-\(n)-answered", results: "{}", state: .done, at: 1001))
                #expect(
                    s.insertTrigger(
                        ServerTriggerRecord(triggerID: "trg-\(n)", thingID: t.thingID, definition: "{}", createdAt: 5)))
                #expect(s.saveAutomation(thingID: t.thingID, config: "{}") != nil)
            }
            let (gone, kept) = (things[0], things[1])
            let secondToken = try #require(s.issueToken(kind: .thing, subjectID: gone.thingID))
            let user = try #require(s.createUser(loginName: nil, passwordHash: nil))

            #expect(s.deleteThing(id: gone.thingID))
            // Nothing of it is found any more, by any key.
            #expect(s.thing(id: gone.thingID) == nil)
            #expect(s.thing(vendorThingID: "AC-DEL") == nil)
            #expect(s.thing(accessToken: gone.accessToken) == nil && s.thing(accessToken: secondToken) == nil)
            #expect(s.thing(mqttTopic: "topic-0") == nil)
            #expect(s.things(ownedBy: ["user:u1"]).map(\.thingID) == [kept.thingID])
            #expect(s.stateHistory(thingID: gone.thingID, from: 0, to: .max).isEmpty)
            #expect(s.stateHistoryPage(thingID: gone.thingID, from: 0, to: .max, after: 0, limit: 10).samples.isEmpty)
            #expect(s.command(id: "cmd-0") == nil && s.command(id: "cmd-0-answered") == nil)
            #expect(s.commands(thingID: gone.thingID, afterSeq: 0, limit: 10).isEmpty)
            #expect(s.unansweredCommands(thingID: gone.thingID).isEmpty)
            #expect(s.trigger(id: "trg-0") == nil && s.triggers(thingID: gone.thingID).isEmpty)
            #expect(s.allTriggers().map(\.triggerID) == ["trg-1"])
            #expect(s.automation(thingID: gone.thingID) == nil)
            // No new token, state or automation for it; a second delete finds nothing.
            #expect(s.issueToken(kind: .thing, subjectID: gone.thingID) == nil)
            #expect(s.applyState(thingID: gone.thingID, method: "PATCH", upload: "{}", at: 2000) == nil)
            #expect(s.saveAutomation(thingID: gone.thingID, config: "{}") == nil)
            #expect(!s.deleteThing(id: gone.thingID))
            #expect(!s.deleteThing(id: "th.nope"))
            #expect(!s.deleteThing(id: "' OR 1=1 --"))

            // The other thing, and the users, are untouched.
            let k = try #require(s.thing(id: kept.thingID))
            #expect(k.installations == ["i1": "topic-1"] && k.owners == ["user:u1"] && k.state == #"{"n":1}"#)
            #expect(s.thing(accessToken: kept.accessToken)?.thingID == kept.thingID)
            #expect(s.thing(mqttTopic: "topic-1")?.thingID == kept.thingID)
            #expect(s.stateHistory(thingID: kept.thingID, from: 0, to: .max).count == 1)
            #expect(
                s.commands(thingID: kept.thingID, afterSeq: 0, limit: 10).map(\.commandID) == [
                    "cmd-1", "cmd-1-answered"
                ])
            #expect(s.unansweredCommands(thingID: kept.thingID).map(\.commandID) == ["cmd-1"])
            #expect(s.triggers(thingID: kept.thingID).map(\.triggerID) == ["trg-1"])
            #expect(s.automation(thingID: kept.thingID)?.version == 1)
            #expect(s.user(accessToken: user.accessToken)?.userID == user.userID)

            // The vendorThingID is free: registering it again makes a new thing
            // with nothing of the old one; the old command IDs can be used again.
            let again = try register(s, "AC-DEL")
            #expect(again.thingID != gone.thingID)
            #expect(again.installations.isEmpty && again.owners.isEmpty && again.state == nil)
            #expect(s.automation(thingID: again.thingID) == nil)
            #expect(s.insertCommand(command("cmd-0", thing: again.thingID)) != nil)
        }
    }

    @Test("Every method is safe from many threads at once", arguments: StoreFactory.all)
    func concurrent(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let t = try register(s, "AC-1")
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for i in 0..<50 {
                    let id = "w\(worker)-\(i)"
                    _ = s.insertCommand(command(id, thing: t.thingID))
                    _ = s.markDelivered(commandID: id, at: 1)
                    _ = s.recordResults(commandID: id, results: "{}", state: .done, at: 2)
                    _ = s.applyState(thingID: t.thingID, method: "PATCH", upload: #"{"w\#(worker)":\#(i)}"#, at: 3)
                    _ = s.thing(id: t.thingID)
                }
            }
            let all = s.commands(thingID: t.thingID, afterSeq: 0, limit: 1000)
            #expect(all.count == 400)
            #expect(Set(all.map(\.seq)).count == 400)
            #expect(all.map(\.seq) == all.map(\.seq).sorted())
            #expect(all.allSatisfy { $0.state == .done })
            #expect(s.unansweredCommands(thingID: t.thingID).isEmpty)
            #expect(s.stateHistory(thingID: t.thingID, from: 0, to: .max).count == 400)
            #expect(parseObject(s.thing(id: t.thingID)?.state)?.count == 8)
        }
    }

    @Test(
        "deleteUser: the user, its tokens, installations, ownerships and memberships go; its things and groups stay",
        arguments: StoreFactory.all)
    func deleteUser(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let gone = try #require(s.createUser(loginName: "gone", passwordHash: "h"))
            let other = try #require(s.createUser(loginName: "other", passwordHash: "h"))
            let t = try register(s, "AC-DEL-USER")
            #expect(s.addOwner(thingID: t.thingID, owner: "user:" + gone.userID))
            #expect(s.addOwner(thingID: t.thingID, owner: "user:" + other.userID))
            let sse = try #require(s.addAppInstallation(userID: gone.userID, kind: .sse, target: nil))
            let mqtt = try #require(s.addAppInstallation(userID: gone.userID, kind: .mqtt, target: nil))
            let kept = try #require(s.addAppInstallation(userID: other.userID, kind: .sse, target: nil))
            let second = try #require(s.issueToken(kind: .user, subjectID: gone.userID))
            let owned = try #require(s.createGroup(name: "g", ownerUserID: gone.userID, members: [other.userID]))
            let joined = try #require(
                s.createGroup(name: "h", ownerUserID: other.userID, members: [gone.userID, other.userID]))
            _ = try #require(s.insertCommand(command("c-del-user", thing: t.thingID, issuer: "user:" + gone.userID)))

            let removed = try #require(s.deleteUser(id: gone.userID))
            #expect(Set(removed.map(\.installationID)) == [sse.installationID, mqtt.installationID])
            #expect(s.user(id: gone.userID) == nil && s.user(loginName: "gone") == nil)
            #expect(s.user(accessToken: gone.accessToken) == nil && s.user(accessToken: second) == nil)
            #expect(s.appInstallation(id: sse.installationID) == nil && s.appInstallations(userID: gone.userID).isEmpty)
            #expect(s.appInstallation(id: kept.installationID) != nil)
            #expect(s.thing(id: t.thingID)?.owners == ["user:" + other.userID])
            #expect(s.command(id: "c-del-user") != nil, "the thing's history stays")
            #expect(s.group(id: owned.groupID)?.ownerUserID == gone.userID, "a group it created stays, as Kii keeps it")
            #expect(s.group(id: joined.groupID)?.members == [other.userID])
            #expect(s.user(id: other.userID) != nil && s.user(accessToken: other.accessToken) != nil)
            #expect(s.deleteUser(id: gone.userID) == nil, "no such user any more")
            // The login name is free again.
            #expect(s.createUser(loginName: "gone", passwordHash: "h") != nil)
        }
    }

    @Test(
        "setVendorThingID: both replaced in one write; a vendorThingID of another thing is taken; an unknown thing",
        arguments: StoreFactory.all)
    func setVendorThingID(_ factory: StoreFactory) throws {
        try withStore(factory) { s in
            let a = try register(s, "AC-VTID-A")
            let b = try register(s, "AC-VTID-B")
            #expect(s.setVendorThingID(thingID: a.thingID, vendorThingID: "AC-VTID-B", passwordHash: "h2") == .taken)
            #expect(s.thing(id: a.thingID)?.vendorThingID == "AC-VTID-A")
            #expect(s.setVendorThingID(thingID: a.thingID, vendorThingID: "AC-VTID-C", passwordHash: "h2") == .changed)
            let moved = try #require(s.thing(id: a.thingID))
            #expect(moved.vendorThingID == "AC-VTID-C" && moved.passwordHash == "h2")
            #expect(s.thing(vendorThingID: "AC-VTID-C")?.thingID == a.thingID)
            #expect(s.thing(vendorThingID: "AC-VTID-A") == nil)
            #expect(s.setVendorThingID(thingID: a.thingID, vendorThingID: "AC-VTID-C", passwordHash: "h3") == .changed)
            #expect(s.setVendorThingID(thingID: "th.nope", vendorThingID: "AC-VTID-D", passwordHash: "h") == .noThing)
            #expect(s.thing(id: b.thingID)?.vendorThingID == "AC-VTID-B")
        }
    }
}
