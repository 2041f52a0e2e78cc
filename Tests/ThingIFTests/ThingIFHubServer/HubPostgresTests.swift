// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

@Suite(
    "thingif-hub on PostgreSQL", .serialized,
    .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"), .offPool)
struct HubOnPostgresTests {
    /// The hub with `--db postgres://…`: the CLI onboards the C appliance,
    /// a command runs, and the thing, the command and its results are rows
    /// of the database.
    @Test(
        "thingif-hub --db postgres://… onboards a thing and stores a command and its results",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub and thingif next to the test bundle"),
        .timeLimit(.minutes(2)))
    func hubOnPostgres() throws {
        let cli = try #require(CLIEndToEnd.cli), hubExe = try #require(CLIEndToEnd.hub)
        let server = try PostgresServer.get()
        let (name, dbURL) = try server.createDatabase()
        let broker = try Broker.start()
        let root = try makeTempDirectory(prefix: "thingif-hub-pg")
        var children: [pid_t] = []
        defer {
            for pid in children.reversed() { endChild(pid) }
            broker.stop()
            broker.removeFiles()
            server.dropDatabase(name)
            try? FileManager.default.removeItem(atPath: root)
        }
        let hubLog = root + "/hub.log"
        let (hubPID, url) = try startHubProcess(hubExe, broker: broker, logPath: hubLog, storeArgs: ["--db", dbURL])
        children.append(hubPID)
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": root + "/cli/cli.json"]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }

        var r = try thingif("user", "create")
        #expect(r.status == 0, "\(r.output)\nhub:\n\(readText(hubLog))")
        r = try thingif("onboard", "AC-PG-1", "demo-pass", "--thing-type", "AirConditioner", "--json")
        #expect(r.status == 0, "\(r.output)")
        let onboarded = try #require(parseObject(r.output), "\(r.output)")
        let thingID = try #require(onboarded["thingID"] as? String)
        let thingToken = try #require(onboarded["accessToken"] as? String)

        let aircon = try ApplianceProcess(
            args: [
                "--port", "\(broker.port)", "--storage", root + "/aircon", "--thing-id", thingID, "--token", thingToken
            ],
            logPath: root + "/aircon.log")
        try aircon.start()
        defer { aircon.stop() }

        r = try thingif(
            "command", "send", thingID, "turnPower", "power=true", "setFanSpeed", "fanSpeed=3", "--wait", "30")
        #expect(r.status == 0 && field(r.output, "state") == "DONE", "\(r.output)\naircon:\n\(aircon.log)")
        let commandID = try #require(field(r.output, "commandID"))

        // In the database, as another hub would read it.
        let store = try PostgresStore(url: dbURL, secrets: .fastForTests)
        defer { store.close() }
        let thing = try #require(store.thing(id: thingID))
        #expect(thing.vendorThingID == "AC-PG-1" && thing.thingType == "AirConditioner")
        #expect(thing.owners.count == 1 && !thing.installations.isEmpty)
        let stored = try #require(store.command(id: commandID))
        #expect(stored.state == .done && stored.thingID == thingID)
        #expect(stored.results?.contains("turnPower") == true, "\(stored.results ?? "nil")")
        // The appliance's state after the command (a PUT over MQTT: the
        // store's putState, which authorises and writes in one statement),
        // with its samples.
        #expect(
            poll(timeoutMs: 30_000) { store.thing(id: thingID)?.state?.contains(#""fanSpeed":3"#) == true },
            "\(store.thing(id: thingID)?.state ?? "nil")\naircon:\n\(aircon.log)")
        #expect(store.stateHistory(thingID: thingID, from: 0, to: .max).count >= 2)
        #expect(readText(hubLog).contains("cannot open") == false)
    }
}

@Suite(
    "Two hubs on one PostgreSQL", .serialized,
    .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"), .offPool)
struct TwoHubsOnPostgresTests {
    /// Hubs A and B share the broker (the shared subscription gives each
    /// request of the things to one of them) and the database. A user
    /// watches a thing on both hubs (`thingif watch`, an event stream on
    /// each); whichever hub takes a command's results, the stream on the
    /// other one learns of them only through the database (LISTEN/NOTIFY),
    /// and both streams must show every command.
    @Test(
        "Event streams on hub A and hub B both see every command, whichever hub handled its results",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub and thingif next to the test bundle"),
        .timeLimit(.minutes(2)))
    func sseAcrossHubs() throws {
        let cli = try #require(CLIEndToEnd.cli), hubExe = try #require(CLIEndToEnd.hub)
        let server = try PostgresServer.get()
        let (name, dbURL) = try server.createDatabase()
        let broker = try Broker.start()
        let root = try makeTempDirectory(prefix: "thingif-two-hubs")
        var children: [pid_t] = []
        defer {
            for pid in children.reversed() { endChild(pid) }
            broker.stop()
            broker.removeFiles()
            server.dropDatabase(name)
            try? FileManager.default.removeItem(atPath: root)
        }
        let logA = root + "/hub-a.log", logB = root + "/hub-b.log"
        let (pidA, urlA) = try startHubProcess(hubExe, broker: broker, logPath: logA, storeArgs: ["--db", dbURL])
        children.append(pidA)
        let (pidB, urlB) = try startHubProcess(hubExe, broker: broker, logPath: logB, storeArgs: ["--db", dbURL])
        children.append(pidB)
        let config = root + "/cli/cli.json"
        let env = ["THINGIF_HUB_URL": urlA, "THINGIF_CONFIG": config]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }

        // A normal user (all its installations are notified, not only the issuing one).
        var r = try thingif("user", "create", "--login", "alice", "--password", "alice-pw-1")
        #expect(r.status == 0, "\(r.output)")
        let token = try #require(parseObject(readText(config))?["token"] as? String, "\(readText(config))")
        r = try thingif("onboard", "AC-TWO-1", "demo-pass", "--thing-type", "AirConditioner", "--json")
        #expect(r.status == 0, "\(r.output)")
        let onboarded = try #require(parseObject(r.output), "\(r.output)")
        let thingID = try #require(onboarded["thingID"] as? String)
        let thingToken = try #require(onboarded["accessToken"] as? String)
        let aircon = try ApplianceProcess(
            args: [
                "--port", "\(broker.port)", "--storage", root + "/aircon", "--thing-id", thingID, "--token", thingToken
            ],
            logPath: root + "/aircon.log")
        try aircon.start()
        defer { aircon.stop() }

        let watchA = root + "/watch-a.log", watchB = root + "/watch-b.log"
        children.append(try spawnChild(cli, ["watch", thingID, "--timeout", "90"], environment: env, logPath: watchA))
        children.append(
            try spawnChild(
                cli, ["watch", thingID, "--timeout", "90"],
                environment: ["THINGIF_HUB_URL": urlB, "THINGIF_TOKEN": token, "THINGIF_CONFIG": root + "/none.json"],
                logPath: watchB))
        for w in [watchA, watchB] {
            #expect(poll(timeoutMs: 30_000) { readText(w).contains("watching \(thingID)") }, "\(readText(w))")
        }

        let count = 8
        for i in 0..<count {
            r = try thingif("command", "send", thingID, "setFanSpeed", "fanSpeed=\(i % 5 + 1)", "--wait", "30")
            #expect(
                r.status == 0 && field(r.output, "state") == "DONE",
                "\(r.output)\naircon:\n\(aircon.log)\nhub A:\n\(readText(logA))\nhub B:\n\(readText(logB))")
        }
        func handled(_ log: String) -> Int {
            readText(log).split(separator: "\n").filter { $0.contains("results of ") }.count
        }
        func shown(_ log: String) -> Int {
            readText(log).split(separator: "\n").filter { $0.hasPrefix("commandID") }.count
        }
        // Each result was taken by one hub ...
        #expect(handled(logA) + handled(logB) == count, "A: \(handled(logA)), B: \(handled(logB))")
        // ... and both hubs' event streams showed every command.
        for w in [watchA, watchB] {
            #expect(
                poll(timeoutMs: 30_000) { shown(w) == count },
                "handled by A: \(handled(logA)), by B: \(handled(logB))\n\(readText(w))")
        }
    }

    /// Hub A records a command's results and dies before it notifies
    /// (simulated: the results go into the database through a store, as A's
    /// request thread does, and nothing sends the webhook). Hub B's sweep
    /// claims the notification once the grace period is over and POSTs it;
    /// a notification hub A did send (marked) is left alone.
    @Test("Results a hub recorded and did not notify are notified by another hub's sweep", .timeLimit(.minutes(1)))
    func sweepTakesOver() throws {
        let server = try PostgresServer.get()
        let (name, dbURL) = try server.createDatabase()
        defer { server.dropDatabase(name) }
        let hook = try WebhookReceiver()
        defer { hook.stop() }
        let storeA = try PostgresStore(url: dbURL, secrets: .fastForTests)
        let storeB = try PostgresStore(url: dbURL, secrets: .fastForTests)
        defer {
            storeA.close()
            storeB.close()
        }
        var optionsB = FrameworkSide.Options(appID: "a", appKey: "k", brokerPort: 1)
        optionsB.webhooks = WebhookGuard(allow: ["127.0.0.1:\(hook.port)"])
        let hubB = try #require(FrameworkSide(optionsB, store: storeB))

        let user = try #require(storeA.createUser(loginName: "alice", passwordHash: "h"))
        _ = try #require(storeA.addAppInstallation(userID: user.userID, kind: .webhook, target: hook.url))
        let now = Platform.epochMs()
        for id in ["c-lost", "c-sent"] {
            _ = try #require(
                storeA.insertCommand(
                    CommandRecord(
                        commandID: id, thingID: "th.x", issuer: "user:\(user.userID)", issuingInstallationID: nil,
                        payload: "{}", createdAt: now, modifiedAt: now)))
            #expect(storeA.recordResults(commandID: id, results: "{}", state: .done, at: now))
        }
        #expect(storeA.markNotified(commandID: "c-sent"))

        // Within the grace period hub A may still be sending: B leaves it.
        #expect(hubB.notifications.sweep(now: now + StoreRules.notificationGraceMs - 1).isEmpty)
        #expect(hubB.notifications.sweep(now: now + StoreRules.notificationGraceMs) == ["c-lost"])
        #expect(
            poll(timeoutMs: 30_000) { hook.bodies.withLock { $0 }.count == 1 }, "\(hook.bodies.withLock { $0 })")
        let body = try #require(parseObject(hook.bodies.withLock { $0 }.first))
        #expect(body["commandID"] as? String == "c-lost" && body["commandState"] as? String == "DONE")
        // Sent and marked: no sweep sends it again, here or on another hub.
        #expect(hubB.notifications.sweep(now: now + 10 * StoreRules.notificationGraceMs).isEmpty)
        #expect(storeA.claimUnnotified(now: now + 100_000, leaseMs: 1, limit: 10).isEmpty)
        // Must not happen: a second webhook, for which no later event marks the point.
        usleep(300_000)
        #expect(hook.bodies.withLock { $0 }.count == 1)
    }

    /// Two hubs take a stream of commands through their REST APIs for two
    /// things; hub B is killed with SIGKILL a third of the way in (whatever
    /// it held in memory, requests queued or half handled, is gone) and
    /// started again on the same database two thirds in. Every command must
    /// end DONE, and no action may run twice (the things' effects logs).
    @Test(
        "A hub killed with SIGKILL mid-stream and restarted: every command gets its results, none runs twice",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub and thingif next to the test bundle"),
        .timeLimit(.minutes(3)))
    func killedHub() throws {
        let hubs = try TwoHubs(prefix: "thingif-killed-hub")
        defer { hubs.close() }
        let things = try (1...2).map { try hubs.addThing("AC-KILL-\($0)") }
        let count = 36
        let sent = try hubs.streamKillingB(things, count: count)
        #expect(sent.count == count)
        hubs.expectEveryCommandDoneOnce(sent)
    }
}

