// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
@testable import ThingIF
@testable import ThingIFHub

/// Things with certificates end to end: the library makes its
/// key and a CSR, the hub signs a certificate for the installation's topic
/// with the things CA, and the thing takes commands on the broker's
/// certificate listener, where pattern rules stand in for per-thing records.
@Suite("Certificate mode", .offPool)
struct CertificateModeTests {
    /// A thing with the aircon handlers whose bootstrap goes to the TLS
    /// listener, with TLS and no certificate of the user's own.
    static func certThing(_ env: Env, storage: String) throws -> TestThing {
        let t = try env.newThing(storage: storage)
        #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
        #expect(ct_set_broker(t.ct, "127.0.0.1", Int32(env.broker.tlsPort)) == RC.ok)
        #expect(ct_set_tls(t.ct, env.broker.caFile, nil, nil) == RC.ok)
        return t
    }

    /// A thing with a certificate, onboarded as `vendorThingID` and, with
    /// `start`, online at the hub; and its thingID.
    static func onboardedCertThing(
        _ env: Env, storage: String, vendorThingID: String, start: Bool = true, gateway: Bool = false
    ) throws
        -> (TestThing, String)
    {
        let t = try certThing(env, storage: storage)
        if gateway { #expect(ct_gateway(t.ct) == RC.ok) }
        try #require(
            ct_onboard(t.ct, vendorThingID, "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(t.logs)")
        let tid = try #require(t.thingID)
        if start {
            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(t.logs)")
        }
        return (t, tid)
    }

    /// The mqttTopic of the thing stored in `storage`.
    static func topic(_ env: Env, storage: String) throws -> String {
        let ep = try #require(try identity(env, storage: storage)["mqttEndpoint"] as? [String: Any])
        return try #require(ep["mqttTopic"] as? String)
    }

    /// The thing's stored identity.json as JSON.
    static func identity(_ env: Env, storage: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: env.storage(storage) + "/identity.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func mode(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_mode & 0o777) : -1
    }

    /// Usernames of the clients in the broker's dynamic-security file.
    static func pluginClients(_ broker: Broker) -> [String] {
        guard let data = FileManager.default.contents(atPath: broker.dynsecFile),
            let j = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let clients = j["clients"] as? [[String: Any]]
        else { return [] }
        return clients.compactMap { $0["username"] as? String }
    }

    @Test(
        "A thing with TLS gets a certificate for its topic, takes commands on the certificate listener, and the broker keeps no record of it"
    )
    func onboardsWithCertificate() throws {
        try withEnv { env in
            let t = try Self.certThing(env, storage: "cert")
            let rc = ct_onboard(t.ct, "AC-CERT", "password-1", "AirConditioner", "1.0.0", nil)
            try #require(rc == RC.ok, "logs:\n\(t.logs)\nbroker:\n\(tail(env.broker.log))")
            let tid = try #require(t.thingID)
            let id = try Self.identity(env, storage: "cert")
            let ep = try #require(id["mqttEndpoint"] as? [String: Any])
            let topic = try #require(ep["mqttTopic"] as? String)
            let pem = try #require(ep["clientCertificate"] as? String, "\(ep)")
            #expect((ep["password"] as? String ?? "").isEmpty)
            #expect(ep["portSSL"] as? Int == env.broker.certPort)
            // The key stays with the thing, readable by it alone; the
            // certificate is beside it for libmosquitto.
            let dir = env.storage("cert")
            #expect(Self.mode(dir + "/thing-key.pem") == 0o600)
            #expect(Self.mode(dir + "/thing-cert.pem") == 0o600)
            #expect(try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8) == pem)
            #expect(!(try String(contentsOfFile: dir + "/identity.json", encoding: .utf8)).contains("PRIVATE KEY"))
            // Signed by the things CA for the topic.
            let pki = try TestPKI()
            let subject = try pki.run(["x509", "-in", dir + "/thing-cert.pem", "-noout", "-subject"])
            #expect(subject.contains("CN = \(topic)") || subject.contains("CN=\(topic)"), "\(subject)")
            let verified = try pki.run(["verify", "-CAfile", BrokerSecrets.thingsCAFile, dir + "/thing-cert.pem"])
            #expect(verified.contains("OK"), "\(verified)")

            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(t.logs)\nbroker:\n\(tail(env.broker.log))")
            try env.expectAlive(tid)
            // No client for the thing in the plugin: a new thing changed nothing in the broker.
            #expect(!Self.pluginClients(env.broker).contains(topic), "\(Self.pluginClients(env.broker))")
            t.destroy()
            env.broker.stop()  // flushes its log
            let log = env.broker.log
            let ports = DeviceSecurityTests.sessionPorts(log, clientPrefix: topic)
            #expect(!ports.isEmpty && ports.allSatisfy { $0 == env.broker.certPort }, "\(ports); broker:\n\(tail(log))")
        }
    }

    @Test("A restarted thing uses its stored certificate: no new onboarding, no new key")
    func restartKeepsCertificate() throws {
        try withEnv { env in
            let t = try Self.certThing(env, storage: "cert")
            try #require(
                ct_onboard(t.ct, "AC-CERT", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(t.logs)")
            let tid = try #require(t.thingID)
            let dir = env.storage("cert")
            let key = try String(contentsOfFile: dir + "/thing-key.pem", encoding: .utf8)
            let cert = try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8)
            t.destroy()
            // The certificate file is gone (say, a partial restore): it is
            // written again from identity.json.
            try FileManager.default.removeItem(atPath: dir + "/thing-cert.pem")
            let again = try Self.certThing(env, storage: "cert")
            try #require(
                ct_onboard(again.ct, "AC-CERT", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(again.logs)")
            #expect(again.thingID == tid)
            #expect(try String(contentsOfFile: dir + "/thing-key.pem", encoding: .utf8) == key)
            #expect(try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8) == cert)
            #expect(ct_start(again.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(again.logs)")
            try env.expectAlive(tid)
        }
    }

    @Test("A thing's certificate reads no other thing's commands")
    func certificateReadsOnlyItsOwnTopic() throws {
        try withEnv { env in
            let a = try Self.certThing(env, storage: "a")
            try #require(ct_onboard(a.ct, "AC-A", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(a.logs)")
            let b = try Self.certThing(env, storage: "b")
            try #require(ct_onboard(b.ct, "AC-B", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(b.logs)")
            let tidB = try #require(b.thingID)
            #expect(ct_start(b.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tidB, timeoutMs: 30_000), "logs:\n\(b.logs)")
            let topicA =
                try #require(try Self.identity(env, storage: "a")["mqttEndpoint"] as? [String: Any])[
                    "mqttTopic"] as? String
            let topicB =
                try #require(try Self.identity(env, storage: "b")["mqttEndpoint"] as? [String: Any])[
                    "mqttTopic"] as? String
            // A's certificate and key, as an intruder with A's files would use them.
            let dirA = env.storage("a")
            let spy = try MqttProbe(
                port: env.broker.certPort, clientID: try #require(topicA), username: nil, password: nil,
                tls: (ca: env.broker.caFile, cert: dirA + "/thing-cert.pem", key: dirA + "/thing-key.pem"))
            defer { spy.stop() }
            #expect(spy.isConnected, "broker:\n\(tail(env.broker.log))")
            _ = spy.subscribe(try #require(topicB))
            _ = spy.subscribe("p/\(topicB ?? "")/resp")
            try env.expectAlive(tidB)
            // Must not happen: the spy reading; room for it to show.
            usleep(300_000)
            #expect(spy.messages().isEmpty, "\(spy.messages().map(\.topic))")
            // Under B's name on the broker, with A's certificate: the broker
            // takes the certificate's CN as the username, so it still reads nothing of B's.
            let impostor = try MqttProbe(
                port: env.broker.certPort, clientID: try #require(topicB) + "-x", username: topicB, password: nil,
                tls: (ca: env.broker.caFile, cert: dirA + "/thing-cert.pem", key: dirA + "/thing-key.pem"))
            defer { impostor.stop() }
            _ = impostor.subscribe(topicB ?? "")
            try env.expectAlive(tidB)
            // Must not happen: the impostor reading; room for it to show.
            usleep(300_000)
            #expect(impostor.messages().isEmpty, "\(impostor.messages().map(\.topic))")
        }
    }

    @Test(
        "Token harvest and injection with a thing certificate: wildcards read nothing of others, forged commands and configurations never run"
    )
    func harvestAndInjectionWithCertificate() throws {
        try withEnv { env in
            let (a, tidA) = try Self.onboardedCertThing(env, storage: "a", vendorThingID: "AC-A")
            try Self.onboardedCertThing(env, storage: "b", vendorThingID: "AC-B", start: false).0.destroy()
            let topicA = try Self.topic(env, storage: "a")
            let dirB = env.storage("b")
            let attacker = try MqttProbe(
                port: env.broker.certPort, clientID: "ignored", username: nil, password: nil,
                tls: (ca: env.broker.caFile, cert: dirB + "/thing-cert.pem", key: dirB + "/thing-key.pem"))
            defer { attacker.stop() }
            try #require(attacker.isConnected, "broker:\n\(tail(env.broker.log))")
            // mosquitto's acl_file grants any subscription and checks read
            // access per message, so the SUBACKs say nothing: what counts is
            // that no message of another client arrives.
            for filter in [
                "#", "p/#", "p/+/resp", "p/+/+", "+/+/resp", "p/+/thing-if/apps/#", "p/+/status", "$share/x/#",
                topicA, "p/\(topicA)/config", "p/\(topicA)/resp", "n/#", "c/#"
            ] {
                _ = attacker.subscribe(filter)
            }
            // Injection: a command on A's topic and a retained configuration.
            let before = a.records.count
            let command =
                #"{"commandID":"evil-cert","schema":"AirConditioner-Demo","schemaVersion":1,"issuer":"user:x","actions":[{"turnPower":{"power":false}}]}"#
            attacker.publish(topicA, Array(command.utf8))
            let config =
                #"{"version":999999,"actionSets":[{"name":"evil","actions":[{"turnPower":{"power":false}}]}],"timers":[]}"#
            attacker.publish(Topics.config(clientID: topicA), Array(config.utf8), retain: true)
            // A newcomer onboards (its token and certificate cross the
            // broker) and A takes a command while the attacker listens.
            let (c, _) = try env.onlineAircon(vendorThingID: "AC-NEW", storage: "newcomer")
            #expect(c.isConnected)
            try env.expectAlive(tidA)
            // Must not happen: an injected command run; room for it to show.
            usleep(500_000)
            #expect(a.records.count == before + 1, "an injected command ran: \(a.records.map { $0.commandID ?? "" })")
            #expect(!a.logContains("applied remote configuration"))
            #expect(env.hub.results(of: "evil-cert") == nil)
            let cid = try StoredIdentity(storage: env.storage("newcomer"))
            let seen = attacker.messages()
            #expect(seen.isEmpty, "the attacker read: \(seen.map(\.topic))")
            #expect(!seen.contains { String(decoding: $0.payload, as: UTF8.self).contains(cid.token) })
        }
    }

    @Test(
        "endNodeCertificatePatterns: a gateway's certificate reads its own end-node commands and events and writes its own end-node statuses; a standalone thing's certificate neither, nor anything of another's"
    )
    func endNodeCertificatePatterns() throws {
        try withEnv { env in
            // A gateway and a thing on its own, both with certificates: the
            // acl_file's patterns give neither end-node rights; the hub's
            // section (--broker-acl) gives them to the gateway alone.
            let (gwThing, gw) = try Self.onboardedCertThing(
                env, storage: "a", vendorThingID: "GW-CERT-A", start: false, gateway: true)
            gwThing.destroy()
            try Self.onboardedCertThing(env, storage: "b", vendorThingID: "AC-CERT-B", start: false).0.destroy()
            let topicA = try Self.topic(env, storage: "a")
            let topicB = try Self.topic(env, storage: "b")
            let acl = try String(contentsOfFile: env.broker.aclFile, encoding: .utf8)
            #expect(acl.contains("user \(topicA)\n") && !acl.contains(topicB), "\(acl)")
            func connect(_ storage: String, _ clientID: String) throws -> MqttProbe {
                let dir = env.storage(storage)
                let p = try MqttProbe(
                    port: env.broker.certPort, clientID: clientID, username: nil, password: nil,
                    tls: (ca: env.broker.caFile, cert: dir + "/thing-cert.pem", key: dir + "/thing-key.pem"))
                try #require(p.isConnected, "broker:\n\(tail(env.broker.log))")
                return p
            }
            let a = try connect("a", topicA)
            let b = try connect("b", topicB)
            let hub = try MqttProbe.watcher(env.broker, "p/+/end-nodes/#")
            defer { a.stop(); b.stop(); hub.stop() }
            let commandsA = Topics.endNodeCommands(clientID: topicA, endNode: "E1")
            let statusA = Topics.endNodeStatus(clientID: topicA, endNode: "E1")
            let commandsB = Topics.endNodeCommands(clientID: topicB, endNode: "F1")
            let statusB = Topics.endNodeStatus(clientID: topicB, endNode: "F1")
            let eventsA = Topics.endNodeEvents(clientID: topicA, endNode: "E1")
            let eventsB = Topics.endNodeEvents(clientID: topicB, endNode: "F1")
            // The acl_file grants any subscription and checks reading per
            // message: what counts is what arrives.
            _ = a.subscribe(Topics.endNodeCommands(clientID: topicA, endNode: "+"))
            _ = a.subscribe(Topics.endNodeEvents(clientID: topicA, endNode: "+"))
            for filter in [
                "#", "p/+/end-nodes/#", "p/\(topicA)/end-nodes/#",
                Topics.endNodeCommands(clientID: topicB, endNode: "+"),
                Topics.endNodeEvents(clientID: topicB, endNode: "+")
            ] {
                _ = b.subscribe(filter)
            }
            let command =
                #"{"commandID":"evil","schema":"Lamp","schemaVersion":1,"issuer":"user:x","actions":[{"turnPower":{"power":false}}]}"#
            // B writes neither A's end-node commands nor statuses, nor end-node
            // statuses of its own (it is no gateway); A not its own commands.
            #expect(b.publishAcked(statusA, Array("online".utf8)) == 0x87)
            #expect(b.publishAcked(commandsA, Array(command.utf8)) == 0x87)
            #expect(b.publishAcked(statusB, Array("online".utf8)) == 0x87)
            #expect(a.publishAcked(commandsA, Array(command.utf8)) == 0x87)
            // Nor an events topic: only the hub writes them.
            let removal = #"{"event":"endNodeRemoved","thingID":"E1"}"#
            #expect(b.publishAcked(eventsA, Array(removal.utf8)) == 0x87)
            #expect(a.publishAcked(eventsA, Array(removal.utf8)) == 0x87)
            // The gateway writes its own end node's status.
            let mine = a.publishAcked(statusA, Array("online".utf8))
            #expect(mine.map { $0 < 0x80 } == true, "\(String(describing: mine))")
            // The hub writes both command and events topics: the gateway reads its own, B nothing.
            for topic in [commandsB, eventsB, commandsA, eventsA] {
                #expect(hub.publishAcked(topic, Array(#"{"event":"probe"}"#.utf8)).map { $0 < 0x80 } == true)
            }
            #expect(a.waitForMessage(on: commandsA) != nil, "A did not read its end node's commands")
            #expect(a.waitForMessage(on: eventsA) != nil, "A did not read its end node's events")
            // B's end-node messages were routed before A's arrived: what B read is all it will.
            #expect(!b.messages().contains { $0.topic.contains("/end-nodes/") }, "\(b.messages().map(\.topic))")
            #expect(hub.waitForMessage(on: statusA) != nil)
            let statuses = hub.messages().map(\.topic).filter { $0.hasSuffix("/status") }
            #expect(Set(statuses) == [statusA], "\(statuses)")

            // Deleting the gateway takes its rights out of the file.
            let record = try #require(env.hub.thing(gw))
            if case .failure(let e) = env.hub.removal.remove(record) { Issue.record("deletion refused: \(e.message)") }
            let after = try String(contentsOfFile: env.broker.aclFile, encoding: .utf8)
            #expect(!after.contains(topicA), "\(after)")
        }
    }

    @Test("A thing's certificate cannot take over another thing's session: the broker makes the CN the client ID")
    func certificateCannotTakeOverSession() throws {
        try withEnv { env in
            let (b, tidB) = try Self.onboardedCertThing(env, storage: "b", vendorThingID: "AC-B")
            try Self.onboardedCertThing(env, storage: "a", vendorThingID: "AC-A", start: false).0.destroy()
            let topicB = try Self.topic(env, storage: "b")
            // A's certificate, asking for B's client ID: without
            // use_username_as_clientid the broker closed B's connection.
            let dirA = env.storage("a")
            let intruder = try MqttProbe(
                port: env.broker.certPort, clientID: topicB, username: nil, password: nil,
                tls: (ca: env.broker.caFile, cert: dirA + "/thing-cert.pem", key: dirA + "/thing-key.pem"))
            defer { intruder.stop() }
            #expect(intruder.isConnected, "broker:\n\(tail(env.broker.log))")
            // Must not happen: the intruder disturbing B; room for it to show.
            usleep(300_000)
            try env.expectAlive(tidB)
            intruder.stop()
            b.destroy()
            env.broker.stop()  // flushes its log
            let log = env.broker.log
            #expect(!log.contains("Client \(topicB) already connected"), "broker:\n\(tail(log))")
            #expect(log.contains("as \(topicB) "), "B's own session is in the log:\n\(tail(log))")
        }
    }
}

/// A hub that administers nothing in its broker: a mosquitto
/// configured by files only (make-broker-config.sh --no-plugin), the hub's
/// own login in its password file, things with certificates.
@Suite("Certificate mode: a hub on a broker it does not administer", .offPool)
struct FilesOnlyBrokerTests {
    @Test("--broker-admin none: a thing onboards with a certificate and takes commands; a thing without TLS is refused")
    func hubAdministersNothing() throws {
        let env = try Env(filesOnlyBroker: true)
        defer { env.close() }
        #expect(!FileManager.default.fileExists(atPath: env.broker.dynsecFile))
        let t = try CertificateModeTests.certThing(env, storage: "cert")
        try #require(
            ct_onboard(t.ct, "AC-NONE", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok,
            "logs:\n\(t.logs)\nbroker:\n\(tail(env.broker.log))")
        let tid = try #require(t.thingID)
        #expect(ct_start(t.ct) == RC.ok)
        #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(t.logs)\nbroker:\n\(tail(env.broker.log))")
        try env.expectAlive(tid)

        // Without TLS the thing sends no CSR: the hub cannot hand it a
        // password here, and says so; the thing gets no identity.
        let plain = try env.newThing(storage: "plain")
        #expect(ct_register_aircon_handlers(plain.ct, Aircon.schema, Aircon.version) == RC.ok)
        let rc = ct_onboard(plain.ct, "AC-PLAIN", "password-1", "AirConditioner", "1.0.0", nil)
        #expect(rc == Int32(THINGIF_ERR_REJECTED.rawValue), "\(rc); logs:\n\(plain.logs)")
        #expect(plain.logContains("CERTIFICATE_SIGNING_REQUEST_REQUIRED"), "logs:\n\(plain.logs)")
        #expect(!FileManager.default.fileExists(atPath: env.storage("plain") + "/identity.json"))
    }
}
