// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
@testable import ThingIF
@testable import ThingIFHub

/// A request lane's results and state uploads in one store transaction
/// (ThingRequests+Lanes.swift): they are stored together, nothing is
/// answered or told before the commit, and a failed commit answers and
/// keeps nothing (the things send again). On an SQLite file and on a
/// PostgreSQL database, each watched from a connection of the test's own,
/// which sees only what is committed.
@Suite("Request lanes: a thing's results and states share one commit", .serialized, .offPool)
struct OneCommitTests {
    /// The commandID of the hub's event "results of {commandID} from …",
    /// told after the commit with the command's notifications.
    static func resultsEvent(_ e: String) -> String? {
        guard e.hasPrefix("results of ") else { return nil }
        return e.split(separator: " ").dropFirst(2).first.map(String.init)
    }

    enum Backend: String, CustomStringConvertible, CaseIterable {
        case sqlite, postgres
        var description: String { rawValue }
        /// PostgreSQL where it is installed (CI requires it).
        static var available: [Backend] { PostgresServer.enabled ? allCases : [.sqlite] }
    }

    /// A hub on a fresh store and the real broker, a thing with an MQTT
    /// client ID, `n` commands for it, and a probe on the thing's reply topic.
    final class Rig: @unchecked Sendable {
        let broker: Broker
        let dir: String
        let hub: FrameworkSide
        let thing: ThingRecord
        let topic: String
        let commands: [String]
        let probe: MqttProbe
        /// The first column of a statement's first row, read on a
        /// connection of the test's own (committed data only).
        let watch: (String, [SQLValue]) -> String?
        /// Runs SQL on that connection.
        let watchExec: (String) throws -> Void
        /// PostgreSQL's database (a second hub's), nil on SQLite.
        let postgres: (server: PostgresServer, name: String, url: String)?
        private let closeWatcher: () -> Void

