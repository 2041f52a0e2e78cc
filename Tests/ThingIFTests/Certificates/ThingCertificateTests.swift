// SPDX-License-Identifier: Apache-2.0

import CThingIF
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

/// The text after `label` on its line in OpenSSL's -text output.
private func sslField(_ text: String, _ label: String) -> String? {
    for line in text.split(separator: "\n") {
        let l = line.trimmingCharacters(in: .whitespaces)
        if l.hasPrefix(label) { return String(l.dropFirst(label.count)).trimmingCharacters(in: .whitespaces) }
    }
    return nil
}

/// The line after the one that starts with `label` (an extension's value).
private func valueAfter(_ text: String, _ label: String) -> String? {
    let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
    guard let i = lines.firstIndex(where: { $0.hasPrefix(label) }), i + 1 < lines.count else { return nil }
    return lines[i + 1]
}

/// OpenSSL's "notBefore=Jan  2 03:04:05 2026 GMT" as a date.
private func opensslDate(_ s: String?) -> Date? {
    guard let s else { return nil }
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "GMT")
    f.dateFormat = "MMM d HH:mm:ss yyyy 'GMT'"
    return f.date(from: s.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " "))
}

/// An onboarding by the thing, as its body goes on the wire.
/// Checks an onboarding answer that carries a certificate: 200, username =
/// the topic, no password, portSSL = `port`, and a certificate that OpenSSL
/// verifies against `caFile` with CN = the topic. Returns (topic, PEM).
private func certificateEndpoint(
    _ r: (status: Int, json: [String: Any]), port: Int, pki: TestPKI, caFile: String,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> (topic: String, pem: String) {
    #expect(r.status == 200, "\(r.json)", sourceLocation: sourceLocation)
    let ep = try #require(r.json["mqttEndpoint"] as? [String: Any], sourceLocation: sourceLocation)
    let topic = try #require(ep["mqttTopic"] as? String, sourceLocation: sourceLocation)
    #expect(ep["username"] as? String == topic, sourceLocation: sourceLocation)
    #expect(ep["password"] as? String == "", sourceLocation: sourceLocation)
    #expect(ep["portSSL"] as? Int == port, sourceLocation: sourceLocation)
    let pem = try #require(ep["clientCertificate"] as? String, sourceLocation: sourceLocation)
    let (verified, text, out) = try pki.inspect(pem, caFile: caFile)
    #expect(verified, "\(out)", sourceLocation: sourceLocation)
    #expect(sslField(text, "Subject:") == "CN = \(topic)", sourceLocation: sourceLocation)
    return (topic, pem)
}

private func onboardingBody(_ vendorThingID: String, csr: Any?) throws -> String {
    var o: [String: Any] = ["vendorThingID": vendorThingID, "thingPassword": "pw-\(vendorThingID)"]
    if let csr { o["certificateSigningRequest"] = csr }
    return String(decoding: try JSONSerialization.data(withJSONObject: o), as: UTF8.self)
}

/// The same request put straight to the hub's router (no broker), as the
/// bootstrap client `clientID` would send it.
private func onboard(_ hub: FrameworkSide, _ vendorThingID: String, csr: Any?) throws -> (
    status: Int, json: [String: Any]
) {
    let req = KiiRequest(
        method: "POST", headers: [("Content-Type", MediaType.onboardingByThing)],
        body: Array(try onboardingBody(vendorThingID, csr: csr).utf8))
    let r = hub.thingRequests.route(req, api: .thingIF, path: "onboardings", clientID: "thingif-bootstrap-test")
    return (r.status, parseObject(r.bodyText) ?? [:])
}

/// A hub that is not started (no broker), with the things' CA read as
/// start() reads it.
private func hubWithCA(
    _ pki: TestPKI, _ ca: (cert: String, key: String), admin: FrameworkSide.BrokerAdminMode = .dynsec,
    brokerUsername: String? = nil
) throws -> FrameworkSide {
    var o = FrameworkSide.Options(
        appID: Env.appID, appKey: Env.appKey, brokerPort: 1, brokerUsername: brokerUsername,
        brokerPassword: brokerUsername == nil ? nil : "x", advertisedTLSPort: 8883)
    o.thingCA = FrameworkSide.ThingCAFiles(certFile: ca.cert, keyFile: ca.key)
    o.advertisedCertPort = 8884
    o.thingCertDays = 30
    o.brokerAdmin = admin
    let hub = try #require(FrameworkSide(o, store: MemoryStore(secrets: .fastForTests)))
    let problem = hub.authority.load()
    try #require(problem == nil, "\(problem ?? "")")
    return hub
}

/// The onboarding request over the real broker, on a bootstrap connection
/// (the app's credentials), as a device sends it; the hub's answer.
private func onboardOverMQTT(_ env: Env, _ vendorThingID: String, csr: String?) throws -> (
    status: Int, json: [String: Any]
) {
    let boot = try MqttProbe.bootstrap(port: env.broker.port)
    defer { boot.stop() }
    try #require(boot.isConnected)
    let bootID = boot.client.clientID
    let replies = Topics.response(clientID: bootID)
    try #require(boot.subscribe(replies) == 1)
    boot.publish(
        Topics.request(clientID: bootID, appID: Env.appID, path: "onboardings"),
        kiiRequest(
            "POST", token: nil, contentType: MediaType.onboardingByThing, requestID: "cert-1",
            body: try onboardingBody(vendorThingID, csr: csr)), correlation: "cert-1")
    let m = try #require(boot.waitForMessage(on: replies, timeoutMs: 30_000), "no answer to the onboarding")
    let r = try #require(KiiResponse.decode(m.payload))
    return (r.status, parseObject(r.bodyText) ?? [:])
}

/// What the broker's dynamic-security plugin knows of `username`.
private func dynsecClient(_ hub: FrameworkSide, _ username: String) throws -> BrokerAdmin.Outcome {
    let admin = try #require(hub.admin)
    let out = try #require(
        admin.run([BrokerAdmin.command("getClient", [("username", BrokerAdmin.str(username))])]),
        "no answer from the plugin")
    return try #require(out.first)
}

