// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
@testable import ThingIF
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// "Deployable security", the device side: the thing checks what it applies.
/// Remote configuration (versions, limits), THINGIF_OPT_MAX_PAYLOAD on every
/// topic, the bounded inbox, argument checks of the action API, TLS.
@Suite("Device security", .offPool)
struct DeviceSecurityTests {
    static let notFound = Int32(THINGIF_ERR_NOT_FOUND.rawValue)
    static let exists = Int32(THINGIF_ERR_EXISTS.rawValue)
    static let tls = Int32(THINGIF_ERR_TLS.rawValue)

    /// The thing's MQTT topic (its client ID).
    static func mqttTopic(_ env: Env, _ tid: String) throws -> String {
        try #require(env.hub.thing(tid)?.installations.values.sorted().first)
    }

    /// A configuration with the named action sets (one turnPower action
    /// each) and no timer triggers.
    static func config(version: Int, sets: [String]) -> String {
        let list = sets.map {
            #"{"name":"\#($0)","actions":[{"schema":"\#(Aircon.schema)","schemaVersion":1,"action":"turnPower","params":{"power":true}}]}"#
        }
        return #"{"version":\#(version),"actionSets":[\#(list.joined(separator: ","))],"timerTriggers":[]}"#
    }

    func publishConfig(_ env: Env, _ topic: String, _ text: String) throws {
        try #require(env.hub.publishRetained(topic: "p/\(topic)/config", payload: Array(text.utf8)))
    }

    // MARK: 1. remote configuration

    @Test(
        "Remote configuration: only a higher version applies; lower and equal ones are ignored with a log line, also after a restart"
    )
    func configVersions() throws {
        try withEnv { env in
            var (t, tid) = try env.onlineAircon()
            let topic = try Self.mqttTopic(env, tid)
            try publishConfig(env, topic, Self.config(version: 2, sets: ["a"]))
            #expect(t.waitForLog("applied remote configuration version 2"), "logs:\n\(t.logs)")
            #expect(ct_action_set_create(t.ct, "a") == Self.exists)

            // Lower: ignored, with a log line.
            try publishConfig(env, topic, Self.config(version: 1, sets: ["b"]))
            #expect(t.waitForLog("remote configuration version 1 ignored: version 2 is applied"), "logs:\n\(t.logs)")
            #expect(ct_action_set_execute(t.ct, "b") == Self.notFound)
            // Equal: ignored too (a debug line), the content is not looked at.
            try publishConfig(env, topic, Self.config(version: 2, sets: ["c"]))
            // Must not happen: the equal version applied; room for it to show.
            usleep(300_000)
            #expect(ct_action_set_execute(t.ct, "c") == Self.notFound)
            #expect(t.logs.components(separatedBy: "applied remote configuration version 2").count == 2)

            // A restart: the applied version was kept in storage_dir, so the
            // retained lower version is still refused.
            try publishConfig(env, topic, Self.config(version: 1, sets: ["b"]))
            // For the retained lower version to reach the broker; if later, the check only weakens.
            usleep(200_000)
            t.destroy()
            (t, _) = try env.onlineAircon()
            #expect(t.waitForLog("remote configuration version 1 ignored: version 2 is applied"), "logs:\n\(t.logs)")
            #expect(ct_action_set_execute(t.ct, "b") == Self.notFound)
            #expect(ct_action_set_create(t.ct, "a") == Self.exists)

            // Higher: applied, and it replaces the remote sets.
            try publishConfig(env, topic, Self.config(version: 3, sets: ["d"]))
            #expect(t.waitForLog("applied remote configuration version 3"), "logs:\n\(t.logs)")
            #expect(ct_action_set_create(t.ct, "d") == Self.exists)
            #expect(ct_action_set_execute(t.ct, "a") == Self.notFound)
        }
    }

