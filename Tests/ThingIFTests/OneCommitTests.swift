import Foundation
import Testing
@testable import ThingIF
@testable import ThingIFHub

/// A request lane's results and state uploads in one store transaction
/// (FrameworkSide+OneCommit.swift): they are stored together, nothing is
/// answered or told before the commit, and a failed commit answers and
/// keeps nothing (the things send again). On an SQLite file, watched from
/// a second connection of its own, which sees only what is committed.
@Suite("Request lanes: a thing's results and states share one commit")
struct OneCommitTests {
    /// A hub on an SQLite file and the real broker, a thing with an MQTT
    /// client ID, `n` commands for it, and a probe on the thing's reply topic.
    final class Rig: @unchecked Sendable {
        let broker: Broker
        let dir: String
        let hub: FrameworkSide
        let thing: ThingRecord
        let topic: String
        let commands: [String]
        let probe: MqttProbe
        /// A connection of the test's own to the hub's file.
        let watcher: SQLiteConnection

        init(commands n: Int) throws {
            broker = try Broker.start()
            dir = try makeTempDirectory(prefix: "thingif-one-commit")
            let path = dir + "/hub.sqlite"
            let options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: broker)
            let hub = try #require(FrameworkSide(options, store: try makeHubStore(path)))
            self.hub = hub
            try #require(hub.start(timeoutMs: 10_000), "\(hub.startProblem ?? "")")
            guard
                case .success(let t) = hub.store.registerThing(
                    vendorThingID: "AC-ONE-COMMIT", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil)
            else { throw CancellationError() }
            thing = t
            let topic = "tonecommit" + randomHexString(4)
            self.topic = topic
            #expect(hub.store.addInstallation(thingID: t.thingID, installationID: "i-one", mqttTopic: topic))
            commands = try (0..<n).map { i in
                try #require(
                    hub.store.insertCommand(
                        CommandRecord(
                            commandID: "cmd-one-commit-\(i)", thingID: t.thingID, issuer: nil,
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
            watcher = try SQLiteConnection(path: path)
        }

        func stop() {
            watcher.close()
            probe.stop()
            hub.stop()
            broker.stop()
            broker.removeFiles()
            try? FileManager.default.removeItem(atPath: dir)
        }

        /// The thing's request as the broker hands it to the hub.
        func message(_ method: String, _ path: String, _ body: String, id: String) -> MqttClient.Message {
            MqttClient.Message(
                topic: Topics.request(clientID: topic, appID: Env.appID, path: path),
                payload: kiiRequest(method, token: thing.accessToken, requestID: id, body: body), qos: 1,
                retain: false)
        }

        func results(_ i: Int) -> MqttClient.Message {
            message(
                "PUT", "targets/thing:\(thing.thingID)/commands/\(commands[i])/action-results",
                #"{"actionResults":[{"turnPower":{"succeeded":true}}]}"#, id: "r\(i)")
        }

        func state(_ power: Bool) -> MqttClient.Message {
            message("PUT", "targets/thing:\(thing.thingID)/states", #"{"power":\#(power)}"#, id: "s\(power)")
        }

        /// The commands whose results a committed read sees.
        func committedResults() -> [String] {
            commands.filter { id in
                ((try? watcher.first("SELECT results FROM commands WHERE command_id = ?", [.text(id)]) { $0.text(0) })
                    ?? nil) != nil
            }
        }

        func committedState() -> String? {
            (try? watcher.first("SELECT state FROM things WHERE thing_id = ?", [.text(thing.thingID)]) { $0.text(0) })
                ?? nil
        }

        /// The replies on the thing's topic: request ID and status.
        func replies() -> [String: Int] {
            var out: [String: Int] = [:]
            for m in probe.messages(on: Topics.response(clientID: topic)) {
                guard let r = KiiResponse.decode(m.payload),
                    let id = r.headers.first(where: { $0.0 == KiiFraming.requestIDHeader })?.1
                else { continue }
                out[id] = r.status
            }
            return out
        }
    }

    @Test("Results and a state upload waiting in a lane are stored in one commit, and told only after it")
    func sharedCommit() throws {
        let rig = try Rig(commands: 4)
        defer { rig.stop() }
        // What each notification and event could read then, from outside the transaction.
        let seen = Locked<[(what: String, results: [String], state: String?)]>([])
        rig.hub.onCommandFinished = { c, _ in
            seen.withLock { $0.append((c.commandID, rig.committedResults(), rig.committedState())) }
        }
        rig.hub.onEvent = { e in
            guard e.hasPrefix("state of") else { return }
            let now = ("state", rig.committedResults(), rig.committedState())
            seen.withLock { $0.append(now) }
        }
        rig.hub.handleLane((0..<4).map(rig.results) + [rig.state(true)])

        let told = seen.withLock { $0 }
        #expect(told.map(\.what) == rig.commands + ["state"])
        for t in told {
            // Every write of the run was committed before the first of them was told.
            #expect(Set(t.results) == Set(rig.commands), "\(t.what) was told when \(t.results) were stored")
            let state = t.state ?? "none"
            #expect(state.contains("\"power\":true"), "\(t.what) was told when the state was \(state)")
        }
        #expect(poll(timeoutMs: 5_000) { rig.replies().count == 5 })
        #expect(rig.replies() == ["r0": 204, "r1": 204, "r2": 204, "r3": 204, "strue": 204])
    }

    @Test("A failed commit answers, tells and keeps nothing; sent again, the requests are stored and answered")
    func failedCommit() throws {
        let rig = try Rig(commands: 2)
        defer { rig.stop() }
        let told = Locked<[String]>([])
        rig.hub.onCommandFinished = { c, _ in told.withLock { $0.append(c.commandID) } }
        // A deferred foreign key that every results write breaks: each
        // statement succeeds, the COMMIT fails.
        try rig.watcher.exec(
            """
            CREATE TABLE doom (thing_id TEXT REFERENCES things (thing_id) DEFERRABLE INITIALLY DEFERRED);
            CREATE TRIGGER doom_on_results AFTER UPDATE OF results ON commands
            BEGIN INSERT INTO doom VALUES ('no such thing'); END;
            """)
        rig.hub.handleLane([rig.results(0), rig.state(true), rig.results(1)])
        #expect(rig.committedResults().isEmpty)
        #expect(rig.committedState() == nil)
        #expect(told.withLock { $0 }.isEmpty)
        usleep(500_000)
        #expect(rig.replies().isEmpty, "answered: \(rig.replies())")
        // The hub's connection is usable after the failed commit.
        #expect(rig.hub.store.command(id: rig.commands[0])?.results == nil)

        try rig.watcher.exec("DROP TRIGGER doom_on_results; DROP TABLE doom")
        // The things send the same requests again.
        rig.hub.handleLane([rig.results(0), rig.state(true), rig.results(1)])
        #expect(Set(rig.committedResults()) == Set(rig.commands))
        #expect(rig.committedState()?.contains("\"power\":true") == true)
        #expect(told.withLock { $0 } == rig.commands)
        #expect(poll(timeoutMs: 5_000) { rig.replies().count == 3 })
        #expect(rig.replies() == ["r0": 204, "r1": 204, "strue": 204])
    }

    @Test("SQLite: the calls in inOneTransaction share it; another thread's call waits for its commit")
    func storeTransaction() throws {
        let dir = try makeTempDirectory(prefix: "thingif-one-commit-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteStore(path: dir + "/s.sqlite", secrets: .fastForTests)
        defer { store.close() }
        guard
            case .success(let t) = store.registerThing(
                vendorThingID: "AC-ONE-TX", password: "pw", thingType: nil, firmwareVersion: nil,
                dataGroupingInterval: nil)
        else {
            Issue.record("registration failed")
            return
        }
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
            usleep(200_000)
            #expect(other.withLock { $0 } == nil)
            // (The calls' own transactions were savepoints of it.) It does not nest.
            #expect(store.inOneTransaction {} == .unsupported)
        }
        #expect(outcome == .committed)
        #expect(committed()?.contains("\"a\":1") == true && committed()?.contains("\"b\":2") == true)
        #expect(store.thing(id: t.thingID)?.thingType == nil)
        #expect(poll(timeoutMs: 5_000) { other.withLock { $0 } != nil })
        #expect(other.withLock { $0 }?.contains("\"b\":2") == true)
        // A store that commits each call on its own runs nothing.
        var ran = false
        #expect(MemoryStore().inOneTransaction { ran = true } == .unsupported && !ran)
    }
}
