// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub

/// What a handed-over thing stored and what the broker saw of it.
private enum HandOverChecks {
    /// The handle's configuration for TLS to the broker's TLS listener with
    /// no certificate of the user's own: the thing asks for one.
    static func tls(_ env: Env) -> (TestThing) -> Void {
        { t in
            #expect(ct_set_broker(t.ct, "127.0.0.1", Int32(env.broker.tlsPort)) == RC.ok)
            #expect(ct_set_tls(t.ct, env.broker.caFile, nil, nil) == RC.ok)
        }
    }

    /// The stored endpoint of `storage` carries a certificate for its topic,
    /// signed by the things CA, written to thing-cert.pem beside the key
    /// (both 0600), with no password and the certificate listener's port.
    /// Returns the topic.
    static func expectCertificate(_ env: Env, storage: String) async throws -> String {
        let ep = try #require(
            try CertificateModeTests.identity(env, storage: storage)["mqttEndpoint"] as? [String: Any])
        let topic = try #require(ep["mqttTopic"] as? String)
        let pem = try #require(ep["clientCertificate"] as? String, "\(ep)")
        #expect((ep["password"] as? String ?? "").isEmpty, "\(ep)")
        #expect(ep["portSSL"] as? Int == env.broker.certPort)
        let dir = env.storage(storage)
        #expect(CertificateModeTests.mode(dir + "/thing-key.pem") == 0o600)
        #expect(CertificateModeTests.mode(dir + "/thing-cert.pem") == 0o600)
        #expect(try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8) == pem)
        #expect(!(try String(contentsOfFile: dir + "/identity.json", encoding: .utf8)).contains("PRIVATE KEY"))
        let (subject, verified) = try await offPool {
            Result {
                let pki = try TestPKI()
                return (
                    try pki.run(["x509", "-in", dir + "/thing-cert.pem", "-noout", "-subject"]),
                    try pki.run(["verify", "-CAfile", BrokerSecrets.thingsCAFile, dir + "/thing-cert.pem"])
                )
            }
        }.get()
        #expect(subject.contains("CN = \(topic)") || subject.contains("CN=\(topic)"), "\(subject)")
        #expect(verified.contains("OK"), "\(verified)")
        return topic
    }

    /// One POST installations, which carried a CSR and was answered 201, and
    /// no GET mqtt-endpoint.
    static func expectOneSignedInstallation(_ hub: FrameworkSide, sourceLocation: SourceLocation = #_sourceLocation) {
        let posts = hub.requests.filter { $0.method == "POST" && $0.path == "installations" }
        #expect(posts.count == 1, sourceLocation: sourceLocation)
        #expect(posts.allSatisfy { $0.status == 201 }, "\(posts.map(\.status))", sourceLocation: sourceLocation)
        #expect(
            posts.allSatisfy { $0.body.contains("BEGIN CERTIFICATE REQUEST") }, "no CSR sent",
            sourceLocation: sourceLocation)
        #expect(!hub.requests.contains { $0.path.hasSuffix("/mqtt-endpoint") }, sourceLocation: sourceLocation)
    }

    /// Stops the thing and the broker (which flushes its log); the ports of
    /// the sessions of client `topic`, none missing.
    static func sessionPorts(_ e: HubAPIEnv, _ t: TestThing, topic: String) async -> [Int] {
        await offPool {
            t.destroy()
            e.env.broker.stop()
            return DeviceSecurityTests.sessionPorts(e.env.broker.log, clientPrefix: topic)
        }
    }

    /// A thing's command from its owner, answered: DONE.
    static func expectCommandDone(_ e: HubAPIEnv, _ tid: String, token: String, userID: String) async throws {
        let cid = try await e.postCommand(tid, token: token, userID: userID)
        let c = try await e.waitForFinished(tid, cid, token: token)
        #expect(c["commandState"] as? String == "DONE", "\(c)")
    }

    /// POST …/installations over HTTP with the thing's token and `csr` (nil: none).
    static func postInstallation(_ e: HubAPIEnv, token: String, csr: Any?) async throws -> HTTPReply {
        var body: [String: Any] = ["deviceType": "MQTT"]
        if let csr { body["certificateSigningRequest"] = csr }
        return try await e.call("POST", "\(e.api)/installations", token: token, json: body)
    }
}

