// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// Status codes of thingif.h as the C functions return them.
enum RC {
    static let ok = Int32(THINGIF_OK.rawValue)
    static let invalid = Int32(THINGIF_ERR_INVALID.rawValue)
    static let state = Int32(THINGIF_ERR_STATE.rawValue)
    static let notOnboarded = Int32(THINGIF_ERR_NOT_ONBOARDED.rawValue)
    static let inCallback = Int32(THINGIF_ERR_IN_CALLBACK.rawValue)
    static let connect = Int32(THINGIF_ERR_CONNECT.rawValue)
    static let noConn = Int32(THINGIF_ERR_NO_CONN.rawValue)
    static let rejected = Int32(THINGIF_ERR_REJECTED.rawValue)
    static let json = Int32(THINGIF_ERR_JSON.rawValue)
    static let last = Int32(THINGIF_ERR_UNSUPPORTED.rawValue)
}

enum LogLevel {
    static let error = Int32(THINGIF_LOG_ERROR.rawValue)
    static let info = Int32(THINGIF_LOG_INFO.rawValue)
    static let debug = Int32(THINGIF_LOG_DEBUG.rawValue)
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Polls `condition` every 10 ms for up to `timeoutMs`: by default 30 s, a
/// bound for ThreadSanitizer on a busy 2-core machine (5 s failed there);
/// a condition that holds returns at once, and no test waits on a default
/// poll for a condition that must stay false.
@discardableResult
func poll(timeoutMs: Int = 30_000, _ condition: () -> Bool) -> Bool {
    expectOffPool("poll")
    let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
    while !condition() {
        if Date() > deadline { return false }
        usleep(10_000)
    }
    return true
}

/// The seeds' AirConditioner-Demo.
enum Aircon {
    static let schema = "AirConditioner-Demo"
    static let version: Int32 = 1
    static let allActions =
        #"[{"turnPower":{"power":true}},{"setPresetTemperature":{"presetTemperature":25}},{"setFanSpeed":{"fanSpeed":5}}]"#
    static let powerOn = #"[{"turnPower":{"power":true}}]"#
    static let powerOff = #"[{"turnPower":{"power":false}}]"#
}

/// What a C handler saw (ct_records_json).
struct Record: Decodable {
    var tag: String?
    var name: String?
    var params: String?
    var commandID: String?
    var issuer: String?
    var schema: String?
    var schemaVersion: Int
    var alias: String?
    var title: String?
    var description: String?
    var metadata: String?
    var index: Int
    var thingMatches: Bool
    /// thingif_action_command_expires_at (0: none).
    var expiresAt: Int64?
    var failRc: Int?
    var dataRc: Int?
    var uploadRc: Int?
    /// True when the handler deferred (ct_behave_defer) and got one handle.
    var deferred: Bool?
    var forbidden: [String: Int]?
    var allowed: [String: Int]?
    /// thingif_action_end_node (nil: the thing's own command).
    var endNode: String?
    /// thingif_action_thing_id.
    var targetThingID: String?
}

/// One entry of an action-results body, in order; `alias` for trait commands.
struct ResultEntry {
    var alias: String?
    var name: String
    var succeeded: Bool
    var errorMessage: String?
    var data: [String: Any]?
}

/// Parses {"actionResults":[…]} (flat or grouped by alias) independently of
/// the library's codec.
func parseResults(_ text: String) throws -> [ResultEntry] {
    let top = try JSONSerialization.jsonObject(with: Data(text.utf8))
    guard let doc = top as? [String: Any], let list = doc["actionResults"] as? [Any] else {
        throw HarnessError("not an actionResults body: \(text)")
    }
    func entry(_ any: Any, alias: String?) throws -> ResultEntry {
        guard let o = any as? [String: Any], o.count == 1, let (name, v) = o.first, let body = v as? [String: Any],
            let ok = body["succeeded"] as? Bool
        else { throw HarnessError("not an action result: \(any)") }
        return ResultEntry(
            alias: alias, name: name, succeeded: ok, errorMessage: body["errorMessage"] as? String,
            data: body["data"] as? [String: Any])
    }
    var out: [ResultEntry] = []
    for e in list {
        if let o = e as? [String: Any], o.count == 1, let (alias, v) = o.first, let group = v as? [Any] {
            for r in group { out.append(try entry(r, alias: alias)) }
        } else {
            out.append(try entry(e, alias: nil))
        }
    }
    return out
}

func parseObject(_ text: String?) -> [String: Any]? {
    guard let text else { return nil }
    return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}

/// A thing driven through the C test appliance.
final class TestThing {
    let ct: OpaquePointer
    private(set) var freed = false