    @Test(
        "Remote configuration over a limit is refused whole, with a log line naming the limit; the version is not taken"
    )
    func configLimits() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                // Let the config-size limit, not the payload limit, speak.
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_MAX_PAYLOAD.rawValue), 1 << 20) == RC.ok)
            }
            let topic = try Self.mqttTopic(env, tid)
            typealias L = AutomationLimits
            let action =
                #"{"schema":"\#(Aircon.schema)","schemaVersion":1,"action":"turnPower","params":{"power":true}}"#

            // Too many action sets.
            try publishConfig(env, topic, Self.config(version: 10, sets: (0...L.maxActionSets).map { "s\($0)" }))
            #expect(
                t.waitForLog(
                    "\(L.maxActionSets + 1) action sets, over AutomationLimits.maxActionSets (\(L.maxActionSets))"),
                "logs:\n\(t.logs)")
            // Too many actions in one set.
            let actions = Array(repeating: action, count: L.maxActionsPerSet + 1).joined(separator: ",")
            try publishConfig(env, topic, #"{"version":11,"actionSets":[{"name":"big","actions":[\#(actions)]}]}"#)
            #expect(
                t.waitForLog(
                    "action set big: \(L.maxActionsPerSet + 1) actions, over AutomationLimits.maxActionsPerSet"),
                "logs:\n\(t.logs)")
            // Too many timer triggers (refused before any is decoded).
            let timers = Array(repeating: "{}", count: L.maxTimerTriggers + 1).joined(separator: ",")
            try publishConfig(env, topic, #"{"version":12,"actionSets":[],"timerTriggers":[\#(timers)]}"#)
            #expect(
                t.waitForLog("\(L.maxTimerTriggers + 1) timer triggers, over AutomationLimits.maxTimerTriggers"),
                "logs:\n\(t.logs)")
            // Too many action sets in one timer trigger.
            let names = (0...L.maxActionSetsPerTrigger).map { "s\($0)" }
            let sets = names.map { #"{"name":"\#($0)","actions":[\#(action)]}"# }.joined(separator: ",")
            let quoted = names.map { "\"\($0)\"" }.joined(separator: ",")
            let future = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            try publishConfig(
                env, topic,
                #"{"version":13,"actionSets":[\#(sets)],"timerTriggers":[{"name":"wide","fireDate":\#(future),"timeZone":"UTC","actionSets":[\#(quoted)],"enabled":true}]}"#
            )
            #expect(t.waitForLog("AutomationLimits.maxActionSetsPerTrigger"), "logs:\n\(t.logs)")
            // Too large.
            let pad = String(repeating: "x", count: L.maxConfigBytes)
            try publishConfig(env, topic, #"{"version":14,"actionSets":[],"pad":"\#(pad)"}"#)
            #expect(t.waitForLog("over AutomationLimits.maxConfigBytes (\(L.maxConfigBytes))"), "logs:\n\(t.logs)")

            #expect(t.logs.components(separatedBy: "remote configuration refused, nothing applied").count - 1 == 5)
            #expect(!t.logContains("applied remote configuration"))
            #expect(ct_action_set_execute(t.ct, "s0") == Self.notFound)
            // None of the refused versions was taken: version 5 still applies.
            try publishConfig(env, topic, Self.config(version: 5, sets: ["ok"]))
            #expect(t.waitForLog("applied remote configuration version 5"), "logs:\n\(t.logs)")
            #expect(ct_action_set_create(t.ct, "ok") == Self.exists)
            try env.expectAlive(tid)
        }
    }

    @Test("The hub refuses an automation change whose configuration would pass AutomationLimits.maxConfigBytes")
    func hubKeepsConfigSize() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-SIZE-1", owner: "user:\(uid)", token: token)
            let sets = "\(e.target(tid))/action-sets"
            // Each action just under the hub's per-action limit (16 KiB).
            let action: [String: Any] = [
                "schema": "AC", "schemaVersion": 1, "action": "turnPower",
                "params": ["pad": String(repeating: "x", count: 15_000)]
            ]
            // (Each request stays under the hub's 64 KiB body limit.)
            #expect(
                try await e.call(
                    "PUT", "\(sets)/three", token: token,
                    json: ["actions": Array(repeating: action, count: 3)]
                ).status == 204)
            // Together over the limit: refused, the first stays.
            let two = try await e.call(
                "PUT", "\(sets)/two", token: token, json: ["actions": Array(repeating: action, count: 2)])
            #expect(
                two.status == 400 && two.text.contains("AutomationLimits.maxConfigBytes"), "\(two.status) \(two.text)")
            let names = (try await e.get(sets, token: token).json["actionSets"] as? [[String: Any]])?.compactMap {
                $0["name"] as? String
            }
            #expect(names == ["three"])
            let published = try #require(e.hub.automation.message(thingID: tid)).dump().utf8.count
            #expect(published <= AutomationLimits.maxConfigBytes)
        }
    }

    // MARK: 2. THINGIF_OPT_MAX_PAYLOAD on every topic

    @Test(
        "A message over THINGIF_OPT_MAX_PAYLOAD is dropped before parsing on every topic: commands, replies, configuration"
    )
    func maxPayloadEveryTopic() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_MAX_PAYLOAD.rawValue), 512) == RC.ok)
            }
            let topic = try Self.mqttTopic(env, tid)
            let pad = String(repeating: "x", count: 600)
            // Configuration: valid, but too large for this thing.
            let config =
                #"{"version":1,"actionSets":[{"name":"big","actions":[{"schema":"\#(Aircon.schema)","schemaVersion":1,"action":"turnPower","params":{"pad":"\#(pad)"}}]}]}"#
            try publishConfig(env, topic, config)
            #expect(t.waitForLog("bytes on p/\(topic)/config: over the limit of 512 bytes"), "logs:\n\(t.logs)")
            #expect(!t.logContains("remote configuration"), "the oversized configuration was parsed")
            #expect(ct_action_set_execute(t.ct, "big") == Self.notFound)
            // A reply.
            let reply = "200\r\nX-Kii-RequestID: nobody\r\n\r\n{\"pad\":\"\(pad)\"}"
            try #require(env.hub.publishRaw(topic: "p/\(topic)/resp", payload: Array(reply.utf8)))
            #expect(t.waitForLog("bytes on p/\(topic)/resp: over the limit of 512 bytes"), "logs:\n\(t.logs)")
            // A command.
            try env.publish(
                #"{"commandID":"cmd-big","schema":"\#(Aircon.schema)","schemaVersion":1,"actions":[{"turnPower":{"power":true,"pad":"\#(pad)"}}]}"#,
                to: tid)
            #expect(t.waitForLog("bytes on \(topic): over the limit of 512 bytes"), "logs:\n\(t.logs)")
            try env.expectAlive(tid)
            // Not run, but reported (its commandID is in its first bytes), so
            // the command has an outcome.
            let reported = env.hub.results(of: "cmd-big") ?? ""
            #expect(
                reported.contains("\"succeeded\":false") && reported.contains("over the limit of 512 bytes"),
                "\(reported)")
            #expect(t.records.count == 1)
        }
    }

    // MARK: 3. the bounded inbox

    @Test(
        "A flood of commands while the handler is slow: every command runs exactly once and the inbox never passes THINGIF_OPT_INBOX_MAX"
    )
    func boundedInbox() throws {
        try withEnv { env in
            // Without the bound this flood fills the inbox to about 40.
            let bound = 4
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_INBOX_MAX.rawValue), 0) == RC.invalid)
                #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_INBOX_MAX.rawValue), bound) == RC.ok)
                #expect(ct_behave_sleep(t.ct, "turnPower", 15) == 0)
            }
            let n = 80
            var ids: [String] = []
            for _ in 0..<n {
                ids.append(
                    try #require(
                        env.hub.sendCommand(
                            to: tid, schema: Aircon.schema, schemaVersion: 1,
                            actions: Aircon.powerOn)))
            }
            #expect(
                poll(timeoutMs: 30_000) { ids.allSatisfy { env.hub.results(of: $0) != nil } },
                "not every command got results; logs:\n\(t.logs)")
            let ran = t.records.compactMap(\.commandID)
            #expect(ran.count == n)
            #expect(Set(ran) == Set(ids))
            let high = inboxHighWater(t)
            #expect(high <= bound, "the inbox held \(high) messages, over the bound \(bound)")
            #expect(high == bound, "the flood never filled the inbox (high water \(high)): the test proves nothing")
            try env.expectAlive(tid)
        }
    }

    // MARK: 4. the action API checks its arguments

    /// "\xC9t\xE9\xFF bad": Latin-1 bytes, not UTF-8.
    static let latin1: [CChar] = [0xC9, 0x74, 0xE9, 0xFF, 0x20, 0x62, 0x61, 0x64, 0x00].map { CChar(bitPattern: $0) }

    @Test("thingif_action_fail with a message that is not UTF-8: the action still fails, the bytes replaced by U+FFFD")
    func failWithBadUTF8() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_fail(t.ct, "setFanSpeed", Self.latin1) == 0)
            }
            let (_, results) = try env.command(Aircon.allActions, to: tid)
            try #require(results.count == 3)
            #expect(results.map(\.succeeded) == [true, true, false])
            #expect(results[2].errorMessage == "\u{FFFD}t\u{FFFD}\u{FFFD} bad")
            #expect(t.records.last?.failRc == Int(RC.ok))
        }
    }

    @Test("thingif_deferred_complete with a message that is not UTF-8: THINGIF_ERR_INVALID and the handle stays usable")
    func deferredBadMessageKeepsHandle() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon { t in
                #expect(ct_behave_defer(t.ct, "setFanSpeed", 1) == 0)
            }
            let id = try #require(
                env.hub.sendCommand(
                    to: tid, schema: Aircon.schema, schemaVersion: 1,
                    actions: Aircon.allActions))
            _ = t.waitForRecords(3)
            #expect(ct_deferred_count(t.ct) == 1)
            #expect(ct_complete_deferred(t.ct, "setFanSpeed", Self.latin1, #"{"a":1}"#) == RC.invalid)
            // Must not happen: the invalid completion sending results; room for it to show.
            usleep(300_000)
            #expect(env.hub.results(of: id) == nil, "an invalid completion completed the action")
            // The same handle, completed properly now.
            #expect(ct_deferred_count(t.ct) == 1)
            #expect(ct_complete_deferred(t.ct, "setFanSpeed", "the fan motor is stuck", nil) == RC.ok)
            let results = try env.results(of: id)
            #expect(results.map(\.succeeded) == [true, true, false])
            #expect(results[2].errorMessage == "the fan motor is stuck")
            try env.expectAlive(tid)
        }
    }

    // MARK: 5. TLS without a TLS broker

    @Test("thingif_set_tls: an unreadable file, or a certificate without its key, gives THINGIF_ERR_TLS and a log line")
    func setTLSChecks() throws {
        try withEnv { env in
            let t = try env.newThing()
            let dir = env.storage("pki")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let ca = dir + "/ca.pem"
            try "not a certificate\n".write(toFile: ca, atomically: true, encoding: .utf8)
            #expect(ct_set_tls(t.ct, dir + "/missing.pem", nil, nil) == Self.tls)
            #expect(t.logContains("missing.pem cannot be read"))
            #expect(ct_set_tls(t.ct, ca, ca, nil) == Self.tls)
            #expect(ct_set_tls(t.ct, ca, nil, ca) == Self.tls)
            #expect(t.logContains("a client certificate needs its key"))
            let unreadable = dir + "/unreadable.pem"
            try "x".write(toFile: unreadable, atomically: true, encoding: .utf8)
            chmod(unreadable, 0)
            if getuid() != 0 { #expect(ct_set_tls(t.ct, unreadable, nil, nil) == Self.tls) }
            #expect(ct_set_tls(t.ct, ca, nil, nil) == RC.ok)
        }
    }

    @Test("With TLS set, a TLS setup that fails is THINGIF_ERR_TLS from onboarding and never a plain-text connection")
    func tlsNeverFallsBack() throws {
        try withEnv { env in
            let dir = env.storage("pki")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let ca = dir + "/ca.pem"
            try "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".write(
                toFile: ca, atomically: true,
                encoding: .utf8)
            // Onboarding: the bootstrap connection.
            let t = try env.newThing()
            #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
            #expect(ct_set_tls(t.ct, ca, nil, nil) == RC.ok)
            #expect(
                ct_onboard(t.ct, "AC-TLS", "password-1", "AirConditioner", "1.0.0", nil) == Self.tls, "logs:\n\(t.logs)"
            )

            // The thing's own connection: onboarded in plain text, then TLS set.
            let (u, tid) = try env.onlineAircon(vendorThingID: "AC-PLAIN", storage: "plain", start: false)
            let topic = try Self.mqttTopic(env, tid)
            #expect(ct_set_tls(u.ct, ca, nil, nil) == RC.ok)
            #expect(ct_start(u.ct) == RC.ok)
            #expect(
                poll {
                    u.logContains("TLS setup failed") || u.logContains("(TLS): A TLS error")
                        || u.logContains("TLS handshake with the broker failed")
                }, "logs:\n\(u.logs)")
            // Must not happen: the thing online after the TLS failure; room for it to show.
            usleep(1_000_000)
            #expect(!env.hub.presence.isOnline(tid))
            // The broker's log (flushed when it exits): one bootstrap session,
            // the plain onboarding's; none of the thing.
            t.destroy()
            u.destroy()
            env.broker.stop()
            let log = env.broker.log
            #expect(Self.sessionPorts(log, clientPrefix: "thingif-bootstrap-") == [env.broker.port], "broker:\n\(log)")
            #expect(Self.sessionPorts(log, clientPrefix: topic).isEmpty, "the thing connected; broker:\n\(log)")
        }
    }

    // MARK: 5. TLS against the test broker's TLS and mutual-TLS listeners

    /// The listener port of every session of a client whose ID starts with
    /// `clientPrefix`, from mosquitto's notice lines: "New connection from
    /// A on port N." then "New client connected from A as ID (…)".
    static func sessionPorts(_ log: String, clientPrefix: String) -> [Int] {
        sessions(log).filter { $0.client.hasPrefix(clientPrefix) }.map(\.port)
    }

    /// Every session in mosquitto's log, in order: its client ID and the
    /// listener port it came in on (-1 when the log does not say).
    static func sessions(_ log: String) -> [(client: String, port: Int)] {
        var portOf: [String: Int] = [:]
        var out: [(client: String, port: Int)] = []
        for line in log.split(separator: "\n").map(String.init) {
            if let r = line.range(of: "New connection from ") {
                let rest = line[r.upperBound...].split(separator: " ")
                if rest.count >= 4, rest[1] == "on", rest[2] == "port" {
                    portOf[String(rest[0])] = Int(rest[3].trimmingCharacters(in: CharacterSet(charactersIn: ".")))
                }
            } else if let r = line.range(of: "New client connected from ") {
                let rest = line[r.upperBound...].split(separator: " ")
                if rest.count >= 3, rest[1] == "as" {
                    out.append((String(rest[2]), portOf[String(rest[0])] ?? -1))
                }
            }
        }
        return out
    }

    /// A CA the broker does not know, made with openssl.
    func otherCA(_ env: Env) throws -> String {
        let dir = env.storage("other-ca")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let rc = try runChild(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-keyout", dir + "/ca.key", "-out",
                dir + "/ca.crt", "-days", "2", "-subj", "/CN=another CA"
            ],
            logPath: dir + "/openssl.log")
        try #require(rc == 0, "openssl failed")
        return dir + "/ca.crt"
    }

    /// A thing with the aircon handlers on `storage`, its bootstrap broker at
    /// 127.0.0.1:`port`, TLS set with `ca` (and the client certificate when
    /// `clientCert`).
    func tlsThing(_ env: Env, storage: String, port: Int, ca: String, clientCert: Bool) throws -> TestThing {
        let t = try env.newThing(storage: storage)
        #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
        Self.useTLS(t, port: port, ca: ca, clientCert: clientCert)
        return t
    }

    /// Points `t`'s bootstrap broker at 127.0.0.1:`port` and sets TLS with
    /// `ca` (and the client certificate when `clientCert`).
    static func useTLS(_ t: TestThing, port: Int, ca: String, clientCert: Bool) {
        #expect(ct_set_broker(t.ct, "127.0.0.1", Int32(port)) == RC.ok)
        let rc =
            clientCert
            ? ct_set_tls(t.ct, ca, BrokerSecrets.clientCert, BrokerSecrets.clientKey)
            : ct_set_tls(t.ct, ca, nil, nil)
        #expect(rc == RC.ok)
    }

    @Test(
        "TLS: onboarding on the mutual-TLS listener with the client certificate, then commands on the endpoint's portSSL"
    )
    func commandsOverTLS() throws {
        try withEnv { env in
            let t = try tlsThing(
                env, storage: "tls", port: env.broker.mtlsPort, ca: env.broker.caFile, clientCert: true)
            let rc = ct_onboard(t.ct, "AC-TLS", "password-1", "AirConditioner", "1.0.0", nil)
            try #require(rc == RC.ok, "logs:\n\(t.logs)\nbroker:\n\(env.broker.log)")
            let tid = try #require(t.thingID)
            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(t.logs)\nbroker:\n\(env.broker.log)")
            try env.expectAlive(tid)
            let topic = try Self.mqttTopic(env, tid)
            t.destroy()
            env.broker.stop()  // flushes its log
            let log = env.broker.log
            // Bootstrap on the port of thingif_set_broker; the thing on the
            // mqttEndpoint's portSSL (the hub advertises the TLS listener).
            #expect(
                Self.sessionPorts(log, clientPrefix: "thingif-bootstrap-") == [env.broker.mtlsPort], "broker:\n\(log)")
            let ports = Self.sessionPorts(log, clientPrefix: topic)
            #expect(!ports.isEmpty && ports.allSatisfy { $0 == env.broker.tlsPort }, "\(ports); broker:\n\(log)")
        }
    }

    @Test("Mutual TLS: the thing's own connection works with the client certificate; without it onboarding fails")
    func mutualTLS() throws {
        try withEnv { env in
            // A hub that hands out the mutual-TLS listener as portSSL.
            env.hub.stop()
            var options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: env.broker)
            options.advertisedTLSPort = env.broker.mtlsPort
            // The tests' password hashing, as Env's hub: the production
            // cost made this onboarding miss its 5 s on a busy machine.
            let hub = try #require(FrameworkSide(options, store: MemoryStore(secrets: .fastForTests)))
            try #require(hub.start(timeoutMs: 30_000), "hub: \(hub.startProblem ?? "?")")
            defer { hub.stop() }

            // Without the client certificate: refused, and no session.
            let bare = try tlsThing(
                env, storage: "bare", port: env.broker.mtlsPort, ca: env.broker.caFile, clientCert: false)
            let refused = ct_onboard(bare.ct, "AC-BARE", "password-1", "AirConditioner", "1.0.0", nil)
            #expect(refused != RC.ok, "logs:\n\(bare.logs)")
            #expect(refused == Self.tls || refused == RC.connect, "\(refused); logs:\n\(bare.logs)")

            // With it: onboarding, the thing's connection and a command.
            let t = try tlsThing(
                env, storage: "mtls", port: env.broker.mtlsPort, ca: env.broker.caFile, clientCert: true)
            try #require(
                ct_onboard(t.ct, "AC-MTLS", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok,
                "logs:\n\(t.logs)")
            let tid = try #require(t.thingID)
            #expect(ct_start(t.ct) == RC.ok)
            #expect(hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(t.logs)")
            let id = try #require(
                hub.sendCommand(to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.powerOn))
            let text = try #require(hub.waitForResults(of: id, timeoutMs: 30_000), "logs:\n\(t.logs)")
            #expect(try parseResults(text).map(\.succeeded) == [true])
            let topic = try #require(hub.thing(tid)?.installations.values.sorted().first)
            t.destroy()
            bare.destroy()
            env.broker.stop()  // flushes its log
            let log = env.broker.log
            // One bootstrap session: the one with the certificate.
            #expect(
                Self.sessionPorts(log, clientPrefix: "thingif-bootstrap-") == [env.broker.mtlsPort], "broker:\n\(log)")
            let ports = Self.sessionPorts(log, clientPrefix: topic)
            #expect(!ports.isEmpty && ports.allSatisfy { $0 == env.broker.mtlsPort }, "\(ports); broker:\n\(log)")
        }
    }

    @Test(
        "A CA that does not know the broker: THINGIF_ERR_TLS from onboarding, backoff on the running connection, no plain-text session"
    )
    func wrongCA() throws {
        try withEnv { env in
            let wrong = try otherCA(env)
            let t = try tlsThing(env, storage: "wrong", port: env.broker.tlsPort, ca: wrong, clientCert: false)
            #expect(
                ct_onboard(t.ct, "AC-WRONG", "password-1", "AirConditioner", "1.0.0", nil) == Self.tls,
                "logs:\n\(t.logs)")

            // The running connection: onboarded over TLS, then restarted with the wrong CA.
            let good = try tlsThing(
                env, storage: "good", port: env.broker.tlsPort, ca: env.broker.caFile, clientCert: false)
            try #require(
                ct_onboard(good.ct, "AC-GOOD", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok,
                "logs:\n\(good.logs)")
            let tid = try #require(good.thingID)
            let topic = try Self.mqttTopic(env, tid)
            good.destroy()
            let again = try tlsThing(env, storage: "good", port: env.broker.tlsPort, ca: wrong, clientCert: false)
            #expect(ct_set_option(again.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 100) == RC.ok)
            #expect(ct_set_option(again.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 400) == RC.ok)
            #expect(ct_onboard(again.ct, "AC-GOOD", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok)  // stored
            #expect(ct_start(again.ct) == RC.ok)
            #expect(again.waitForLog("ERROR TLS handshake with the broker failed"), "logs:\n\(again.logs)")
            // Must not happen: a fallback connection; room for it to show.
            usleep(1_500_000)
            #expect(!again.isConnected)
            #expect(!env.hub.presence.isOnline(tid))
            again.destroy()
            t.destroy()
            env.broker.stop()  // flushes its log
            let log = env.broker.log
            // One bootstrap session (the good CA's), none of the thing.
            #expect(
                Self.sessionPorts(log, clientPrefix: "thingif-bootstrap-") == [env.broker.tlsPort], "broker:\n\(log)")
            #expect(Self.sessionPorts(log, clientPrefix: topic).isEmpty, "broker:\n\(log)")
        }
    }
}

/// The most messages the thing's inbox has held (a test hook on the library's
/// internals, through the handle inside the test appliance).
func inboxHighWater(_ t: TestThing) -> Int {
    let th = Unmanaged<Thing>.fromOpaque(ct_handle(t.ct)!).takeUnretainedValue()
    return th.pipeline.state.withLock { $0.inboxHighWater }
}