/// A thing the app onboarded and handed over (thingif_use_onboarded) gets a
/// client certificate when it makes its MQTT installation: the
/// installation request carries a CSR and the hub answers with the endpoint
/// and the certificate, as onboarding by the thing does.
@Suite("Hand-over certificates", .offPool)
struct HandOverCertificateTests {
    @Test(
        "A handed-over thing with TLS gets a certificate for its topic, takes commands on the certificate listener, and the plugin has no client for it"
    )
    func handOverGetsCertificate() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            // The owner's answer hands out a password installation (a plugin
            // client), which this thing is never given: the plugin's file is
            // read below, and knows that one.
            let owned = try await e.onboardSilent("AC-HO-1", owner: "user:\(uid)", token: token)
            let t = try await e.appliance(
                thingID: owned.thingID, token: owned.token, storage: "ho", configure: HandOverChecks.tls(e.env))
            HandOverChecks.expectOneSignedInstallation(e.hub)
            let topic = try await HandOverChecks.expectCertificate(e.env, storage: "ho")
            #expect(topic != owned.topic)
            #expect(e.hub.store.thing(id: owned.thingID)?.installations.values.contains(topic) == true)
            try await HandOverChecks.expectCommandDone(e, owned.thingID, token: token, userID: uid)
            let clients = CertificateModeTests.pluginClients(e.env.broker)
            #expect(clients.contains(owned.topic), "the plugin's file was not read: \(clients)")
            #expect(!clients.contains(topic), "\(clients)")
            let ports = await HandOverChecks.sessionPorts(e, t, topic: topic)
            #expect(!ports.isEmpty && ports.allSatisfy { $0 == e.env.broker.certPort }, "\(ports)")
            // The certificate was recorded like an onboarding's: deleting the
            // thing revokes it. (The broker is stopped: the owner's password
            // installation cannot be removed from it, so the store deletes.)
            let serial = try await offPool {
                Result { try RevocationSupport.serial(TestPKI(), certFile: e.env.storage("ho") + "/thing-cert.pem") }
            }.get()
            #expect(e.hub.store.deleteThing(id: owned.thingID))
            let revoked = try #require(e.hub.store.revokedCertificates(now: Platform.epochMs())).map {
                $0.serial.uppercased()
            }
            #expect(revoked.contains(serial), "\(serial) not in \(revoked)")
        }
    }

    @Test(
        "--broker-admin none: a handed-over thing with TLS gets a certificate and takes commands; without TLS it is refused"
    )
    func handOverOnFilesOnlyBroker() async throws {
        try await withHubAPI(filesOnlyBroker: true) { e in
            #expect(!FileManager.default.fileExists(atPath: e.env.broker.dynsecFile))
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-HO-NONE", owner: "user:\(uid)", token: token)
            let t = try await e.appliance(
                thingID: tid, token: thingToken, storage: "ho", configure: HandOverChecks.tls(e.env))
            HandOverChecks.expectOneSignedInstallation(e.hub)
            let topic = try await HandOverChecks.expectCertificate(e.env, storage: "ho")
            try await HandOverChecks.expectCommandDone(e, tid, token: token, userID: uid)

            // Without TLS the thing sends no CSR: this hub hands out no
            // password, and says so; the thing stores nothing.
            let plain = try await offPool { () -> Result<(Int32, TestThing), Error> in
                Result {
                    let p = try e.env.newThing(storage: "plain")
                    return (ct_use_onboarded(p.ct, tid, thingToken), p)
                }
            }.get()
            #expect(plain.0 == RC.rejected, "\(plain.0); logs:\n\(plain.1.logs)")
            #expect(plain.1.logContains("CERTIFICATE_SIGNING_REQUEST_REQUIRED"), "logs:\n\(plain.1.logs)")
            #expect(!FileManager.default.fileExists(atPath: e.env.storage("plain") + "/identity.json"))
            #expect(!FileManager.default.fileExists(atPath: e.env.storage("plain") + "/thing-key.pem"))

            let ports = await HandOverChecks.sessionPorts(e, t, topic: topic)
            #expect(!ports.isEmpty && ports.allSatisfy { $0 == e.env.broker.certPort }, "\(ports)")
        }
    }

    @Test("A restarted handed-over thing uses its stored installation, key and certificate: no new installation")
    func restartKeepsHandedOverCertificate() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-HO-2", owner: "user:\(uid)", token: token)
            let first = try await e.appliance(
                thingID: tid, token: thingToken, storage: "ho", configure: HandOverChecks.tls(e.env))
            let topic = try await HandOverChecks.expectCertificate(e.env, storage: "ho")
            let dir = e.env.storage("ho")
            let key = try String(contentsOfFile: dir + "/thing-key.pem", encoding: .utf8)
            let cert = try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8)
            let installations = e.hub.store.thing(id: tid)?.installations.count
            await offPool { _ = first.destroy() }
            // The certificate file is gone (a partial restore): written again from identity.json.
            try FileManager.default.removeItem(atPath: dir + "/thing-cert.pem")

            let again = try await e.appliance(
                thingID: tid, token: thingToken, storage: "ho", configure: HandOverChecks.tls(e.env))
            #expect(again.logContains("using the stored MQTT installation"), "logs:\n\(again.logs)")
            HandOverChecks.expectOneSignedInstallation(e.hub)
            #expect(e.hub.store.thing(id: tid)?.installations.count == installations)
            #expect(try String(contentsOfFile: dir + "/thing-key.pem", encoding: .utf8) == key)
            // The loop's connect writes it; the hub may still count the
            // first session online, so the thing can be "online" before that.
            #expect(await offPool { poll { FileManager.default.fileExists(atPath: dir + "/thing-cert.pem") } })
            #expect(try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8) == cert)
            #expect(try await HandOverChecks.expectCertificate(e.env, storage: "ho") == topic)
            try await HandOverChecks.expectCommandDone(e, tid, token: token, userID: uid)
        }
    }

    @Test(
        "Without TLS a handed-over thing still gets a password; a bad CSR is refused with 400; over HTTP a good one is signed"
    )
    func passwordAndRefusals() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-HO-3", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken, storage: "plain")
            let posts = e.hub.requests.filter { $0.method == "POST" && $0.path == "installations" }
            #expect(posts.count == 1 && posts.allSatisfy { !$0.body.contains("certificateSigningRequest") })
            #expect(e.hub.requests.filter { $0.method == "GET" && $0.path.hasSuffix("/mqtt-endpoint") }.count == 1)
            let ep = try #require(
                try CertificateModeTests.identity(e.env, storage: "plain")["mqttEndpoint"] as? [String: Any])
            let topic = try #require(ep["mqttTopic"] as? String)
            #expect((ep["password"] as? String)?.isEmpty == false && ep["clientCertificate"] == nil, "\(ep)")
            #expect(!FileManager.default.fileExists(atPath: e.env.storage("plain") + "/thing-key.pem"))
            #expect(CertificateModeTests.pluginClients(e.env.broker).contains(topic))
            try await HandOverChecks.expectCommandDone(e, tid, token: token, userID: uid)

            // CSRs the hub refuses, as in onboarding: 400 naming the field, no installation made.
            let pki = try TestPKI()
            let good = try pki.makeCSR("good")
            let before = e.hub.store.thing(id: tid)?.installations.count
            let bad: [(String, Any)] = [
                ("broken signature", try TestPKI.brokenSignature(good)),
                ("not PEM", "hello"),
                ("RSA-1024", try pki.makeCSR("rsa1024", key: "rsa:1024")),
                ("empty", ""),
                ("too long", String(repeating: "A", count: OnboardingRequest.maxCSRBytes + 1)),
                ("a number", 42)
            ]
            for (name, csr) in bad {
                let r = try await HandOverChecks.postInstallation(e, token: thingToken, csr: csr)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(name): \(r.status) \(r.text)")
                #expect(r.string("message")?.contains("certificateSigningRequest") == true, "\(name): \(r.text)")
            }
            #expect(e.hub.store.thing(id: tid)?.installations.count == before)

            // The good one over HTTP: the endpoint and its certificate in the
            // answer, and nothing in the plugin.
            let r = try await HandOverChecks.postInstallation(e, token: thingToken, csr: good)
            #expect(r.status == 201, "\(r.status) \(r.text)")
            let signed = try #require(r.json["mqttEndpoint"] as? [String: Any], "\(r.text)")
            let newTopic = try #require(signed["mqttTopic"] as? String)
            #expect(signed["installationID"] as? String == r.string("installationID"))
            #expect(signed["password"] as? String == "" && signed["username"] as? String == newTopic)
            #expect(signed["portSSL"] as? Int == e.env.broker.certPort)
            let (verified, text, out) = try pki.inspect(
                try #require(signed["clientCertificate"] as? String), caFile: BrokerSecrets.thingsCAFile)
            #expect(verified, "\(out)")
            #expect(text.contains("CN = \(newTopic)") || text.contains("CN=\(newTopic)"))
            #expect(e.hub.store.thing(id: tid)?.installations[r.string("installationID") ?? ""] == newTopic)
            #expect(!CertificateModeTests.pluginClients(e.env.broker).contains(newTopic))
            // The owner's token makes an app installation (n/{id}), which is signed nothing.
            let app = try await HandOverChecks.postInstallation(e, token: token, csr: good)
            #expect(app.status == 201 && app.string("mqttTopic")?.hasPrefix("n/") == true, "\(app.status) \(app.text)")
            #expect(!app.text.contains("clientCertificate") && !app.text.contains("CERTIFICATE"), "\(app.text)")
        }
    }

    @Test("A hub without a CA ignores the CSR: the handed-over thing with TLS gets a password, as from Kii")
    func hubWithoutCAHandsOutPassword() async throws {
        try await withHubAPI(options: { Env.withoutThingCA(&$0) }) { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-HO-4", owner: "user:\(uid)", token: token)
            let t = try await e.appliance(
                thingID: tid, token: thingToken, storage: "ho", configure: HandOverChecks.tls(e.env))
            #expect(t.logContains("the framework signed no client certificate"), "logs:\n\(t.logs)")
            let posts = e.hub.requests.filter { $0.method == "POST" && $0.path == "installations" }
            #expect(posts.count == 1 && posts.allSatisfy { $0.body.contains("BEGIN CERTIFICATE REQUEST") })
            #expect(e.hub.requests.filter { $0.path.hasSuffix("/mqtt-endpoint") }.count == 1)
            let ep = try #require(
                try CertificateModeTests.identity(e.env, storage: "ho")["mqttEndpoint"] as? [String: Any])
            #expect((ep["password"] as? String)?.isEmpty == false && ep["clientCertificate"] == nil, "\(ep)")
            #expect(!FileManager.default.fileExists(atPath: e.env.storage("ho") + "/thing-cert.pem"))
            try await HandOverChecks.expectCommandDone(e, tid, token: token, userID: uid)
        }
    }
}