        init(commands n: Int, on backend: Backend) throws {
            broker = try Broker.start()
            dir = try makeTempDirectory(prefix: "thingif-one-commit")
            let store: HubStore
            switch backend {
            case .sqlite:
                let path = dir + "/hub.sqlite"
                store = try makeHubStore(path)
                let c = try SQLiteConnection(path: path)
                watch = { sql, values in (try? c.first(sql, values) { $0.text(0) }) ?? nil }
                watchExec = { try c.exec($0) }
                closeWatcher = { c.close() }
                postgres = nil
            case .postgres:
                let server = try PostgresServer.get()
                let (name, url) = try server.createDatabase()
                postgres = (server, name, url)
                store = try PostgresStore(url: url, secrets: .fastForTests)
                let c = try PostgresConnection(url: url)
                watch = { sql, values in (try? c.first(sql, values) { $0.text(0) }) ?? nil }
                watchExec = { try c.exec($0) }
                closeWatcher = { c.close() }
            }
            let options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: broker)
            let hub = try #require(FrameworkSide(options, store: store))
            self.hub = hub
            try #require(hub.start(timeoutMs: 30_000), "\(hub.startProblem ?? "")")
            let (thing, topic) = try Self.thing("AC-ONE-COMMIT", in: hub.store)
            (self.thing, self.topic) = (thing, topic)
            commands = try (0..<n).map { i in
                try #require(
                    hub.store.insertCommand(
                        CommandRecord(
                            commandID: "cmd-one-commit-\(i)", thingID: thing.thingID, issuer: nil,
                            issuingInstallationID: nil,
                            payload: #"{"schema":"AC","schemaVersion":1,"actions":[{"turnPower":{"power":true}}]}"#,
                            // Now: the hub's lifecycle sweep ends a command created long ago.
                            createdAt: Platform.epochMs(), modifiedAt: Platform.epochMs()))
                ).commandID
            }
            probe = try MqttProbe(
                port: broker.port, clientID: "probe-" + randomHexString(6), username: broker.adminUsername,
                password: broker.adminPassword)
            #expect(probe.subscribe(Topics.response(clientID: topic)) == 1)
        }

        /// A registered thing with an installation (its MQTT client ID).
        static func thing(_ vendorThingID: String, in store: HubStore) throws -> (ThingRecord, String) {
            let t = try OneCommitTests.registered(vendorThingID, in: store)
            let topic = "tonecommit" + randomHexString(4)
            #expect(store.addInstallation(thingID: t.thingID, installationID: "i-" + topic, mqttTopic: topic))
            return (t, topic)
        }

        func stop() {
            closeWatcher()
            probe.stop()
            hub.stop()
            // The hub leaves its store open; its connections end before the database goes.
            (hub.store as? PostgresStore)?.close()
            broker.stop()
            broker.removeFiles()
            if let postgres { postgres.server.dropDatabase(postgres.name) }
            try? FileManager.default.removeItem(atPath: dir)
        }

        /// A thing's request as the broker hands it to the hub.
        func message(_ method: String, _ path: String, _ body: String, id: String, from: (ThingRecord, String)? = nil)
            -> MqttClient.Message
        {
            let (thing, topic) = from ?? (thing, topic)
            return MqttClient.Message(
                topic: Topics.request(clientID: topic, appID: Env.appID, path: path),
                payload: kiiRequest(method, token: thing.accessToken, requestID: id, body: body), qos: 1,
                retain: false)
        }

        func results(_ i: Int) -> MqttClient.Message {
            message(
                "PUT", "targets/thing:\(thing.thingID)/commands/\(commands[i])/action-results",
                #"{"actionResults":[{"turnPower":{"succeeded":true}}]}"#, id: "r\(i)")
        }

        func state(_ power: Bool, of other: (ThingRecord, String)? = nil, id: String? = nil) -> MqttClient.Message {
            let t = other?.0 ?? thing
            return message(
                "PUT", "targets/thing:\(t.thingID)/states", #"{"power":\#(power)}"#, id: id ?? "s\(power)",
                from: other)
        }

        /// The commands whose results a committed read sees.
        func committedResults() -> [String] {
            commands.filter { watch("SELECT results FROM commands WHERE command_id = ?", [.text($0)]) != nil }
        }

        func committedState(of thingID: String? = nil) -> String? {
            watch("SELECT state FROM things WHERE thing_id = ?", [.text(thingID ?? thing.thingID)])
        }

        /// The replies on the thing's topic (or `topic`'s): request ID and status.
        func replies(on other: String? = nil) -> [String: Int] {
            var out: [String: Int] = [:]
            for m in probe.messages(on: Topics.response(clientID: other ?? topic)) {
                guard let r = KiiResponse.decode(m.payload),
                    let id = r.headers.first(where: { $0.0 == KiiFraming.requestIDHeader })?.1
                else { continue }
                out[id] = r.status
            }
            return out
        }
    }

    @Test(
        "Results and a state upload waiting in a lane are stored in one commit, and told only after it",
        arguments: Backend.available)
    func sharedCommit(backend: Backend) throws {
        let rig = try Rig(commands: 4, on: backend)
        defer { rig.stop() }
        // What each notification and event could read then, from outside the transaction.
        let seen = Locked<[(what: String, results: [String], state: String?)]>([])
        // Results are told (notifications, metrics, this event) in one step after the commit.
        rig.hub.onEvent = { e in
            if let cid = OneCommitTests.resultsEvent(e) {
                let now = (cid, rig.committedResults(), rig.committedState())
                seen.withLock { $0.append(now) }
            }
            guard e.hasPrefix("state of") else { return }
            let now = ("state", rig.committedResults(), rig.committedState())
            seen.withLock { $0.append(now) }
        }
        rig.hub.thingRequests.handleLane(((0..<4).map(rig.results) + [rig.state(true)]).map(Inbound.init))

        let told = seen.withLock { $0 }
        #expect(told.map(\.what) == rig.commands + ["state"])
        for t in told {
            // Every write of the run was committed before the first of them was told.
            #expect(Set(t.results) == Set(rig.commands), "\(t.what) was told when \(t.results) were stored")
            let state = t.state ?? "none"
            #expect(state.contains("\"power\":true"), "\(t.what) was told when the state was \(state)")
        }
        #expect(poll(timeoutMs: 30_000) { rig.replies().count == 5 })
        // The state is the thing's first upload: Kii's 201.
        #expect(rig.replies() == ["r0": 204, "r1": 204, "r2": 204, "r3": 204, "strue": 201])
    }

    @Test(
        "A failed commit answers, tells and keeps nothing; sent again, the requests are stored and answered",
        arguments: Backend.available)
    func failedCommit(backend: Backend) throws {
        let rig = try Rig(commands: 2, on: backend)
        defer { rig.stop() }
        let told = Locked<[String]>([])
        rig.hub.onEvent = { e in OneCommitTests.resultsEvent(e).map { cid in told.withLock { $0.append(cid) } } }
        // A deferred check that every results write breaks: each statement
        // succeeds, the COMMIT fails.
        switch backend {
        case .sqlite:
            try rig.watchExec(
                """
                CREATE TABLE doom (thing_id TEXT REFERENCES things (thing_id) DEFERRABLE INITIALLY DEFERRED);
                CREATE TRIGGER doom_on_results AFTER UPDATE OF results ON commands
                BEGIN INSERT INTO doom VALUES ('no such thing'); END;
                """)
        case .postgres:
            try rig.watchExec(
                """
                CREATE FUNCTION doom() RETURNS trigger LANGUAGE plpgsql AS
                $$ BEGIN RAISE EXCEPTION 'refused at the commit by the test'; END $$;
                CREATE CONSTRAINT TRIGGER doom_on_results AFTER UPDATE OF results ON commands
                DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION doom();
                """)
        }
        rig.hub.thingRequests.handleLane([rig.results(0), rig.state(true), rig.results(1)].map(Inbound.init))
        #expect(rig.committedResults().isEmpty)
        #expect(rig.committedState() == nil)
        #expect(told.withLock { $0 }.isEmpty)
        // Must not happen: an answer after the failed commit; room for it to show.
        usleep(500_000)
        #expect(rig.replies().isEmpty, "answered: \(rig.replies())")
        // The hub's connection is usable after the failed commit.
        #expect(rig.hub.store.command(id: rig.commands[0])?.results == nil)

        switch backend {
        case .sqlite: try rig.watchExec("DROP TRIGGER doom_on_results; DROP TABLE doom")
        case .postgres: try rig.watchExec("DROP TRIGGER doom_on_results ON commands; DROP FUNCTION doom()")
        }
        // The things send the same requests again.
        rig.hub.thingRequests.handleLane([rig.results(0), rig.state(true), rig.results(1)].map(Inbound.init))
        #expect(Set(rig.committedResults()) == Set(rig.commands))
        #expect(rig.committedState()?.contains("\"power\":true") == true)
        #expect(told.withLock { $0 } == rig.commands)
        #expect(poll(timeoutMs: 30_000) { rig.replies().count == 3 })
        #expect(rig.replies() == ["r0": 204, "r1": 204, "strue": 201])
    }

    @Test(
        "PostgreSQL: a call that fails undoes the lane's transaction, and each request is handled again alone",
        .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"))
    func undone() throws {
        let rig = try Rig(commands: 2, on: .postgres)
        defer { rig.stop() }
        let told = Locked<[String]>([])
        let events = Locked<[String]>([])
        rig.hub.onEvent = { e in
            events.withLock { $0.append(e) }
            OneCommitTests.resultsEvent(e).map { cid in told.withLock { $0.append(cid) } }
        }
        // The state upload's statement fails (at once, not at the commit),
        // which aborts PostgreSQL's whole transaction.
        try rig.watchExec(
            """
            CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
            CREATE TRIGGER refuse_state BEFORE UPDATE OF state ON things FOR EACH ROW EXECUTE FUNCTION refuse();
            """)
        rig.hub.thingRequests.handleLane([rig.results(0), rig.state(true), rig.results(1)].map(Inbound.init))
        #expect(events.withLock { $0 }.contains { $0.contains("each handled again alone") })
        // Alone, the results are stored, told once and answered; the state upload is a 500.
        #expect(Set(rig.committedResults()) == Set(rig.commands))
        #expect(rig.committedState() == nil)
        #expect(told.withLock { $0 } == rig.commands)
        #expect(poll(timeoutMs: 30_000) { rig.replies().count == 3 })
        #expect(rig.replies() == ["r0": 204, "r1": 204, "strue": 500])
    }

    @Test(
        "Two hubs' lanes with two things' uploads in opposite orders both commit: rows are taken in thingID order",
        .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"))
    func thingOrder() throws {
        let rig = try Rig(commands: 0, on: .postgres)
        defer { rig.stop() }
        let postgres = try #require(rig.postgres)
        let other = try Rig.thing("AC-ONE-COMMIT-2", in: rig.hub.store)
        #expect(rig.probe.subscribe(Topics.response(clientID: other.1)) == 1)
        let hub2 = try #require(
            FrameworkSide(
                Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: rig.broker),
                store: try PostgresStore(url: postgres.url, secrets: .fastForTests)))
        try #require(hub2.start(timeoutMs: 30_000), "\(hub2.startProblem ?? "")")
        defer {
            hub2.stop()
            (hub2.store as? PostgresStore)?.close()
        }
        let events = Locked<[String]>([])
        for hub in [rig.hub, hub2] { hub.onEvent = { e in events.withLock { $0.append(e) } } }
        // Each upload holds its thing's row a while: taken in opposite
        // orders, the two transactions would wait for each other.
        try rig.watchExec(
            """
            CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$;
            CREATE TRIGGER slow_state BEFORE UPDATE OF state ON things FOR EACH ROW EXECUTE FUNCTION slow();
            """)
        let a = (rig.thing, rig.topic)
        let first = Thread {
            rig.hub.thingRequests.handleLane(
                [rig.state(true, of: a, id: "a1"), rig.state(true, of: other, id: "b1")].map(Inbound.init))
        }
        first.start()
        hub2.thingRequests.handleLane(
            [rig.state(false, of: other, id: "b2"), rig.state(false, of: a, id: "a2")].map(Inbound.init))
        #expect(poll(timeoutMs: 30_000) { rig.replies().count == 2 && rig.replies(on: other.1).count == 2 })
        // Each thing's first upload is Kii's 201, the other 204: which of
        // the two hubs' commits comes first is theirs to decide.
        #expect(rig.replies().values.sorted() == [201, 204], "\(rig.replies())")
        #expect(rig.replies(on: other.1).values.sorted() == [201, 204], "\(rig.replies(on: other.1))")
        let undone = events.withLock { $0 }.filter { $0.contains("each handled again alone") }
        #expect(undone.isEmpty, "a transaction was undone (a deadlock): \(undone)")
        // Each thing's two uploads were stored in one order or the other, both of them.
        for (t, _) in [a, other] {
            #expect(rig.committedState(of: t.thingID) != nil)
            #expect(rig.hub.store.stateHistory(thingID: t.thingID, from: 0, to: Int64.max).count == 2)
        }
    }

    @Test("SQLite: the calls in inOneTransaction share it; another thread's call waits for its commit")
    func storeTransaction() throws {
        let dir = try makeTempDirectory(prefix: "thingif-one-commit-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteStore(path: dir + "/s.sqlite", secrets: .fastForTests)
        defer { store.close() }
        let t = try Self.registered("AC-ONE-TX", in: store)
        let watcher = try SQLiteConnection(path: dir + "/s.sqlite")
        defer { watcher.close() }
        func committed() -> String? {
            (try? watcher.first("SELECT state FROM things WHERE thing_id = ?", [.text(t.thingID)]) { $0.text(0) })
                ?? nil
        }
        let other = Locked<String?>(nil)
        let outcome = store.inOneTransaction {
            #expect(store.applyState(thingID: t.thingID, method: "PUT", upload: #"{"a":1}"#, at: 1) != nil)
            // Its own calls see the write; a merge builds on it.
            #expect(store.applyState(thingID: t.thingID, method: "PATCH", upload: #"{"b":2}"#, at: 2) != nil)
            #expect(store.thing(id: t.thingID)?.state?.contains("\"b\":2") == true)
            #expect(committed() == nil)
            // A call whose own transaction fails rolls back to its savepoint only.
            let refused = store.attempt { c in
                try c.transaction { () throws -> Void in
                    try c.run("UPDATE things SET thing_type = 'gone' WHERE thing_id = ?", [.text(t.thingID)])
                    throw SQLiteError(code: 1, message: "refused by the test")
                }
            }
            if case .success = refused { Issue.record("the refused call succeeded") }
            #expect(store.thing(id: t.thingID)?.thingType == nil)
            // Another thread's call waits for the commit, and then sees both.
            let reader = Thread {
                let state = store.thing(id: t.thingID)?.state ?? "none"
                other.withLock { $0 = state }
            }
            reader.start()
            // Must not happen: the reader seeing the open transaction.
            usleep(200_000)
            #expect(other.withLock { $0 } == nil)
            // (The calls' own transactions were savepoints of it.) It does not nest.
            #expect(store.inOneTransaction {} == .unsupported)
        }
        #expect(outcome == .committed)
        #expect(committed()?.contains("\"a\":1") == true && committed()?.contains("\"b\":2") == true)
        #expect(store.thing(id: t.thingID)?.thingType == nil)
        #expect(poll(timeoutMs: 30_000) { other.withLock { $0 } != nil })
        #expect(other.withLock { $0 }?.contains("\"b\":2") == true)
        // A store that commits each call on its own runs nothing.
        var ran = false
        #expect(MemoryStore().inOneTransaction { ran = true } == .unsupported && !ran)
    }

    /// A PostgreSQL store on a database of its own, its URL, and what
    /// closes the store and drops the database.
    static func postgresStore() throws -> (PostgresStore, String, () -> Void) {
        let server = try PostgresServer.get()
        let (name, url) = try server.createDatabase()
        do {
            let store = try PostgresStore(url: url, secrets: .fastForTests)
            return (
                store, url,
                {
                    store.close()
                    server.dropDatabase(name)
                }
            )
        } catch {
            server.dropDatabase(name)
            throw error
        }
    }

    /// A registered thing, without an installation.
    static func registered(_ vendorThingID: String, in store: HubStore) throws -> ThingRecord {
        try #require(
            try? store.registerThing(
                vendorThingID: vendorThingID, password: "pw", thingType: nil, firmwareVersion: nil,
                dataGroupingInterval: nil, layoutPosition: nil
            ).get())
    }

    @Test(
        "PostgreSQL: the calls in inOneTransaction share it; one that fails undoes all of it",
        .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"))
    func postgresTransaction() throws {
        let (store, url, done) = try Self.postgresStore()
        defer { done() }
        let t = try Self.registered("AC-ONE-TX", in: store)
        let u = try Self.registered("AC-ONE-TX-2", in: store)
        let watcher = try PostgresConnection(url: url)
        defer { watcher.close() }
        func committed(_ id: String) -> String? {
            (try? watcher.first("SELECT state FROM things WHERE thing_id = ?", [.text(id)]) { $0.text(0) }) ?? nil
        }
        let outcome = store.inOneTransaction {
            #expect(store.applyState(thingID: t.thingID, method: "PUT", upload: #"{"a":1}"#, at: 1) != nil)
            #expect(store.applyState(thingID: t.thingID, method: "PATCH", upload: #"{"b":2}"#, at: 2) != nil)
            #expect(store.thing(id: t.thingID)?.state?.contains("\"b\":2") == true)
            #expect(committed(t.thingID) == nil)
            // Another thread's call on another row goes on meanwhile.
            let done = Locked(false)
            let writer = Thread {
                _ = store.applyState(thingID: u.thingID, method: "PUT", upload: #"{"c":3}"#, at: 3)
                done.withLock { $0 = true }
            }
            writer.start()
            #expect(poll(timeoutMs: 30_000) { done.withLock { $0 } })
            #expect(committed(u.thingID)?.contains("\"c\":3") == true)
            #expect(store.inOneTransaction {} == .unsupported)
        }
        #expect(outcome == .committed)
        #expect(committed(t.thingID)?.contains("\"a\":1") == true && committed(t.thingID)?.contains("\"b\":2") == true)

        // A call whose own transaction throws spoils the whole: nothing is stored.
        let spoiled = store.inOneTransaction {
            #expect(store.applyState(thingID: t.thingID, method: "PUT", upload: #"{"d":4}"#, at: 4) != nil)
            let refused = store.attempt { c in
                try c.transaction { () throws -> Void in
                    try c.run("UPDATE things SET thing_type = 'gone' WHERE thing_id = ?", [.text(t.thingID)])
                    throw PostgresError(sqlState: "", message: "refused by the test")
                }
            }
            if case .success = refused { Issue.record("the refused call succeeded") }
        }
        #expect(spoiled == .undone)
        #expect(committed(t.thingID)?.contains("\"d\":4") == false)
        #expect(store.thing(id: t.thingID)?.thingType == nil)
        // A statement the server refuses does too; the connection serves the next call.
        let refusedStatement = store.inOneTransaction {
            #expect(store.applyState(thingID: t.thingID, method: "PUT", upload: #"{"e":5}"#, at: 5) != nil)
            _ = store.attempt { c in try c.run("SELECT no_such_column FROM things", []) }
        }
        #expect(refusedStatement == .undone)
        #expect(store.thing(id: t.thingID)?.state?.contains("\"e\":5") == false)
        #expect(store.applyState(thingID: t.thingID, method: "PUT", upload: #"{"f":6}"#, at: 6) != nil)
        #expect(committed(t.thingID)?.contains("\"f\":6") == true)
    }

    @Test(
        "PostgreSQL: a lane's BEGIN travels with its first statement; a run without one sends nothing",
        .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"))
    func postgresBeginWithFirstStatement() throws {
        let (store, url, done) = try Self.postgresStore()
        defer { done() }
        let t = try Self.registered("AC-BEGIN", in: store)
        var shared: PostgresConnection?
        // The statements a body prepared on the connection (a round trip each, on first use).
        var preparedBefore = 0
        func take() {
            shared = try? store.attempt { $0 }.get()
            preparedBefore = shared?.preparedCount ?? -1
        }
        func prepares() -> Int { (shared?.preparedCount ?? 0) - preparedBefore }
        func setType(_ type: String) -> Result<Int, Error> {
            store.attempt { c in
                try c.run("UPDATE things SET thing_type = ? WHERE thing_id = ?", [.text(type), .text(t.thingID)])
            }
        }
        // Two statements: the first carries BEGIN, then COMMIT. Three round trips
        // (and one for each statement prepared on first use), not four.
        let two = store.inOneTransaction {
            take()
            #expect((try? setType("one").get()) == 1)
            #expect((try? setType("two").get()) == 1)
        }
        #expect(two == .committed)
        #expect(shared?.lastSharedRoundTrips == 3 + prepares())
        #expect(store.thing(id: t.thingID)?.thingType == "two")

        // None: nothing sent, nothing to commit.
        shared = nil
        let none = store.inOneTransaction { take() }
        #expect(none == .committed)
        #expect(shared?.lastSharedRoundTrips == 0)

        // A first statement that fails when it runs, after its BEGIN in the
        // same round trip: undone (ROLLBACK), and the connection is back out
        // of the pipeline and of the transaction for the next call.
        shared = nil
        let failed = store.inOneTransaction {
            take()
            let r = store.attempt { c in try c.first("SELECT 1 / ?::int", [.int(0)]) { $0.int(0) } }
            if case .success = r { Issue.record("a division by zero succeeded") }
            if case .success = setType("three") { Issue.record("a statement after a failed one succeeded") }
        }
        #expect(failed == .undone)
        #expect(shared?.lastSharedRoundTrips == 3 + prepares())
        let connection = try #require(shared)
        #expect((try? connection.first("SELECT 2", []) { $0.int(0) }) == 2)
        #expect(store.thing(id: t.thingID)?.thingType == "two")

        // The connection dies before the first statement (its BEGIN never
        // takes, in the pipeline): that call fails and so do the next ones,
        // the run is undone, and the store serves the next call.
        let killer = try PostgresConnection(url: url)
        defer { killer.close() }
        let lost = store.inOneTransaction {
            take()
            let pid = shared?.backendPID ?? 0
            #expect(
                (try? killer.first("SELECT pg_terminate_backend(?::int)", [.int(Int64(pid))]) { $0.text(0) }) == "t")
            if case .success = setType("four") { Issue.record("a statement on a terminated connection succeeded") }
            if case .success = setType("five") { Issue.record("a statement after a lost connection succeeded") }
        }
        #expect(lost == .undone)
        #expect((try? setType("six").get()) == 1)
        #expect(store.thing(id: t.thingID)?.thingType == "six")
    }
}