@Suite("Thing certificates", .serialized, .offPool)
struct ThingCertificateTests {
    @Test(
        "The CA signs a CSR: OpenSSL verifies it for client use, CN = the topic, CA:FALSE, clientAuth, the validity",
        arguments: [("P-256", "P-256"), ("P-384", "rsa:2048"), ("rsa:2048", "P-384")])
    func signs(caKey: String, csrKey: String) throws {
        let pki = try TestPKI()
        let ca = try pki.makeCA("ca", key: caKey)
        let things = try ThingCertificates.load(certFile: ca.cert, keyFile: ca.key).get()
        let request = try ThingCertificates.request(try pki.makeCSR("thing", key: csrKey)).get()
        let topic = "t" + randomHexString(11)
        let now = Date()
        let issued = try things.issue(request, topic: topic, days: 42, now: now).get()
        let pem = issued.pem

        let (verified, text, verifyOutput) = try pki.inspect(pem, caFile: ca.cert)
        #expect(verified, "openssl verify: \(verifyOutput)")
        #expect(sslField(text, "Subject:") == "CN = \(topic)", "the CSR's subject is not used")
        #expect(sslField(text, "Issuer:") == "CN = thingif things CA ca")
        #expect(valueAfter(text, "X509v3 Basic Constraints: critical") == "CA:FALSE")
        #expect(valueAfter(text, "X509v3 Key Usage: critical") == "Digital Signature")
        #expect(valueAfter(text, "X509v3 Extended Key Usage:") == "TLS Web Client Authentication")
        #expect(valueAfter(text, "X509v3 Subject Key Identifier:") != nil)
        #expect(valueAfter(text, "X509v3 Authority Key Identifier:") != nil)
        #expect(!text.contains("TLS Web Server Authentication"), "a requested extension was copied")
        // 16 bytes, positive: openssl prints them as 16 hex pairs.
        let serial = try #require(valueAfter(text, "Serial Number:"))
        #expect(serial.split(separator: ":").count == 16, "serial \(serial)")
        // What the store records to revoke it: the same serial and notAfter.
        #expect(issued.serial == serial.replacing(":", with: "").lowercased())
        let notBefore = try #require(opensslDate(sslField(text, "notBefore=")))
        let notAfter = try #require(opensslDate(sslField(text, "notAfter=")))
        #expect(abs(notBefore.timeIntervalSince(now) + 300) < 2, "notBefore \(notBefore), now \(now)")
        #expect(abs(notAfter.timeIntervalSince(now) - 42 * 86_400) < 2, "notAfter \(notAfter)")
        #expect(abs(Double(issued.notAfterMs) / 1000 - notAfter.timeIntervalSince1970) < 1)
        // Serials are random: a second certificate has another.
        let again = try things.issue(request, topic: topic, days: 42, now: now).get()
        #expect(valueAfter(try pki.inspect(again.pem, caFile: ca.cert).text, "Serial Number:") != serial)
        #expect(again.serial != issued.serial)
        // Another CA does not vouch for it.
        let other = try pki.makeCA("other")
        #expect(!(try pki.inspect(pem, caFile: other.cert).verified))
    }