    init(ct: OpaquePointer) { self.ct = ct }

    var thingID: String? { ct_thing_id(ct).map { String(cString: $0) } }
    var isConnected: Bool { ct_is_connected(ct) == 1 }

    var records: [Record] {
        guard let p = ct_records_json(ct) else { return [] }
        defer { free(p) }
        return (try? JSONDecoder().decode([Record].self, from: Data(String(cString: p).utf8))) ?? []
    }

    func waitForRecords(_ count: Int, timeoutMs: Int = 30_000) -> [Record] {
        poll(timeoutMs: timeoutMs) { ct_record_count(ct) >= count }
        return records
    }

    var logs: String {
        guard let p = ct_logs_text(ct) else { return "" }
        defer { free(p) }
        return String(cString: p)
    }

    func logContains(_ s: String) -> Bool { ct_log_contains(ct, s) == 1 }

    func waitForLog(_ s: String, timeoutMs: Int = 30_000) -> Bool {
        poll(timeoutMs: timeoutMs) { logContains(s) }
    }

    /// Lets the handlers held by ct_behave_hold return; nothing once the
    /// thing is destroyed (its memory is gone).
    func release() {
        if !freed { ct_release(ct) }
    }

    /// thingif_destroy, bounded. Returns its status, or -1 on a timeout.
    @discardableResult
    func destroy(timeoutMs: Int32 = 5000) -> Int32 {
        expectOffPool("thingif_destroy")
        guard !freed else { return RC.ok }
        freed = true
        return ct_free(ct, timeoutMs)
    }
}

/// One test's world: its own broker, framework side and storage root.
final class Env {
    static let appID = "testApp"
    static let appKey = "testAppKey"

    let broker: Broker
    let hub: FrameworkSide
    let root: String
    private var things: [TestThing] = []

    /// `configure` changes the framework side's options (the flood defences' settings).
    /// A hub without a CA for things (password mode): `Env.withoutThingCA`.
    /// With `filesOnlyBroker`, the broker has no plugin and the hub
    /// administers nothing in it (--broker-admin none). `store`: the hub's
    /// store (default a fresh MemoryStore); the caller closes it.
    init(
        filesOnlyBroker: Bool = false, store: HubStore? = nil,
        configure: (inout FrameworkSide.Options) -> Void = { _ in }
    ) throws {
        expectOffPool("Env")
        broker = try filesOnlyBroker ? Broker.startFilesOnly() : Broker.start()
        root = try makeTempDirectory(prefix: "thingif-test")
        // Fast password hashes: the KDF's production cost (600,000 iterations)
        // would add a quarter second to every onboarding and login.
        var options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: broker)
        if filesOnlyBroker { options.brokerAdmin = .none }
        configure(&options)
        guard
            let h = FrameworkSide(options, store: store ?? MemoryStore(secrets: .fastForTests))
        else {
            try? FileManager.default.removeItem(atPath: root)
            throw HarnessError("cannot create the framework side")
        }
        hub = h
        guard hub.start(timeoutMs: 30_000) else {
            hub.stop()
            try? FileManager.default.removeItem(atPath: root)
            throw HarnessError(
                "the framework side did not start: \(hub.startProblem ?? "?"); broker log: \(broker.log)")
        }
    }

    /// The hub as the tests run it: the broker's admin identity, the plain
    /// listener, the TLS port advertised to things, and the things CA with
    /// the broker's certificate listener (certificate mode, the default:
    /// a thing with TLS and no certificate of its own sends a CSR and gets
    /// one; a thing without TLS gets a password), the broker's crlfile as
    /// the things' CRL and its pid file to tell it of each new one.
    static func hubOptions(
        appID: String, appKey: String, broker: Broker, advertisedPort: Int? = nil,
        sharedSubscription: Bool = true
    ) -> FrameworkSide.Options {
        var o = FrameworkSide.Options(
            appID: appID, appKey: appKey, brokerPort: broker.port, advertisedPort: advertisedPort,
            sharedSubscription: sharedSubscription, brokerUsername: broker.adminUsername,
            brokerPassword: broker.adminPassword, advertisedTLSPort: broker.tlsPort)
        o.thingCA = FrameworkSide.ThingCAFiles(
            certFile: BrokerSecrets.thingsCAFile, keyFile: BrokerSecrets.thingsCAKey)
        o.advertisedCertPort = broker.certPort
        o.thingCRL = broker.crlFile
        o.brokerPidFile = broker.pidFile
        o.brokerACL = broker.aclFile
        // Tests drive the trigger schedules and the notification sweep
        // themselves, with clocks of their own (TriggerEngine.now).
        o.runsSchedules = false
        return o
    }