/// Hubs A and B (processes) on one fresh PostgreSQL database and one
/// secured broker, a user made through A, and aircon things onboarded
/// through A with an effects log each; close() stops everything.
/// `hubArgs` go to both hubs (e.g. `--subscriptions partitioned`).
final class TwoHubs {
    let cli: String, hubExe: String
    let server: PostgresServer
    let name: String, dbURL: String
    let broker: Broker
    let root: String
    private(set) var urlA = "", urlB = ""
    private var pidB: pid_t = 0
    private var children: [pid_t] = []
    private var appliances: [ApplianceProcess] = []
    private var token = "", userID = ""
    /// Hub B's starts so far (each logs to a file of its own).
    private var starts = 0
    private let hubArgs: [String]

    init(prefix: String, hubArgs: [String] = []) throws {
        self.hubArgs = hubArgs
        cli = try #require(CLIEndToEnd.cli)
        hubExe = try #require(CLIEndToEnd.hub)
        server = try PostgresServer.get()
        (name, dbURL) = try server.createDatabase()
        broker = try Broker.start()
        root = try makeTempDirectory(prefix: prefix)
        do {
            let a = try startHubProcess(
                hubExe, broker: broker, logPath: root + "/hub-a.log", storeArgs: ["--db", dbURL] + hubArgs)
            children.append(a.pid)
            urlA = a.url
            try restartB()
            let r = try thingif(urlA, "user", "create", "--login", "bob", "--password", "bob-pw-1")
            #expect(r.status == 0, "\(r.output)")
            let saved = try #require(parseObject(readText(root + "/cli/cli.json")))
            token = try #require(saved["token"] as? String)
            userID = try #require(saved["userID"] as? String, "\(saved)")
        } catch {
            close()
            throw error
        }
    }

