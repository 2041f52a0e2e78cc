// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

private func mode(_ path: String) -> mode_t? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return st.st_mode & 0o777
}

/// Both onboarding paths, the stored identity, and the ways onboarding fails.
@Suite("Onboarding", .offPool)
struct OnboardingTests {
    @Test("Onboarding by the thing sends vendorThingID, password, type, firmware version and properties")
    func onboardingByTheThing() throws {
        try withEnv { env in
            let t = try env.newThing()
            #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
            #expect(t.thingID == nil)
            let rc = ct_onboard(
                t.ct, "AC-0001", "secret-pw", "AirConditioner", "1.0.3",
                #"{"manufacturer":"Acme","productName":"Breeze 9000","_serial":"SN-1"}"#)
            try #require(rc == RC.ok, "onboarding: \(rc)\n\(t.logs)")
            let record = try #require(env.hub.thing(vendorThingID: "AC-0001"))
            #expect(t.thingID == record.thingID)
            #expect(record.passwordHash.map { ThingIFHub.PasswordHash.verify("secret-pw", $0) } == true)
            #expect(record.thingType == "AirConditioner")
            #expect(record.firmwareVersion == "1.0.3")

            let request = try #require(env.hub.requests.first { $0.path == "onboardings" })
            #expect(request.method == "POST")
            #expect(request.status == 200)
            let body = try #require(parseObject(request.body))
            #expect(body["vendorThingID"] as? String == "AC-0001")
            #expect(body["layoutPosition"] as? String == "STANDALONE")
            let props = try #require(body["thingProperties"] as? [String: Any])
            #expect(props["manufacturer"] as? String == "Acme")
            #expect(props["productName"] as? String == "Breeze 9000")
            // The bootstrap connection has a client ID of its own.
            #expect(request.clientID.hasPrefix("thingif-bootstrap-"))

            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForOnline(record.thingID, timeoutMs: 30_000))
            try env.expectAlive(record.thingID)
        }
    }

    @Test("An identity handed over by the app: one installation, endpoint fetched, commands arrive")
    func handedOverIdentity() throws {
        try withEnv { env in
            let (tid, token) = try #require(
                env.hub.onboardByApp(vendorThingID: "AC-BLE-1", password: "pw", thingType: "AirConditioner"))
            let t = try env.newThing()
            #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
            let rc = ct_use_onboarded(t.ct, tid, token)
            try #require(rc == RC.ok, "use_onboarded: \(rc)\n\(t.logs)")
            #expect(t.thingID == tid)
            let requests = env.hub.requests
            #expect(requests.filter { $0.method == "POST" && $0.path == "installations" }.count == 1)
            #expect(requests.filter { $0.method == "GET" && $0.path.hasSuffix("/mqtt-endpoint") }.count == 1)
            #expect(requests.allSatisfy { $0.status < 300 })
            #expect(env.hub.thing(tid)?.installations.count == 1)

            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000))
            try env.expectAlive(tid)
        }
    }

    @Test(
        "A restart on the same storage dir onboards from storage: no new request, commands still arrive, file mode 0600"
    )
    func persistedOnboarding() throws {
        try withEnv { env in
            let storage = "nested/dir/ac"
            let (first, tid) = try env.onlineAircon(storage: storage)
            try env.expectAlive(tid)
            #expect(first.destroy() == RC.ok)

            let dir = env.storage(storage)
            #expect(mode(dir) == 0o700)
            let files = try FileManager.default.contentsOfDirectory(atPath: dir)
            #expect(!files.isEmpty)
            for f in files {
                #expect(mode(dir + "/" + f) == 0o600, "\(f) must be private")
            }
            let identity = try String(contentsOfFile: dir + "/identity.json", encoding: .utf8)
            #expect(identity.contains(tid))

            let onboardings = env.hub.requests.filter { $0.path == "onboardings" }.count
            #expect(onboardings == 1)
            #expect(env.hub.thing(tid)?.installations.count == 1)

            let (second, tid2) = try env.onlineAircon(storage: storage)
            #expect(tid2 == tid)
            #expect(
                env.hub.requests.filter { $0.path == "onboardings" || $0.path == "installations" }.count == onboardings)
            #expect(env.hub.thing(tid)?.installations.count == 1)
            _ = try env.command(Aircon.allActions, to: tid)
            #expect(second.records.count == 3)
        }
    }

    @Test("A handed-over identity is kept: a restart creates no new installation")
    func persistedHandedOverIdentity() throws {
        try withEnv { env in
            let (tid, token) = try #require(env.hub.onboardByApp(vendorThingID: "AC-BLE-2", password: "pw"))
            for round in 0..<2 {
                let t = try env.newThing(storage: "ble")
                #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
                #expect(ct_use_onboarded(t.ct, tid, token) == RC.ok)
                #expect(ct_start(t.ct) == RC.ok)
                #expect(t.waitForLog("connected; commands arrive on"))
                try env.expectAlive(tid)
                #expect(env.hub.requests.filter { $0.path == "installations" }.count == 1, "round \(round)")
                #expect(env.hub.thing(tid)?.installations.count == 1)
                #expect(t.destroy() == RC.ok)
            }
            #expect(mode(env.storage("ble") + "/identity.json") == 0o600)
        }
    }

    @Test("A wrong password for a registered vendorThingID gives THINGIF_ERR_REJECTED")
    func wrongPassword() throws {
        try withEnv { env in
            _ = try #require(env.hub.onboardByApp(vendorThingID: "AC-0009", password: "right"))
            let t = try env.newThing()
            #expect(ct_onboard(t.ct, "AC-0009", "wrong", nil, nil, nil) == RC.rejected)
            #expect(t.thingID == nil)
            #expect(t.logContains("rejected"))
            #expect(env.hub.requests.last?.status == 403)
            #expect(ct_loop_once(t.ct, 0) == RC.notOnboarded)
            // The right one works on the same handle.
            #expect(ct_onboard(t.ct, "AC-0009", "right", nil, nil, nil) == RC.ok)
            #expect(t.thingID == env.hub.thing(vendorThingID: "AC-0009")?.thingID)
        }
    }

    @Test("No broker on the port gives THINGIF_ERR_CONNECT, promptly")
    func noBroker() throws {
        let root = try makeTempDirectory(prefix: "thingif-nobroker")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let port = try #require(Broker.freePort())
        // Not inside #require: its expansion would evaluate the C string
        // arguments apart from the call and pass dangling pointers.
        let made = ct_new("app", "key", root + "/thing", Int32(port), LogLevel.info)
        let ct = try #require(made)
        let t = TestThing(ct: ct)
        defer { t.destroy() }
        #expect(ct_set_option(ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 2000) == RC.ok)
        let start = Date()
        #expect(ct_onboard(ct, "AC-0001", "pw", nil, nil, nil) == RC.connect)
        #expect(ct_use_onboarded(ct, "th.1", "token") == RC.connect)
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(t.logContains("cannot connect to 127.0.0.1:\(port)"))
        #expect(t.thingID == nil)
    }

    @Test("Invalid thing properties give THINGIF_ERR_JSON before any request")
    func invalidProperties() throws {
        try withEnv { env in
            let t = try env.newThing()
            #expect(ct_onboard(t.ct, "AC-0001", "pw", nil, nil, #"{"manufacturer":"Acme""#) == RC.json)
            #expect(ct_onboard(t.ct, "AC-0001", "pw", nil, nil, #"["not","an","object"]"#) == RC.json)
            #expect(ct_onboard(t.ct, "AC-0001", "pw", nil, nil, #"{"a":1,"a":2}"#) == RC.json)
            #expect(env.hub.requests.isEmpty)
            #expect(t.thingID == nil)
        }
    }
}