    @Test("CSRs that do not parse, whose signature is broken or whose key is refused get 400 and store nothing")
    func refusedRequests() throws {
        let pki = try TestPKI()
        let hub = try hubWithCA(pki, try pki.makeCA("ca"))
        let good = try pki.makeCSR("good")
        let cases: [(String, Any)] = [
            ("broken signature", try TestPKI.brokenSignature(good)),
            ("garbage", "-----BEGIN CERTIFICATE REQUEST-----\nbm90IGEgQ1NS\n-----END CERTIFICATE REQUEST-----\n"),
            ("not PEM", "hello"),
            ("RSA-1024", try pki.makeCSR("rsa1024", key: "rsa:1024")),
            ("P-521", try pki.makeCSR("p521", key: "P-521")),
            ("Ed25519", try pki.makeCSR("ed25519", key: "ed25519")),
            ("a certificate", try String(contentsOfFile: pki.path("ca.crt"), encoding: .utf8)),
            ("empty", ""),
            ("too long", String(repeating: "A", count: OnboardingRequest.maxCSRBytes + 1)),
            ("a number", 42)
        ]
        for (n, (name, csr)) in cases.enumerated() {
            let r = try onboard(hub, "AC-BAD-\(n)", csr: csr)
            #expect(r.status == 400, "\(name): \(r.status) \(r.json)")
            #expect(r.json["errorCode"] as? String == "INVALID_INPUT_DATA", "\(name)")
            #expect((r.json["message"] as? String)?.contains("certificateSigningRequest") == true, "\(name): \(r.json)")
            #expect(hub.thing(vendorThingID: "AC-BAD-\(n)") == nil, "\(name): a thing was stored")
        }
        // The same CSR unbroken is signed.
        let r = try onboard(hub, "AC-GOOD", csr: good)
        let (topic, pem) = try certificateEndpoint(r, port: 8884, pki: pki, caFile: pki.path("ca.crt"))
        // Onboarding again keeps the installation: a new certificate for the same topic.
        let again = try onboard(hub, "AC-GOOD", csr: try pki.makeCSR("good2"))
        let ep2 = try #require(again.json["mqttEndpoint"] as? [String: Any])
        #expect(ep2["mqttTopic"] as? String == topic)
        #expect((ep2["clientCertificate"] as? String).map { $0 != pem } == true)
    }

    @Test("A hub without a CA ignores a CSR: the thing gets a broker password and a dynsec client, as from any hub")
    func noCAIgnoresCSR() throws {
        let pki = try TestPKI()
        let csr = try pki.makeCSR("thing")
        try withEnv(configure: Env.withoutThingCA) { env in
            let r = try onboardOverMQTT(env, "AC-NOCA", csr: csr)
            #expect(r.status == 200, "\(r.json)")
            let ep = try #require(r.json["mqttEndpoint"] as? [String: Any])
            let topic = try #require(ep["mqttTopic"] as? String)
            #expect(ep["clientCertificate"] == nil)
            #expect((ep["password"] as? String)?.isEmpty == false)
            #expect(ep["portSSL"] as? Int == env.broker.tlsPort)
            #expect(try dynsecClient(env.hub, topic).isSuccess, "the password thing has its broker client")
        }
    }