    /// The CLI against hub `url` as the user (the CLI keeps a token for hub A).
    func thingif(_ url: String, _ args: String...) throws -> (status: Int32, output: String) {
        var env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": root + "/cli/cli.json"]
        if url != urlA { env["THINGIF_TOKEN"] = token }
        return try runProgram(cli, url != urlA ? args + ["--user-id", userID] : args, environment: env)
    }

    /// Onboards a thing through hub A and starts an aircon for it (resending
    /// an unanswered request after 1 s); returns its thingID.
    func addThing(_ vendorThingID: String) throws -> String {
        let k = appliances.count + 1
        let r = try thingif(urlA, "onboard", vendorThingID, "demo-pass", "--thing-type", "AirConditioner", "--json")
        let o = try #require(parseObject(r.output), "\(r.output)")
        let id = try #require(o["thingID"] as? String), thingToken = try #require(o["accessToken"] as? String)
        let a = try ApplianceProcess(
            args: [
                "--port", "\(broker.port)", "--storage", root + "/aircon-\(k)", "--thing-id", id, "--token", thingToken,
                "--request-timeout-ms", "1000", "--effects-log", root + "/effects-\(k).log"
            ],
            logPath: root + "/aircon-\(k).log")
        try a.start()
        appliances.append(a)
        return id
    }

