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
    .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"))
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
        #expect(readText(hubLog).contains("cannot open") == false)
    }
}

@Suite("Hub storage choice")
struct HubStorageChoiceTests {
    @Test("--db, THINGIF_HUB_DB and the file's db choose PostgreSQL for a postgres:// URL; SQLite stays the default")
    func storageChoice() throws {
        func storage(_ args: [String], _ env: [String: String] = [:], file: String? = nil) throws -> HubConfig.Storage {
            let outcome = try HubConfig.load(
                arguments: args, environment: env, readFile: { _ in file.map { Array($0.utf8) } })
            guard case .run(let c) = outcome else { throw HarnessError("help") }
            return c.storage
        }
        let url = "postgres://thingif:pw@db.example:5432/thingif"
        #expect(try storage([]) == .sqlite(path: "./thingif-hub.sqlite"))
        #expect(try storage(["--db", "/var/lib/thingif/hub.sqlite"]) == .sqlite(path: "/var/lib/thingif/hub.sqlite"))
        #expect(try storage(["--db", url]) == .postgres(url: url))
        #expect(try storage(["--db=postgresql://u@h/d"]) == .postgres(url: "postgresql://u@h/d"))
        #expect(try storage([], ["THINGIF_HUB_DB": url]) == .postgres(url: url))
        #expect(try storage(["--config", "hub.json"], file: #"{"db": "\#(url)"}"#) == .postgres(url: url))
        #expect(try storage(["--db", url, "--memory"]) == .memory)
    }
}