/// The connection to the broker and the framework going away.
@Suite("Connection", .offPool)
struct ConnectionTests {
    @Test("A broker with no framework behind it: onboarding gives THINGIF_ERR_TIMEOUT within the request timeout")
    func noFrameworkTimesOut() throws {
        // A hub made the app's bootstrap identity in the broker, then went away.
        let env = try Env()
        env.hub.stop()
        let broker = env.broker
        let root = try makeTempDirectory(prefix: "thingif-nohub")
        defer {
            env.close()
            try? FileManager.default.removeItem(atPath: root)
        }
        let made = ct_new(Env.appID, Env.appKey, root + "/thing", Int32(broker.port), LogLevel.info)
        let t = TestThing(ct: try #require(made))
        defer { t.destroy() }
        #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 300) == RC.ok)
        let start = Date()
        #expect(ct_onboard(t.ct, "AC-0001", "pw", nil, nil, nil) == Int32(THINGIF_ERR_TIMEOUT.rawValue))
        #expect(ct_use_onboarded(t.ct, "th.1", "token") == Int32(THINGIF_ERR_TIMEOUT.rawValue))
        #expect(Date().timeIntervalSince(start) < 3)
        #expect(t.logContains("no answer to POST onboardings in time"))
        #expect(t.thingID == nil)
    }

    @Test("After the broker restarts, the thing reconnects by itself and commands arrive again")
    func reconnectsAfterBrokerRestart() throws {
        let env = try Env()
        var restarted: Broker?
        defer {
            env.close()
            restarted?.stop()
            restarted?.removeFiles()
        }
        let (t, tid) = try env.onlineAircon { t in
            #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 50) == RC.ok)
            #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 300) == RC.ok)
        }
        try env.expectAlive(tid)
        env.broker.stop()
        #expect(poll { !t.isConnected })
        #expect(
            poll { t.logContains("connection to the broker lost") || t.logContains("disconnected from the broker") })
        restarted = try env.broker.restarted()
        // Both the thing and the framework side come back on their own.
        #expect(poll(timeoutMs: 30_000) { t.isConnected && env.hub.presence.isOnline(tid) }, "\(t.logs)")
        #expect(
            poll(timeoutMs: 30_000) {
                guard
                    let id = env.hub.sendCommand(
                        to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.powerOff)
                else { return false }
                return env.hub.waitForResults(of: id, timeoutMs: 1000) != nil
            })
    }
}