    /// Every thing's effect lines ("commandID action").
    func effects() -> [Substring] {
        (0..<appliances.count).flatMap { readText(root + "/effects-\($0 + 1).log").split(separator: "\n") }
    }

    /// `count` commands round robin over `things` and the live hubs' REST
    /// APIs; hub B is killed with SIGKILL a third of the way in and started
    /// again two thirds in (`beforeKill`, `beforeRestart` run just before).
    /// Returns each command sent, with its thing.
    func streamKillingB(
        _ things: [String], count: Int, beforeKill: () -> Void = {}, beforeRestart: () throws -> Void = {}
    ) throws -> [(thing: String, id: String)] {
        var sent: [(thing: String, id: String)] = []
        var urls = [urlA, urlB]
        for i in 0..<count {
            if i == count / 3 {
                beforeKill()
                killB()
                urls = [urlA]
            } else if i == 2 * count / 3 {
                try beforeRestart()
                try restartB()
                urls = [urlA, urlB]
            }
            let thing = things[i % things.count]
            let r = try thingif(
                urls[i % urls.count], "command", "send", thing, "setFanSpeed", "fanSpeed=\(i % 5 + 1)", "--json")
            #expect(r.status == 0, "command \(i): \(r.output)")
            if let id = parseObject(r.output)?["commandID"] as? String { sent.append((thing, id)) }
        }
        return sent
    }

    /// None lost: each command of `sent` reaches DONE (the things resend
    /// what a dead hub never answered; the hubs redeliver what they
    /// stored). None twice: one effect line per command and action.
    func expectEveryCommandDoneOnce(_ sent: [(thing: String, id: String)]) {
        var notDone: [String] = []
        for c in sent {
            let done = poll(timeoutMs: 30_000) {
                (try? thingif(urlA, "command", "get", c.thing, c.id)).flatMap { field($0.output, "state") } == "DONE"
            }
            if !done { notDone.append(c.id) }
        }
        #expect(notDone.isEmpty, "not DONE: \(notDone)\nhub A:\n\(readText(root + "/hub-a.log").suffix(4000))")
        let effects = effects()
        #expect(effects.count == Set(effects).count, "an action ran twice: \(effects.count) lines")
        #expect(Set(effects.map { String($0.split(separator: " ")[0]) }) == Set(sent.map(\.id)))
    }

    /// Hub B goes away without a word: no DISCONNECT, no cleanup.
    func killB() {
        kill(pidB, SIGKILL)
        var status: Int32 = 0
        waitpid(pidB, &status, 0)
        children.removeAll { $0 == pidB }
    }

    /// Starts hub B (again) on the same database.
    func restartB() throws {
        let b = try startHubProcess(
            hubExe, broker: broker, logPath: root + "/hub-b-\(starts).log", storeArgs: ["--db", dbURL] + hubArgs)
        starts += 1
        children.append(b.pid)
        pidB = b.pid
        urlB = b.url
    }

    func close() {
        for a in appliances { a.stop() }
        appliances = []
        for pid in children.reversed() { _ = endChild(pid) }
        children = []
        broker.stop()
        broker.removeFiles()
        server.dropDatabase(name)
        try? FileManager.default.removeItem(atPath: root)
    }
}