    @Test(
        "With a CA, an onboarding over the broker answers a certificate and makes no dynsec client; deleting the thing works"
    )
    func certificateOverBroker() throws {
        let pki = try TestPKI()
        let ca = try pki.makeCA("ca", key: "P-384")
        let env = try Env { o in
            o.thingCA = FrameworkSide.ThingCAFiles(certFile: ca.cert, keyFile: ca.key)
            o.advertisedCertPort = 18_884
        }
        defer { env.close() }
        let r = try onboardOverMQTT(env, "AC-CERT", csr: try pki.makeCSR("thing"))
        let tid = try #require(r.json["thingID"] as? String)
        let (topic, _) = try certificateEndpoint(r, port: 18_884, pki: pki, caFile: ca.cert)
        let client = try dynsecClient(env.hub, topic)
        #expect(!client.isSuccess && client.notFound, "a broker client was made: \(client)")
        #expect(try dynsecClient(env.hub, Env.appID).isSuccess, "the plugin answers for a client it has")

        // Retiring its installation and deleting it need no broker client.
        let t = try #require(env.hub.thing(tid))
        _ = try #require(env.hub.installations.newInstallation(for: t))
        #expect(env.hub.installations.retire(of: try #require(env.hub.thing(tid)), keeping: 1))
        #expect(env.hub.thing(tid)?.installations.count == 1)
        let now = try #require(env.hub.thing(tid))
        let left = try #require(now.installations.values.first)
        if case .failure(let e) = env.hub.removal.remove(now) { Issue.record("deletion refused: \(e.message)") }
        #expect(env.hub.thing(tid) == nil)
        // Its certificate still opens the broker's door, but the hub no
        // longer knows its topic: a status or a request from it changes nothing.
        let admin = try MqttProbe(
            port: env.broker.port, clientID: "probe-" + randomHexString(4), username: env.broker.adminUsername,
            password: env.broker.adminPassword)
        defer { admin.stop() }
        try #require(admin.isConnected)
        admin.publish(Topics.status(clientID: left), Array("online".utf8))
        #expect(admin.subscribe(Topics.response(clientID: left)) == 1)
        admin.publish(
            Topics.request(clientID: left, appID: Env.appID, path: "targets/thing:\(tid)/states"),
            kiiRequest("PUT", token: "x", requestID: "s1", body: #"{"power":true}"#))
        let reply = try #require(admin.waitForMessage(on: Topics.response(clientID: left)))
        #expect(KiiResponse.decode(reply.payload).map { (400..<500).contains($0.status) } == true)
        #expect(!env.hub.presence.isOnline(tid))
        #expect(env.hub.thing(tid) == nil && env.hub.store.thing(mqttTopic: left) == nil)
    }

    @Test(
        "--broker-admin none: no BrokerAdmin, a CSR is required (400), Kii's installation calls are refused, no hand-over endpoint"
    )
    func adminNone() throws {
        let pki = try TestPKI()
        let hub = try hubWithCA(pki, try pki.makeCA("ca"), admin: .none, brokerUsername: "thingif-hub")
        #expect(hub.admin == nil, "none makes no BrokerAdmin, even with a broker identity")
        let refused = try onboard(hub, "AC-NONE", csr: nil)
        #expect(refused.status == 400)
        #expect(refused.json["errorCode"] as? String == "CERTIFICATE_SIGNING_REQUEST_REQUIRED")
        #expect(hub.thing(vendorThingID: "AC-NONE") == nil)

        let r = try onboard(hub, "AC-NONE", csr: try pki.makeCSR("thing"))
        #expect(r.status == 200, "\(r.json)")
        let ep = try #require(r.json["mqttEndpoint"] as? [String: Any])
        #expect(ep["clientCertificate"] is String && ep["password"] as? String == "")
        let t = try #require(hub.thing(vendorThingID: "AC-NONE"))
        #expect(hub.installations.handover(for: t) == nil)
        let token = try #require(r.json["accessToken"] as? String)
        let auth = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")]
        let create = hub.thingRequests.route(
            KiiRequest(method: "POST", headers: auth, body: Array(#"{"deviceType":"MQTT"}"#.utf8)), api: .kii,
            path: "installations", clientID: nil)
        #expect(create.status == 400 && create.bodyText.contains("CERTIFICATE_SIGNING_REQUEST_REQUIRED"))
        let iid = try #require(ep["installationID"] as? String)
        let get = hub.thingRequests.route(
            KiiRequest(method: "GET", headers: auth, body: []), api: .kii, path: "installations/\(iid)/mqtt-endpoint",
            clientID: nil)
        #expect(get.status == 400 && get.bodyText.contains("CERTIFICATE_SIGNING_REQUEST_REQUIRED"))
        // Deleting a thing asks nothing of the broker.
        if case .failure(let e) = hub.removal.remove(t) { Issue.record("deletion refused: \(e.message)") }
    }

    @Test("A CA that cannot be used stops the hub's start, with the reason")
    func unusableCA() throws {
        let pki = try TestPKI()
        let ca = try pki.makeCA("ca")
        let other = try pki.makeCA("other")
        let leaf = try pki.makeCA("leaf", isCA: false)
        let cases: [(String, FrameworkSide.ThingCAFiles?, Int?, FrameworkSide.BrokerAdminMode, String)] = [
            ("mismatched key", .init(certFile: ca.cert, keyFile: other.key), 8884, .dynsec, "does not match"),
            ("not a CA", .init(certFile: leaf.cert, keyFile: leaf.key), 8884, .dynsec, "not a CA"),
            ("missing file", .init(certFile: pki.path("nope.crt"), keyFile: ca.key), 8884, .dynsec, "cannot read"),
            ("a key for a certificate", .init(certFile: ca.key, keyFile: ca.key), 8884, .dynsec, "CERTIFICATE"),
            ("no cert port", .init(certFile: ca.cert, keyFile: ca.key), nil, .dynsec, "--advertised-cert-port"),
            ("none without a CA", nil, nil, .none, "--broker-admin none")
        ]
        for (name, files, port, mode, reason) in cases {
            var o = FrameworkSide.Options(appID: Env.appID, appKey: Env.appKey, brokerPort: 1)
            o.thingCA = files
            o.advertisedCertPort = port
            o.brokerAdmin = mode
            let hub = try #require(FrameworkSide(o, store: MemoryStore(secrets: .fastForTests)))
            #expect(!hub.start(timeoutMs: 500), "\(name): the hub started")
            #expect(hub.startProblem?.contains(reason) == true, "\(name): \(hub.startProblem ?? "")")
            #expect(hub.authority.ca == nil)
        }
        // The right pair passes the CA's checks (and then fails on the missing broker, not the CA).
        var o = FrameworkSide.Options(appID: Env.appID, appKey: Env.appKey, brokerPort: 1)
        o.thingCA = .init(certFile: ca.cert, keyFile: ca.key)
        o.advertisedCertPort = 8884
        let hub = try #require(FrameworkSide(o, store: MemoryStore(secrets: .fastForTests)))
        #expect(hub.authority.load() == nil)
    }

    /// The configuration `args` give (no environment, no file).
    static func load(_ args: [String]) throws -> HubConfig {
        guard case .run(let c) = try HubConfig.load(arguments: args, environment: [:], readFile: { _ in nil })
        else { throw HarnessError("help") }
        return c
    }

    @Test("The options: CA files together, the cert port with the CA, none needs the CA, days 1…36500")
    func options() throws {
        let load = Self.load
        let ca = ["--thing-ca-cert", "/ca.crt", "--thing-ca-key", "/ca.key", "--advertised-cert-port", "8884"]
        let c = try load(ca + ["--thing-cert-days", "90", "--broker-admin", "none"])
        var o = FrameworkSide.Options(appID: "a", appKey: "k", brokerPort: 1)
        c.applyThingCertificates(to: &o)
        #expect(o.thingCA == FrameworkSide.ThingCAFiles(certFile: "/ca.crt", keyFile: "/ca.key"))
        #expect(o.thingCertDays == 90 && o.advertisedCertPort == 8884 && o.brokerAdmin == .none)
        let defaults = try load([])
        #expect(defaults.thingCertDays == 3650 && defaults.brokerAdmin == "dynsec" && defaults.thingCACert == nil)
        let env = try HubConfig.load(
            arguments: [],
            environment: [
                "THINGIF_HUB_THING_CA_CERT": "/c", "THINGIF_HUB_THING_CA_KEY": "/k",
                "THINGIF_HUB_ADVERTISED_CERT_PORT": "1", "THINGIF_HUB_BROKER_ADMIN": "none"
            ], readFile: { _ in nil })
        guard case .run(let fromEnv) = env else { throw HarnessError("help") }
        #expect(fromEnv.thingCAKey == "/k" && fromEnv.brokerAdmin == "none")
        for bad in [
            ["--thing-ca-cert", "/ca.crt", "--advertised-cert-port", "8884"],
            ["--thing-ca-cert", "/ca.crt", "--thing-ca-key", "/ca.key"],
            ["--advertised-cert-port", "8884"],
            ["--broker-admin", "none"],
            ["--broker-admin", "plugin"] + ca,
            ["--thing-cert-days", "0"] + ca,
            ["--thing-cert-days", "36501"] + ca
        ] {
            #expect(throws: HubConfig.ConfigError.self, "\(bad)") { try load(bad) }
        }
        for flag in [
            "--thing-ca-cert", "--thing-ca-key", "--thing-cert-days", "--advertised-cert-port", "--broker-admin"
        ] {
            #expect(HubConfig.usage.contains(flag))
        }
    }
}