    /// Options without the things CA: every thing gets a password, as from
    /// a hub that does not sign (or Kii's cloud).
    static func withoutThingCA(_ o: inout FrameworkSide.Options) {
        o.thingCA = nil
        o.advertisedCertPort = nil
        o.thingCRL = nil
        o.brokerPidFile = nil
        o.brokerACL = nil
    }

    func close() {
        for t in things { t.destroy() }
        hub.stop()
        broker.stop()
        broker.removeFiles()
        try? FileManager.default.removeItem(atPath: root)
    }

    func storage(_ name: String) -> String { root + "/" + name }

    /// A new handle (not onboarded) on `storage`, pointed at this broker.
    func newThing(storage name: String = "thing", port: Int? = nil, logLevel: Int32 = LogLevel.info) throws -> TestThing
    {
        guard let ct = ct_new(Env.appID, Env.appKey, storage(name), Int32(port ?? broker.port), logLevel) else {
            throw HarnessError("ct_new failed")
        }
        let t = TestThing(ct: ct)
        #expect(ct_set_option(ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 5000) == RC.ok)
        things.append(t)
        return t
    }

    /// A thing with the AirConditioner-Demo handlers, onboarded by itself,
    /// its loop thread running and online at the hub.
    func onlineAircon(
        vendorThingID: String = "AC-0001", storage name: String = "thing", start: Bool = true,
        logLevel: Int32 = LogLevel.info, configure: (TestThing) -> Void = { _ in }
    ) throws -> (TestThing, String) {
        let t = try newThing(storage: name, logLevel: logLevel)
        #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
        configure(t)
        let rc = ct_onboard(t.ct, vendorThingID, "password-1", "AirConditioner", "1.0.0", nil)
        guard rc == RC.ok else { throw HarnessError("onboarding failed: \(rc); logs:\n\(t.logs)") }
        let tid = try #require(t.thingID)
        if start {
            #expect(ct_start(t.ct) == RC.ok)
            guard hub.waitForOnline(tid, timeoutMs: 30_000) else {
                throw HarnessError("\(tid) did not come online; logs:\n\(t.logs)")
            }
        }
        return (t, tid)
    }

    /// Sends a schema command and waits for its results.
    func command(
        _ actions: String, to tid: String, schema: String = Aircon.schema, version: Int = 1,
        title: String? = nil, description: String? = nil, metadata: String? = nil,
        timeoutMs: Int = 30_000
    ) throws -> (id: String, results: [ResultEntry]) {
        let id = try #require(
            hub.sendCommand(
                to: tid, schema: schema, schemaVersion: version, actions: actions,
                title: title, description: description, metadata: metadata))
        let text = try #require(hub.waitForResults(of: id, timeoutMs: timeoutMs), "no results for \(id)")
        return (id, try parseResults(text))
    }

    /// Publishes raw bytes on the thing's command topic. When they hold a
    /// commandID, the hub records that command first (as it does for every
    /// command it sends), so that it accepts the thing's results for it.
    func publish(_ bytes: [UInt8], to tid: String) throws {
        let id = (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])?["commandID"] as? String
        try #require(hub.publishRawCommand(bytes, commandID: id, to: tid))
    }

    func publish(_ text: String, to tid: String) throws { try publish(Array(text.utf8), to: tid) }

    /// Waits for the results of a command published raw.
    func results(of commandID: String, timeoutMs: Int = 30_000) throws -> [ResultEntry] {
        let text = try #require(hub.waitForResults(of: commandID, timeoutMs: timeoutMs), "no results for \(commandID)")
        return try parseResults(text)
    }

    /// A good command still runs: the thing survived what came before.
    func expectAlive(_ tid: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let (_, results) = try command(Aircon.powerOn, to: tid)
        #expect(results.count == 1, sourceLocation: sourceLocation)
        #expect(results.first?.name == "turnPower", sourceLocation: sourceLocation)
        #expect(results.first?.succeeded == true, sourceLocation: sourceLocation)
    }
}

/// Runs `body` in a fresh Env (its hub's options changed by `configure`)
/// and always tears it down.
func withEnv(configure: (inout FrameworkSide.Options) -> Void = { _ in }, _ body: (Env) throws -> Void) throws {
    let env = try Env(configure: configure)
    defer { env.close() }
    try body(env)
}

/// A hub store kept in a file, so that a restarted framework side finds what
/// the previous one stored. The same path always gives the same data.
/// The parent directory is created when missing.
func makeHubStore(_ path: String) throws -> HubStore {
    let parent = (path as NSString).deletingLastPathComponent
    if !parent.isEmpty { try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true) }
    return try SQLiteStore(path: path, secrets: .fastForTests)
}
